"""gluon_bbb's startup hook (``_gluon_bbb_mxcompat_hook`` and ``gluon_bbb-mxnet-compat.pth``)
cannot harm a program that never imports gluon_bbb: it acts only when MXNet executes, it cannot
be shadowed by a folder named ``gluon_bbb``, and when anything goes wrong MXNet's import is what
it would be without gluon_bbb, with one warning and nothing half-loaded left in ``sys.modules``.

Most checks run a fresh interpreter with ``-S`` (no site-packages processed) on a site folder
made here with ``site.addsitedir``, laid out as a wheel install lays it out, with the
environment's own packages appended after it (so its numpy and MXNet are found, and its own
startup file is not run).
"""
import json
import os
import shutil
import subprocess
import sys
import sysconfig
import textwrap
from pathlib import Path

import pytest

import _gluon_bbb_mxcompat_hook as hook
from gluon_bbb import _mxcompat as compat

HOOK_FILE = Path(hook.__file__)
COMPAT_FILE = Path(compat.__file__)
ENVIRONMENT = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
NAMES = sorted(shim.name for shim in compat.NUMPY_SHIMS)

#: Runs in a fresh interpreter: adds the site folder argv[1] (if any) as ``site`` does, then the
#: environment's packages; imports MXNet (or only looks it up, argv[2] == "find_spec") and
#: prints what a program would see.
PROBE = textwrap.dedent(f"""
    import json, site, sys, warnings
    if sys.argv[1]:
        site.addsitedir(sys.argv[1])
    sys.path.extend({ENVIRONMENT!r})
    modules_before = set(sys.modules)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            if sys.argv[2] == "find_spec":
                import importlib.util
                spec = importlib.util.find_spec("mxnet")
                outcome = "found " + spec.origin
            else:
                import mxnet
                outcome = "imported " + mxnet.__file__
        except Exception as error:
            outcome = type(error).__name__ + ": " + str(error)
    numpy = sys.modules.get("numpy")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        present = None if numpy is None else [name for name in {NAMES!r} if hasattr(numpy, name)]
    print(json.dumps({{
        "outcome": outcome,
        "numpy_names": present,
        "new_modules": sorted(name for name in set(sys.modules) - modules_before
                              if "gluon_bbb" in name or name in ("numpy", "mxnet")),
        "finders": [type(finder).__name__ for finder in sys.meta_path],
        "warnings": [str(w.message) for w in caught
                     if issubclass(w.category, RuntimeWarning) and "gluon_bbb" in str(w.message)],
    }}))
    """)


def _clean_environment(**extra):
    env = {key: value for key, value in os.environ.items()
           if key not in ("PYTHONPATH", "GLUON_BBB_NUMPY_COMPAT", "PYTHONSTARTUP")}
    env.update(extra)
    return env


def _probe(site_dir, cwd, action="import", **env):
    """What a fresh ``python -S`` sees after adding ``site_dir`` ("" for none) and importing
    (or looking up) MXNet in ``cwd``; stderr must be free of ``site``'s error messages."""
    result = subprocess.run([sys.executable, "-S", "-c", PROBE, str(site_dir), action],
                            capture_output=True, text=True, cwd=str(cwd), timeout=300,
                            env=_clean_environment(**env))
    assert result.returncode == 0, result.stderr[-3000:]
    assert "Error processing line" not in result.stderr, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def _site(folder, hook_module=True, compat_source=None):
    """A site folder as a wheel install leaves it: the startup file, the hook module (unless
    ``hook_module`` is False) and ``gluon_bbb/_mxcompat.py`` (this checkout's, or
    ``compat_source``; none if it is "")."""
    folder.mkdir()
    (folder / "gluon_bbb-mxnet-compat.pth").write_text(hook.PTH_LINE, encoding="utf-8")
    if hook_module:
        shutil.copy(HOOK_FILE, folder / HOOK_FILE.name)
    if compat_source != "":
        (folder / "gluon_bbb").mkdir()
        target = folder / "gluon_bbb" / "_mxcompat.py"
        if compat_source is None:
            shutil.copy(COMPAT_FILE, target)
        else:
            target.write_text(compat_source, encoding="utf-8")
    return folder


