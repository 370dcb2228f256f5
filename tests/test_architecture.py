"""The package's modules keep to their own private names (checked with ast): no module
reaches into another's ``_private`` names, and nothing imports upward from the package root."""
import ast
import pathlib

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "gluon_bbb"


def _modules():
    return sorted(PACKAGE.rglob("*.py"))


def _private_uses(path):
    """(line, text) of every use of another module's private name in ``path``."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    modules = set()  # names bound to sibling modules: from . import x
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level >= 1:
            for alias in node.names:
                if node.module is None:
                    modules.add(alias.asname or alias.name)
                if alias.name.startswith("_") and not alias.name.startswith("__"):
                    found.append((node.lineno, f"from .{node.module or ''} import {alias.name}"))
    for node in ast.walk(tree):
        if (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                and not node.attr.startswith("__") and isinstance(node.value, ast.Name)
                and node.value.id in modules):
            found.append((node.lineno, f"{node.value.id}.{node.attr}"))
    return found


def _upward_imports(path):
    """Imports of the package root (``from . import __version__``, ``import gluon_bbb``)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.level >= 1 and node.module is None:
            folder = path.parent
            for _ in range(node.level - 1):
                folder = folder.parent
            found += [(node.lineno, alias.name) for alias in node.names
                      if not (folder / f"{alias.name}.py").exists()
                      and not (folder / alias.name).is_dir()]
        if isinstance(node, ast.ImportFrom) and node.level == 0 and \
                (node.module or "").split(".")[0] == "gluon_bbb":
            found.append((node.lineno, node.module))
    return found


