"""Training on all 60,000 training images with the test set scored after every epoch, under
each of the test conventions public reproductions use: the protocol of a run that reports the
test error at the end of training (or averaged over its last epochs) rather than at an epoch
chosen on a validation set.

The conventions differ in two ways:

- **Test pixels.** The network trains on pixels / 126 (the paper's preprocessing); the test
  images are fed either the same way (``"x126"``) or as raw pixels 0-255 (``"raw"``), as a run
  that takes the test images straight from the file does. With ReLU layers, raw pixels scale
  every layer's input by 126, so the biases count for about 1/126 of what they did in training.
- **Monte Carlo average.** The predictive of ``n`` sampled networks averages their class
  probabilities (``"prob"``, the Monte Carlo estimate of Eq. (1)'s expectation) or their
  log-probabilities (``"logprob"``, a geometric mean of the sampled predictives).

After every epoch the record holds the training error, the posterior-mean network's test error
on both pixel scales, and, on the epochs :func:`mc_epochs` names (every ``mc_every``-th and the
last ``last_mc``), the Monte Carlo test error of ``mc_samples`` sampled networks under all four
combinations. The sampled networks come from a stream of their own (seeded from the run's seed
and the epoch), so the numbers do not depend on whether the run was resumed, and training's own
noise (reseeded before every epoch) is untouched by them.

A run folder holds ``config.json``, ``checkpoint.bbb`` (the last completed epoch: the same
command resumes it, bit for bit), ``all_images.json`` (the per-epoch record, rewritten
atomically after every epoch) and ``sessions.json``.
"""
import logging
import os
import time
from typing import Optional

from mxnet import nd

from .. import data
from ..epochs import epoch_seed
from ..io.checkpoint import CheckpointError, checked_field, read_json, write_json
from ..predictive import EVAL_BATCH_SIZE, error_rate, sample_outputs
from ..context import resolve_context
from .configs import learning_rate_schedule, run_kind
from .machine import machine_info
from .runfolder import CONFIG, append_session, check_run_dir, now, read_run_config
from .runlock import RunFolderLock
from .runners import make_runner
from .wording import describe

__all__ = ["RECORD", "PIXEL_SCALES", "AVERAGES", "TEST_SEED_STREAM", "TRAIN_SEED_STREAM",
           "mc_epochs", "convention_errors", "run_all_images", "read_record", "training_errors"]

logger = logging.getLogger(__name__)

#: The per-epoch record of a run folder.
RECORD = "all_images.json"

#: How the test images are fed: as in training (pixels / 126) or as raw pixels 0-255.
PIXEL_SCALES = ("x126", "raw")

#: How the sampled networks' predictives are averaged: probabilities or log-probabilities.
AVERAGES = ("prob", "logprob")

#: The :func:`~gluon_bbb.epochs.epoch_seed` stream of the test-time weight samples.
TEST_SEED_STREAM = 3

#: The :func:`~gluon_bbb.epochs.epoch_seed` stream of :func:`training_errors`' weight samples.
TRAIN_SEED_STREAM = 4


def mc_epochs(epochs, mc_every, last_mc):
    """The epochs (from 1) after which the Monte Carlo test errors are measured: every
    ``mc_every``-th (none for 0) and the last ``last_mc`` of ``epochs``.

    Returns
    -------
    set of int
    """
    chosen = set(range(max(1, epochs - last_mc + 1), epochs + 1)) if last_mc > 0 else set()
    if mc_every > 0:
        chosen.update(range(mc_every, epochs + 1, mc_every))
    return chosen


def convention_errors(trainer, batches, labels, num_samples):
    """Test errors of a trained :class:`~gluon_bbb.BBBTrainer` under every convention.

    Parameters
    ----------
    trainer : BBBTrainer
        Set up (it has trained or loaded a checkpoint); its MXNet generator is used for the
        draws (seed it first for reproducible numbers).
    batches : dict
        ``{"x126": [...], "raw": [...]}``: the same test images, batched alike, (b_j, 784)
        NDArrays on the trainer's context, under each pixel scale.
    labels : list of NDArray, (b_j,) each
    num_samples : int
        Sampled networks of the Monte Carlo errors; 0 for the posterior mean only.

    Returns
    -------
    dict
        ``"mean_<scale>"`` for each scale of :data:`PIXEL_SCALES`, and with ``num_samples > 0``
        ``"mc_<average>_<scale>"`` for each average of :data:`AVERAGES`: error rates in [0, 1].
    """
    scales = list(batches)
    trainer.set_mean()
    errors = {f"mean_{scale}": error_rate([trainer.forward(x) for x in batches[scale]], labels)
              for scale in scales}
    if num_samples == 0:
        return errors
    flat = [x for scale in scales for x in batches[scale]]
    sums = {average: [None] * len(flat) for average in AVERAGES}
    for outputs in sample_outputs(trainer, flat, num_samples):  # one draw serves both scales
        for j, output in enumerate(outputs):
            for average, value in (("prob", nd.softmax(output, axis=-1)),
                                   ("logprob", nd.log_softmax(output, axis=-1))):
                sums[average][j] = value if sums[average][j] is None else sums[average][j] + value
    per_scale = len(labels)
    for average in AVERAGES:
        for k, scale in enumerate(scales):
            totals = sums[average][k * per_scale:(k + 1) * per_scale]
            errors[f"mc_{average}_{scale}"] = error_rate(totals, labels)
    return errors


