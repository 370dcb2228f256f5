"""Reproducible runs of the paper's MNIST experiments (Blundell et al. 2015, Table 1 and the
networks behind Table 2), with early stopping on a validation set, resuming and a report.

Protocol (section 5.1 of the paper): train on the first 50,000 MNIST training images and keep
the last 10,000 for validation; pixels are divided by 126; minibatches of 128. After every
epoch the validation error of the posterior-mean network (of the plain network for the
baselines) is measured, the epoch's checkpoint is written atomically, and when the validation
error improves on every earlier epoch the checkpoint is also kept as the best one. The
reported numbers are the test errors of the best epoch on validation: the 10,000 test images
are used by the final report only, with the posterior mean and with a Monte Carlo average of
``mc_samples`` sampled networks.

The same protocol trains configurations of the user's own (:func:`~.configs.custom_config`,
what ``gluon-bbb train`` runs) and every trial of the search, so there is one run-folder format.
A run folder (default ``results/<name>``) holds:

``config.json``
    The configuration's name (``"reproduce"``: a key of :data:`CONFIGS`, or ``"custom"``) and
    its hyperparameters. ``gluon-bbb evaluate``, ``prune`` (the paper's Table 2), ``plot``,
    ``uncertainty`` and ``reproduce-report`` read any run folder; they use the best epoch.
``checkpoint.bbb`` / ``best.bbb`` (Bayes by Backprop)
    The last completed epoch and the best epoch on validation, :meth:`BBBTrainer.save` files.
``checkpoint.ckpt`` / ``best.params`` (baselines)
    The last completed epoch (parameters, optimizer state, epoch, history, best epoch) and
    the best epoch's parameters as an ordinary Gluon parameter file (``net.load_parameters``
    on ``models.mlp(hidden, dropout=...)``).
``sessions.json``
    One entry per invocation: the command, the machine, the seconds and epochs it ran.
``train.log``, ``result.json``
    The log, and the report (see :func:`report`).

Running the same command again continues after the last completed epoch; a resumed run
draws the same minibatch order, dropout masks and weight noise as an uninterrupted one (the
training loader is reshuffled from (seed, epoch) at the start of every epoch). A folder
holding a different configuration is refused.

Choices the paper leaves open (documented in :data:`DESCRIPTIONS`): the KL weighting is
uniform (pi_i = 1/M, the ``gluon-bbb train`` default), rho starts at -5, the Gaussian-prior
configurations use sigma = 1 (= e^0, the wide component of the default mixture), the
baselines use plain SGD at learning rate 0.1, and the dropout baselines drop hidden units with
probability 0.5 (no input dropout).

Example::

    from gluon_bbb import experiments
    config = experiments.get_config("bbb-mixture-400")
    result = experiments.run(config, epochs=600, output_dir="results/bbb-mixture-400")
    print(result["test_error_mean"], result["test_error_mc"])
"""
import logging
import math
import os
import time

from .._checks import check_int
from ..io.checkpoint import CheckpointError, checked_field, write_json
from ..context import resolve_context
from .machine import machine_info
from .runlock import RunFolderLock
from .configs import PAPER_TEST_ERROR, get_config, hyperparameters, run_kind
from .wording import describe, format_overrides, network_label
from .runfolder import (CONFIG, FILES, RESULT, append_session, best_of, check_run_dir,
                        checkpoint_metadata, now, read_result, read_run_config, read_sessions,
                        renamed_record)
from .runners import loaders_for, make_runner

__all__ = ["MC_SAMPLES", "NETWORKS", "run", "load_network", "evaluate_run", "report", "results_table", "recorded_result",
           "recorded_history", "seeds_table"]

logger = logging.getLogger(__name__)


#: Weight samples of the Monte Carlo test error a run reports (the command line's default too).
MC_SAMPLES = 10


