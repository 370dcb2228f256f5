"""The paper's MNIST configurations (Blundell et al. 2015, Table 1 and the networks behind
Table 2): named hyperparameters, their checks, overrides and descriptions, and the paper's
search grid.

Choices the paper leaves open (documented in :data:`DESCRIPTIONS`): the KL weighting is
uniform (pi_i = 1/M, the ``gluon-bbb train`` default), rho starts at -5, the Gaussian-prior
configurations use sigma = 1 (= e^0, the wide component of the default mixture), the
baselines use plain SGD at learning rate 0.1 (no momentum, no decay: both are hyperparameters a
search may set), and the dropout baselines drop hidden units with
probability 0.5 (no input dropout).

The ``-paper`` configurations follow the paper's long protocol instead (:data:`PAPER_EPOCHS`
epochs of plain SGD, the learning rate divided by 10 after epoch 300) with the initialisation
of the one public scale-mixture run near the paper's numbers.
"""
import math
import numbers

import mxnet as mx

from .._checks import check_int, check_positive_ints
from ..data import DATASETS, PREPROCESSING_METHODS
from ..estimators import ESTIMATORS
from ..priors import GaussianPrior, ScaleMixturePrior
from ..weighting import KL_WEIGHTINGS

__all__ = ["INPUT_SIZE", "PROTOCOL", "PAPER_GRID", "SEARCH_KEYS", "EXTRA_KEYS", "CHOICES",
           "PRIOR_KEYS", "RENAMED_KEYS", "with_current_names", "MOMENTUM_OPTIMIZERS", "CUSTOM",
           "LATER_DEFAULTS", "PAPER_TEST_ERROR",
           "CONFIGS",
           "DESCRIPTIONS", "get_config", "custom_config", "base_config", "check_hyperparameter",
           "make_prior", "run_kind", "hyperparameters", "learning_rate_schedule",
           "PAPER_EPOCHS", "PAPER_LR_STEPS", "PAPER_LR_STEP_FACTOR", "PAPER_RHO_INIT",
           "PAPER_MU_INIT"]

INPUT_SIZE = 784


#: The paper's MNIST protocol, shared by every configuration.
PROTOCOL = {
    "dataset": "mnist",
    "num_validation": 10000,
    "preprocessing": "paper",  # pixels / 126
    "batch_size": 128,
    "seed": 0,
    "subset": None,  # smoke runs only: first N examples of each split
}


#: Hyperparameter grid of the paper's section 5.1 for the scale-mixture prior.
PAPER_GRID = {
    "lr": [1e-3, 1e-4, 1e-5],
    "num_samples": [1, 2, 5, 10],
    "pi": [0.25, 0.5, 0.75],
    "neg_log_sigma1": [0.0, 1.0, 2.0],  # -log sigma1
    "neg_log_sigma2": [6.0, 7.0, 8.0],  # -log sigma2
}


#: Hyperparameters under the names that files written before a rename hold: ``log_sigma1`` and
#: ``log_sigma2`` were the mixture's -log sigma here, while the learnable prior calls +log sigma
#: ``log_sigma1``. Read with :func:`with_current_names`; refused as new overrides.
RENAMED_KEYS = {"log_sigma1": "neg_log_sigma1", "log_sigma2": "neg_log_sigma2"}


def with_current_names(values):
    """A dict of hyperparameters read from a file, with keys of :data:`RENAMED_KEYS` under their
    current names (anything that is not a dict is returned as it is)."""
    if not isinstance(values, dict):
        return values
    return {RENAMED_KEYS.get(key, key): value for key, value in values.items()}


def _refuse_old_name(key):
    if key in RENAMED_KEYS:
        raise ValueError(f"{key} is now called {RENAMED_KEYS[key]} (it is -log sigma, as in the "
                         f"paper's grid)")


#: The keys a search setting may set, in table order.
SEARCH_KEYS = tuple(PAPER_GRID)