@pytest.fixture(scope="module")
def without_gluon_bbb(tmp_path_factory):
    """``import mxnet`` in this environment with no gluon_bbb at all."""
    return _probe("", tmp_path_factory.mktemp("plain"))


def _as_without(seen, without):
    assert seen["outcome"] == without["outcome"]
    assert seen["numpy_names"] == without["numpy_names"]
    assert "MXNetFinder" not in seen["finders"]
    assert hook.COMPAT_NAME not in seen["new_modules"]
    assert "gluon_bbb._mxcompat" not in seen["new_modules"]


# ------------------------------------------------------------------ as installed
def test_the_startup_line_is_one_line_that_imports_the_hook():
    assert hook.PTH_LINE.count("\n") == 1 and hook.PTH_LINE.endswith("\n")
    assert hook.PTH_LINE.startswith("import ")  # site executes only such lines
    assert '__import__("_gluon_bbb_mxcompat_hook").install()' in hook.PTH_LINE
    assert HOOK_FILE.parent / "gluon_bbb" / "_mxcompat.py" == Path(hook.COMPAT_PATH)


def test_the_hook_applies_the_stand_ins_when_mxnet_executes(tmp_path):
    seen = _probe(_site(tmp_path / "site"), tmp_path)
    assert seen["outcome"].startswith("imported"), seen
    assert seen["numpy_names"] == NAMES  # every name MXNet reads exists
    assert hook.COMPAT_NAME in seen["new_modules"]
    assert "gluon_bbb._mxcompat" not in seen["new_modules"]  # the package's name stays free
    assert "MXNetFinder" not in seen["finders"]  # gone after its one use
    assert seen["warnings"] == []


def test_a_gluon_bbb_folder_in_the_working_directory_does_not_break_import_mxnet(tmp_path):
    """A folder named ``gluon_bbb`` without ``__init__.py`` in the working directory is a
    namespace package that shadows an editable install; the hook does not look there. In this
    environment, as installed, with its own startup file."""
    (tmp_path / "gluon_bbb").mkdir()
    code = textwrap.dedent("""
        import json, sys
        import mxnet
        compat = sys.modules["_gluon_bbb_mxcompat_stand_ins"]
        print(json.dumps({"compat": compat.__file__, "added": compat.added()}))
        """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=str(tmp_path), timeout=300,
                            env=_clean_environment(PYTHONPATH=os.environ.get("PYTHONPATH", "")))
    assert result.returncode == 0, result.stderr[-3000:]
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert Path(seen["compat"]).resolve() == COMPAT_FILE.resolve()
    assert sorted(seen["added"]) == sorted(compat.added())


def test_the_namespace_folder_is_not_read_where_the_package_is_installed(tmp_path):
    (tmp_path / "gluon_bbb").mkdir()
    (tmp_path / "gluon_bbb" / "_mxcompat.py").write_text("raise SystemExit('shadowed')\n",
                                                         encoding="utf-8")
    seen = _probe(_site(tmp_path / "site"), tmp_path)
    assert seen["outcome"].startswith("imported"), seen
    assert seen["warnings"] == []


def test_looking_mxnet_up_imports_and_changes_nothing(tmp_path):
    """``importlib.util.find_spec("mxnet")`` only asks whether MXNet is installed: numpy is not
    imported, nothing is patched, and the hook stays for a later import. In this environment,
    as installed."""
    code = textwrap.dedent(f"""
        import importlib.util, json, sys
        spec = importlib.util.find_spec("mxnet")
        looked_up = sorted(name for name in sys.modules
                           if name.split(".")[0] in ("numpy", "mxnet", "gluon_bbb"))
        import mxnet, numpy, warnings
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            present = [name for name in {NAMES!r} if hasattr(numpy, name)]
        print(json.dumps({{"origin": spec.origin, "looked_up": looked_up, "mxnet": mxnet.__file__,
                          "present": present, "loader": type(mxnet.__loader__).__name__}}))
        """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=str(tmp_path), timeout=300,
                            env=_clean_environment(PYTHONPATH=os.environ.get("PYTHONPATH", "")))
    assert result.returncode == 0, result.stderr[-3000:]
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert seen["looked_up"] == []
    assert seen["origin"] == seen["mxnet"]
    assert seen["present"] == NAMES  # the later import still got the stand-ins
    assert seen["loader"] == "SourceFileLoader"  # MXNet's own loader, as without the hook


