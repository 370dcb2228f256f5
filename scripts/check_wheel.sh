#!/usr/bin/env bash
# Build the wheel, install it into a fresh virtual environment (nothing from this checkout on
# the path) and train a few steps, the fused C++ operator compiled from the installed source.
# Usage: bash scripts/check_wheel.sh [PYTHON]   (CI runs it after the tests)
set -euo pipefail
cd "$(dirname "$0")/.."
python="${1:-python3}"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
# built from a copy of the sources: .ci/run runs the Colab check, which installs too, beside it
bash scripts/copy_sources.sh "$work/src"
"$python" -m pip wheel -q --no-deps -w "$work/dist" "$work/src"
"$python" -m venv "$work/venv"
"$work/venv/bin/python" -m pip install -q "$work"/dist/gluon_bbb-*.whl
cd "$work"  # not the checkout: the installed package must stand on its own
GLUON_BBB_CACHE="$work/cache" "$work/venv/bin/python" - <<'PY'
import mxnet as mx
import numpy as np
import gluon_bbb
from gluon_bbb import BBBLoss, BBBTrainer, ScaleMixturePrior, models
from gluon_bbb.data import ArrayLoader

assert "site-packages" in gluon_bbb.__file__, gluon_bbb.__file__
rng = np.random.default_rng(0)
x = rng.normal(size=(256, 20)).astype("float32")
y = (x[:, 0] > 0).astype("float32")
net = models.mlp([16], num_outputs=2)
net.initialize(mx.init.Xavier())
net(mx.nd.zeros((1, 20)))
trainer = BBBTrainer(net, BBBLoss(ScaleMixturePrior(0.5, 1.0, np.exp(-6))), seed=0)
history = trainer.fit(ArrayLoader(x, y, batch_size=32, shuffle=True, seed=0), 2,
                      progress=False)
assert trainer.fused, f"the fused operator did not build from the wheel: {trainer.fused_reason}"
assert all(np.isfinite(record["loss"]) for record in history)
print(f"wheel {gluon_bbb.__version__} from {gluon_bbb.__file__}: 2 epochs, fused operator "
      f"built, loss {history[0]['loss']:.1f} -> {history[-1]['loss']:.1f}")
PY
