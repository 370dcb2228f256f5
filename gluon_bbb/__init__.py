"""gluon_bbb: Bayes by Backprop (Blundell et al. 2015, "Weight Uncertainty in Neural
Networks") for MXNet Gluon.

Quick start::

    import mxnet as mx
    from mxnet import gluon
    import gluon_bbb

    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(400, activation="relu"), gluon.nn.Dense(400, activation="relu"),
            gluon.nn.Dense(10))
    loss = gluon_bbb.BBBLoss(gluon_bbb.ScaleMixturePrior(pi=0.5, sigma1=1.0, sigma2=0.0025))
    trainer = gluon_bbb.BBBTrainer(net, loss, optimizer_params={"learning_rate": 1e-3})
    loaders = gluon_bbb.data.get_loaders("mnist", batch_size=128)
    trainer.fit(loaders["train"], num_epochs=10, eval_data=loaders["test"])
"""
import importlib
import importlib.util

# First, before anything imports MXNet: what MXNet 1.9.1 reads from numpy and the standard
# library and newer releases removed (nothing where nothing is missing).
from ._mxcompat import apply as _apply_stand_ins

_apply_stand_ins()
if importlib.util.find_spec("mxnet") is None:  # on Python 3.13 it is installed apart
    raise ImportError("gluon_bbb needs MXNet 1.9.1, which is not installed. On Python 3.13 "
                      "install it without its numpy<2 pin: pip install --no-deps mxnet==1.9.1 "
                      "(docs/install.md)")

from . import baselines, data, models, predictive  # noqa: E402
from .context import resolve_context  # noqa: E402
from .loss import BBBLoss
from .posterior import VariationalPosterior, assign_arrays
from .priors import DiagonalGaussianPrior, GaussianPrior, ScaleMixturePrior, prior_from_config
from .trainer import BBBTrainer, NonFiniteLossError
from .version import __version__
from .weighting import kl_weights

#: Subpackages and modules loaded on first use (``gluon_bbb.plots`` imports nothing heavy until
#: it draws, but the experiments, the applications and the analysis are not needed to train):
#: public name -> module.
LAZY_MODULES = {
    "analysis": "gluon_bbb.analysis", "apps": "gluon_bbb.apps",
    "experiments": "gluon_bbb.experiments", "fused": "gluon_bbb.fused", "io": "gluon_bbb.io",
    "plots": "gluon_bbb.plots",
    "bandit": "gluon_bbb.apps.bandit", "regression": "gluon_bbb.apps.regression",
    "calibration": "gluon_bbb.analysis.calibration", "pruning": "gluon_bbb.analysis.pruning",
    "uncertainty": "gluon_bbb.analysis.uncertainty", "mushroom": "gluon_bbb.data.mushroom",
}


def __getattr__(name):
    if name in LAZY_MODULES:
        module = importlib.import_module(LAZY_MODULES[name])
        globals()[name] = module
        return module
    raise AttributeError(f"module 'gluon_bbb' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(LAZY_MODULES))


__all__ = [
    "__version__",
    "BBBLoss",
    "BBBTrainer",
    "DiagonalGaussianPrior",
    "GaussianPrior",
    "NonFiniteLossError",
    "ScaleMixturePrior",
    "VariationalPosterior",
    "analysis",
    "apps",
    "assign_arrays",
    "bandit",
    "baselines",
    "calibration",
    "data",
    "experiments",
    "fused",
    "io",
    "kl_weights",
    "models",
    "mushroom",
    "plots",
    "prior_from_config",
    "predictive",
    "pruning",
    "regression",
    "resolve_context",
    "uncertainty",
]