def training_errors(run_dir: str, num_samples: int = 100, num_examples: Optional[int] = None,
                    data_dir: Optional[str] = None, ctx=None) -> dict:
    """The errors on the training images of the network a run folder's checkpoint holds, under
    every convention: how a run that reports its training accuracy after each epoch measures
    it (``bayes1`` averages 100 sampled networks' log-probabilities on raw pixels).

    Parameters
    ----------
    run_dir : str
        A folder written by :func:`run_all_images` (``config.json``, ``checkpoint.bbb``).
    num_samples : int
        Sampled networks of the Monte Carlo errors (drawn from the
        :data:`TRAIN_SEED_STREAM` stream of the run's seed and epoch); 0 for the posterior
        mean only.
    num_examples : int, optional
        Score the first ``num_examples`` of the training images the run trained on (all by
        default): the Monte Carlo errors of 60,000 images cost six times the test set's.
    data_dir, ctx
        As for :func:`run_all_images`.

    Returns
    -------
    dict
        ``"epoch"`` (the checkpoint's), ``"num_examples"`` and the errors of
        :func:`convention_errors` over those images.

    Raises
    ------
    ValueError
        Not such a folder, or a damaged file.
    """
    config = read_run_config(run_dir)
    if run_kind(config) != "bbb" or config["num_validation"] != 0:
        raise ValueError(f"{run_dir} holds no Bayes-by-Backprop run on every training image")
    ctx = resolve_context(ctx)
    runner = make_runner(config, ctx)
    runner.trainer.load(os.path.join(run_dir, "checkpoint.bbb"), optimizer=False)
    trainer = runner.trainer
    if num_examples is not None:
        config = dict(config, subset=min(int(num_examples), config["subset"] or num_examples))
    batches, labels = _image_batches(config, "train", data_dir, ctx)
    trainer.reseed(epoch_seed(config["seed"], trainer.epoch, stream=TRAIN_SEED_STREAM))
    errors = convention_errors(trainer, batches, labels, num_samples)
    return dict(epoch=trainer.epoch, num_examples=sum(len(batch) for batch in labels),
                **errors)


def _image_batches(config, split, data_dir, ctx):
    """The images of ``split`` ("train" or "test") under both pixel scales and their labels,
    in large batches."""
    scaled = data.load_dataset(config["dataset"], split, data_dir, config["preprocessing"])
    raw_images, labels = data.load_raw(config["dataset"], split, data_dir)
    if config["subset"] is not None:
        scaled = tuple(array[:config["subset"]] for array in scaled)
        raw_images, labels = raw_images[:config["subset"]], labels[:config["subset"]]
    images = {"x126": scaled[0], "raw": raw_images.reshape(len(raw_images), -1).astype("float32")}
    return ({scale: _batched(array, ctx) for scale, array in images.items()},
            _batched(labels.astype("float32"), ctx))


def _batched(array, ctx):
    """``array`` as NDArrays of :data:`~gluon_bbb.predictive.EVAL_BATCH_SIZE` rows."""
    return [nd.array(array[i:i + EVAL_BATCH_SIZE], ctx=ctx)
            for i in range(0, len(array), EVAL_BATCH_SIZE)]


def read_record(run_dir):
    """The checked per-epoch record of a run folder (``[]`` when it has none yet).

    Raises
    ------
    ValueError
        The file is damaged (:class:`~gluon_bbb.io.checkpoint.CheckpointError`).
    """
    path = os.path.join(run_dir, RECORD)
    if not os.path.isfile(path):
        return []
    epochs = checked_field(read_json(path, "a per-epoch record"), "epochs", list, path)
    for i, entry in enumerate(epochs):
        if not isinstance(entry, dict) or entry.get("epoch") != i + 1:
            raise CheckpointError(f"{path}: entry {i} is not the record of epoch {i + 1}")
    return epochs


