"""The rendered book (docs/, Sphinx + myst-nb): it builds with warnings as errors, every notebook
page holds its figures as real images and no error output. The notebooks run in smoke mode."""
import importlib
import inspect
import json
import os
import pkgutil
import re
import subprocess
import sys
from pathlib import Path

import pytest

from synthetic import needs_mnist

ROOT = Path(__file__).resolve().parent.parent
NOTEBOOKS = sorted(path.stem for path in (ROOT / "notebooks").glob("*.ipynb"))
#: Modules without a section of their own in the API reference: private ones, the version, and
#: the command modules of the CLI (docs/cli.md describes the commands).
UNDOCUMENTED = re.compile(r"(^|\.)_|^gluon_bbb\.version$|^gluon_bbb\.cli\.")


def public_modules():
    import gluon_bbb

    names = ["gluon_bbb"] + [info.name for info in pkgutil.walk_packages(gluon_bbb.__path__, "gluon_bbb.")]
    return [name for name in names if not UNDOCUMENTED.search(name)]


def api_pages(book):
    """The API reference's pages: the overview (api.html) and one page per subpackage."""
    return [book / "api.html"] + sorted((book / "api").glob("*.html"))


def notebook_names():
    """Every gluon_bbb name the notebooks' code uses, as written there (e.g. "gluon_bbb.data.get_loaders",
    "uncertainty.plot_reliability_diagrams"), with the object it names."""
    import gluon_bbb

    found = {}
    for path in sorted((ROOT / "notebooks").glob("*.ipynb")):
        cells = json.loads(path.read_text(encoding="utf-8"))["cells"]
        code = "\n".join("".join(cell["source"]) for cell in cells if cell["cell_type"] == "code")
        aliases = {"gluon_bbb": gluon_bbb}
        for module, names in re.findall(r"^\s*from (gluon_bbb[\w.]*) import ([\w, ]+)$", code, re.M):
            for name in (part.strip() for part in names.split(",")):
                obj = getattr(importlib.import_module(module), name)
                found[f"{module}.{name}"] = obj
                if inspect.ismodule(obj):
                    aliases[name] = obj
        for alias, module in aliases.items():
            for chain in re.findall(rf"(?<![\w.]){alias}((?:\.[A-Za-z]\w*)+)", code):
                obj = module
                for attribute in chain.strip(".").split("."):
                    if not (inspect.ismodule(obj) or inspect.isclass(obj)) or not hasattr(obj, attribute):
                        break
                    obj = getattr(obj, attribute)
                    found[alias + chain[:chain.index(attribute) + len(attribute)]] = obj
    return found


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
    api = "".join(page.read_text(encoding="utf-8") for page in api_pages(book))
    for name in ("BBBTrainer", "BBBLoss", "ScaleMixturePrior", "mc_predict", "read_checkpoint",
                 "custom_config"):
        assert name in api, name
    results = (book / "results.html").read_text(encoding="utf-8")
    # the page's own text, after the sidebar (which names the per-experiment pages, Table 1's too)
    results = results[results.index('role="main"'):]
    assert "Table 1" in results
    assert results.index('id="summary"') < results.index("Table 1"), "results.md opens with its summary"
    for page in ("table1", "long-protocol", "search", "pruning", "bandit", "other-reproductions",
                 "lstm-sunspots", "continual-learning", "history"):
        assert f'href="results/{page}.html' in results, f"the summary does not link results/{page}"
        assert (book / "results" / f"{page}.html").is_file(), f"results/{page}.html was not built"
    assert (book / "benchmarks.html").is_file() and (book / "index.html").is_file()


@needs_mnist
def test_the_api_reference_opens_with_an_overview_and_has_a_section_per_module(book):
    overview = (book / "api.html").read_text(encoding="utf-8")
    assert re.search(r"<h2>Overview", overview), "api.md: no overview section"
    for name in ("BBBTrainer", "BBBLoss", "GaussianPrior", "ScaleMixturePrior", "get_loaders",
                 "gluon_bbb.analysis.pruning", "gluon_bbb.analysis.uncertainty"):
        assert name in overview, f"the overview does not name {name}"
    assert 'class="highlight-python' in overview, "the overview has no example"
    pages = {page: page.read_text(encoding="utf-8") for page in api_pages(book)}
    for module in public_modules():
        holding = [page for page, html in pages.items() if f'id="module-{module}"' in html]
        assert holding, f"{module} is not documented"
        headings = re.findall(r"<h[12]>(.*?)<a class=\"headerlink", pages[holding[0]], re.S)
        assert any(re.sub(r"<[^>]+>", "", text).strip() == module for text in headings), \
            f"{module} has no heading of its own"