def test_find_spec_in_a_site_folder_leaves_numpy_unimported(tmp_path):
    seen = _probe(_site(tmp_path / "site"), tmp_path, action="find_spec")
    assert seen["outcome"].startswith("found"), seen
    assert seen["numpy_names"] is None and seen["new_modules"] == []
    assert seen["finders"][0] == "MXNetFinder"


# ------------------------------------------------------------------ it fails soft
def test_a_startup_file_left_behind_is_silent_and_changes_nothing(tmp_path, without_gluon_bbb):
    """The package uninstalled, its startup file left behind (and a ``gluon_bbb`` folder in the
    working directory): the interpreter starts without a message, MXNet imports as without
    gluon_bbb."""
    (tmp_path / "gluon_bbb").mkdir()
    seen = _probe(_site(tmp_path / "site", hook_module=False, compat_source=""), tmp_path)
    _as_without(seen, without_gluon_bbb)
    assert seen["warnings"] == [] and "_gluon_bbb_mxcompat_hook" not in seen["new_modules"]


@pytest.mark.parametrize("compat_source", ["", "raise RuntimeError('a broken stand-in list')\n",
                                           "def apply():\n    raise OSError('disk gone')\n"],
                         ids=["package-removed", "module-raises", "apply-raises"])
def test_any_error_leaves_mxnet_as_without_gluon_bbb_with_one_warning(tmp_path, compat_source,
                                                                      without_gluon_bbb):
    seen = _probe(_site(tmp_path / "site", compat_source=compat_source), tmp_path)
    _as_without(seen, without_gluon_bbb)
    assert len(seen["warnings"]) == 1, seen["warnings"]
    assert "MXNet is imported without its stand-ins" in seen["warnings"][0]


def test_the_switch_keeps_the_hook_unimported(tmp_path, without_gluon_bbb):
    seen = _probe(_site(tmp_path / "site"), tmp_path, GLUON_BBB_NUMPY_COMPAT="0")
    _as_without(seen, without_gluon_bbb)
    assert "_gluon_bbb_mxcompat_hook" not in seen["new_modules"]


def test_apply_sets_all_stand_ins_or_none(tmp_path):
    """A stand-in that raises while they are made leaves numpy without any of them."""
    code = textwrap.dedent(f"""
        import importlib.util, json, sys, warnings
        sys.path.extend({ENVIRONMENT!r})
        spec = importlib.util.spec_from_file_location("compat_copy", {str(COMPAT_FILE)!r})
        compat = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(compat)
        import numpy
        def fails(np):
            raise ValueError("cannot make it")
        compat.NUMPY_SHIMS = compat.NUMPY_SHIMS + (compat.NUMPY_SHIMS[0]._replace(
            name="not_a_numpy_name", removed_in=(0, 0), restored_in=None, make=fails),)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            before = [name for name in {NAMES!r} if hasattr(numpy, name)]
            try:
                compat.apply()
                outcome = "applied"
            except ValueError as error:
                outcome = str(error)
            after = [name for name in {NAMES!r} if hasattr(numpy, name)]
        print(json.dumps({{"outcome": outcome, "same": before == after, "added": compat.added()}}))
        """)
    result = subprocess.run([sys.executable, "-S", "-c", code], capture_output=True, text=True,
                            cwd=str(tmp_path), timeout=120, env=_clean_environment())
    assert result.returncode == 0, result.stderr[-3000:]
    assert json.loads(result.stdout.strip().splitlines()[-1]) == {
        "outcome": "cannot make it", "same": True, "added": []}


