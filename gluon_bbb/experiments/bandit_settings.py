"""The mushroom bandit's settings: every agent's, checked, and the agent they make.

The paper's settings (section 5.3; ``notebooks/08_bandit.ipynb``) are the defaults: reward
networks of two hidden layers of 100 ReLUs, a buffer of the last 4096 interactions, minibatches
of 64, Adam at 1e-3, and for the Bayesian agent the scale-mixture prior pi = 1/2,
-log sigma1 = 0, -log sigma2 = 6, two weight samples per training step and two averaged to act.
:func:`agent_settings` gives everything that determines one agent's run (equal settings mean an
identical run), :func:`thompson_settings` and :func:`greedy_settings` check the values that
replace the paper's, and :func:`make_agent` builds the seeded agent.
"""
import math

import mxnet as mx
import numpy as np

from ..apps import bandit
from .._checks import check_positive
from ..priors import ScaleMixturePrior
from .configs import with_current_names

__all__ = [
    "AGENTS",
    "PAPER_SETTINGS",
    "OPTIMIZER_SETTINGS",
    "GREEDY_SETTINGS",
    "THOMPSON_SETTINGS",
    "LATER_GREEDY_DEFAULTS",
    "LATER_THOMPSON_DEFAULTS",
    "check_agent",
    "agent_settings",
    "greedy_settings",
    "thompson_settings",
    "with_later_defaults",
    "make_agent",
]

#: Agent name -> (label, epsilon); epsilon None is Thompson sampling with Bayes by Backprop.
AGENTS = {
    "thompson": ("Thompson sampling (BBB)", None),
    "greedy-0": ("0% greedy", 0.0),
    "greedy-1": ("1% greedy", 0.01),
    "greedy-5": ("5% greedy", 0.05),
}
#: The paper's settings shared by every agent (notebooks/08_bandit.ipynb).
PAPER_SETTINGS = {
    "hidden": [100, 100],
    "buffer_size": 4096,
    "batch_size": 64,
    "noise_sigma": 1.0,
}
#: How each agent trains, the paper's: Adam ('adam' or 'sgd', plain SGD on the cost summed
#: over a minibatch) at learning rate 1e-3, no gradient clipping (None, or the bound C of
#: the elementwise clipping to [-C, C]). Each kind of agent has its own: in
#: :data:`THOMPSON_SETTINGS` and in :data:`GREEDY_SETTINGS`.
OPTIMIZER_SETTINGS = {
    "optimizer": "adam",
    "learning_rate": 1e-3,
    "clip_gradient": None,
}
#: The epsilon-greedy agents' own settings: their optimizer (:data:`OPTIMIZER_SETTINGS`).
GREEDY_SETTINGS = dict(OPTIMIZER_SETTINGS)
#: The Bayesian agent's own settings, the paper's and notebook 08's: its optimizer
#: (:data:`OPTIMIZER_SETTINGS`), prior (-log sigma convention), weight samples to act and per
#: training step, initial rho (a number, or [low, high] for a uniform draw), what the
#: complexity weight counts as the data set, its scale and its weighting across an
#: interaction's minibatches, and what the agent acts on
#: (:class:`gluon_bbb.apps.bandit.ThompsonAgent`).
THOMPSON_SETTINGS = {
    **OPTIMIZER_SETTINGS,
    "prior": {"pi": 0.5, "neg_log_sigma1": 0.0, "neg_log_sigma2": 6.0},
    "num_action_samples": 2,
    "num_train_samples": 2,
    "rho_init": -5.0,
    "kl_data": "buffer",
    "kl_scale": 1.0,
    "kl_weighting": "uniform",
    "act_on": "outputs",
}
#: Settings added after runs were stored, with the value those runs had: a stored record or
#: checkpoint that lacks one ran with it (the learning rate was stored from the start).
LATER_GREEDY_DEFAULTS = {"optimizer": "adam", "clip_gradient": None}
LATER_THOMPSON_DEFAULTS = {"kl_scale": 1.0, "kl_weighting": "uniform", "act_on": "outputs",
                           **LATER_GREEDY_DEFAULTS}


