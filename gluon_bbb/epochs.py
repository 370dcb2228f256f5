"""What happens at each epoch of :meth:`gluon_bbb.BBBTrainer.fit` besides the steps: the
epoch's seed, per-step statistics summed on the device (one host sync per epoch), the checks
at an epoch's end, the learning-rate schedule's check, the readable log line, and how
progress shows (the progress bar and the epoch's line, on a terminal or in a notebook).

**Seeds.** Anything random that a run does in epoch e (the weight noise, dropout masks, the
minibatch order) is seeded from (seed, e) at the start of that epoch (:func:`epoch_seed`), so a
run resumed at epoch e draws what an uninterrupted run draws. Independent streams of one run
use different ``stream`` numbers.

**Progress.** Whatever trains or plays shows its progress through :func:`progress_bar` and
:func:`print_in_notebook`. On a terminal that is tqdm's text bar on stderr, and the epoch's line
goes to the log only. In a Jupyter kernel the bar is ipywidgets' (as with ``tqdm.auto``), and the
epoch's line is also printed to stdout, so that it stays in the cell's output: the bar goes when
its epoch ends, and a kernel does not show INFO log records.
"""
import math
import sys
import time
import warnings
from typing import Iterable

import numpy as np
from mxnet import gluon, nd
from tqdm import tqdm

__all__ = ["epoch_seed", "NonFiniteLossError", "StepStatistics", "EpochTotals",
           "finish_epoch_checks", "checked_learning_rate", "epoch_line", "in_notebook",
           "progress_bar_class", "progress_bar", "print_in_notebook"]

#: Seeds are kept below this, the bound of ``mx.random.seed`` and NumPy's legacy seeding.
SEED_BOUND = 2**31 - 1


def epoch_seed(seed, epoch, stream=0):
    """A seed in [0, 2^31 - 1) for epoch ``epoch`` of a run seeded with ``seed``.

    Parameters
    ----------
    seed, epoch : int
    stream : int
        0 for the trainer's weight noise; other numbers for other streams of the same run
        (1: the dropout masks of the deterministic baselines; 2: the bandit agents' segments,
        with ``epoch`` the segment; 3 and 4: the sampled networks that score the test and the
        training images in :mod:`gluon_bbb.experiments.all_images`).

    Returns
    -------
    int
    """
    entropy = [int(seed), int(epoch)] + ([int(stream)] if stream else [])
    return int(np.random.SeedSequence(entropy).generate_state(1)[0] % SEED_BOUND)



class NonFiniteLossError(FloatingPointError):
    """Every step of an epoch had a non-finite cost: the data or the settings are broken."""


class StepStatistics(gluon.HybridBlock):
    """fit's per-step bookkeeping as one cached graph, on the device, without a host sync.

    Outputs (3,) sums: cost, nll and kl_weight * complexity, zero for a discarded
    (non-finite) step; and (3,) counts: training mistakes, 1 if the step was discarded,
    labels outside [0, num_outputs).
    """

    def __init__(self, classification, num_outputs, **kwargs):
        super().__init__(**kwargs)
        self.classification, self.num_outputs = classification, num_outputs

    def hybrid_forward(self, F, cost, nll, complexity, kl_weight, finite, *predictions):
        values = F.concat(cost, nll, kl_weight * complexity, dim=0)
        values = F.where(F.broadcast_like(finite, values), values, F.zeros_like(values))
        if self.classification:
            pred, label = predictions
            mistakes = F.sum(F.broadcast_not_equal(F.argmax(pred, axis=-1), label)).reshape((1,))
            bad_labels = F.sum((label < 0) + (label >= self.num_outputs)).reshape((1,))
        else:
            mistakes = bad_labels = F.zeros_like(finite)
        return values, F.concat(mistakes, 1 - finite, bad_labels, dim=0)


