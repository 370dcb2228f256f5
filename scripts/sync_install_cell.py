"""Write the notebooks' install cell and their Colab links from the one setting,
``notebooks/install.json`` (where gluon_bbb is installed from, and where the notebooks live).

    python scripts/sync_install_cell.py           # writes the notebooks, README.md, notebooks/README.md
    python scripts/sync_install_cell.py --check   # exit 1 if any of them disagrees with the setting

The install cell is every notebook's first code cell. Where gluon_bbb is importable (a class's
own environment, the tests, the book) it does nothing. Where it is missing (Colab) it installs it
with pip, on Python 3.13 with MXNet installed apart (``pip install --no-deps mxnet==1.9.1``:
MXNet declares numpy<2, which has no wheel there), and says whether the kernel must be restarted:
only when the install changed a numpy this kernel had already imported. The environment variable
``GLUON_BBB_INSTALL_SOURCE`` overrides where it installs from (a path, a wheel, a URL); the tests
use it to install the checkout.
"""
import argparse
import json
import re
import sys
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]
SETTING = ROOT / "notebooks" / "install.json"
NOTEBOOKS = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
#: The tag that marks the install cell (the book and scripts/execute_notebooks.py know it).
TAG = "install"
#: Where the Colab links stand in the two READMEs.
LINKS_BEGIN, LINKS_END = "<!-- colab-links: scripts/sync_install_cell.py -->", "<!-- /colab-links -->"

CELL = '''\
# Installs gluon_bbb where it is missing (Colab); where it is installed, does nothing.
import importlib, importlib.util, os, subprocess, sys
if importlib.util.find_spec("gluon_bbb") is None:
    SOURCE = os.environ.get("GLUON_BBB_INSTALL_SOURCE", "{source}")
    numpy_imported = sys.modules["numpy"].__version__ if "numpy" in sys.modules else None
    pip = [sys.executable, "-m", "pip", "install", "-q"]
    if sys.version_info >= (3, 13):  # MXNet 1.9.1 declares numpy<2, which has no wheel here
        subprocess.check_call(pip + ["--no-deps", "mxnet==1.9.1"])
    subprocess.check_call(pip + [SOURCE])
    importlib.invalidate_caches()
    from importlib.metadata import version
    if numpy_imported is not None and version("numpy") != numpy_imported:
        raise RuntimeError(f"The install replaced numpy {{numpy_imported}} by {{version('numpy')}}: "
                           "restart the kernel (Colab: Runtime > Restart session) and run the "
                           "notebook again from the top.")
    import gluon_bbb  # in this kernel, before MXNet: what MXNet needs from numpy
    if sys.version_info >= (3, 13):
        print("pip's note that mxnet 1.9.1 requires numpy<2 is expected: gluon_bbb gives MXNet "
              "what it reads from numpy 2.")
    print(f"Installed gluon_bbb {{gluon_bbb.__version__}}; no restart needed.")
'''


def setting():
    """The one setting: repository URL and branch."""
    values = json.loads(SETTING.read_text(encoding="utf-8"))
    repository = values["repository"].rstrip("/")
    if not re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+", repository):
        raise ValueError(f"{SETTING}: 'repository' must be https://github.com/OWNER/NAME")
    return repository, values["branch"]


def install_cell_source():
    """The install cell's code."""
    repository, branch = setting()
    return CELL.format(source=f"git+{repository}@{branch}")


def colab_url(notebook_name):
    """The Colab address of ``notebooks/<notebook_name>`` on the configured branch."""
    repository, branch = setting()
    path = repository[len("https://github.com/"):]
    return f"https://colab.research.google.com/github/{path}/blob/{branch}/notebooks/{notebook_name}"


def links_block(prefix):
    """The Markdown list of Colab links, with ``prefix`` before each notebook's own path."""
    rows = [f"- [{path.stem}]({prefix}{path.name}): [open in Colab]({colab_url(path.name)})"
            for path in NOTEBOOKS]
    return "\n".join([LINKS_BEGIN, *rows, LINKS_END])


def with_install_cell(notebook):
    """``notebook`` with the current install cell as its first code cell (replacing an old one)."""
    cells = [cell for cell in notebook.cells if TAG not in cell.metadata.get("tags", [])]
    cell = nbformat.v4.new_code_cell(install_cell_source(), metadata={"tags": [TAG]})
    cell.id = TAG
    first_code = next(index for index, c in enumerate(cells) if c.cell_type == "code")
    notebook.cells = cells[:first_code] + [cell] + cells[first_code:]
    return notebook


def with_links(text, prefix, path):
    """``text`` (a README) with its Colab links block replaced by the current one."""
    pattern = re.compile(re.escape(LINKS_BEGIN) + r".*?" + re.escape(LINKS_END), re.S)
    if not pattern.search(text):
        raise ValueError(f"{path}: no {LINKS_BEGIN} ... {LINKS_END} block")
    return pattern.sub(lambda _: links_block(prefix), text)


def stale():
    """What disagrees with the setting: notebook names and README paths."""
    found = []
    for path in NOTEBOOKS:
        notebook = nbformat.read(str(path), as_version=4)
        current = [c.source for c in notebook.cells if TAG in c.metadata.get("tags", [])]
        first_code = next(c for c in notebook.cells if c.cell_type == "code")
        if current != [install_cell_source()] or TAG not in first_code.metadata.get("tags", []):
            found.append(path.name)
    for readme, prefix in ((ROOT / "README.md", "notebooks/"), (ROOT / "notebooks" / "README.md", "")):
        text = readme.read_text(encoding="utf-8")
        if LINKS_BEGIN not in text or with_links(text, prefix, readme) != text:
            found.append(str(readme.relative_to(ROOT)))
    return found


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="only check; exit 1 if stale")
    args = parser.parse_args(argv)
    if args.check:
        found = stale()
        for name in found:
            print(f"stale: {name} (run python scripts/sync_install_cell.py)")
        return 1 if found else 0
    for path in NOTEBOOKS:
        notebook = with_install_cell(nbformat.read(str(path), as_version=4))
        nbformat.write(notebook, str(path))
    for readme, prefix in ((ROOT / "README.md", "notebooks/"), (ROOT / "notebooks" / "README.md", "")):
        readme.write_text(with_links(readme.read_text(encoding="utf-8"), prefix, readme),
                          encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
