"""The package as it is installed: the design card's top-level layout, requirements.txt against
the installed package's metadata (setup.py reads the file), and the Python versions it declares."""
import importlib.metadata
import re
from pathlib import Path

from packaging.requirements import Requirement

ROOT = Path(__file__).resolve().parents[2]


def _requirements_txt():
    lines = (line.split("#", 1)[0].strip()
             for line in (ROOT / "requirements.txt").read_text(encoding="utf-8").splitlines())
    return {str(Requirement(line)) for line in lines if line}


def test_the_design_cards_top_level_layout_is_there():
    for name in ("gluon_bbb", "notebooks", "tests"):
        assert (ROOT / name).is_dir(), name
    for name in ("requirements.txt", "setup.py", "README.md"):
        assert (ROOT / name).is_file(), name


def test_requirements_txt_is_what_the_installed_package_requires():
    """Every runtime requirement of the installed metadata is a line of requirements.txt and the
    other way round (reinstall after editing it: pip install -e .)."""
    installed = {str(Requirement(line)) for line in importlib.metadata.requires("gluon_bbb")
                 if "extra ==" not in line}
    assert installed == _requirements_txt()


def test_mxnet_and_numpy_are_required_as_each_python_needs():
    requirements = [Requirement(line) for line in _requirements_txt()]

    def required(python):
        environment = {"python_version": python, "python_full_version": python + ".0"}
        return {str(r.name): str(r.specifier) for r in requirements
                if r.marker is None or r.marker.evaluate(environment)}

    for python in ("3.9", "3.10", "3.11", "3.12"):
        assert required(python)["mxnet"] == "==1.9.1"
        assert Requirement("numpy" + required(python)["numpy"]).specifier.contains("1.26.4")
        assert not Requirement("numpy" + required(python)["numpy"]).specifier.contains("2.0.0")
    # 3.13: no numpy<2 wheel, so MXNet is installed apart (--no-deps) and numpy 2 is required
    assert "mxnet" not in required("3.13")
    numpy_313 = Requirement("numpy" + required("3.13")["numpy"]).specifier
    # up to the newest numpy the stand-ins are tested on, no further (.ci/run tries the next)
    assert numpy_313.contains("2.1.0") and numpy_313.contains("2.5.5")
    assert not numpy_313.contains("2.6.0") and not numpy_313.contains("3.0.0")
    assert {"requests", "graphviz"} <= set(required("3.13"))  # MXNet's other requirements
    for python in ("3.12", "3.13"):
        assert "setuptools" in required(python)  # distutils for MXNet
    assert "setuptools" not in required("3.11")


def test_the_declared_pythons_are_the_tested_ones():
    metadata = importlib.metadata.metadata("gluon_bbb")
    assert metadata["Requires-Python"] in (">=3.9,<3.14", "<3.14,>=3.9")
    classifiers = {c for c in metadata.get_all("Classifier") if re.fullmatch(
        r"Programming Language :: Python :: 3\.\d+", c)}
    assert classifiers == {f"Programming Language :: Python :: 3.{minor}" for minor in range(9, 14)}
