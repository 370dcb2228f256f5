"""Sphinx configuration of the gluon_bbb book: the notebooks (executed by myst-nb), the API
reference from the numpy-style docstrings, and the results and benchmarks pages.

Build (one command, from the repository root)::

    GLUON_BBB_SMOKE=1 GLUON_BBB_DATA=../shared/data sphinx-build -W -b html docs docs/_build/html

With ``GLUON_BBB_SMOKE=1`` the notebooks run in their quick configuration (about a minute);
without it they run at full settings, and their outputs are cached in
``docs/_build/.jupyter_cache-full`` so that a rebuild only re-runs the notebooks that changed.
"""
import json
import os
import re
import shutil
import sys

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, ROOT)

from gluon_bbb.version import __version__  # noqa: E402

project = "gluon_bbb"
author = "the gluon_bbb authors"
copyright = "2026, the gluon_bbb authors (Apache-2.0)"
version = release = __version__

extensions = ["myst_nb", "sphinx.ext.autodoc", "sphinx.ext.napoleon", "sphinx.ext.mathjax",
              "sphinx.ext.viewcode"]
source_suffix = {".md": "myst-nb", ".ipynb": "myst-nb"}
exclude_patterns = ["_build", "executed", "Thumbs.db", ".DS_Store"]
myst_enable_extensions = ["dollarmath", "amsmath"]
myst_heading_anchors = 3

SMOKE = "GLUON_BBB_SMOKE" in os.environ
nb_execution_mode = "cache"
nb_execution_cache_path = os.environ.get("GLUON_BBB_BOOK_CACHE") or os.path.join(
    os.path.dirname(__file__), "_build", ".jupyter_cache-" + ("smoke" if SMOKE else "full"))
nb_execution_timeout = 600 if SMOKE else 7200
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_merge_streams = True
# Markdown that a cell prints (notebook 05's tables) is read as MyST, so its tables render.
nb_render_markdown_format = "myst"
# A notebook run with progress=True holds ipywidgets progress bars (gluon_bbb.epochs.progress_bar),
# closed when their epoch ended; the epoch lines printed beside them are what the page shows. No
# widget JavaScript is loaded (myst-nb's default fetches RequireJS and an ipywidgets 7 manager
# from CDNs): the bars stay invisible, and the book reads offline.
nb_ipywidgets_js = {}

autodoc_default_options = {"members": True, "show-inheritance": True}
toc_object_entries_show_parents = "hide"  # the page's table of contents: "fit()", not "BBBTrainer.fit()"
add_module_names = False  # "get_config(name)" under the heading gluon_bbb.experiments.configs
autodoc_member_order = "bysource"
autodoc_mock_imports = []
napoleon_google_docstring = False
napoleon_numpy_docstring = True
napoleon_use_rtype = False

# The notebooks live in notebooks/ (where the tests execute them); the book takes copies, so that
# their relative links between each other resolve. The one link out of the folder, to the
# repository's README, becomes plain text.
NOTEBOOKS = os.path.join(os.path.dirname(__file__), "notebooks")
shutil.rmtree(NOTEBOOKS, ignore_errors=True)
shutil.copytree(os.path.join(ROOT, "notebooks"), NOTEBOOKS,
                ignore=shutil.ignore_patterns(".ipynb_checkpoints"))

# A notebook executed at its full settings (docs/executed/, made by scripts/execute_notebooks.py
# and committed with its outputs) lends its outputs to its source's code cells in the book, and
# the page is not executed again, as long as the code is the source's (tests/test_book.py fails
# on a stale copy). The text is always the source's.
EXECUTED = os.path.join(os.path.dirname(__file__), "executed")


def _code_cells(path):
    with open(path, encoding="utf-8") as handle:
        return ["".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
                for cell in json.load(handle)["cells"] if cell["cell_type"] == "code"]


