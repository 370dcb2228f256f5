"""gluon_bbb._mxcompat's stand-ins for what MXNet 1.9.1 reads and numpy or Python removed, and
its startup file: every stand-in is still needed, and together they are enough, on the numpy and
Python this suite runs on (CI runs it on numpy 1.26 and 2.x, Python 3.11 to 3.13).

"Needed": MXNet's line still reads the name, and the installed numpy lacks exactly the names whose
version ranges cover it (a numpy that brings one back, or removes another, fails here). "Enough":
after the stand-ins, nothing MXNet reads from numpy at import, or names in its sources, is
missing. "Import order": ``import mxnet`` before ``import gluon_bbb`` works, through the startup
hook, in a fresh interpreter (``test_mxcompat_hook.py`` checks that the hook harms nothing).
"""
import json
import os
import subprocess
import sys
import sysconfig
import textwrap
import warnings
from pathlib import Path

import mxnet as mx
import numpy as np
import pytest

from gluon_bbb import _mxcompat as compat

REPOSITORY = Path(__file__).resolve().parents[2]
MXNET_ROOT = Path(mx.__file__).parent
VERSION = compat.numpy_version(np)


def _run(code, disable_startup_file=False, timeout=120):
    """Run ``code`` in a fresh interpreter of this environment, not from the checkout's root
    (so that the installed package is what is imported); its last stdout line, parsed as JSON."""
    env = dict(os.environ)
    if disable_startup_file:
        env["GLUON_BBB_NUMPY_COMPAT"] = "0"
    else:
        env.pop("GLUON_BBB_NUMPY_COMPAT", None)
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                            text=True, env=env, cwd=str(REPOSITORY / "tests"), timeout=timeout)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


def _shim(name):
    return next(shim for shim in compat.NUMPY_SHIMS if shim.name == name)


# ------------------------------------------------------------------ each stand-in is needed
@pytest.mark.parametrize("shim", compat.NUMPY_SHIMS, ids=lambda shim: shim.name)
def test_mxnet_still_reads_the_name_on_the_line_given(shim):
    line = (MXNET_ROOT / shim.mxnet_file).read_text(encoding="utf-8").splitlines()[
        shim.mxnet_line - 1]
    assert shim.mxnet_text in line, (shim.mxnet_file, shim.mxnet_line, line)
    assert shim.reason


def test_mxnet_still_imports_distutils_where_the_table_says():
    for path, number, text in compat.DISTUTILS_SHIM.mxnet_lines:
        line = (MXNET_ROOT / path).read_text(encoding="utf-8").splitlines()[number - 1]
        assert text in line, (path, number, line)


def test_the_installed_numpy_lacks_exactly_the_names_whose_versions_cover_it():
    names = [shim.name for shim in compat.NUMPY_SHIMS]
    missing = _run(f"""
        import json, numpy, warnings
        warnings.simplefilter("ignore")
        print(json.dumps([name for name in {names!r} if not hasattr(numpy, name)]))
        """, disable_startup_file=True)
    expected = [shim.name for shim in compat.NUMPY_SHIMS if shim.missing_in(VERSION)]
    assert sorted(missing) == sorted(expected), f"numpy {np.__version__}"
    # and this process, where gluon_bbb applied them, set exactly those
    assert sorted(compat.added()) == sorted(expected)


def test_distutils_is_missing_from_the_standard_library_exactly_from_python_3_12():
    in_stdlib = (Path(sysconfig.get_paths()["stdlib"]) / "distutils").is_dir()
    assert in_stdlib == (sys.version_info[:2] < compat.DISTUTILS_SHIM.removed_in_python)
    from distutils.version import LooseVersion, StrictVersion  # after apply(), on every Python
    assert LooseVersion("1.10") > LooseVersion("1.9") and StrictVersion("1.2") < "1.10"


