"""The code of gluon_bbb's startup file, ``gluon_bbb-mxnet-compat.pth``.

setup.py writes this file's text into that startup file at the top of site-packages, where
Python runs it at every interpreter start (as it runs setuptools' ``distutils-precedence.pth``),
unless ``GLUON_BBB_NUMPY_COMPAT=0``. It imports nothing and only puts a finder on
``sys.meta_path`` (microseconds). The first ``import mxnet`` of the process asks that finder, which
steps aside, loads ``gluon_bbb/_npcompat.py`` alone (neither the package nor MXNet) and applies it:
so ``import mxnet`` works before ``import gluon_bbb`` on numpy 2 and Python 3.12+.
"""
import sys


class GluonBBBBeforeMXNet:
    """Apply gluon_bbb._npcompat before the first ``import mxnet``; finds nothing itself."""

    def find_spec(self, name, path=None, target=None):
        if name != "mxnet":
            return None
        sys.meta_path.remove(self)
        module = sys.modules.get("gluon_bbb._npcompat")
        if module is None:
            import importlib.util
            import os.path
            package = importlib.util.find_spec("gluon_bbb")
            if package is None or not package.submodule_search_locations:
                return None
            location = list(package.submodule_search_locations)[0]
            spec = importlib.util.spec_from_file_location(
                "gluon_bbb._npcompat", os.path.join(location, "_npcompat.py"))
            module = importlib.util.module_from_spec(spec)
            sys.modules[spec.name] = module
            spec.loader.exec_module(module)
        module.apply()
        return None


if "mxnet" not in sys.modules and not any(type(finder).__name__ == "GluonBBBBeforeMXNet"
                                          for finder in sys.meta_path):
    sys.meta_path.insert(0, GluonBBBBeforeMXNet())
