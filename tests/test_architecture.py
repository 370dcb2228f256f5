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