# ------------------------------------------------------------------ a user-site install
@pytest.mark.slow
def test_a_user_site_install_applies_the_stand_ins(tmp_path):
    """The wheel installed with ``pip install --user`` by this environment's base interpreter
    (a virtual environment hides the user site): the hook is imported from the user site and
    applies the stand-ins before MXNet executes (an ``mxnet`` stand-in that records it, with
    this environment's numpy and setuptools)."""
    base = getattr(sys, "_base_executable", sys.executable)
    repository = COMPAT_FILE.parents[1]
    if not (repository / "setup.py").is_file():
        pytest.skip("needs the checkout (setup.py) to build the wheel")
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w",
                            str(tmp_path / "dist"), str(repository)],  # as scripts/check_wheel.sh
                           capture_output=True, text=True, timeout=600)
    assert build.returncode == 0, build.stderr[-3000:]
    env = _clean_environment(PYTHONUSERBASE=str(tmp_path / "user"), PIP_NO_INDEX="1")
    env.pop("PYTHONNOUSERSITE", None)
    install = subprocess.run([base, "-m", "pip", "install", "-q", "--user", "--no-deps",
                              *map(str, (tmp_path / "dist").glob("gluon_bbb-*.whl"))],
                             capture_output=True, text=True, env=env, timeout=600)
    assert install.returncode == 0, install.stderr[-3000:]
    programs = tmp_path / "programs"
    (programs / "mxnet").mkdir(parents=True)
    (programs / "mxnet" / "__init__.py").write_text(textwrap.dedent("""
        import sys
        compat = sys.modules.get("_gluon_bbb_mxcompat_stand_ins")
        SEEN = {"compat": compat and compat.__file__, "added": compat and compat.added()}
        """), encoding="utf-8")
    for name in ("numpy", "numpy.libs", "setuptools", "_distutils_hack"):  # this environment's
        for folder in ENVIRONMENT:
            if (Path(folder) / name).is_dir() and not (programs / name).exists():
                (programs / name).symlink_to(Path(folder) / name, target_is_directory=True)
    code = textwrap.dedent("""
        import json, site, sys
        import mxnet
        print(json.dumps({"user_site": site.getusersitepackages(), **mxnet.SEEN,
                          "hook": getattr(sys.modules.get("_gluon_bbb_mxcompat_hook"),
                                          "__file__", None)}))
        """)
    runs = {}
    for switch in ("1", "0"):
        result = subprocess.run([base, "-c", code], capture_output=True, text=True,
                                cwd=str(programs), timeout=300,
                                env=dict(env, GLUON_BBB_NUMPY_COMPAT=switch))
        assert result.returncode == 0, result.stderr[-3000:]
        assert "Error processing line" not in result.stderr, result.stderr[-3000:]
        runs[switch] = json.loads(result.stdout.strip().splitlines()[-1])
    user_site = Path(runs["1"]["user_site"])
    assert Path(runs["1"]["hook"]) == user_site / HOOK_FILE.name
    assert Path(runs["1"]["compat"]) == user_site / "gluon_bbb" / "_mxcompat.py"
    assert sorted(runs["1"]["added"]) == sorted(compat.added())
    assert runs["0"]["hook"] is None and runs["0"]["compat"] is None


def test_a_checkout_on_the_path_keeps_its_own_compatibility_module(tmp_path):
    """``import mxnet`` first, with this environment's hook, then ``import gluon_bbb`` from
    another copy of the package on PYTHONPATH (a checkout beside an installed release): the
    package's ``_mxcompat`` is the copy's own file, not the one the hook loaded, and it counts
    the names the hook set."""
    checkout = tmp_path / "checkout"
    shutil.copytree(COMPAT_FILE.parent, checkout / "gluon_bbb",
                    ignore=shutil.ignore_patterns("__pycache__", "*.so"))
    code = textwrap.dedent("""
        import json, sys
        import mxnet
        hooked = sys.modules.get("_gluon_bbb_mxcompat_stand_ins")
        import gluon_bbb
        print(json.dumps({"package": gluon_bbb._mxcompat.__file__,
                          "hooked": hooked and hooked.__file__,
                          "added": gluon_bbb._mxcompat.added()}))
        """)
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            cwd=str(tmp_path), timeout=300,
                            env=_clean_environment(PYTHONPATH=str(checkout)))
    assert result.returncode == 0, result.stderr[-3000:]
    seen = json.loads(result.stdout.strip().splitlines()[-1])
    assert Path(seen["package"]).resolve() == (checkout / "gluon_bbb" / "_mxcompat.py").resolve()
    assert Path(seen["hooked"]).resolve() == Path(hook.COMPAT_PATH).resolve()
    assert sorted(seen["added"]) == sorted(compat.added())
