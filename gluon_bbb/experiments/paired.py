"""Paired continuations: gluon_bbb and the PyTorch peer of ``bayes1``'s training
(``scripts/peer_all_images.py``) continued from the same variational state, with several noise
seeds each, so that the difference between the two implementations is measured without the
spread that separate initialisations add.

A continuation is one run folder per implementation and noise seed. It holds
``continuation.json`` (what it continues: the state's source, epoch, SHA-256 and the command
that trains that state again; the implementation, noise seed, learning rate and width), the
per-epoch record ``all_images.json`` of :mod:`gluon_bbb.experiments.all_images` (its epochs
numbered from 1 after the state), the checkpoint of its last completed epoch (the same command
resumes it bit for bit) and ``sessions.json``. The gluon_bbb half is :func:`continue_gluon`;
the peer's half, which needs PyTorch, is ``scripts/paired_continuation.py``.

:func:`paired_difference` is the comparison: per state, the mean over its noise seeds of one
implementation less the other's, and the mean of those differences over the states with a
Student-t interval (the states are the pairs).
"""
import math
import os
from typing import Dict, List, Optional, Sequence

from ..context import resolve_context
from ..io.checkpoint import read_json, write_json
from .all_images import RECORD, read_record, run_all_images
from .peer_state import set_trainer_state
from .runfolder import CONFIG, FILES, check_run_dir
from .runlock import RunFolderLock
from .runners import make_runner
from .wording import describe

__all__ = ["CONTINUATION", "IMPLEMENTATIONS", "claim_continuation", "continue_gluon",
           "run_summary", "paired_difference", "t_cdf", "t_quantile"]

#: The file that says what a continuation's run folder continues.
CONTINUATION = "continuation.json"

#: The implementations a paired continuation compares, in the order of the difference.
IMPLEMENTATIONS = ("gluon_bbb", "peer")

#: The keys of ``continuation.json`` that must match for a folder to be continued (the
#: command that wrote it may differ: another path, another thread count).
_IDENTITY = ("implementation", "state_sha256", "state_epoch", "noise_seed", "lr", "hidden",
             "subset")


def claim_continuation(output_dir: str, claim: dict) -> dict:
    """Write ``claim`` to the folder's ``continuation.json``, or refuse (ValueError) a folder
    that continues another state, implementation, seed or setting; call it holding the folder's
    :class:`~gluon_bbb.experiments.runlock.RunFolderLock`.

    Returns
    -------
    dict, the claim stored before (``{}`` for a new folder)
    """
    missing = [key for key in _IDENTITY if key not in claim]
    if missing:
        raise ValueError(f"a continuation's claim needs {missing}")
    path = os.path.join(output_dir, CONTINUATION)
    stored = {}
    if os.path.exists(path):
        stored = read_json(path, "a continuation's description")
        changed = [key for key in _IDENTITY if stored.get(key) != claim[key]]
        if changed:
            raise ValueError(f"{path}: continues another run ({', '.join(changed)} differ: "
                             f"{[stored.get(key) for key in changed]} there, "
                             f"{[claim[key] for key in changed]} now); choose another folder")
    elif os.path.exists(os.path.join(output_dir, RECORD)):
        raise ValueError(f"{output_dir} holds a record but no {CONTINUATION}: not a "
                         "continuation's folder")
    os.makedirs(output_dir, exist_ok=True)
    write_json(path, dict(stored, **claim))
    return stored


def continue_gluon(config: dict, state: dict, claim: dict, epochs: int, output_dir: str,
                   mc_samples: int = 100, last_mc: int = 10, data_dir: Optional[str] = None,
                   ctx=None, command: Optional[str] = None) -> List[dict]:
    """Continue ``state`` with gluon_bbb for ``epochs`` epochs into ``output_dir``, or resume
    the continuation the folder holds.

    Parameters
    ----------
    config : dict
        A Bayes-by-Backprop configuration on every training image (``num_validation=0``) whose
        ``seed`` is the noise seed and whose ``lr`` (with no ``lr_steps``) is the continuation's
        rate, e.g. ``get_config("bbb-mixture-400-paper", num_validation=0, seed=1, lr=1e-4,
        lr_steps=[], kl_scale=469 / 468.75)``.
    state : dict
        A variational state of :mod:`gluon_bbb.experiments.peer_state` for the configuration's
        network.
    claim : dict
        What the folder continues (:func:`claim_continuation`; ``implementation`` is set here).
    epochs : int
    output_dir : str
    mc_samples, last_mc : int
        The Monte Carlo test errors of ``mc_samples`` networks on the last ``last_mc`` epochs.
    data_dir, ctx, command
        As for :func:`~gluon_bbb.experiments.all_images.run_all_images`.

    Returns
    -------
    list of dict, the per-epoch record

    Raises
    ------
    ValueError
        Another continuation or another run in the folder, a state that does not fit the
        network, or a damaged file.
    """
    with RunFolderLock(output_dir):
        claim_continuation(output_dir, dict(claim, implementation="gluon_bbb"))
        checkpoint = os.path.join(output_dir, FILES["bbb"]["checkpoint"])
        if not os.path.exists(checkpoint):
            check_run_dir(output_dir, config)
            trainer = make_runner(config, resolve_context(ctx)).trainer
            set_trainer_state(trainer, state)
            # the configuration first: a folder with a checkpoint and no configuration is refused
            write_json(os.path.join(output_dir, CONFIG),
                       dict(config, epochs=int(epochs), data_dir=data_dir,
                            description=describe(config)))
            trainer.save(checkpoint)  # epoch 0: run_all_images continues from it
        return run_all_images(config, epochs, output_dir, mc_samples=mc_samples, mc_every=0,
                              last_mc=last_mc, data_dir=data_dir, ctx=ctx, command=command)


