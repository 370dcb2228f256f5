"""What a hyperparameter search may vary (:mod:`gluon_bbb.experiments.search` runs it): the
keys of each kind of configuration, a checked space of values, the settings of a grid, and the
run-folder name of a setting.

Every method of Table 1 has its own keys, so that each can be tuned on the same budget: the
scale-mixture prior searches the paper's grid (section 5.1), the Gaussian prior its sigma, the
SGD and dropout baselines their learning rate, its schedule, momentum and the dropout rate.
"""
import itertools

import numpy as np

from .._checks import check_int
from .configs import CONFIGS, PAPER_GRID, SEARCH_KEYS, check_hyperparameter

__all__ = ["SPACE_KEYS", "SAMPLERS", "PRUNERS", "search_kind", "search_space", "grid_settings",
           "sample_settings", "trial_name", "format_setting"]

#: How a search picks its next setting: the whole grid in a fixed order, Optuna's TPE, or at
#: random.
SAMPLERS = ("grid", "tpe", "random")
#: How a search stops hopeless trials early: Hyperband, the median rule, or never.
PRUNERS = ("hyperband", "median", "none")


#: The keys a search may vary, per kind of base configuration (:func:`search_kind`): for the
#: scale mixture the paper's grid (its default space), then the optimizer and its per-epoch
#: decay; for the Gaussian prior its sigma in place of the mixture's keys; for the baselines
#: the learning rate, its schedule and momentum, and the dropout rate.
SPACE_KEYS = {
    "scale-mixture": SEARCH_KEYS + ("optimizer", "lr_decay"),
    "gaussian": ("lr", "num_samples", "sigma", "optimizer", "lr_decay"),
    "sgd": ("lr", "momentum", "optimizer", "lr_decay"),
    "dropout": ("lr", "momentum", "dropout", "optimizer", "lr_decay"),
}


# the order of the keys in a trial's folder name
_NAME_ORDER = SEARCH_KEYS + ("sigma", "momentum", "dropout", "optimizer", "lr_decay")


def search_kind(base):
    """The kind of search a base configuration has (a key of :data:`SPACE_KEYS`): its prior
    ('scale-mixture', 'gaussian') for Bayes by Backprop, else its method ('sgd', 'dropout'),
    or a ValueError for an unknown name."""
    if base not in CONFIGS:
        raise ValueError(f"unknown base configuration {base!r}; choose one of {', '.join(CONFIGS)}")
    config = CONFIGS[base]
    return config["prior"] if config["method"] == "bbb" else config["method"]


def search_space(base="bbb-mixture-400", **values):
    """A search space for configurations like ``base``: key -> list of values.

    For a scale-mixture base the keys not given take the paper's grid (:data:`PAPER_GRID`)
    and ``optimizer`` and ``lr_decay`` are searched only if given; for the other bases only
    the keys given are searched, the rest keep the base's values.

    Every value is checked as a configuration checks it; a key with one value is fixed.

    Parameters
    ----------
    base : str
        A configuration of :data:`CONFIGS`; its kind (:func:`search_kind`) decides the keys.
    **values
        key -> list of values, keys among ``SPACE_KEYS[search_kind(base)]``.

    Returns
    -------
    dict, keys in the order of ``SPACE_KEYS[search_kind(base)]``.
    """
    kind = search_kind(base)
    keys = SPACE_KEYS[kind]
    unknown = set(values) - set(keys)
    if unknown:
        raise ValueError(f"unknown search keys {sorted(unknown)} for {base} (a {kind} configuration); "
                         f"use {', '.join(keys)}")
    defaults = PAPER_GRID if kind == "scale-mixture" else {}
    space = {}
    for key in keys:
        chosen = values.get(key, defaults.get(key))
        if chosen is None:
            continue
        chosen = [check_hyperparameter(key, value) for value in chosen]
        if not chosen or len(set(chosen)) != len(chosen):
            raise ValueError(f"the values of {key} must be distinct and at least one, got {chosen}")
        space[key] = chosen
    if not space:
        raise ValueError(f"the search of {base} varies nothing: give values for some of "
                         f"{', '.join(keys)}")
    return space


def grid_settings(grid=None, base="bbb-mixture-400"):
    """Every setting of a grid (default the paper's, 324 settings), in a fixed order, without
    those whose mixture prior is invalid (``neg_log_sigma2 <= neg_log_sigma1``).

    Parameters
    ----------
    grid : dict, optional
        key -> list of values, as :func:`search_space` takes them.
    base : str
        The configuration the settings modify (:func:`search_space`).

    Returns
    -------
    list of dict
    """
    space = search_space(base, **(grid or {}))
    settings = []
    for values in itertools.product(*space.values()):
        setting = dict(zip(space, values))
        if setting.get("neg_log_sigma2", 1.0) > setting.get("neg_log_sigma1", 0.0):
            settings.append(setting)
    return settings


def sample_settings(settings, max_trials, seed=0):
    """A seeded random sample of ``max_trials`` settings (all of them if fewer), in grid order."""
    check_int("max_trials", max_trials)
    if max_trials >= len(settings):
        return list(settings)
    chosen = np.random.default_rng(seed).choice(len(settings), size=max_trials, replace=False)
    return [settings[i] for i in sorted(chosen)]


def trial_name(setting):
    """The run folder name of a setting, e.g. ``lr0.001_samples1_pi0.5_logsigma1-0_logsigma2-6``
    (then ``_adam`` and ``_decay0.98`` when the setting has them), ``lr0.1_momentum0.9_dropout0.5``
    for a baseline's."""
    short = {"lr": "lr", "num_samples": "samples", "pi": "pi", "neg_log_sigma1": "logsigma1-",
             "neg_log_sigma2": "logsigma2-", "sigma": "sigma", "momentum": "momentum",
             "dropout": "dropout", "optimizer": "", "lr_decay": "decay"}
    return "_".join(f"{short[key]}{setting[key]:g}" if key != "optimizer" else setting[key]
                    for key in _NAME_ORDER if key in setting)


def format_setting(setting):
    """A setting as ``key=value`` pairs separated by commas, what ``reproduce --set`` and
    :func:`~gluon_bbb.experiments.wording.parse_setting` read back exactly (numbers by
    ``repr``: no digit is lost)."""
    return ",".join(f"{key}={value}" if isinstance(value, str) else f"{key}={value!r}"
                    for key, value in setting.items())
