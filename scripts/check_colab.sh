#!/usr/bin/env bash
# A notebook as Colab meets it: a fresh Python 3.13 environment with numpy 2.x, matplotlib and a
# Jupyter kernel, without MXNet or gluon_bbb. The notebook runs in smoke mode under nbclient, from
# its first cell: the install cell installs gluon_bbb (from this checkout, through
# GLUON_BBB_INSTALL_SOURCE, in place of the repository it names) and MXNet apart, must say that no
# restart is needed, and every later cell must run without error.
# Usage: bash scripts/check_colab.sh PYTHON [NOTEBOOK]   (CI runs it with pyenv's 3.13)
set -euo pipefail
cd "$(dirname "$0")/.."
python="${1:?usage: check_colab.sh PYTHON [NOTEBOOK]}"
notebook="${2:-07_regression}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
"$python" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q "numpy>=2" matplotlib ipykernel nbclient nbformat
GLUON_BBB_INSTALL_SOURCE="$PWD" GLUON_BBB_SMOKE=1 MPLBACKEND=Agg \
    "$work/venv/bin/python" - "notebooks/$notebook.ipynb" <<'PY'
import sys, time
import nbformat
from nbclient import NotebookClient

path = sys.argv[1]
notebook = nbformat.read(path, as_version=4)
start = time.perf_counter()
# run from the notebooks' folder, where the checkout's gluon_bbb is not importable
NotebookClient(notebook, timeout=900, kernel_name="python3",
               resources={"metadata": {"path": "notebooks"}}).execute()
install = next(cell for cell in notebook.cells if "install" in cell.metadata.get("tags", []))
printed = "".join(output.get("text", "") for output in install.outputs)
assert "no restart needed" in printed, printed
errors = [output for cell in notebook.cells for output in cell.get("outputs", [])
          if output.get("output_type") == "error"]
assert not errors, errors
import numpy
print(f"{path} on Python {sys.version.split()[0]}, numpy {numpy.__version__}: the install cell "
      f"said {printed.strip().splitlines()[-1]!r}; every cell ran "
      f"({time.perf_counter() - start:.0f} s)")
PY