class EpochTotals:
    """One epoch of :meth:`BBBTrainer.fit`: its statistics summed on the device step by step
    (:class:`StepStatistics`), read once at the end as the epoch's history record.

    Parameters
    ----------
    classification : bool
        The likelihood is a softmax: count the training mistakes and check the labels.
    num_outputs : int or None
        The network's outputs (classification).
    ctx : mx.Context
    dtype : str, the posterior's
    """

    def __init__(self, classification, num_outputs, ctx, dtype):
        self.classification, self.num_outputs = classification, num_outputs
        self.statistics = StepStatistics(classification, num_outputs)
        self.statistics.hybridize()
        self.sums = nd.zeros((3,), ctx=ctx, dtype=dtype)  # cost, nll, weighted complexity
        self.counts = nd.zeros((3,), ctx=ctx, dtype=dtype)  # mistakes, skipped steps, bad labels
        self.num_steps = self.num_examples = 0

    def add(self, label, kl_weight, cost, nll, complexity, pred, finite):
        """Add one step: its labels (batch_size,), its (1,) weight pi_i and what
        :meth:`BBBTrainer.step` returned. No host sync."""
        predictions = (pred, label) if self.classification else ()
        sums, counts = self.statistics(cost, nll, complexity, kl_weight, finite, *predictions)
        self.sums += sums
        self.counts += counts
        self.num_steps += 1
        self.num_examples += label.shape[0]

    def record(self, epoch, start):
        """The history record of epoch ``epoch`` (from 1) after :func:`finish_epoch_checks`:
        'epoch', 'loss', 'nll', 'complexity', 'skipped_steps', 'seconds' (since ``start``, a
        ``time.time()``, measured after the sync: MXNet runs asynchronously) and, for
        classification, 'train_error'. The epoch's one host sync."""
        totals = nd.concat(self.sums, self.counts, dim=0).asnumpy()
        seconds = time.time() - start
        finish_epoch_checks(totals, self.num_steps, epoch, self.num_outputs)
        record = {"epoch": epoch, "loss": float(totals[0]), "nll": float(totals[1]),
                  "complexity": float(totals[2]), "skipped_steps": int(totals[4]),
                  "seconds": seconds}
        if self.classification:
            record["train_error"] = float(totals[3]) / self.num_examples
        return record


def epoch_line(record, num_epochs, eval_label="test"):
    """One readable log line for a :attr:`BBBTrainer.history` record, e.g.
    ``epoch 3/10  free energy 1,059,669 (nll 3,354 + complexity 1,056,316)  train 1.76%
    test 2.47%  4.3 s``, or for a deterministic network's record (one without 'complexity',
    :func:`gluon_bbb.baselines.run_epochs`), ``epoch 3/10  loss 4,012  train 1.52%  test 2.01%
    1.1 s``."""
    parts = [f"epoch {record['epoch']}/{int(num_epochs)}"]
    if "complexity" in record:
        parts.append(f"free energy {record['loss']:,.0f} (nll {record['nll']:,.0f} + complexity "
                     f"{record['complexity']:,.0f})")
    else:
        parts.append(f"loss {record['loss']:,.0f}")
    if "train_error" in record:
        parts.append(f"train {100 * record['train_error']:.2f}%")
    if "test_error" in record:
        parts.append(f"{eval_label} {100 * record['test_error']:.2f}%")
    if "posterior" in record:
        parts.append(f"median sigma {record['posterior']['median_sigma']:.3g}, "
                     f"SNR<1 {100 * record['posterior']['snr_below_1']:.0f}%")
    if "prior" in record:  # a learned prior's values
        parts.append("prior " + ", ".join(f"{k} {v:.3g}" for k, v in record["prior"].items()))
    if record.get("skipped_steps"):
        parts.append(f"{record['skipped_steps']} steps skipped")
    parts.append(f"{record['seconds']:.1f} s")
    return "  ".join(parts)