def run_all_images(config, epochs, output_dir, mc_samples=100, mc_every=10, last_mc=10,
                   data_dir=None, ctx=None, progress=False, command=None):
    """Train a Bayes-by-Backprop configuration on all training images to ``epochs`` epochs,
    scoring the test set under every convention after each epoch (see the module docstring).

    The configuration must keep no validation split (``num_validation=0``). A folder holding
    a run of the same configuration is continued from its last completed epoch.

    Parameters
    ----------
    config : dict
        From :func:`~gluon_bbb.experiments.get_config`, e.g.
        ``get_config("bbb-mixture-1200-paper", num_validation=0)``.
    epochs : int
    output_dir : str
    mc_samples : int
        Sampled networks of each Monte Carlo test error.
    mc_every, last_mc : int
        Monte Carlo errors after every ``mc_every``-th epoch and the last ``last_mc`` epochs
        (:func:`mc_epochs`).
    data_dir, ctx, progress, command
        As for :func:`gluon_bbb.experiments.run`.

    Returns
    -------
    list of dict
        The per-epoch record (also in ``output_dir/all_images.json``).

    Raises
    ------
    ValueError
        Not a Bayes-by-Backprop configuration without validation split, another configuration
        in ``output_dir``, or a damaged file.
    """
    if run_kind(config) != "bbb" or config["num_validation"] != 0:
        raise ValueError("run_all_images trains a Bayes-by-Backprop configuration on every "
                         "training image: it needs method 'bbb' and num_validation=0")
    ctx = resolve_context(ctx)
    with RunFolderLock(output_dir):
        check_run_dir(output_dir, config)
        os.makedirs(output_dir, exist_ok=True)
        start = time.time()
        loaders = data.get_loaders(config["dataset"], batch_size=config["batch_size"],
                                   data_dir=data_dir, preprocessing=config["preprocessing"],
                                   num_validation=0, subset=config["subset"], ctx=ctx,
                                   seed=config["seed"])
        test_batches, test_labels = _image_batches(config, "test", data_dir, ctx)
        runner = make_runner(config, ctx)
        trainer = runner.trainer
        checkpoint = os.path.join(output_dir, "checkpoint.bbb")
        if os.path.exists(checkpoint):
            runner.load(checkpoint)
        record = read_record(output_dir)[:trainer.epoch]
        write_json(os.path.join(output_dir, CONFIG),
                   dict(config, epochs=int(epochs), data_dir=data_dir,
                        description=describe(config)))
        session = {"command": command, "started": now(), "epochs_before": trainer.epoch,
                   "epochs_requested": int(epochs), "machine": machine_info(ctx)}
        measured = mc_epochs(int(epochs), mc_every, last_mc)

        def score(history_entry):
            """Append the test errors of the network the trainer holds after an epoch."""
            epoch = history_entry["epoch"]
            trainer.reseed(epoch_seed(config["seed"], epoch, stream=TEST_SEED_STREAM))
            samples = mc_samples if epoch in measured else 0
            errors = convention_errors(trainer, test_batches, test_labels, samples)
            record.append(dict(epoch=epoch, train_error=history_entry.get("train_error"),
                               seconds=history_entry["seconds"], mc_samples=samples, **errors))
            write_json(os.path.join(output_dir, RECORD),
                       {"config": config["reproduce"], "epochs": record})
            logger.info("epoch %d: test error (mean, x/126) %.2f%%, (mean, raw) %.2f%%%s",
                        epoch, 100 * errors["mean_x126"], 100 * errors["mean_raw"],
                        "" if not samples else
                        f", MC {samples} (prob, x/126) {100 * errors['mc_prob_x126']:.2f}%"
                        f", (logprob, raw) {100 * errors['mc_logprob_raw']:.2f}%")

        if len(record) == trainer.epoch - 1:  # stopped between the checkpoint and the record
            score(trainer.history[-1])
        if len(record) != trainer.epoch:
            raise CheckpointError(f"{os.path.join(output_dir, RECORD)} holds {len(record)} "
                                  f"epochs where {checkpoint} holds {trainer.epoch}")

        shuffled = data.EpochShuffled(loaders["train"], config["seed"], lambda: trainer.epoch)
        try:
            trainer.fit(shuffled, epochs, checkpoint_path=checkpoint, progress=progress,
                        epoch_callback=lambda _, entry: score(entry),
                        learning_rate_schedule=learning_rate_schedule(config))
            session["outcome"] = "finished"
        except BaseException as error:
            session["outcome"] = f"stopped by {type(error).__name__}"
            raise
        finally:
            session["epochs_after"] = trainer.epoch
            session["seconds"] = time.time() - start
            append_session(output_dir, session)
        return record
