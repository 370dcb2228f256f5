"""The rendered book (docs/, Sphinx + myst-nb): it builds with warnings as errors, every notebook
page holds its figures as real images and no error output. The notebooks run in smoke mode."""
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from synthetic import needs_mnist

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted(path.stem for path in (ROOT / "notebooks").glob("*.ipynb"))


@pytest.fixture(scope="module")
def book(tmp_path_factory):
    pytest.importorskip("myst_nb", reason="the book needs sphinx and myst-nb (pip install -e .[test])")
    if not os.environ.get("GLUON_BBB_DATA") or not (Path(os.environ["GLUON_BBB_DATA"]) / "mushroom").is_dir():
        pytest.skip("the book's notebooks need GLUON_BBB_DATA with MNIST, Fashion-MNIST and mushroom")
    out = tmp_path_factory.mktemp("book")
    env = dict(os.environ, GLUON_BBB_SMOKE="1", MPLBACKEND="Agg",
               GLUON_BBB_BOOK_CACHE=str(out / "cache"))  # executed afresh, never a stale cache
    built = subprocess.run([sys.executable, "-m", "sphinx", "-W", "-q", "-b", "html", str(ROOT / "docs"),
                            str(out / "html"), "-d", str(out / "doctrees")],
                           capture_output=True, text=True, env=env, timeout=1200)
    assert built.returncode == 0, built.stderr[-5000:]  # -W: any Sphinx warning fails the build
    return out / "html"


@needs_mnist
@pytest.mark.parametrize("name", NOTEBOOKS)
def test_every_notebook_page_shows_its_figures_and_no_error(book, name):
    page = book / "notebooks" / f"{name}.html"
    html = page.read_text(encoding="utf-8")
    sources = re.findall(r'<img[^>]*src="([^"]+)"', html)
    figures = [src for src in sources if "_images/" in src]
    assert figures, f"{name}: no figure"
    for src in figures:
        image = (page.parent / src).resolve()
        data = image.read_bytes()
        assert data.startswith(b"\x89PNG") and len(data) > 2000, f"{name}: {src} is not a figure"
    for sign in ('class="output traceback"', "Traceback (most recent call last)", 'class="output stderr"'):
        assert sign not in html, f"{name}: {sign}"


@needs_mnist
def test_the_book_has_the_api_reference_and_the_results(book):
    api = (book / "api.html").read_text(encoding="utf-8")
    for name in ("BBBTrainer", "BBBLoss", "ScaleMixturePrior", "mc_predict", "read_checkpoint",
                 "custom_config"):
        assert name in api, name
    assert "Table 1" in (book / "results.html").read_text(encoding="utf-8")
    assert (book / "benchmarks.html").is_file() and (book / "index.html").is_file()