def _with_outputs(source_path, executed_path):
    """The source notebook with the executed copy's outputs in its code cells (so its text is
    the source's, edited or not), or None when their code differs."""
    with open(source_path, encoding="utf-8") as handle:
        source = json.load(handle)
    with open(executed_path, encoding="utf-8") as handle:
        executed = json.load(handle)
    if _code_cells(source_path) != _code_cells(executed_path):
        return None
    ran = [cell for cell in executed["cells"] if cell["cell_type"] == "code"]
    for cell, done in zip([c for c in source["cells"] if c["cell_type"] == "code"], ran):
        cell["outputs"], cell["execution_count"] = done.get("outputs", []), done.get("execution_count")
    source["metadata"]["gluon_bbb"] = executed["metadata"].get("gluon_bbb", {})
    return source


FULL_SETTINGS = []  # the docnames shown executed at their full settings
for name in sorted(os.listdir(EXECUTED) if os.path.isdir(EXECUTED) else []):
    target = os.path.join(NOTEBOOKS, name)
    if name.endswith(".ipynb") and os.path.isfile(target):
        merged = _with_outputs(target, os.path.join(EXECUTED, name))
        if merged is not None:
            with open(target, "w", encoding="utf-8") as handle:
                json.dump(merged, handle)
            FULL_SETTINGS.append("notebooks/" + name[:-len(".ipynb")])
nb_execution_excludepatterns = [f"*{docname}.ipynb" for docname in FULL_SETTINGS]


def _book_links(text):
    """A link of a notebook into the book's sources (``../docs/x.md`` from notebooks/) as the
    book's copy in docs/notebooks/ reaches it (``../x.md``)."""
    return re.sub(r"\]\(\.\./docs/", "](../", text)


for name in sorted(os.listdir(NOTEBOOKS)):
    if name.endswith(".ipynb"):
        path = os.path.join(NOTEBOOKS, name)
        with open(path, encoding="utf-8") as handle:
            notebook = json.load(handle)
        for cell in notebook["cells"]:
            if cell["cell_type"] == "markdown":
                text = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
                cell["source"] = _book_links(text)
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(notebook, handle)
with open(os.path.join(NOTEBOOKS, "README.md"), encoding="utf-8") as handle:
    readme = _book_links(re.sub(r"\[([^\]]*)\]\(\.\./README\.md\)", r"\1 (the repository's README)",
                                handle.read()))
with open(os.path.join(NOTEBOOKS, "README.md"), "w", encoding="utf-8") as handle:
    handle.write(readme)

# Furo: a sidebar with the toctrees' captions, a local table of contents on every page with
# sections, previous/next links at the bottom; code blocks keep their lines and scroll sideways.
html_theme = "furo"
html_title = f"gluon_bbb {__version__}"
html_static_path = ["_static"]
html_css_files = ["book.css"]
html_theme_options = {"navigation_with_keys": True}

# MathJax. A local copy is used when one is installed (Debian's libjs-mathjax, MathJax 2), so
# that the book reads offline; otherwise Sphinx's default, MathJax from its CDN.
# GLUON_BBB_MATHJAX overrides the choice: "cdn" for the CDN (a book to be published), or the URL
# of a MathJax script, e.g. file:///usr/share/javascript/mathjax/MathJax.js?config=TeX-AMS-MML_HTMLorMML
LOCAL_MATHJAX = "/usr/share/javascript/mathjax/MathJax.js"
MATHJAX = os.environ.get("GLUON_BBB_MATHJAX", "").strip()
if not MATHJAX and os.path.isfile(LOCAL_MATHJAX):
    MATHJAX = f"file://{LOCAL_MATHJAX}?config=TeX-AMS-MML_HTMLorMML"
if MATHJAX and MATHJAX.lower() != "cdn":
    mathjax_path = MATHJAX
    if "config=" in mathjax_path:  # MathJax 2 (Debian's): its own configuration, not version 3's
        mathjax2_config = {"tex2jax": {"inlineMath": [["\\(", "\\)"]],
                                       "displayMath": [["\\[", "\\]"]],
                                       "processEscapes": True,
                                       "ignoreClass": "tex2jax_ignore|mathjax_ignore|document",
                                       "processClass": "tex2jax_process|mathjax_process|math|output_area"}}
        myst_update_mathjax = False