def run_summary(run_dir: str, last: int = 10) -> dict:
    """What a continuation's record reports, test errors in %.

    Returns
    -------
    dict
        ``"epochs"``; ``"mean_x126"``: the posterior mean's error on pixels / 126 averaged over
        the last ``last`` epochs; ``"bayes1_rule"``: the Monte Carlo error (log-probabilities,
        raw pixels) averaged over the last ``last`` epochs (None where one of them lacks it);
        ``"mc_last"``: that error at the last epoch (None where it lacks it).

    Raises
    ------
    ValueError
        No record, fewer than ``last`` epochs, or a damaged record.
    """
    record = read_record(run_dir)
    if len(record) < last:
        raise ValueError(f"{os.path.join(run_dir, RECORD)}: {len(record)} epochs, fewer than "
                         f"the {last} averaged")
    tail = record[-last:]
    mc = [entry.get("mc_logprob_raw") for entry in tail]
    return {"epochs": len(record),
            "mean_x126": 100 * sum(entry["mean_x126"] for entry in tail) / last,
            "bayes1_rule": None if None in mc else 100 * sum(mc) / last,
            "mc_last": None if mc[-1] is None else 100 * mc[-1]}


def _mean(values):
    return sum(values) / len(values)


def paired_difference(cells: Dict[str, Dict[str, Sequence[float]]], level: float = 0.95) -> dict:
    """The difference between the implementations, paired by starting state.

    Parameters
    ----------
    cells : dict
        ``{state: {"gluon_bbb": [value per noise seed], "peer": [...]}}``, e.g. the
        ``"mean_x126"`` of :func:`run_summary` of each run.
    level : float
        Of the intervals.

    Returns
    -------
    dict
        ``"per_state"``: ``{state: gluon_bbb's mean - the peer's}``; ``"states"``: their number
        n; ``"mean"``: the mean difference over the states; ``"sd"``: the states' standard
        deviation (None for n < 2); ``"interval"``: ``mean -/+ t(n - 1) sd / sqrt(n)`` (None
        for n < 2), what generalises to other states; ``"noise_interval"`` and ``"noise_df"``:
        the interval from the seeds' spread within each (state, implementation) alone
        (pooled, ``sum(n_cell - 1)`` degrees of freedom), which assumes the difference is the
        same from every state (None without two seeds in some cell).
    """
    if not cells:
        raise ValueError("no state to compare")
    per_state, squares, df, inverse_counts = {}, 0.0, 0, 0.0
    for state, groups in cells.items():
        if any(not groups.get(name) for name in IMPLEMENTATIONS):
            raise ValueError(f"state {state}: needs runs of both {IMPLEMENTATIONS}")
        per_state[state] = _mean(groups[IMPLEMENTATIONS[0]]) - _mean(groups[IMPLEMENTATIONS[1]])
        for name in IMPLEMENTATIONS:
            values = list(groups[name])
            centre = _mean(values)
            squares += sum((v - centre) ** 2 for v in values)
            df += len(values) - 1
            inverse_counts += 1 / len(values)
    n = len(per_state)
    differences = list(per_state.values())
    mean = _mean(differences)
    quantile = (1 + level) / 2
    result = {"per_state": per_state, "states": n, "mean": mean, "sd": None, "interval": None,
              "noise_interval": None, "noise_df": df or None, "level": level}
    if n >= 2:
        sd = math.sqrt(sum((d - mean) ** 2 for d in differences) / (n - 1))
        half = t_quantile(quantile, n - 1) * sd / math.sqrt(n)
        result.update(sd=sd, interval=(mean - half, mean + half))
    if df > 0:
        half = t_quantile(quantile, df) * math.sqrt(squares / df * inverse_counts) / n
        result["noise_interval"] = (mean - half, mean + half)
    return result


def _incomplete_beta(a, b, x):
    """The regularized incomplete beta function I_x(a, b), by its continued fraction
    (modified Lentz), on the side where it converges fast."""
    if x <= 0:
        return 0.0
    if x >= 1:
        return 1.0
    if x > (a + 1) / (a + b + 2):
        return 1.0 - _incomplete_beta(b, a, 1 - x)
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b)
                     + a * math.log(x) + b * math.log1p(-x)) / a
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    fraction = d
    for m in range(1, 500):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            fraction *= c * d
        if abs(c * d - 1.0) < 1e-15:
            break
    return front * fraction


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with ``df`` degrees of freedom."""
    tail = 0.5 * _incomplete_beta(df / 2, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


def t_quantile(p: float, df: float) -> float:
    """The ``p``-quantile of Student's t with ``df`` degrees of freedom (0 < p < 1), by
    bisection on :func:`t_cdf` to double precision."""
    if not 0 < p < 1 or not df > 0:
        raise ValueError(f"t_quantile needs 0 < p < 1 and df > 0, got {p}, {df}")
    low, high = -1.0, 1.0
    while t_cdf(low, df) > p:
        low *= 2
    while t_cdf(high, df) < p:
        high *= 2
    for _ in range(200):
        middle = (low + high) / 2
        if middle in (low, high):
            break
        if t_cdf(middle, df) < p:
            low = middle
        else:
            high = middle
    return (low + high) / 2