def check_agent(name):
    if name not in AGENTS:
        raise ValueError(f"unknown agent {name!r}; choose among {', '.join(AGENTS)}")


def agent_settings(name, steps, seed=0, num_minibatches=64, data_sha256=None, thompson=None,
                   buffer_size=PAPER_SETTINGS["buffer_size"], greedy=None):
    """Everything that determines an agent's run; equal settings mean an identical run.

    Parameters
    ----------
    name : str, a key of :data:`AGENTS`
    steps : int, interactions
    seed : int
    num_minibatches : int, training minibatches after each interaction
    data_sha256 : str, optional
        The mushroom file's SHA-256.
    thompson : dict, optional
        For the Thompson agent: values replacing those of :data:`THOMPSON_SETTINGS` (any of
        its keys; a 'prior' replaces the whole prior).
    buffer_size : int, the most recent interactions kept for training (the paper: 4096)
    greedy : dict, optional
        For the epsilon-greedy agents: values replacing those of :data:`GREEDY_SETTINGS`.

    Returns
    -------
    dict, JSON-serialisable
    """
    check_agent(name)
    for what, value, low in (("steps", steps, 1), ("seed", seed, 0),
                             ("num_minibatches", num_minibatches, 1),
                             ("buffer_size", buffer_size, 1)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
            raise ValueError(f"{what} must be an integer >= {low}, got {value!r}")
    label, epsilon = AGENTS[name]
    settings = dict(PAPER_SETTINGS, hidden=list(PAPER_SETTINGS["hidden"]), agent=name,
                    label=label, epsilon=epsilon, steps=int(steps), seed=int(seed),
                    num_minibatches=int(num_minibatches), buffer_size=int(buffer_size),
                    mushroom_sha256=data_sha256)
    settings.update(thompson_settings(thompson) if epsilon is None else greedy_settings(greedy))
    return settings


def greedy_settings(overrides=None):
    """:data:`GREEDY_SETTINGS` with ``overrides``, every value checked.

    Raises
    ------
    ValueError
        An unknown key or a value out of range, named.
    """
    overrides = dict(overrides or {})
    unknown = sorted(set(overrides) - set(GREEDY_SETTINGS))
    if unknown:
        raise ValueError(f"unknown greedy settings {unknown}; known: {sorted(GREEDY_SETTINGS)}")
    return _checked_optimizer(dict(GREEDY_SETTINGS, **overrides))


def _checked_optimizer(settings):
    """``settings`` with its :data:`OPTIMIZER_SETTINGS` checked and normalised (floats)."""
    optimizers = bandit.ThompsonAgent.OPTIMIZERS
    if settings["optimizer"] not in optimizers:
        raise ValueError(f"optimizer must be one of {optimizers}, got {settings['optimizer']!r}")
    settings["learning_rate"] = check_positive("learning_rate", settings["learning_rate"])
    if settings["clip_gradient"] is not None:
        settings["clip_gradient"] = check_positive("clip_gradient", settings["clip_gradient"])
    return settings


def _is_finite_number(value):
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def _checked_rho_init(value):
    """A finite rho as a float, or a range [low, high] (low < high) as a list of two floats."""
    if _is_finite_number(value):
        return float(value)
    if (isinstance(value, (list, tuple)) and len(value) == 2
            and all(_is_finite_number(bound) for bound in value) and value[0] < value[1]):
        return [float(value[0]), float(value[1])]
    raise ValueError(f"rho_init must be a finite number or a range [low, high] with low < high, "
                     f"got {value!r}")


def thompson_settings(overrides=None):
    """:data:`THOMPSON_SETTINGS` with ``overrides``, every value checked.

    Raises
    ------
    ValueError
        An unknown key or a value out of range, named.
    """
    overrides = dict(overrides or {})
    unknown = sorted(set(overrides) - set(THOMPSON_SETTINGS))
    if unknown:
        raise ValueError(f"unknown Thompson settings {unknown}; known: {sorted(THOMPSON_SETTINGS)}")
    settings = dict(THOMPSON_SETTINGS, prior=dict(THOMPSON_SETTINGS["prior"]))
    settings.update(overrides)
    prior = settings["prior"]
    if not (isinstance(prior, dict) and set(prior) == {"pi", "neg_log_sigma1", "neg_log_sigma2"}):
        raise ValueError(f"prior must give pi, neg_log_sigma1 and neg_log_sigma2, got {prior!r}")
    ScaleMixturePrior(prior["pi"], math.exp(-prior["neg_log_sigma1"]), math.exp(-prior["neg_log_sigma2"]))
    for key in ("num_action_samples", "num_train_samples"):
        value = settings[key]
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < 1:
            raise ValueError(f"{key} must be an integer >= 1, got {value!r}")
        settings[key] = int(value)
    settings["rho_init"] = _checked_rho_init(settings["rho_init"])
    scale = settings["kl_scale"]
    if isinstance(scale, bool) or not isinstance(scale, (int, float)) or not 0 < scale < math.inf:
        raise ValueError(f"kl_scale must be a positive finite number, got {scale!r}")
    settings["kl_scale"] = float(scale)
    for key, choices in (("kl_data", bandit.ThompsonAgent.KL_DATA),
                         ("kl_weighting", bandit.ThompsonAgent.KL_WEIGHTINGS),
                         ("act_on", bandit.ThompsonAgent.ACT_ON)):
        if settings[key] not in choices:
            raise ValueError(f"{key} must be one of {choices}, got {settings[key]!r}")
    return _checked_optimizer(settings)


def make_agent(settings, num_features, ctx=None):
    """A fresh, seeded agent for :func:`agent_settings` (reseeds MXNet's generator).

    Returns
    -------
    bandit.ThompsonAgent or bandit.EpsilonGreedyAgent
    """
    settings = with_later_defaults(settings)  # stored by an earlier version, maybe
    common = dict(hidden_sizes=tuple(settings["hidden"]), noise_sigma=settings["noise_sigma"],
                  buffer_size=settings["buffer_size"], num_minibatches=settings["num_minibatches"],
                  batch_size=settings["batch_size"], optimizer=settings["optimizer"],
                  learning_rate=settings["learning_rate"], clip_gradient=settings["clip_gradient"],
                  seed=settings["seed"], ctx=ctx)
    mx.random.seed(settings["seed"])  # the network's initialisation
    if settings["epsilon"] is not None:
        return bandit.EpsilonGreedyAgent(num_features, epsilon=settings["epsilon"], **common)
    prior, rho_init = settings["prior"], settings["rho_init"]
    return bandit.ThompsonAgent(
        num_features, prior=ScaleMixturePrior(prior["pi"], math.exp(-prior["neg_log_sigma1"]),
                                              math.exp(-prior["neg_log_sigma2"])),
        num_action_samples=settings["num_action_samples"],
        num_train_samples=settings["num_train_samples"],
        rho_init=tuple(rho_init) if isinstance(rho_init, list) else rho_init,
        kl_data=settings["kl_data"], kl_scale=settings["kl_scale"],
        kl_weighting=settings["kl_weighting"], act_on=settings["act_on"], **common)


def with_later_defaults(settings):
    """Stored settings of an agent completed with :data:`LATER_THOMPSON_DEFAULTS` or
    :data:`LATER_GREEDY_DEFAULTS`, the prior's keys under their current names."""
    if isinstance(settings, dict) and "epsilon" in settings:
        later = LATER_THOMPSON_DEFAULTS if settings["epsilon"] is None else LATER_GREEDY_DEFAULTS
        settings = dict(later, **settings)
    if isinstance(settings, dict) and isinstance(settings.get("prior"), dict):
        settings = dict(settings, prior=with_current_names(settings["prior"]))  # older names
    return settings