def run(config, epochs, output_dir, data_dir=None, ctx=None, mc_samples=MC_SAMPLES,
        progress=False, command=None, evaluate_test=True, loaders=None,
        epoch_callback=None):
    """Train configuration ``config`` to ``epochs`` epochs in ``output_dir`` and report.

    A folder that already holds a run of the same configuration is continued from its last
    completed epoch (nothing is trained when it has ``epochs`` epochs already).

    Parameters
    ----------
    config : dict or str
        From :func:`get_config`, or a name of :data:`CONFIGS`.
    epochs : int
        Total number of epochs.
    output_dir : str
    data_dir : str, optional
        See :func:`gluon_bbb.data.find_data_dir`.
    ctx : mx.Context or str, optional
    mc_samples : int
        Sampled networks of the Monte Carlo test error.
    progress : bool
        Progress bars (:func:`gluon_bbb.epochs.progress_bar`), as
        :meth:`gluon_bbb.BBBTrainer.fit` shows them.
    command : str, optional
        The command line, recorded in ``sessions.json`` and ``result.json``.
    evaluate_test : bool
        False: do not touch the test set and do not write ``result.json`` (for searches).
    loaders : dict, optional
        Loaders from :func:`gluon_bbb.data.get_loaders` with this configuration's data
        settings (dataset, batch size, preprocessing, validation split, subset), to share
        them between runs; default: loaded here.
    epoch_callback : callable, optional
        ``epoch_callback(record)`` after each epoch, once its checkpoint (and the best one) is
        written; ``record`` holds 'epoch' and 'test_error' (the validation error). An exception
        it raises stops the run there, with the folder complete (a search prunes trials so).

    Returns
    -------
    dict
        The report (see :func:`report`) or, with ``evaluate_test=False``, a summary with
        'best_epoch', 'validation_error', 'last_validation_error', 'epochs_run', 'seconds'.

    Raises
    ------
    ValueError
        ``output_dir`` holds another configuration, bad arguments, or a damaged file
        (:class:`~gluon_bbb.io.checkpoint.CheckpointError`).
    RunFolderBusyError
        Another process is writing ``output_dir`` (see :mod:`gluon_bbb.experiments.runlock`).
    """
    if isinstance(config, str):
        config = get_config(config)
    check_int("epochs", epochs)
    check_int("mc_samples", mc_samples)
    if not config["num_validation"]:
        raise ValueError("this protocol chooses the epoch on a validation split, and the "
                         "configuration keeps none (num_validation=0): train on every image "
                         "with gluon_bbb.experiments.all_images.run_all_images")
    ctx = resolve_context(ctx)
    with RunFolderLock(output_dir):
        return _run_locked(config, epochs, output_dir, data_dir, ctx, mc_samples, progress,
                           command, evaluate_test, loaders, epoch_callback)


