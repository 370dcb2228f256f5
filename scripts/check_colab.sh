#!/usr/bin/env bash
# The notebooks and the main job as Colab and a fresh machine meet them: a fresh Python 3.13
# environment with numpy 2.x, matplotlib and a Jupyter kernel, without MXNet or gluon_bbb, an empty
# HOME (no ~/.mxnet, no download cache), no GLUON_BBB_DATA, and the data sets served over HTTP by a
# local server from ../shared/data (GLUON_BBB_MIRROR), as a class would serve them; the public
# sources come after it and are not needed.
# The notebooks run in smoke mode under nbclient, from their first cell: the first one's install
# cell installs gluon_bbb (from this checkout, through GLUON_BBB_INSTALL_SOURCE, in place of the
# repository it names) and MXNet apart, and must say that no restart is needed; a later one's
# installs only what that notebook needs besides (statsmodels for 10); every cell must run without
# error, the data sets downloaded through the fetcher into the empty HOME's cache. Then, that
# cache emptied, `gluon-bbb train --dataset mnist --epochs 1` (small settings) downloads MNIST
# afresh and trains.
# Usage: bash scripts/check_colab.sh PYTHON [NOTEBOOK...]   (CI runs it with pyenv's 3.13;
#        default notebooks: 02_bbb_gluon_mnist 08_bandit 10_bayesian_rnn)
set -euo pipefail
cd "$(dirname "$0")/.."
python="${1:?usage: check_colab.sh PYTHON [NOTEBOOK...]}"
shift
notebooks=(02_bbb_gluon_mnist 08_bandit 10_bayesian_rnn)
if [ $# -gt 0 ]; then notebooks=("$@"); fi
data="${GLUON_BBB_DATA:-$(cd .. && pwd)/shared/data}"
if [ ! -d "$data/mnist" ]; then
    echo "check_colab.sh: no data folder $data (set GLUON_BBB_DATA)" >&2
    exit 2
fi
start=$SECONDS
work="$(mktemp -d)"
server=""
trap '[ -n "$server" ] && kill "$server" 2>/dev/null; rm -rf "$work"' EXIT

# pip keeps this machine's configuration and cache; the data see an empty HOME
for config in "$HOME/.config/pip/pip.conf" "$HOME/.pip/pip.conf"; do
    if [ -f "$config" ]; then export PIP_CONFIG_FILE="$config"; break; fi
done
export PIP_CACHE_DIR="${PIP_CACHE_DIR:-$HOME/.cache/pip}"

# the class's server: ../shared/data over HTTP on a free port of 127.0.0.1
port="$("$python" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0))
print(s.getsockname()[1])')"
"$python" -m http.server "$port" --bind 127.0.0.1 --directory "$data" >"$work/server.log" 2>&1 &
server=$!
for _ in $(seq 50); do
    "$python" -c "import urllib.request as r; r.urlopen('http://127.0.0.1:$port/', timeout=1)" \
        2>/dev/null && break
    sleep 0.2
done

mkdir "$work/home"
fresh=(env -u GLUON_BBB_DATA -u MXNET_HOME -u XDG_CACHE_HOME -u PYTHONPATH HOME="$work/home"
       GLUON_BBB_MIRROR="http://127.0.0.1:$port" MPLBACKEND=Agg)
"$python" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q "numpy>=2" matplotlib ipykernel nbclient nbformat
paths=()
for notebook in "${notebooks[@]}"; do paths+=("notebooks/$notebook.ipynb"); done
# the install cell installs from a copy of the sources (its build's files land there, not in the
# checkout, where the wheel's check and the tests may run beside it)
bash scripts/copy_sources.sh "$work/src"
"${fresh[@]}" GLUON_BBB_INSTALL_SOURCE="$work/src" GLUON_BBB_SMOKE=1 \
    "$work/venv/bin/python" - "${paths[@]}" <<'PY'
import sys, time
import nbformat
from nbclient import NotebookClient

for number, path in enumerate(sys.argv[1:]):
    notebook = nbformat.read(path, as_version=4)
    start = time.perf_counter()
    # run from the notebooks' folder, where the checkout's gluon_bbb is not importable
    NotebookClient(notebook, timeout=900, kernel_name="python3",
                   resources={"metadata": {"path": "notebooks"}}).execute()
    install = next(cell for cell in notebook.cells if "install" in cell.metadata.get("tags", []))
    printed = "".join(output.get("text", "") for output in install.outputs)
    if number == 0:  # the install cell installed gluon_bbb
        assert "no restart needed" in printed, printed
    errors = [output for cell in notebook.cells for output in cell.get("outputs", [])
              if output.get("output_type") == "error"]
    assert not errors, errors
    import numpy
    said = printed.strip().splitlines()[-1] if printed.strip() else "nothing"
    print(f"{path} on Python {sys.version.split()[0]}, numpy {numpy.__version__}: the install "
          f"cell said {said!r}; every cell ran ({time.perf_counter() - start:.0f} s)")
PY
echo "downloaded into the empty HOME's cache:" $(cd "$work/home/.cache/gluon_bbb/data" && ls -d */)
# the main job on a fresh machine: MNIST downloaded afresh (the fused operator's build is kept)
rm -rf "$work/home/.cache/gluon_bbb/data"
"${fresh[@]}" "$work/venv/bin/gluon-bbb" train --dataset mnist --epochs 1 --hidden 50 50 \
    --subset 2000 --mc-samples 2 --no-progress --output-dir "$work/run"
"${fresh[@]}" "$work/venv/bin/gluon-bbb" data verify mnist
requests=$(grep -c '"GET ' "$work/server.log" || true)
echo "check_colab.sh: done in $((SECONDS - start)) s; the local server answered $requests requests"