# Whether the notebooks ran in smoke mode: a page built from one says so at its top. A config
# value, so that switching modes re-reads every page.
gluon_bbb_smoke = SMOKE
SMOKE_NOTEBOOK = re.compile(r"notebooks/\d\d_")


def smoke_banner(app, doctree):
    """Put a note under the title of every notebook page executed in smoke mode."""
    from docutils import nodes
    from sphinx import addnodes

    if (not app.config.gluon_bbb_smoke or not SMOKE_NOTEBOOK.match(app.env.docname)
            or app.env.docname in FULL_SETTINGS):
        return
    section = next(iter(doctree.findall(nodes.section)), None)
    if section is None:
        return
    link = addnodes.pending_xref("", refdomain="std", reftype="doc", reftarget="/results",
                                 refexplicit=True, refwarn=True)
    link += nodes.inline("", "Results")
    text = nodes.paragraph()
    text += nodes.Text("This page was executed with ")
    text += nodes.literal("", "GLUON_BBB_SMOKE=1")
    text += nodes.Text(
        ", the notebook's quick configuration (little data, few epochs or steps), to check "
        "that it runs: the numbers and figures below are not results. The full settings' "
        "numbers are quoted under \u201cWhat the full settings give\u201d in the introduction "
        "and recorded in ")
    text += link
    text += nodes.Text(" (\u201cNotebooks with their full settings\u201d).")
    note = nodes.admonition(classes=["smoke-build", "warning"])
    note += nodes.title("", "Smoke build")
    note += text
    section.insert(1, note)  # after the title


def resolve_short_names(app, env, node, contnode):
    """Link a name written the way users import it (``gluon_bbb.BBBTrainer``,
    ``gluon_bbb.uncertainty.auroc``) to the object's documentation under its own module."""
    import importlib
    import inspect

    target = node.get("reftarget", "")
    if node.get("refdomain") != "py" or not target.startswith("gluon_bbb."):
        return None
    parts = target.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            obj = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            continue
        try:
            for attribute in parts[cut:]:
                obj = getattr(obj, attribute)
        except AttributeError:
            return None
        break
    else:
        return None
    if inspect.ismodule(obj):
        canonical = obj.__name__
    elif hasattr(obj, "__module__") and hasattr(obj, "__qualname__"):
        canonical = f"{obj.__module__}.{obj.__qualname__}"
    else:
        return None
    if canonical == target:
        return None
    return env.get_domain("py").resolve_xref(env, node["refdoc"], app.builder, node["reftype"],
                                             canonical, node, contnode)


def keep_constants_prose(app, what, name, obj, options, lines):
    """Napoleon reads "X: Y" on the first line of a constant's or a property's docstring as its
    type X (Google style); gluon_bbb's are prose ("Deprecated: the old name of ..."). Break the
    line after that colon, which napoleon then leaves in the text. Runs before napoleon
    (priority 400 < 500)."""
    from sphinx.ext.napoleon.docstring import _single_colon_regex, _xref_or_code_regex

    first = next((index for index, line in enumerate(lines) if line.strip()), None)
    if what not in ("data", "property") or first is None:
        return
    line, offset = lines[first], 0
    for index, part in enumerate(_xref_or_code_regex.split(line)):
        match = _single_colon_regex.search(part) if index % 2 == 0 else None
        if match:
            cut = offset + match.end()
            if line[cut:].strip():
                lines[first:first + 1] = [line[:cut], line[cut:].strip()]
            return
        offset += len(part)


def setup(app):
    app.add_config_value("gluon_bbb_smoke", False, "env")
    app.connect("autodoc-process-docstring", keep_constants_prose, priority=400)
    app.connect("doctree-read", smoke_banner)
    app.connect("missing-reference", resolve_short_names)