def _run_locked(config, epochs, output_dir, data_dir, ctx, mc_samples, progress, command,
                evaluate_test, loaders, epoch_callback):
    """:func:`run`, holding the folder's writer lock."""
    start = time.time()
    check_run_dir(output_dir, config)
    if loaders is None:
        loaders = loaders_for(config, data_dir, ctx)
    runner = make_runner(config, ctx)
    files = FILES[runner.kind]
    checkpoint = os.path.join(output_dir, files["checkpoint"])
    os.makedirs(output_dir, exist_ok=True)
    epochs_before = 0
    if os.path.exists(checkpoint):
        runner.load(checkpoint)
        epochs_before = runner.epoch
        best = best_of(runner.history)
        if best is not None:
            runner.restore_best(output_dir, best)
        logger.info("resuming %s after epoch %d", checkpoint, runner.epoch)
    if epochs < runner.epoch:
        logger.warning("%s has %d epochs already, more than the %d asked for; nothing to train",
                       output_dir, runner.epoch, epochs)
    write_json(os.path.join(output_dir, CONFIG),
                dict(config, epochs=int(epochs), data_dir=data_dir,
                     description=describe(config)))
    session = {"command": command, "started": now(), "epochs_before": epochs_before,
               "epochs_requested": int(epochs), "machine": machine_info(ctx)}
    changed = format_overrides(config["overrides"])
    logger.info("start: %s%s to epoch %d on %s; run folder %s", config["reproduce"],
                f" ({changed})" if changed else "", epochs, ctx, output_dir)
    try:
        runner.fit(loaders["train"], loaders["validation"], epochs, output_dir, progress,
                   epoch_callback)
        session["fused"] = runner.fused()
        session["epochs_after"] = runner.epoch
        if not evaluate_test:
            best = best_of(runner.history)
            session["outcome"] = "finished"
            return {"best_epoch": best["epoch"], "validation_error": best["validation_error"],
                    "last_validation_error": runner.history[-1]["test_error"],
                    "epochs_run": runner.epoch, "seconds": time.time() - start}
        result = report(output_dir, mc_samples=mc_samples, data_dir=data_dir, ctx=ctx,
                        command=command, _session=(session, start))
        session["outcome"] = "finished"
        return result
    except BaseException as error:
        session["outcome"] = f"stopped by {type(error).__name__}"
        raise
    finally:
        session.setdefault("epochs_after", runner.epoch)
        session["seconds"] = time.time() - start
        append_session(output_dir, session)


#: The networks of a run folder that can be evaluated: the best epoch on validation (the
#: protocol's) or the last completed epoch (the end of training, Table 2's network in the paper).
NETWORKS = ("best", "last")


def _loaded_runner(run_dir, network, ctx):
    """(config, runner holding the folder's best or last epoch, that epoch)."""
    if network not in NETWORKS:
        raise ValueError(f"network must be one of {NETWORKS}, got {network!r}")
    config = read_run_config(run_dir)
    files = FILES[run_kind(config)]
    path = os.path.join(run_dir, files["best" if network == "best" else "checkpoint"])
    if not os.path.isfile(path):
        raise FileNotFoundError(f"{path} not found: {run_dir} has no completed epoch yet"
                                + ("" if network == "best" else " or was committed without it"))
    runner = make_runner(config, resolve_context(ctx))
    if network == "best":
        return config, runner, runner.load_best(run_dir)
    runner.load(path)
    return config, runner, runner.epoch


def load_network(run_dir, network="best", ctx=None):
    """The trained network of a run folder, ready to predict, evaluate or prune.

    Parameters
    ----------
    run_dir : str, a folder of ``train``, ``reproduce`` or a search trial
    network : {'best', 'last'}, the best epoch on validation or the last epoch
    ctx : mx.Context or str, optional

    Returns
    -------
    (dict, BBBTrainer or gluon.Block)
        The configuration, and a :class:`~gluon_bbb.BBBTrainer` holding the posterior of a
        Bayes-by-Backprop run or the network of a baseline (SGD, dropout).
    """
    config, runner, _ = _loaded_runner(run_dir, network, ctx)
    return config, runner.trainer if runner.kind == "bbb" else runner.net