def test_nothing_numpy_has_is_replaced():
    names = [shim.name for shim in compat.NUMPY_SHIMS]
    present = _run(f"""
        import json, numpy, warnings
        warnings.simplefilter("ignore")
        def identity(value):
            return getattr(value, "__module__", None), getattr(value, "__qualname__", repr(value))
        print(json.dumps({{name: identity(getattr(numpy, name)) for name in {names!r}
                          if hasattr(numpy, name)}}))
        """, disable_startup_file=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, (module, qualname) in present.items():
            value = getattr(np, name)
            assert [getattr(value, "__module__", None),
                    getattr(value, "__qualname__", repr(value))] == [module, qualname], name
    if VERSION >= (2, 0):
        assert np.bool is np.bool_  # numpy 2's own np.bool, not the builtin


# ------------------------------------------------------------------ together they are enough
def test_after_the_stand_ins_mxnet_reads_no_missing_numpy_name():
    """Every numpy name MXNet looks up while all its modules import, and every ``numpy.X`` its
    sources name (read with ast, where the module imports the real numpy), exists."""
    result = _run(f"""
        import ast, importlib, json, os, pkgutil, warnings
        import numpy
        from gluon_bbb import _mxcompat as compat
        compat.apply()
        asked = set()
        original = numpy.__getattr__
        def tracing(name):
            try:
                return original(name)
            except AttributeError:
                if not name.startswith("__"):
                    asked.add(name)
                raise
        numpy.__getattr__ = tracing
        import mxnet
        failed = []
        for module in pkgutil.walk_packages(mxnet.__path__, "mxnet."):
            if module.name in ("mxnet.libmxnet", "mxnet.onnx.setup"):  # not modules to import
                continue
            try:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    importlib.import_module(module.name)
            except ImportError as error:  # optional dependencies (onnx, tensorrt)
                if not any(part in str(error) for part in ("onnx", "tensorrt", "onnxruntime")):
                    failed.append(module.name + ": " + str(error))
            except Exception as error:
                failed.append(module.name + ": " + repr(error))
        named = set()
        for folder, _, files in os.walk({str(MXNET_ROOT)!r}):
            for file in files:
                if not file.endswith(".py"):
                    continue
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    tree = ast.parse(open(os.path.join(folder, file), encoding="utf-8").read())
                aliases = {{alias.asname or alias.name for node in ast.walk(tree)
                           if isinstance(node, ast.Import) for alias in node.names
                           if alias.name == "numpy"}}
                for node in ast.walk(tree):
                    if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name)
                            and node.value.id in aliases):
                        named.add(node.attr)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            absent = sorted(name for name in named if not hasattr(numpy, name))
        print(json.dumps({{"asked": sorted(asked), "failed": failed, "absent": absent}}))
        """, timeout=300)
    assert result == {"asked": [], "failed": [], "absent": []}, f"numpy {np.__version__}"


# ------------------------------------------------------------------ what stands in behaves
def test_the_stand_ins_behave_as_numpy_1_did():
    # np.trapezoid, trapz's stand-in, came with numpy 2.0; trapz went in 2.4
    stand_in = {shim.name: shim.make(np) for shim in compat.NUMPY_SHIMS
                if shim.name != "trapz" or VERSION >= (2, 0)}
    assert stand_in["bool"] is bool and stand_in["int"] is int
    assert stand_in["NINF"] == -np.inf and stand_in["PINF"] == np.inf == stand_in["Inf"]
    assert np.isnan(stand_in["NAN"]) and np.isnan(stand_in["NaN"])
    assert stand_in["PZERO"] == 0.0 and np.signbit(stand_in["NZERO"])
    assert stand_in["alltrue"]([True, False]) == np.all([True, False])
    assert stand_in["sometrue"]([True, False]) == np.any([True, False])
    assert stand_in["product"]([2, 3, 4]) == 24
    assert stand_in["round_"](2.567, 1) == pytest.approx(2.6)
    a = np.array([[3, 1], [1, 2], [2, 0]])
    np.testing.assert_array_equal(stand_in["msort"](a), [[1, 0], [2, 1], [3, 2]])
    np.testing.assert_array_equal(stand_in["in1d"]([[1, 2], [3, 4]], [2, 4]),
                                  [False, True, False, True])
    np.testing.assert_array_equal(stand_in["in1d"]([1, 2], [2], invert=True), [True, False])
    if "trapz" in stand_in:
        x = np.linspace(0.0, 1.0, 11)
        assert stand_in["trapz"](x ** 2, x) == pytest.approx(0.335)
    assert stand_in["compat"].basestring is str
    for name in ("mirr", "npv", "pmt", "ppmt", "pv", "rate"):
        with pytest.raises(RuntimeError, match="numpy_financial"):
            stand_in[name](0.1, [1.0])


def test_what_mxnet_does_with_them():
    """The MXNet functions that read a stand-in work: boolean indexing and mx.np.bool (np.bool),
    mx.np.pad with a mode name (np.compat.basestring), the constants of mx.np."""
    x = mx.np.array([1.0, -2.0, 3.0])
    np.testing.assert_array_equal(x[x > 0].asnumpy(), [1.0, 3.0])
    x[mx.np.array([True, False, True], dtype=mx.np.bool)] = 0.0
    np.testing.assert_array_equal(x.asnumpy(), [0.0, -2.0, 0.0])
    padded = mx.np.pad(mx.np.ones((1, 2)), ((0, 0), (1, 1)), mode="constant")
    np.testing.assert_array_equal(padded.asnumpy(), [[0.0, 1.0, 1.0, 0.0]])
    assert mx.np.NINF == -np.inf and mx.np.PZERO == 0.0 and np.isnan(mx.np.NAN)


# ------------------------------------------------------------------ the import order students type
def test_import_mxnet_first_then_gluon_bbb_trains():
    result = _run("""
        import json
        import mxnet as mx
        import numpy as np
        import gluon_bbb
        from gluon_bbb import BBBLoss, BBBTrainer, GaussianPrior, models
        from gluon_bbb.data import ArrayLoader
        rng = np.random.default_rng(0)
        x = rng.normal(size=(64, 5)).astype("float32")
        y = (x[:, 0] > 0).astype("float32")
        net = models.mlp([8], num_outputs=2)
        net.initialize(mx.init.Xavier())
        net(mx.nd.zeros((1, 5)))
        trainer = BBBTrainer(net, BBBLoss(GaussianPrior(1.0)), seed=0, fused=False)
        history = trainer.fit(ArrayLoader(x, y, batch_size=16, shuffle=True, seed=0), 1,
                              progress=False)
        from gluon_bbb import _mxcompat as compat
        assert gluon_bbb._mxcompat is compat  # loaded before the package, still its attribute
        print(json.dumps({"loss": history[-1]["loss"], "added": compat.added(),
                          "file": compat.__file__}))
        """)
    assert np.isfinite(result["loss"])
    assert sorted(result["added"]) == sorted(compat.added())
    assert Path(result["file"]).resolve() == Path(compat.__file__).resolve()


@pytest.mark.skipif(not compat.added() and sys.version_info < (3, 12),
                    reason="this numpy and Python lack nothing MXNet reads")
def test_without_the_startup_file_mxnet_first_fails_here():
    """What the startup file is for: here, ``import mxnet`` alone fails without it."""
    env = dict(os.environ, GLUON_BBB_NUMPY_COMPAT="0")
    result = subprocess.run([sys.executable, "-c", "import mxnet"], capture_output=True,
                            text=True, env=env, cwd=str(REPOSITORY / "tests"), timeout=120)
    assert result.returncode != 0
    assert "AttributeError" in result.stderr or "distutils" in result.stderr


def test_the_installed_startup_file_imports_this_checkouts_hook():
    """The environment's ``gluon_bbb-mxnet-compat.pth`` is the hook module's ``PTH_LINE``
    (reinstall after changing it: ``pip install -e .``), and the hook it imports is this
    checkout's, next to this checkout's compatibility module."""
    import _gluon_bbb_mxcompat_hook as hook
    startup_files = [Path(folder) / "gluon_bbb-mxnet-compat.pth"
                     for folder in {sysconfig.get_paths()["purelib"],
                                    sysconfig.get_paths()["platlib"]}
                     if (Path(folder) / "gluon_bbb-mxnet-compat.pth").is_file()]
    assert len(startup_files) == 1, "gluon_bbb's startup file is not installed"
    assert startup_files[0].read_text(encoding="utf-8") == hook.PTH_LINE
    assert Path(hook.COMPAT_PATH).resolve() == Path(compat.__file__).resolve()
