"""Install gluon_bbb: ``pip install -e ".[test]"``."""
import ast
import base64
import glob
import hashlib
import os
import re
import zipfile

from setuptools import find_packages, setup
from setuptools.command.build_py import build_py
from setuptools.command.editable_wheel import editable_wheel

#: The startup hook that applies MXNet's stand-ins for removed numpy names before a first
#: ``import mxnet`` (gluon_bbb/_mxcompat.py): a top-level module, installed with the package,
#: and the one-line startup file that imports it, at the top of site-packages.
HOOK_MODULE = "_gluon_bbb_mxcompat_hook"
STARTUP_FILE = "gluon_bbb-mxnet-compat.pth"


def startup_line():
    """The one line of :data:`STARTUP_FILE`: the hook module's ``PTH_LINE``, read from its
    source (not imported)."""
    with open(HOOK_MODULE + ".py", encoding="utf-8") as handle:
        tree = ast.parse(handle.read())
    return next(ast.literal_eval(node.value) for node in tree.body if isinstance(node, ast.Assign)
                and [getattr(target, "id", None) for target in node.targets] == ["PTH_LINE"])


class BuildWithStartupFile(build_py):
    """build_py that also writes :data:`STARTUP_FILE` at the top of the wheel."""

    def run(self):
        super().run()
        with open(os.path.join(self.build_lib, STARTUP_FILE), "w", encoding="utf-8") as handle:
            handle.write(startup_line())

    def get_outputs(self, include_bytecode=1):
        return super().get_outputs(include_bytecode) + [os.path.join(self.build_lib, STARTUP_FILE)]

    def get_output_mapping(self):
        mapping = super().get_output_mapping()
        mapping[os.path.join(self.build_lib, STARTUP_FILE)] = HOOK_MODULE + ".py"
        return mapping


class EditableWithStartupFile(editable_wheel):
    """editable_wheel (``pip install -e``) whose wheel also holds :data:`STARTUP_FILE`: an
    editable wheel carries only what points at the checkout, so it is added to the finished
    wheel, with its line in RECORD (the wheel format's hash and size). The hook module is
    served from the checkout by setuptools' ``__editable__`` startup file, which sorts, and so
    runs, before this one."""

    def run(self):
        super().run()
        data = startup_line().encode("utf-8")
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        for wheel in glob.glob(os.path.join(self.dist_dir, "*.whl")):
            with zipfile.ZipFile(wheel) as archive:
                names = archive.namelist()
                record_name = next(name for name in names if name.endswith(".dist-info/RECORD"))
                record = archive.read(record_name).decode("utf-8")
            if STARTUP_FILE in names:
                continue
            rewritten = wheel + ".tmp"
            with zipfile.ZipFile(wheel) as source, \
                    zipfile.ZipFile(rewritten, "w", zipfile.ZIP_DEFLATED) as target:
                for item in source.infolist():
                    if item.filename != record_name:
                        target.writestr(item, source.read(item.filename))
                target.writestr(STARTUP_FILE, data)
                target.writestr(record_name, record.rstrip("\n") + "\n"
                                + f"{STARTUP_FILE},sha256={digest},{len(data)}\n")
            os.replace(rewritten, wheel)


with open("gluon_bbb/version.py", encoding="utf-8") as handle:
    VERSION = re.search(r'__version__ = "([^"]+)"', handle.read()).group(1)


def read_requirements(path="requirements.txt"):
    """The requirement lines of ``path``, comments and blank lines left out."""
    with open(path, encoding="utf-8") as handle:
        lines = (line.split("#", 1)[0].strip() for line in handle)
        return [line for line in lines if line]


setup(
    name="gluon_bbb",
    version=VERSION,
    description="Bayes by Backprop (Blundell et al. 2015) for MXNet Gluon",
    long_description=open("README.md", encoding="utf-8").read(),
    long_description_content_type="text/markdown",
    license="Apache-2.0",
    classifiers=[
        "Development Status :: 3 - Alpha",
        "Intended Audience :: Education",
        "Intended Audience :: Science/Research",
        "Operating System :: POSIX :: Linux",
        "Programming Language :: Python :: 3",
        "Programming Language :: Python :: 3.9",
        "Programming Language :: Python :: 3.10",
        "Programming Language :: Python :: 3.11",
        "Programming Language :: Python :: 3.12",
        "Programming Language :: Python :: 3.13",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
    packages=find_packages(include=["gluon_bbb", "gluon_bbb.*"]),
    py_modules=[HOOK_MODULE],
    # The fused operator's C++ source; it is compiled on first use, never shipped built.
    package_data={"gluon_bbb.fused": ["*.cc"]},
    # supported: 3.9 to 3.13 (MXNet 1.9.1's wheel, numpy's); CI tests 3.11, 3.12 and 3.13
    python_requires=">=3.9,<3.14",
    # requirements.txt holds them, with the reasons for the version markers
    install_requires=read_requirements(),
    extras_require={
        # gluon-bbb search: a study in SQLite by default (heartbeat and retry APIs of Optuna 5)
        "search": ["optuna>=5.0,<6"],
        # a search study on a PostgreSQL server (--storage postgresql://...)
        "postgresql": ["optuna>=5.0,<6", "psycopg[binary]>=3.1"],
        # the notebooks in JupyterLab, with the widget progress bars; statsmodels ships the
        # sunspot numbers of the recurrent-network notebook
        "notebooks": ["jupyterlab>=4", "ipywidgets>=8", "statsmodels>=0.14"],
        # the rendered book (docs/): sphinx-build -W -b html docs docs/_build/html
        "docs": ["optuna>=5.0,<6", "sphinx>=7", "myst-nb>=1.0", "furo>=2024.8.6"],
        # the independent PyTorch implementation of bayes1's training (scripts/peer_*.py) and its
        # tests, the evidence behind the results pages' comparisons with it
        "peer": ["torch>=2.1"],
        # the tests, the notebooks and the book among them, on one pytest-xdist worker per
        # core (pytest.ini); the browser test drives Debian's chromium through its chromedriver
        # with selenium
        "test": ["optuna>=5.0,<6", "pytest>=7.2", "pytest-xdist>=3.8", "nbclient>=0.7", "nbformat>=5",
                 "ipykernel>=6", "psycopg[binary]>=3.1", "sphinx>=7", "myst-nb>=1.0", "furo>=2024.8.6",
                 "jupyterlab>=4", "ipywidgets>=8", "selenium>=4.11", "statsmodels>=0.14"],
    },
    entry_points={"console_scripts": ["gluon-bbb=gluon_bbb.cli:main"]},
    cmdclass={"build_py": BuildWithStartupFile, "editable_wheel": EditableWithStartupFile},
)