def evaluate_run(run_dir, mc_samples=MC_SAMPLES, data_dir=None, ctx=None, network="best"):
    """Errors of a run folder's best epoch on validation (or of its last epoch); writes
    nothing.

    The same numbers come out every time: MXNet's and NumPy's generators are seeded from the
    configuration and the weight noise is restored from the checkpoint.

    Parameters
    ----------
    run_dir : str
    mc_samples : int, weight samples of the Monte Carlo test error
    data_dir, ctx : optional
    network : {'best', 'last'}
        ``best.bbb`` (the best epoch on validation) or ``checkpoint.bbb`` (the last epoch).

    Returns
    -------
    dict
        'network', 'epoch' (the one evaluated), 'best_epoch' (with network='best'),
        'validation_error' (re-measured), 'test_error_mean', 'test_error_mc' (None for a
        deterministic baseline), 'mc_samples', 'num_train', 'num_validation', 'num_test',
        'num_weights', 'fused' (of the evaluating trainer; None for a baseline).
    """
    config, ctx = read_run_config(run_dir), resolve_context(ctx)
    loaders = loaders_for(config, data_dir or config.get("data_dir"), ctx)  # before the seeding
    config, runner, epoch = _loaded_runner(run_dir, network, ctx)
    mean = runner.evaluate(loaders["test"], num_samples=0)
    mc = runner.evaluate(loaders["test"], num_samples=mc_samples) if runner.kind == "bbb" else None
    return {
        "network": network,
        "epoch": epoch,
        **({"best_epoch": epoch} if network == "best" else {}),
        "validation_error": runner.evaluate(loaders["validation"], num_samples=0),
        "test_error_mean": mean,
        "test_error_mc": mc,
        "mc_samples": mc_samples if runner.kind == "bbb" else None,
        "num_train": loaders["train"].num_examples,
        "num_validation": loaders["validation"].num_examples,
        "num_test": loaders["test"].num_examples,
        "num_weights": runner.num_weights,
        "fused": runner.fused(),
    }


def report(run_dir, mc_samples=MC_SAMPLES, data_dir=None, ctx=None, command=None, _session=None):
    """Evaluate the best epoch on validation on the test set and write ``result.json``.

    Works at any time, also while the run is training (checkpoints are written atomically).

    Returns
    -------
    dict, the contents of ``result.json``:
        'config' (name), 'method', 'description', 'hyperparameters', 'overrides', 'protocol',
        'best_epoch', 'validation_error' (recorded after that epoch),
        'validation_error_recheck' (measured again from the best checkpoint),
        'test_error_mean', 'test_error_mc', 'mc_samples', 'paper_test_error' (%),
        'epochs_run', 'epochs_requested', 'finished', 'history' (per epoch, with
        'validation_error'), 'train_seconds', 'total_wall_seconds' (all reproduce sessions of
        the folder), 'report_seconds', 'machine', 'fused', 'num_weights', 'command' (of this
        report), 'commands' (of the training sessions), 'written'.
    """
    start = time.time()
    config = read_run_config(run_dir)
    ctx = resolve_context(ctx)
    files = FILES[run_kind(config)]
    metadata = checkpoint_metadata(os.path.join(run_dir, files["checkpoint"]), run_kind(config))
    history = [renamed_record(record) for record in metadata.get("history", [])]
    best = best_of(metadata.get("history", []))
    if best is None and not metadata and os.path.isfile(os.path.join(run_dir, files["best"])):
        raise FileNotFoundError(
            f"{run_dir} has {files['best']} but no {files['checkpoint']}, whose history the "
            "report needs (committed results keep only the best epoch); 'gluon-bbb evaluate "
            f"{run_dir}' measures the best epoch's test error again")
    if best is None:
        raise FileNotFoundError(f"{run_dir} has no completed epoch yet: nothing to report")
    evaluation = evaluate_run(run_dir, mc_samples=mc_samples, data_dir=data_dir, ctx=ctx)
    if evaluation["best_epoch"] != best["epoch"]:
        raise ValueError(f"the best checkpoint of {run_dir} holds epoch {evaluation['best_epoch']}, "
                         f"the history says {best['epoch']}: a training is writing the folder "
                         "(try again in a moment), or the folder was modified")
    sessions = read_sessions(run_dir)
    wall = sum(s["seconds"] for s in sessions)
    commands = [s.get("command") for s in sessions]
    fused_sessions = [s["fused"] for s in sessions if s.get("fused")]
    if _session is not None:  # called by run(): its session is not in sessions.json yet
        session, session_start = _session
        wall += time.time() - session_start
        commands.append(session.get("command"))
        if session.get("fused"):
            fused_sessions.append(session["fused"])
    fused = None
    if run_kind(config) == "bbb":
        fused = {"used_in_training": (all(f["used"] for f in fused_sessions)
                                      if fused_sessions else None),
                 "training_reasons": sorted({f["reason"] for f in fused_sessions if f["reason"]}),
                 "used_in_evaluation": evaluation["fused"]["used"]}
    result = {
        "config": config["reproduce"],
        "method": config["method"],
        "description": describe(config),  # not config.json's: that may predate the overrides
        "hyperparameters": hyperparameters(config),
        "overrides": config.get("overrides", {}),
        "protocol": {
            "train_examples": evaluation["num_train"],
            "validation_examples": evaluation["num_validation"],
            "test_examples": evaluation["num_test"],
            "validation": f"the last {config['num_validation']} training images",
            "selection": "the epoch with the lowest validation error (posterior mean for BBB)",
        },
        "best_epoch": best["epoch"],
        "validation_error": best["validation_error"],
        "validation_error_recheck": evaluation["validation_error"],
        "test_error_mean": evaluation["test_error_mean"],
        "test_error_mc": evaluation["test_error_mc"],
        "mc_samples": evaluation["mc_samples"],
        "paper_test_error": PAPER_TEST_ERROR.get(config["reproduce"]),
        "epochs_run": int(metadata["epoch"]),
        "epochs_requested": config.get("epochs"),
        "finished": int(metadata["epoch"]) >= int(config.get("epochs") or 0),
        "history": history,
        "train_seconds": sum(record.get("seconds", 0.0) for record in history),
        "total_wall_seconds": wall,
        "report_seconds": time.time() - start,
        "machine": machine_info(ctx),
        "fused": fused,
        "num_weights": evaluation["num_weights"],
        "command": command,
        "commands": commands,
        "written": now(),
    }
    write_json(os.path.join(run_dir, RESULT), result)
    return result