#: Keys ``--set`` may change besides :data:`SEARCH_KEYS` (choices the paper leaves open).
EXTRA_KEYS = ("optimizer", "kl_weighting", "kl_scale", "lr_decay", "lr_steps", "lr_step_factor",
              "rho_init", "mu_init", "sigma", "estimator", "momentum", "dropout")


#: The values the text-valued keys may take (``optimizer``: any of MXNet's optimizers).
CHOICES = {"kl_weighting": KL_WEIGHTINGS, "prior": (GaussianPrior.name, ScaleMixturePrior.name),
           "estimator": ESTIMATORS, "network": ("mlp", "lenet"),
           "method": ("bbb", "sgd", "dropout"), "dataset": DATASETS,
           "preprocessing": PREPROCESSING_METHODS}


#: The hyperparameters of each prior.
PRIOR_KEYS = {"gaussian": ("sigma",), "scale-mixture": ("pi", "neg_log_sigma1", "neg_log_sigma2")}


#: The configuration name of a run with hyperparameters of the user's own
#: (``gluon-bbb train``, :func:`custom_config`).
CUSTOM = "custom"


#: Hyperparameters added after the first runs were written, with the value those runs used.
LATER_DEFAULTS = {"bbb": {"lr_decay": 1.0, "kl_scale": 1.0, "estimator": "weights",
                          "network": "mlp", "learn_prior": False, "lr_steps": [],
                          "lr_step_factor": 0.1, "mu_init": "net"},
                  "deterministic": {"network": "mlp", "lr_decay": 1.0, "momentum": 0.0,
                                    "lr_steps": [], "lr_step_factor": 0.1}}


#: Test errors (%) of Table 1 of the paper for the networks these configurations train.
PAPER_TEST_ERROR = {
    "sgd-400": 1.83, "sgd-800": 1.84, "sgd-1200": 1.88,
    "dropout-400": 1.51, "dropout-800": 1.33, "dropout-1200": 1.36,
    "bbb-gaussian-400": 1.82, "bbb-gaussian-800": 1.99, "bbb-gaussian-1200": 2.04,
    "bbb-mixture-400": 1.36, "bbb-mixture-800": 1.34, "bbb-mixture-1200": 1.32,
}
PAPER_TEST_ERROR.update({f"{name}-paper": PAPER_TEST_ERROR[name] for name in
                         ("bbb-mixture-400", "bbb-mixture-1200", "bbb-gaussian-1200", "sgd-1200",
                          "dropout-1200")})


def _bbb_config(units, prior):
    config = dict(PROTOCOL, method="bbb", hidden=[units, units], prior=prior, optimizer="adam",
                  lr=1e-3, lr_decay=1.0, lr_steps=[], lr_step_factor=0.1, num_samples=1,
                  kl_weighting="uniform", kl_scale=1.0, rho_init=-5.0, mu_init="net",
                  estimator="weights", network="mlp", learn_prior=False)
    if prior == "scale-mixture":
        config.update(pi=0.5, neg_log_sigma1=0.0, neg_log_sigma2=6.0)
    else:
        config.update(sigma=1.0)
    return config


def _deterministic_config(units, dropout):
    return dict(PROTOCOL, method="dropout" if dropout else "sgd", hidden=[units, units],
                dropout=dropout, optimizer="sgd", lr=0.1, lr_decay=1.0, lr_steps=[],
                lr_step_factor=0.1, momentum=0.0, network="mlp")


#: The optimizers of the baselines that take a ``momentum`` (MXNet's names).
MOMENTUM_OPTIMIZERS = ("sgd", "nag")


#: Named configurations: name -> hyperparameters (a flat dict; see :func:`get_config`).
CONFIGS = {}


#: Named configurations: name -> one line on what it is and which choices it makes.
DESCRIPTIONS = {}


