"""Write the notebooks' install cell and their Colab links from the one setting,
``notebooks/install.json`` (where gluon_bbb is installed from, where the notebooks live, and what
each notebook needs besides gluon_bbb).

    python scripts/sync_install_cell.py           # writes the notebooks, README.md, notebooks/README.md
    python scripts/sync_install_cell.py --check   # exit 1 if any of them disagrees with the setting

The install cell is every notebook's first code cell. Where gluon_bbb is importable (a class's
own environment, the tests, the book) it does nothing. Where it is missing (Colab) it installs it
with pip, on Python 3.13 with MXNet installed apart (``pip install --no-deps mxnet==1.9.1``:
MXNet declares numpy<2, which has no wheel there), and says whether the kernel must be restarted:
only when the install changed a numpy this kernel had already imported. A notebook that needs
other packages (the setting's "needs": statsmodels for the sunspots of 10_bayesian_rnn) installs
them with gluon_bbb, or alone where only they are missing (a fresh environment, Binder). The
environment variable
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
# {header}
import importlib, importlib.util, os, subprocess, sys
{needs}if importlib.util.find_spec("gluon_bbb") is None:
    SOURCE = os.environ.get("GLUON_BBB_INSTALL_SOURCE", "{source}")
    numpy_imported = sys.modules["numpy"].__version__ if "numpy" in sys.modules else None
    pip = [sys.executable, "-m", "pip", "install", "-q"]
    if sys.version_info >= (3, 13):  # MXNet 1.9.1 declares numpy<2, which has no wheel here
        subprocess.check_call(pip + ["--no-deps", "mxnet==1.9.1"])
    subprocess.check_call(pip + [SOURCE]{plus_needed})
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
{needed_alone}'''

#: The lines of the cell of a notebook that needs packages besides gluon_bbb's (``{{needs}}``).
NEEDS_LINES = '''\
NEEDED = [name for name in {packages} if importlib.util.find_spec(name) is None]
'''
NEEDED_ALONE = '''\
elif NEEDED:
    subprocess.check_call([sys.executable, "-m", "pip", "install", "-q"] + NEEDED)
    importlib.invalidate_caches()
    print(f"Installed {', '.join(NEEDED)}.")
'''


def setting():
    """The one setting: repository URL and branch."""
    values = json.loads(SETTING.read_text(encoding="utf-8"))
    repository = values["repository"].rstrip("/")
    if not re.fullmatch(r"https://github\.com/[\w.-]+/[\w.-]+", repository):
        raise ValueError(f"{SETTING}: 'repository' must be https://github.com/OWNER/NAME")
    return repository, values["branch"]


def needs(notebook_name=None):
    """The packages that notebook ``notebook_name`` (a stem, e.g. "10_bayesian_rnn") needs
    besides gluon_bbb and its dependencies (the setting's "needs"; none for None)."""
    values = json.loads(SETTING.read_text(encoding="utf-8"))
    table = values.get("needs", {})
    unknown = sorted(set(table) - {path.stem for path in NOTEBOOKS})
    if unknown:
        raise ValueError(f"{SETTING}: 'needs' names no notebook {unknown}")
    packages = table.get(notebook_name, [])
    if not all(isinstance(name, str) and re.fullmatch(r"[A-Za-z0-9_.-]+", name)
               for name in packages):
        raise ValueError(f"{SETTING}: 'needs' of {notebook_name} must be package names")
    return list(packages)


def install_cell_source(notebook_name=None):
    """The install cell's code, for notebook ``notebook_name`` (a stem; None: one that needs
    nothing besides gluon_bbb)."""
    repository, branch = setting()
    packages = needs(notebook_name)
    if not packages:
        return CELL.format(source=f"git+{repository}@{branch}", needs="", plus_needed="",
                           needed_alone="", header="Installs gluon_bbb where it is missing "
                                                   "(Colab); where it is installed, does nothing.")
    return CELL.format(source=f"git+{repository}@{branch}",
                       needs=NEEDS_LINES.format(packages=json.dumps(packages)),
                       plus_needed=" + NEEDED", needed_alone=NEEDED_ALONE,
                       header=f"Installs gluon_bbb and {', '.join(packages)} where missing "
                              "(Colab); where installed, does nothing.")


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


def with_install_cell(notebook, notebook_name=None):
    """``notebook`` with the current install cell of ``notebook_name`` (a stem) as its first code
    cell (replacing an old one)."""
    cells = [cell for cell in notebook.cells if TAG not in cell.metadata.get("tags", [])]
    cell = nbformat.v4.new_code_cell(install_cell_source(notebook_name), metadata={"tags": [TAG]})
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
        if current != [install_cell_source(path.stem)] or \
                TAG not in first_code.metadata.get("tags", []):
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
        notebook = with_install_cell(nbformat.read(str(path), as_version=4), path.stem)
        nbformat.write(notebook, str(path))
    for readme, prefix in ((ROOT / "README.md", "notebooks/"), (ROOT / "notebooks" / "README.md", "")):
        readme.write_text(with_links(readme.read_text(encoding="utf-8"), prefix, readme),
                          encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
