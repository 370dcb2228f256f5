"""Sphinx configuration of the gluon_bbb book: the notebooks (executed by myst-nb), the API
reference from the numpy-style docstrings, and the results and benchmarks pages.

Build (one command, from the repository root)::

    GLUON_BBB_SMOKE=1 GLUON_BBB_DATA=../shared/data sphinx-build -W -b html docs docs/_build/html

With ``GLUON_BBB_SMOKE=1`` the notebooks run in their quick configuration (about a minute);
without it they run at full settings, and their outputs are cached in
``docs/_build/.jupyter_cache-full`` so that a rebuild only re-runs the notebooks that changed.
"""
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
exclude_patterns = ["_build", "Thumbs.db", ".DS_Store"]
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

autodoc_default_options = {"members": True, "show-inheritance": True}
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
with open(os.path.join(NOTEBOOKS, "README.md"), encoding="utf-8") as handle:
    readme = re.sub(r"\[([^\]]*)\]\(\.\./README\.md\)", r"\1 (the repository's README)", handle.read())
with open(os.path.join(NOTEBOOKS, "README.md"), "w", encoding="utf-8") as handle:
    handle.write(readme)

html_theme = "alabaster"
html_theme_options = {"page_width": "1240px", "sidebar_width": "250px"}
html_title = f"gluon_bbb {__version__}"
html_static_path = ["_static"]
html_css_files = ["wrap-code.css"]  # long code lines wrap (no sideways scrolling)
# MathJax from its CDN (the default), or from a local copy for reading offline, e.g. Debian's
# libjs-mathjax: GLUON_BBB_MATHJAX=file:///usr/share/javascript/mathjax/MathJax.js?config=TeX-AMS-MML_HTMLorMML
if os.environ.get("GLUON_BBB_MATHJAX"):
    mathjax_path = os.environ["GLUON_BBB_MATHJAX"]
    if "config=" in mathjax_path:  # MathJax 2 (Debian's): its own configuration, not version 3's
        mathjax2_config = {"tex2jax": {"inlineMath": [["\\(", "\\)"]],
                                       "displayMath": [["\\[", "\\]"]],
                                       "processEscapes": True,
                                       "ignoreClass": "tex2jax_ignore|mathjax_ignore|document",
                                       "processClass": "tex2jax_process|mathjax_process|math|output_area"}}
        myst_update_mathjax = False