def in_notebook() -> bool:
    """Whether this code runs in a Jupyter kernel (JupyterLab, Notebook, VS Code, Colab): the
    IPython shell is ipykernel's. There, text on stderr shows as a pink strip and INFO log
    records are not shown.

    Returns
    -------
    bool
    """
    zmqshell, ipython = sys.modules.get("ipykernel.zmqshell"), sys.modules.get("IPython")
    if zmqshell is None or ipython is None:  # neither is imported outside a kernel
        return False
    return isinstance(ipython.get_ipython(), zmqshell.ZMQInteractiveShell)


def progress_bar_class() -> type:
    """The tqdm class that shows progress here: ``tqdm.notebook.tqdm`` (an ipywidgets bar) in
    a Jupyter kernel where ipywidgets imports, else ``tqdm.tqdm`` (a text bar on stderr).

    The choice of ``tqdm.auto``, made afresh at each call (not once, when a module is
    imported) and without ``tqdm.auto``'s warning when a kernel lacks ipywidgets (the text bar
    is used then; ``pip install ipywidgets`` for the widget).

    Returns
    -------
    type, a subclass of ``tqdm.tqdm``
    """
    if in_notebook():
        try:
            from tqdm.notebook import IProgress, tqdm as notebook_tqdm
        except ImportError:
            IProgress = None
        if IProgress is not None:
            return notebook_tqdm
    return tqdm


def progress_bar(iterable: Iterable, show: bool = True, **options) -> Iterable:
    """``iterable`` wrapped in a progress bar of :func:`progress_bar_class`.

    Parameters
    ----------
    iterable : iterable
    show : bool
        False: no bar (a disabled tqdm; nothing is imported or displayed).
    **options
        tqdm's, e.g. ``total``, ``desc``, ``leave``, ``initial``.

    Returns
    -------
    tqdm.tqdm, iterating over ``iterable``
    """
    bar_class = progress_bar_class() if show else tqdm
    return bar_class(iterable, disable=not show, **options)


def print_in_notebook(line: str, show: bool = True) -> None:
    """Print ``line`` (e.g. an :func:`epoch_line`) to stdout in a Jupyter kernel, where it
    stays in the cell's output; elsewhere do nothing (the caller logs it, or not).

    Parameters
    ----------
    line : str
    show : bool
        False: print nothing (progress is off).
    """
    if show and in_notebook():
        print(line, flush=True)


def checked_learning_rate(value, epoch):
    """A schedule's value for ``epoch`` as a float, or a ValueError naming the problem."""
    try:
        rate = float(value)
    except (TypeError, ValueError):
        raise ValueError(f"learning_rate_schedule({epoch}) returned {value!r}, not a number") from None
    if not (math.isfinite(rate) and rate > 0):
        raise ValueError(f"learning_rate_schedule({epoch}) returned {rate!r}; a learning rate must "
                         "be a finite positive number")
    return rate


def finish_epoch_checks(totals, num_steps, epoch, num_outputs):
    """The checks at the end of an epoch of :meth:`BBBTrainer.fit`, on its one host sync.

    Parameters
    ----------
    totals : numpy.ndarray (6,)
        :class:`StepStatistics` sums and counts of the epoch.
    num_steps : int
    epoch : int, the epoch's number (from 1)
    num_outputs : int, the network's outputs (for the message on bad labels)

    Raises
    ------
    ValueError
        Labels outside [0, num_outputs).
    NonFiniteLossError
        Every step had a non-finite cost. Some did: a RuntimeWarning.
    """
    skipped, bad_labels = int(totals[4]), int(totals[5])
    if bad_labels:
        raise ValueError(
            f"{bad_labels} labels in this epoch were outside [0, {num_outputs}); "
            f"the epoch was not recorded (the last checkpoint, if any, is intact)"
        )
    if skipped == num_steps:
        raise NonFiniteLossError(
            f"every one of the {num_steps} steps of epoch {epoch} had a non-finite "
            "cost; check the inputs for NaN/inf and lower the learning rate"
        )
    if skipped:
        warnings.warn(
            f"{skipped} of {num_steps} steps in epoch {epoch} had a non-finite cost; "
            "their gradients were discarded", RuntimeWarning, stacklevel=4)