def _foreign_private_attributes(path):
    """(line, text) of every private attribute of an object other than self, cls or super()."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not (isinstance(node, ast.Attribute) and node.attr.startswith("_")
                and not node.attr.startswith("__")):
            continue
        owner = node.value
        if isinstance(owner, ast.Name) and owner.id in ("self", "cls"):
            continue
        if isinstance(owner, ast.Call) and getattr(owner.func, "id", None) == "super":
            continue
        found.append((node.lineno, ast.unparse(node)))
    return found


#: The one module that may reach into MXNet's and Optuna's private attributes.
COMPATIBILITY_MODULE = PACKAGE / "_mxcompat.py"


def test_only_the_compatibility_module_touches_private_attributes():
    problems = [f"{path.relative_to(PACKAGE)}:{line}: {text}" for path in _modules()
                if path != COMPATIBILITY_MODULE for line, text in _foreign_private_attributes(path)]
    assert not problems, "\n".join(problems)
    assert _foreign_private_attributes(COMPATIBILITY_MODULE)  # the check finds what it looks for


def test_no_module_uses_another_modules_private_names():
    problems = [f"{path.name}:{line}: {text}" for path in _modules()
                for line, text in _private_uses(path)]
    assert not problems, "\n".join(problems)


def test_no_module_imports_from_the_package_root():
    problems = [f"{path.name}:{line}: {name}" for path in _modules()
                if path != PACKAGE / "__init__.py"
                for line, name in _upward_imports(path)]
    assert not problems, "\n".join(problems)


def test_the_checks_find_what_they_look_for(tmp_path):
    """The two checks are not vacuous: they flag a planted private use and upward import."""
    planted = tmp_path / "planted.py"
    planted.write_text("from . import reproduce, __version__\nfrom ._checks import _hidden\n"
                       "x = reproduce._runner\n", encoding="utf-8")
    assert {text for _, text in _private_uses(planted)} == {"from ._checks import _hidden",
                                                           "reproduce._runner"}
    package = tmp_path / "pkg"
    (package / "sub").mkdir(parents=True)
    (package / "trainer.py").write_text("", encoding="utf-8")
    nested = package / "sub" / "planted.py"
    nested.write_text("from .. import __version__, trainer\n", encoding="utf-8")
    assert [name for _, name in _upward_imports(nested)] == ["__version__"]


def _layout_table():
    readme = (PACKAGE.parent / "README.md").read_text(encoding="utf-8")
    table = readme.split("\n## Layout\n", 1)[1].split("\n## ", 1)[0]
    return [line for line in table.splitlines() if line.startswith("| `")]


def test_the_readme_layout_table_names_every_module():
    rows = _layout_table()
    missing = []
    for path in _modules():
        if path.name in ("__init__.py", "__main__.py"):
            continue
        package = path.parent.relative_to(PACKAGE.parent).as_posix()  # gluon_bbb[/cli]
        if package == "gluon_bbb":
            named = any(f"{path.name}`" in row for row in rows)
        else:  # a subpackage's row names its modules as `stem`
            named = any(f"`{package}/`" in row and f"`{path.stem}`" in row for row in rows)
        if not named:
            missing.append(path.relative_to(PACKAGE.parent).as_posix())
    assert not missing, f"README's layout table does not name {missing}"


def test_the_core_sits_at_the_top_and_the_rest_in_subpackages():
    """At most 17 modules directly in gluon_bbb/ (the core); every subpackage is a folder with
    an __init__.py that says what it is for."""
    top = sorted(path.name for path in PACKAGE.glob("*.py") if path.name != "__init__.py")
    assert len(top) <= 17, top
    for folder in sorted(p for p in PACKAGE.iterdir() if p.is_dir() and p.name != "__pycache__"):
        init = folder / "__init__.py"
        assert init.is_file(), folder
        assert ast.get_docstring(ast.parse(init.read_text(encoding="utf-8"))), init


def test_no_python_module_is_much_over_500_lines():
    long = {path.relative_to(PACKAGE).as_posix(): n for path in _modules()
            if (n := len(path.read_text(encoding="utf-8").splitlines())) > 520}
    assert not long, f"modules over ~500 lines (split them by job): {long}"


def test_importing_the_package_does_not_import_optuna_or_matplotlib():
    """Optuna (the search) is slow to import and makes tqdm warn in notebooks without
    ipywidgets: the package imports it only when the search is used. matplotlib and seaborn
    load when a figure is drawn."""
    import subprocess
    import sys
    code = ("import sys, gluon_bbb; loaded = {m.split('.')[1] for m in sys.modules "
            "if m.startswith('gluon_bbb.')}; "
            "assert not loaded & {'experiments', 'apps', 'analysis', 'plots', 'cli'}, loaded; "
            "import gluon_bbb.experiments; assert 'optuna' not in sys.modules; "
            "assert not {'matplotlib', 'seaborn'} & set(sys.modules), 'matplotlib loaded'; "
            "gluon_bbb.plots.axes_for(); assert 'matplotlib' in sys.modules; "
            "gluon_bbb.experiments.search_space(); assert 'optuna' not in sys.modules; "
            "gluon_bbb.experiments.search.STUDY_NAME; assert 'optuna' in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True, timeout=120)


def test_the_public_api_has_type_hints():
    """Every parameter and the return value of the entry points users call first are
    annotated, and the annotations resolve."""
    import inspect
    import typing

    import gluon_bbb
    from gluon_bbb import fused
    entry_points = [gluon_bbb.BBBTrainer.__init__, gluon_bbb.BBBLoss.__init__,
                    gluon_bbb.GaussianPrior.__init__, gluon_bbb.ScaleMixturePrior.__init__,
                    gluon_bbb.VariationalPosterior.__init__, gluon_bbb.prior_from_config,
                    gluon_bbb.kl_weights, gluon_bbb.resolve_context, gluon_bbb.assign_arrays,
                    gluon_bbb.data.get_loaders, fused.variational_sample, fused.normal_sample]
    entry_points += [getattr(gluon_bbb.BBBTrainer, name) for name in (
        "step", "fit", "predict_proba", "evaluate", "save", "load", "set_mean", "draw_network",
        "reseed")]
    missing = []
    for function in entry_points:
        hints = typing.get_type_hints(function)
        for name, parameter in inspect.signature(function).parameters.items():
            if name != "self" and parameter.kind not in (parameter.VAR_POSITIONAL,
                                                         parameter.VAR_KEYWORD):
                if name not in hints:
                    missing.append(f"{function.__qualname__}({name})")
        if "return" not in hints:
            missing.append(f"{function.__qualname__} -> ?")
    assert not missing, missing


def test_the_tests_are_laid_out_like_the_package():
    """tests/<part>/ for each part of the package (core: the modules at the top), and at the top
    only the package-wide tests (this file, the notebooks, the book, a notebook in JupyterLab,
    the links of the documents) and shared helpers."""
    tests = PACKAGE.parent / "tests"
    parts = {p.name for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").is_file()}
    folders = {p.name for p in tests.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders <= parts | {"core"}, folders - parts
    top = {p.name for p in tests.glob("test_*.py")}
    assert top == {"test_architecture.py", "test_book.py", "test_jupyterlab.py",
                   "test_links.py", "test_notebook_exercises.py", "test_notebooks.py"}, top
    for folder in folders:
        assert list((tests / folder).glob("test_*.py")), folder