for _units in (400, 800, 1200):
    CONFIGS[f"bbb-mixture-{_units}"] = _bbb_config(_units, "scale-mixture")
    DESCRIPTIONS[f"bbb-mixture-{_units}"] = (
        f"Bayes by Backprop, 2x{_units} ReLU, scale-mixture prior pi=1/2, -log sigma1=0, "
        "-log sigma2=6; Adam lr 1e-3, 1 sample, uniform KL weights, rho_init -5")
    CONFIGS[f"bbb-gaussian-{_units}"] = _bbb_config(_units, "gaussian")
    DESCRIPTIONS[f"bbb-gaussian-{_units}"] = (
        f"Bayes by Backprop, 2x{_units} ReLU, Gaussian prior sigma=1 (-log sigma=0, the "
        "mixture's wide component); Adam lr 1e-3, 1 sample, uniform KL weights, rho_init -5")
    CONFIGS[f"sgd-{_units}"] = _deterministic_config(_units, 0.0)
    DESCRIPTIONS[f"sgd-{_units}"] = f"plain MLP 2x{_units} ReLU, SGD lr 0.1, no dropout"
    CONFIGS[f"dropout-{_units}"] = _deterministic_config(_units, 0.5)
    DESCRIPTIONS[f"dropout-{_units}"] = (
        f"MLP 2x{_units} ReLU with dropout 0.5 after each hidden layer, SGD lr 0.1")


del _units


for _name in ("bbb-mixture-400", "bbb-gaussian-400", "sgd-400", "dropout-400"):
    CONFIGS[f"fashion-{_name}"] = dict(CONFIGS[_name], dataset="fashion-mnist",
                                       reproduce=f"fashion-{_name}")
    DESCRIPTIONS[f"fashion-{_name}"] = "Fashion-MNIST: " + DESCRIPTIONS[_name]


LENET = "LeNet-5 (Conv2D 6-pool-Conv2D 16-pool-Dense 120-Dense 84, ReLU)"
for _name in ("bbb-mixture-400", "bbb-gaussian-400", "sgd-400", "dropout-400"):
    # 'hidden' records the LeNet's two Dense layers (the MLP's key)
    _lenet = _name.replace("-400", "-lenet")
    CONFIGS[_lenet] = dict(CONFIGS[_name], network="lenet", hidden=[120, 84])
    DESCRIPTIONS[_lenet] = (DESCRIPTIONS[_name].replace("plain MLP 2x400", "plain 2x400")
                            .replace("MLP 2x400", "2x400").replace("2x400 ReLU", LENET))
    CONFIGS[f"fashion-{_lenet}"] = dict(CONFIGS[_lenet], dataset="fashion-mnist",
                                        reproduce=f"fashion-{_lenet}")
    DESCRIPTIONS[f"fashion-{_lenet}"] = "Fashion-MNIST: " + DESCRIPTIONS[_lenet]


del _name, _lenet


#: The paper's long protocol (section 5.1, Figure 2): plain SGD, 600 epochs, the learning rate
#: times :data:`PAPER_LR_STEP_FACTOR` after each epoch of :data:`PAPER_LR_STEPS`.
PAPER_EPOCHS = 600
PAPER_LR_STEPS = [300]
PAPER_LR_STEP_FACTOR = 0.1
#: The initialisation of the one public scale-mixture run near the paper's 1.3% without
#: tempering (the paper gives none): rho ~ U(-3.5, -3), mu ~ U(-0.03, 0.03).
PAPER_RHO_INIT = [-3.5, -3.0]
PAPER_MU_INIT = 0.03
_PAPER_SCHEDULE = (f"plain SGD, lr x{PAPER_LR_STEP_FACTOR:g} after epoch "
                   f"{', '.join(map(str, PAPER_LR_STEPS))}, {PAPER_EPOCHS} epochs")
