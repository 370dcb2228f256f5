"""Install gluon_bbb: ``pip install -e ".[test]"``."""
import re

from setuptools import find_packages, setup

with open("gluon_bbb/version.py", encoding="utf-8") as handle:
    VERSION = re.search(r'__version__ = "([^"]+)"', handle.read()).group(1)

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
        "Programming Language :: Python :: 3.11",
        "Topic :: Scientific/Engineering :: Artificial Intelligence",
    ],
    packages=find_packages(include=["gluon_bbb", "gluon_bbb.*"]),
    # The fused operator's C++ source; it is compiled on first use, never shipped built.
    package_data={"gluon_bbb.fused": ["*.cc"]},
    python_requires=">=3.9",  # tested on 3.11
    install_requires=[
        "mxnet==1.9.1",
        # mxnet 1.9.1 uses np.bool, which numpy 1.24 removed.
        "numpy>=1.17,<1.24",
        "matplotlib>=3.3",
        "seaborn>=0.11",
        "tqdm>=4.40",
    ],
    extras_require={
        # gluon-bbb search: a study in SQLite by default (heartbeat and retry APIs of Optuna 5)
        "search": ["optuna>=5.0,<6"],
        # a search study on a PostgreSQL server (--storage postgresql://...)
        "postgresql": ["optuna>=5.0,<6", "psycopg[binary]>=3.1"],
        # the rendered book (docs/): sphinx-build -W -b html docs docs/_build/html
        "docs": ["optuna>=5.0,<6", "sphinx>=7", "myst-nb>=1.0", "furo>=2024.8.6"],
        "test": ["optuna>=5.0,<6", "pytest>=7", "nbclient>=0.7", "nbformat>=5", "ipykernel>=6",
                 "psycopg[binary]>=3.1", "sphinx>=7", "myst-nb>=1.0", "furo>=2024.8.6"],
    },
    entry_points={"console_scripts": ["gluon-bbb=gluon_bbb.cli:main"]},
)
