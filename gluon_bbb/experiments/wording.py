"""Configurations and settings in words, both ways: the one-line description of a
configuration, its overrides as ``key=value``, and the ``key=value,...`` text of ``--set`` and
of a search setting read back into checked values."""
from .configs import CHOICES, CUSTOM, DESCRIPTIONS, SEARCH_KEYS

__all__ = ["format_overrides", "describe", "initial_values", "network_label", "parse_setting"]


def format_overrides(overrides):
    """``key=value, ...`` for a configuration's overrides, sorted; '' when there are none."""
    return ", ".join(f"{key}={value}" for key, value in sorted((overrides or {}).items()))


def describe(config):
    """One line on a configuration: its :data:`DESCRIPTIONS` entry, then the overrides; for a
    custom one, its hyperparameters."""
    if config["reproduce"] == CUSTOM:
        return _describe_custom(config)
    changes = format_overrides(config.get("overrides"))
    return DESCRIPTIONS[config["reproduce"]] + (f"; changed: {changes}" if changes else "")


def _describe_custom(config):
    if config["prior"] == "gaussian":
        prior = f"Gaussian prior sigma={config['sigma']:g}"
    else:
        prior = (f"scale-mixture prior pi={config['pi']:g}, -log sigma1={config['neg_log_sigma1']:g}, "
                 f"-log sigma2={config['neg_log_sigma2']:g}")
    decay = "" if config["lr_decay"] == 1.0 else f" (x{config['lr_decay']:g} per epoch)"
    if config.get("lr_steps"):
        decay += (f" (x{config['lr_step_factor']:g} after epoch"
                  f"{'s' if len(config['lr_steps']) > 1 else ''} "
                  f"{', '.join(map(str, config['lr_steps']))})")
    scale = "" if config["kl_scale"] == 1.0 else f", complexity x{config['kl_scale']:g}"
    samples = config["num_samples"]
    estimator = config.get("estimator", "weights")
    estimator = "" if estimator == "weights" else f", {estimator} estimator"
    if config.get("learn_prior"):
        prior = prior.replace(" prior ", " prior learned from ", 1)
    return (f"custom Bayes by Backprop on {config['dataset']}, {network_label(config)}, "
            f"{prior}; {config['optimizer']} lr "
            f"{config['lr']:g}{decay}, {samples} sample{'s' if samples > 1 else ''}, "
            f"{config['kl_weighting']} KL weights{scale}, {initial_values(config)}{estimator}")


def initial_values(config):
    """How a Bayes-by-Backprop configuration starts rho and mu, in words: 'rho_init -5',
    'rho ~ U(-3.5, -3), mu ~ U(-0.03, 0.03)'."""
    rho = config["rho_init"]
    text = (f"rho ~ U({rho[0]:g}, {rho[1]:g})" if isinstance(rho, (list, tuple))
            else f"rho_init {rho:g}")
    mu = config.get("mu_init", "net")
    return text if mu == "net" else text + f", mu ~ U({-mu:g}, {mu:g})"


def network_label(config):
    """'LeNet-5', or the MLP's hidden units, e.g. '400x400 ReLU'."""
    if config.get("network", "mlp") == "lenet":
        return "LeNet-5"
    return f"{'x'.join(map(str, config['hidden']))} ReLU"



def parse_setting(text, keys=SEARCH_KEYS):
    """``"lr=1e-4,num_samples=2,pi=0.25"`` -> a dict; keys among ``keys`` (default
    :data:`SEARCH_KEYS`; ``SEARCH_KEYS + EXTRA_KEYS`` for ``--set``)."""
    setting = {}
    for item in text.split(","):
        key, sep, value = item.partition("=")
        key = key.strip().replace("-", "_")
        if not sep or key not in keys:
            raise ValueError(f"bad setting {text!r}: write key=value pairs separated by commas, "
                             f"keys among {', '.join(keys)}")
        try:
            setting[key] = _parse_value(key, value.strip())
        except ValueError:
            raise ValueError(f"bad value {value!r} for {key} in setting {text!r}") from None
    return setting


def _parse_value(key, text):
    """One value of a ``key=value`` setting; lists (``lr_steps``, a ``rho_init`` range) are
    written with colons: ``lr_steps=300:450``, ``rho_init=-3.5:-3``."""
    if key in CHOICES or key == "optimizer" or (key == "mu_init" and text == "net"):
        return text
    if key == "num_samples":
        return int(text)
    if key == "lr_steps":
        return [int(step) for step in text.split(":")] if text else []
    if key == "rho_init" and ":" in text:
        return [float(bound) for bound in text.split(":")]
    return float(text)