for _units in (400, 1200):
    CONFIGS[f"bbb-mixture-{_units}-paper"] = dict(
        CONFIGS[f"bbb-mixture-{_units}"], optimizer="sgd", lr=1e-3, lr_steps=list(PAPER_LR_STEPS),
        lr_step_factor=PAPER_LR_STEP_FACTOR, pi=0.75, neg_log_sigma1=0.0, neg_log_sigma2=8.0,
        rho_init=list(PAPER_RHO_INIT), mu_init=PAPER_MU_INIT)
    DESCRIPTIONS[f"bbb-mixture-{_units}-paper"] = (
        f"Bayes by Backprop, 2x{_units} ReLU, scale-mixture prior pi=3/4, -log sigma1=0, "
        f"-log sigma2=8; {_PAPER_SCHEDULE} at lr 1e-3 on the summed minibatch cost, 1 sample, "
        "uniform KL weights, rho ~ U(-3.5, -3), mu ~ U(-0.03, 0.03)")
CONFIGS["bbb-gaussian-1200-paper"] = dict(
    CONFIGS["bbb-gaussian-1200"], optimizer="sgd", lr=1e-3, lr_steps=list(PAPER_LR_STEPS),
    lr_step_factor=PAPER_LR_STEP_FACTOR, rho_init=list(PAPER_RHO_INIT), mu_init=PAPER_MU_INIT)
DESCRIPTIONS["bbb-gaussian-1200-paper"] = (
    f"Bayes by Backprop, 2x1200 ReLU, Gaussian prior sigma=1; {_PAPER_SCHEDULE} at lr 1e-3 on "
    "the summed minibatch cost, 1 sample, uniform KL weights, rho ~ U(-3.5, -3), "
    "mu ~ U(-0.03, 0.03)")
for _name in ("sgd-1200", "dropout-1200"):
    CONFIGS[f"{_name}-paper"] = dict(CONFIGS[_name], lr_steps=list(PAPER_LR_STEPS),
                                     lr_step_factor=PAPER_LR_STEP_FACTOR)
    DESCRIPTIONS[f"{_name}-paper"] = (DESCRIPTIONS[_name].replace(
        "SGD lr 0.1", f"{_PAPER_SCHEDULE} at lr 0.1 on the mean minibatch cost"))


del _name, _units


def get_config(name, **overrides):
    """The hyperparameters of configuration ``name``, with ``overrides`` applied and checked.

    Parameters
    ----------
    name : str
        A key of :data:`CONFIGS`.
    **overrides
        Values for keys the configuration has, e.g. ``hidden=[16]`` and ``subset=256`` for a
        smoke run, ``seed=1`` for a replicate, or the search keys ``lr``, ``num_samples``,
        ``pi``, ``neg_log_sigma1``, ``neg_log_sigma2``. Overrides equal to the default are dropped.

    Returns
    -------
    dict
        The flat hyperparameters plus ``"reproduce"`` (the name) and ``"overrides"``.

    Raises
    ------
    ValueError
        An unknown name or key, or a value out of range.
    """
    if name not in CONFIGS:
        raise ValueError(f"unknown configuration {name!r}; choose one of {', '.join(CONFIGS)}")
    config = dict(CONFIGS[name])
    applied = {}
    for key, value in overrides.items():
        _refuse_old_name(key)
        if key not in config:
            raise ValueError(f"configuration {name} has no hyperparameter {key!r}; it has "
                             f"{', '.join(sorted(config))}")
        value = check_hyperparameter(key, value)
        if value != config[key]:
            applied[key] = value
            config[key] = value
    if config["method"] == "bbb":
        make_prior(config)  # checks pi and sigma1 > sigma2
    elif config["momentum"] and config["optimizer"] not in MOMENTUM_OPTIMIZERS:
        raise ValueError(f"momentum applies to the optimizers {', '.join(MOMENTUM_OPTIMIZERS)}, "
                         f"not {config['optimizer']}")
    config["reproduce"] = name
    config["overrides"] = applied
    return config


