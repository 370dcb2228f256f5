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
from . import data, models
from . import baselines, plots, predictive, pruning
from .context import resolve_context
from .loss import BBBLoss
from .posterior import VariationalPosterior, assign_arrays
from .priors import GaussianPrior, ScaleMixturePrior, prior_from_config
from .trainer import BBBTrainer, NonFiniteLossError
from .weighting import kl_weights
from . import bandit, mushroom, regression, uncertainty
from . import experiments
from .version import __version__


__all__ = [
    "__version__",
    "BBBLoss",
    "BBBTrainer",
    "GaussianPrior",
    "NonFiniteLossError",
    "ScaleMixturePrior",
    "VariationalPosterior",
    "assign_arrays",
    "bandit",
    "baselines",
    "data",
    "experiments",
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