@needs_mnist
def test_every_name_the_notebooks_use_is_in_the_api_reference(book):
    ids = set()
    for page in api_pages(book):
        ids.update(re.findall(r'id="([^"]+)"', page.read_text(encoding="utf-8")))
    missing = []
    for written, obj in sorted(notebook_names().items()):
        name = written.rsplit(".", 1)[-1]
        if name.startswith("_"):
            continue
        if inspect.ismodule(obj):
            anchors = {f"module-{obj.__name__}"}
        elif inspect.isclass(obj) or inspect.isfunction(obj):
            anchors = {f"{obj.__module__}.{obj.__qualname__}"}
        else:  # a constant: documented in the module that defines it
            anchors = {anchor for anchor in ids if anchor.startswith("gluon_bbb.") and anchor.endswith("." + name)}
        if not anchors & ids:
            missing.append(written)
    assert not missing, f"used in the notebooks, not in the API reference: {missing}"


EXECUTED = ROOT / "docs" / "executed"


@pytest.mark.parametrize("copy", sorted(EXECUTED.glob("*.ipynb")), ids=lambda path: path.stem)
def test_an_executed_notebook_in_the_book_is_its_source_at_full_settings(copy):
    """The book shows docs/executed/ copies (scripts/execute_notebooks.py) in place of their
    sources: each must hold its source's cells exactly (code and prose: the prose quotes the
    outputs), run at full settings, without errors."""
    import json

    def cells(path):
        return [(cell["cell_type"], cell["source"] if isinstance(cell["source"], str)
                 else "".join(cell["source"]))
                for cell in json.loads(path.read_text(encoding="utf-8"))["cells"]]

    executed = json.loads(copy.read_text(encoding="utf-8"))
    assert cells(copy) == cells(ROOT / "notebooks" / copy.name), \
        f"{copy.name} is stale: run scripts/execute_notebooks.py {copy.stem}"
    assert executed["metadata"]["gluon_bbb"]["settings"] == "full"
    outputs = [output for cell in executed["cells"] if cell["cell_type"] == "code"
               for output in cell.get("outputs", [])]
    assert outputs and not [o for o in outputs if o.get("output_type") == "error"]
    assert any("image/png" in o.get("data", {}) for o in outputs)  # its figures are there


def test_an_up_to_date_copy_takes_its_sources_new_prose_and_keeps_its_outputs(tmp_path,
                                                                              monkeypatch):
    """scripts/execute_notebooks.py: when only the prose of a source changed, its executed copy
    is given the new cells without running again, its outputs and metadata kept."""
    import importlib.util
    nbformat = pytest.importorskip("nbformat")
    spec = importlib.util.spec_from_file_location("execute_notebooks",
                                                  ROOT / "scripts" / "execute_notebooks.py")
    script = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(script)
    sources, copies = tmp_path / "notebooks", tmp_path / "executed"
    sources.mkdir(), copies.mkdir()
    monkeypatch.setattr(script, "SOURCES", str(sources))
    v4 = nbformat.v4
    output = v4.new_output("stream", name="stdout", text="1.73%\n")
    executed = v4.new_notebook(cells=[v4.new_markdown_cell("The error is 1.70%."),
                                      v4.new_code_cell("print('1.73%')", outputs=[output],
                                                       execution_count=1)])
    executed.metadata["gluon_bbb"] = {"settings": "full", "seconds": 5}
    nbformat.write(executed, str(copies / "nb.ipynb"))
    source = v4.new_notebook(cells=[v4.new_markdown_cell("# Title"),
                                    v4.new_markdown_cell("The error is 1.73%."),
                                    v4.new_code_cell("print('1.73%')")])
    nbformat.write(source, str(sources / "nb.ipynb"))
    assert script.up_to_date("nb", str(copies))
    assert script.refresh_text("nb", str(copies))
    refreshed = nbformat.read(str(copies / "nb.ipynb"), as_version=4)
    assert [cell.source for cell in refreshed.cells] == [cell.source for cell in source.cells]
    assert refreshed.cells[2].outputs == [output] and refreshed.cells[2].execution_count == 1
    assert refreshed.metadata["gluon_bbb"] == {"settings": "full", "seconds": 5}
    assert not script.refresh_text("nb", str(copies))  # nothing left to refresh