def custom_config(**hyperparameters):
    """A Bayes-by-Backprop configuration of the user's own, named :data:`CUSTOM`: the
    protocol's data settings (:data:`PROTOCOL`: validation on the last 10,000 training images)
    and the defaults of ``bbb-mixture-400`` (``bbb-gaussian-400`` for ``prior='gaussian'``),
    with ``hyperparameters`` applied and checked.

    Its run folder is that of a named configuration: :func:`gluon_bbb.experiments.run` trains
    it, and every command that reads a run folder reads it.

    Parameters
    ----------
    **hyperparameters
        Any key of those configurations but ``method``, e.g. ``hidden=[1200, 1200]``,
        ``prior='gaussian'``, ``sigma=0.1``, ``optimizer='rmsprop'``, ``dataset='fashion-mnist'``,
        ``num_validation=5000``; the prior's keys are those of :data:`PRIOR_KEYS`.

    Returns
    -------
    dict
        Flat hyperparameters plus ``"reproduce": "custom"`` and empty ``"overrides"``.

    Raises
    ------
    ValueError
        An unknown key (the other prior's included) or a value out of range.
    """
    config = base_config(hyperparameters.get("prior", "scale-mixture"))
    for key, value in hyperparameters.items():
        _refuse_old_name(key)
        if key not in config or key == "method":
            raise ValueError(f"a custom {config['prior']} configuration has no hyperparameter "
                             f"{key!r}; it has {', '.join(sorted(set(config) - {'method'}))}")
        config[key] = check_hyperparameter(key, value)
    make_prior(config)  # checks sigma1 > sigma2
    config["reproduce"] = CUSTOM
    config["overrides"] = {}
    return config


def base_config(prior):
    """The defaults of a custom configuration with this prior ('gaussian' or
    'scale-mixture'): those of ``bbb-gaussian-400`` or ``bbb-mixture-400``."""
    return dict(CONFIGS[{"gaussian": "bbb-gaussian-400"}.get(check_hyperparameter("prior", prior),
                                                              "bbb-mixture-400")])


def check_hyperparameter(key, value):
    """``value`` as the type ``key`` takes, or a ValueError."""
    def integer(low):
        return check_int(key, value, minimum=low)

    def real(test, what):
        if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (
                math.isfinite(value) and test(value)):
            raise ValueError(f"{key} must be {what}, got {value!r}")
        return float(value)

    if key == "hidden":
        return check_positive_ints("hidden", value)
    if key == "subset":
        return None if value is None else integer(1)
    if key in ("seed",):
        return integer(0)
    if key in ("num_samples", "batch_size"):
        return integer(1)
    if key == "num_validation":  # 0: every training image (experiments.all_images)
        return integer(0)
    if key in ("lr", "sigma", "kl_scale"):
        return real(lambda v: v > 0, "a positive number")
    if key == "lr_decay":
        return real(lambda v: 0 < v <= 1, "a number in (0, 1]")
    if key == "pi":
        return real(lambda v: 0 < v < 1, "a number strictly between 0 and 1")
    if key in ("dropout", "momentum"):
        return real(lambda v: 0 <= v < 1, "a number in [0, 1)")
    if key in ("neg_log_sigma1", "neg_log_sigma2"):
        return real(lambda v: True, "a finite number")
    if key == "lr_step_factor":
        return real(lambda v: 0 < v <= 1, "a number in (0, 1]")
    if key == "lr_steps":
        steps = list(value) if isinstance(value, (list, tuple)) else [None]
        if not all(isinstance(step, numbers.Integral) and not isinstance(step, bool)
                   and step >= 1 for step in steps) or steps != sorted(set(steps)):
            raise ValueError(f"lr_steps must be a list of increasing epochs >= 1, got {value!r:.60}")
        return [int(step) for step in steps]
    if key == "rho_init":
        if isinstance(value, (list, tuple)):
            if len(value) != 2:
                raise ValueError(f"rho_init must be a number or a range [low, high], got {value!r:.60}")
            if not all(isinstance(bound, numbers.Real) and not isinstance(bound, bool)
                       and math.isfinite(bound) for bound in value):
                raise ValueError(f"rho_init's range must be two finite numbers, got {value!r:.60}")
            low, high = float(value[0]), float(value[1])
            if not low < high:
                raise ValueError(f"rho_init's range needs low < high, got {value!r:.60}")
            return [low, high]
        return real(lambda v: True, "a finite number or a range [low, high]")
    if key == "mu_init":
        if value == "net":
            return value
        return real(lambda v: v > 0, "'net' or the half-width a > 0 of mu ~ U(-a, a)")
    if key == "learn_prior":
        if not isinstance(value, bool):
            raise ValueError(f"learn_prior must be true or false, got {value!r:.60}")
        return value
    if key in CHOICES:
        if value not in CHOICES[key]:
            raise ValueError(f"{key} must be one of {', '.join(CHOICES[key])}, got {value!r:.60}")
        return value
    if key == "optimizer":
        if not isinstance(value, str) or value.lower() not in mx.optimizer.Optimizer.opt_registry:
            raise ValueError(f"unknown optimizer {value!r:.60}; MXNet has "
                             f"{', '.join(sorted(mx.optimizer.Optimizer.opt_registry))}")
        return value.lower()
    return value


