"""gluon_bbb's startup hook: prepares numpy and the standard library for MXNet 1.9.1 when a
program executes ``import mxnet`` before ``import gluon_bbb``.

The package installs this module and the one-line startup file ``gluon_bbb-mxnet-compat.pth``
(:data:`PTH_LINE`) at the top of site-packages, as setuptools installs ``_distutils_hack`` and
``distutils-precedence.pth``. At every interpreter start the line calls :func:`install`, which
imports nothing and puts :class:`MXNetFinder` first on ``sys.meta_path``. The finder answers for
the one name ``mxnet``: it lets the other finders locate MXNet and hands back their spec, its
loader wrapped so that the stand-ins of ``gluon_bbb/_mxcompat.py`` are applied just before
MXNet's ``__init__`` executes. Looking MXNet up (``importlib.util.find_spec("mxnet")``) imports
and changes nothing.

The stand-ins are loaded from ``gluon_bbb/_mxcompat.py`` next to this file, by its path: in a
wheel install, a user-site install, an editable install and a checkout on ``PYTHONPATH`` alike,
this module and the package lie side by side. Neither the package's ``__init__`` nor anything
found on ``sys.path`` is imported, so a folder named ``gluon_bbb`` in the working directory (a
namespace package) cannot stand in for it, and the list of stand-ins stays in the one
compatibility module. The copy loaded here is kept under a name of its own
(:data:`COMPAT_NAME`), never under the package's: a program that then imports another gluon_bbb
(a checkout on ``PYTHONPATH`` beside an installed one) gets that package's own
``gluon_bbb._mxcompat``, whose ``apply`` finds the names already set and counts them as this
copy's (``added``).

It fails soft: if anything goes wrong (the package removed, an unreadable file, a stand-in that
raises), MXNet is imported exactly as it would be without gluon_bbb, a RuntimeWarning says why,
once, and no partly loaded module stays in ``sys.modules``. ``GLUON_BBB_NUMPY_COMPAT=0`` keeps
the startup line from importing this module at all. Only the standard library is imported here.
"""
import os
import sys

__all__ = ["PTH_LINE", "MXNetFinder", "install"]

#: The one line of ``gluon_bbb-mxnet-compat.pth`` (setup.py writes it from this constant). The
#: hook is imported only where the import system finds it (asked as importlib.util.find_spec
#: asks, without importing importlib.util), so a startup file left behind by a broken
#: uninstall does nothing, silently.
PTH_LINE = ('import os, sys; os.environ.get("GLUON_BBB_NUMPY_COMPAT", "1") == "0" '
            'or not any(hasattr(finder, "find_spec") '
            'and finder.find_spec("_gluon_bbb_mxcompat_hook", None) for finder in sys.meta_path) '
            'or __import__("_gluon_bbb_mxcompat_hook").install()\n')

#: The package's compatibility module (used as it is where the package was imported first).
PACKAGE_COMPAT_NAME = "gluon_bbb._mxcompat"
#: The name of the copy this hook loads from :data:`COMPAT_PATH`.
COMPAT_NAME = "_gluon_bbb_mxcompat_stand_ins"
COMPAT_PATH = os.path.join(os.path.dirname(os.path.abspath(__file__)), "gluon_bbb",
                           "_mxcompat.py")


def _warn(error):
    import warnings
    warnings.warn(f"gluon_bbb could not prepare numpy for MXNet 1.9.1 ({error!r}); MXNet is "
                  "imported without its stand-ins (import gluon_bbb before mxnet, or set "
                  "GLUON_BBB_NUMPY_COMPAT=0 to silence this)", RuntimeWarning, stacklevel=3)


def _apply():
    """Apply the stand-ins: the compatibility module already imported (the package's, or this
    hook's copy), else the one at :data:`COMPAT_PATH`, loaded as :data:`COMPAT_NAME` and, if
    loading or applying it fails, removed from ``sys.modules`` again."""
    module = sys.modules.get(PACKAGE_COMPAT_NAME) or sys.modules.get(COMPAT_NAME)
    if module is not None:
        module.apply()
        return
    import importlib.util
    spec = importlib.util.spec_from_file_location(COMPAT_NAME, COMPAT_PATH)
    if spec is None:
        raise ImportError(f"cannot load {COMPAT_PATH}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[COMPAT_NAME] = module
    try:
        spec.loader.exec_module(module)
        module.apply()
    except BaseException:
        if sys.modules.get(COMPAT_NAME) is module:
            del sys.modules[COMPAT_NAME]
        raise


class _ApplyThenExecute:
    """MXNet's own loader, with the stand-ins applied before it executes the module."""

    def __init__(self, finder, loader):
        self._finder = finder
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module):
        self._finder.uninstall()
        # MXNet's module and spec name MXNet's loader, as without the hook
        module.__loader__ = self._loader
        if module.__spec__ is not None and module.__spec__.loader is self:
            module.__spec__.loader = self._loader
        try:
            _apply()
        except Exception as error:  # fail soft: MXNet as it is, one warning
            _warn(error)
        self._loader.exec_module(module)

    def __getattr__(self, name):  # is_package, get_code, get_source, ... of MXNet's loader
        return getattr(self._loader, name)


class MXNetFinder:
    """A ``sys.meta_path`` finder that finds nothing itself: for ``mxnet`` it returns the spec
    the other finders give, its loader applying the stand-ins first."""

    def __init__(self):
        self._searching = False

    def find_spec(self, name, path=None, target=None):
        if name != "mxnet" or self._searching or self not in sys.meta_path:
            return None
        self._searching = True
        try:
            for finder in sys.meta_path[sys.meta_path.index(self) + 1:]:
                find_spec = getattr(finder, "find_spec", None)
                spec = find_spec(name, path, target) if find_spec is not None else None
                if spec is not None:
                    break
            else:
                return None
        except Exception:  # a finder's own error: the import system meets it as without the hook
            self.uninstall()
            return None
        finally:
            self._searching = False
        if spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        spec.loader = _ApplyThenExecute(self, spec.loader)
        return spec

    def uninstall(self):
        """Take this finder off ``sys.meta_path`` (the first execution of MXNet does)."""
        while self in sys.meta_path:
            sys.meta_path.remove(self)


def install():
    """Put one :class:`MXNetFinder` first on ``sys.meta_path`` unless MXNet is imported already
    or a finder of this module is there (the startup line calls it)."""
    if "mxnet" in sys.modules or any(isinstance(finder, MXNetFinder) for finder in sys.meta_path):
        return
    sys.meta_path.insert(0, MXNetFinder())