def results_table(results):
    """A markdown table (Table 1 layout) of :func:`report` results.

    The 'changed' column lists each run's overrides of its configuration (``--set`` and the
    like), so that runs of one configuration stay apart.
    """
    lines = ["| configuration | changed | units/layer | # weights | epochs | best epoch "
             "| validation error | test error (mean) | test error (MC) | paper |",
             "| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for result in results:
        units = network_label(result["hyperparameters"]).replace(" ReLU", "")
        mc, paper = result["test_error_mc"], result.get("paper_test_error")
        mc_cell = "-" if mc is None else f"{100 * mc:.2f}% ({result['mc_samples']} samples)"
        paper_cell = "-" if paper is None else f"{paper:.2f}%"
        changed = format_overrides(result.get("overrides")) or "-"
        lines.append(
            f"| {result['config']} | {changed} | {units} | "
            f"{result['num_weights']:,} | {result['epochs_run']} | {result['best_epoch']} | "
            f"{100 * result['validation_error']:.2f}% | {100 * result['test_error_mean']:.2f}% | "
            f"{mc_cell} | {paper_cell} |")
    return "\n".join(lines) + "\n"


def recorded_result(run_dir):
    """The ``result.json`` of a run folder with the fields :func:`seeds_table` reads checked
    (the file may come from someone else), without evaluating anything again.

    Raises
    ------
    FileNotFoundError
        The folder has no ``result.json``.
    ValueError
        A field is missing or of the wrong type (one line naming the file).
    """
    result = read_result(run_dir)
    path = os.path.join(run_dir, RESULT)
    checked_field(result, "config", str, path)
    for key in ("validation_error", "test_error_mean"):
        checked_field(result, key, float, path)
    for key in ("paper_test_error", "test_error_mc", "train_seconds"):
        checked_field(result, key, (float, type(None)), path, optional=True)
    checked_field(result, "overrides", dict, path, optional=True)
    checked_field(checked_field(result, "hyperparameters", dict, path), "seed", int, path)
    return result


def recorded_history(run_dir):
    """(label, history) of a run folder's ``result.json`` for the curves of
    :func:`gluon_bbb.plots.error_curves` and :func:`gluon_bbb.plots.posterior_widths`: the
    label names the configuration, its changes and the seed; every record's 'epoch',
    'validation_error' and, where present, 'posterior' are checked (the file may come from
    someone else).

    Raises
    ------
    FileNotFoundError
        The folder has no ``result.json``.
    ValueError
        A missing or malformed field (one line naming the file).
    """
    result = recorded_result(run_dir)
    path = os.path.join(run_dir, RESULT)
    history = checked_field(result, "history", list, path)
    for record in history:
        if not isinstance(record, dict):
            raise CheckpointError(f"{path}: a history record is not an object")
        checked_field(record, "epoch", int, path)
        fields = [("validation_error", checked_field(record, "validation_error", float, path))]
        posterior = checked_field(record, "posterior", dict, path, optional=True)
        if posterior is not None:
            fields += [(key, checked_field(posterior, key, float, path))
                       for key in ("median_sigma", "snr_below_1")]
        for key, value in fields:
            if not math.isfinite(value):
                raise CheckpointError(f"{path}: {key} of epoch {record['epoch']} is {value!r}")
    if not history:
        raise CheckpointError(f"{path}: the history is empty")
    overrides = {key: value for key, value in (result.get("overrides") or {}).items()
                 if key != "seed"}
    changed = f" ({format_overrides(overrides)})" if overrides else ""
    return f"{result['config']}{changed}, seed {result['hyperparameters']['seed']}", history


def seeds_table(results):
    """A markdown table of results grouped by configuration and setting (the overrides but the
    seed): the validation and test error of every seed (the test error of the posterior mean,
    and of the Monte Carlo average where there is one), their mean and spread (largest minus
    smallest), the seed that the validation error selects, the paper's number and the training
    time of every seed.

    Parameters
    ----------
    results : list of dict
        :func:`report` results, or :func:`recorded_result` ones.

    Returns
    -------
    str, one row per configuration and setting, in the order they first appear.
    """
    def per_seed(group, key, scale=100.0, unit="%", digits=2):
        return ", ".join("-" if r.get(key) is None else f"{scale * r[key]:,.{digits}f}{unit}"
                         for r in group)

    groups = {}
    for result in results:
        overrides = {key: value for key, value in (result.get("overrides") or {}).items()
                     if key != "seed"}
        groups.setdefault((result["config"], format_overrides(overrides)), []).append(result)
    lines = ["| configuration | changed | seeds | validation per seed | test error per seed "
             "| MC test error per seed | mean | spread | selected on validation | paper "
             "| training seconds per seed |",
             "| --- | --- | --- | --- | --- | --- | ---: | ---: | --- | ---: | --- |"]
    for (config, changed), group in groups.items():
        group = sorted(group, key=lambda r: r["hyperparameters"]["seed"])
        errors = [100 * r["test_error_mean"] for r in group]
        selected = min(group, key=lambda r: (r["validation_error"], r["hyperparameters"]["seed"]))
        paper = group[0].get("paper_test_error")
        lines.append(
            f"| {config} | {changed or '-'} | "
            f"{', '.join(str(r['hyperparameters']['seed']) for r in group)} | "
            f"{per_seed(group, 'validation_error')} | {per_seed(group, 'test_error_mean')} | "
            f"{per_seed(group, 'test_error_mc')} | "
            f"{sum(errors) / len(errors):.2f}% | "
            f"{max(errors) - min(errors):.2f} | seed {selected['hyperparameters']['seed']}: "
            f"{100 * selected['test_error_mean']:.2f}% | "
            f"{'-' if paper is None else f'{paper:.2f}%'} | "
            f"{per_seed(group, 'train_seconds', scale=1.0, unit='', digits=0)} |")
    return "\n".join(lines) + "\n"