def make_prior(config):
    """The prior of a Bayes-by-Backprop configuration, a ``reproduce`` or a ``train`` one:
    ``prior`` ('gaussian' with ``sigma``, or 'scale-mixture' with ``pi``, ``neg_log_sigma1`` and
    ``neg_log_sigma2``, the paper's -log sigma convention), learned with the posterior where
    ``learn_prior`` is true (its values are then the starting point)."""
    learnable = config.get("learn_prior", False)
    if config["prior"] == "gaussian":
        return GaussianPrior(config["sigma"], learnable=learnable)
    try:
        sigma1, sigma2 = math.exp(-config["neg_log_sigma1"]), math.exp(-config["neg_log_sigma2"])
    except OverflowError:
        raise ValueError("neg_log_sigma1 and neg_log_sigma2 are -log sigma: values below -700 "
                         "overflow") from None
    if not sigma2 < sigma1:
        raise ValueError(f"the scale-mixture prior needs sigma2 < sigma1, i.e. neg_log_sigma2 > "
                         f"neg_log_sigma1 (--neg-log-sigma2 > --neg-log-sigma1; they are -log sigma); got "
                         f"{config['neg_log_sigma2']} and {config['neg_log_sigma1']}")
    return ScaleMixturePrior(config["pi"], sigma1, sigma2, learnable=learnable)


def run_kind(config):
    """'bbb' for a Bayes-by-Backprop configuration, 'deterministic' for a baseline."""
    return "bbb" if config["method"] == "bbb" else "deterministic"


def hyperparameters(config):
    """The keys that identify a run: everything but bookkeeping (with :data:`LATER_DEFAULTS`
    filled in for folders written before those keys existed)."""
    bookkeeping = {"reproduce", "overrides", "epochs", "data_dir", "output_dir", "description"}
    values = dict(LATER_DEFAULTS[run_kind(config)], **config)
    return {key: value for key, value in values.items() if key not in bookkeeping}


def learning_rate_schedule(config):
    """The learning rate of each epoch (from 0):
    ``lr * lr_decay ** epoch * lr_step_factor ** (number of lr_steps <= epoch)``.

    With ``lr_steps=[300]`` and ``lr_step_factor=0.1``, epochs 0-299 (the first 300) train at
    ``lr`` and the rest at ``lr / 10``. A function of the epoch alone, so resumed runs follow
    it exactly; None when constant.
    """
    decay = config.get("lr_decay", 1.0)
    steps = list(config.get("lr_steps") or [])
    factor = config.get("lr_step_factor", 0.1)
    if decay == 1.0 and (not steps or factor == 1.0):
        return None
    base = config["lr"]
    return lambda epoch: base * decay ** epoch * factor ** sum(step <= epoch for step in steps)
