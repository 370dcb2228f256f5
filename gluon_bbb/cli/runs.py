"""``gluon-bbb evaluate``, ``prune`` and ``plot``: the commands that read a run folder of
``train`` or ``reproduce`` and report on its (best) network."""
import argparse
import logging
import os

import mxnet as mx
import numpy as np

from .. import data, plots, pruning
from ..checkpoint import atomic_write_bytes, read_json, write_json
from ..context import resolve_context
from ..experiments import protocol, runfolder
from ..experiments.runners import make_bbb_trainer
from .common import (CHECKPOINT, CONFIG, FIGURES, MC_SAMPLES, PROG, PRUNING_JSON, PRUNING_MD,
                     add_common, fraction, number, result_line, save_figure)
from .train import checked_train_config

__all__ = ["add_parsers", "read_config", "load_run", "evaluate_command", "reproduce_line",
           "prune_command", "plot_command"]

logger = logging.getLogger("gluon_bbb.cli")


def add_parsers(commands):
    """The ``evaluate``, ``prune`` and ``plot`` commands."""
    evaluate = commands.add_parser("evaluate", help="test error of a trained run",
                                   formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    evaluate.add_argument("run_dir", metavar="RUN_DIR",
                          help="folder written by 'train' or 'reproduce' (its best epoch)")
    evaluate.add_argument("--num-samples", type=number(int, 1, True), default=MC_SAMPLES,
                          help="weight samples of the Monte Carlo average")
    add_common(evaluate)
    evaluate.set_defaults(func=evaluate_command)

    prune = commands.add_parser(
        "prune", help="test error after removing weights (Table 2); writes pruning.json/.md",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    prune.add_argument("run_dir", metavar="RUN_DIR", help="folder written by 'train'")
    prune.add_argument("--fractions", type=fraction, nargs="+",
                       default=list(pruning.DEFAULT_FRACTIONS), metavar="FRACTION",
                       help="proportions of the weights to remove, each in [0, 1)")
    prune.add_argument("--method", dest="methods", choices=pruning.METHODS, nargs="+",
                       default=list(pruning.METHODS),
                       help="remove the lowest signal-to-noise ratio |mu|/sigma, or the "
                            "lowest |mu|, first")
    add_common(prune)
    prune.set_defaults(func=prune_command)

    plot = commands.add_parser("plot", help="PNG figures of a run, written into RUN_DIR",
                               formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    plot.add_argument("run_dir", metavar="RUN_DIR", help="folder written by 'train'")
    plot.add_argument("--ctx", default="cpu", help="'cpu', 'gpu' or 'gpu(i)'")
    plot.set_defaults(func=plot_command)


def read_config(run_dir):
    """The ``config.json`` of a run folder, or a FileNotFoundError that says what is wrong."""
    config_path = os.path.join(run_dir, CONFIG)
    if not os.path.isfile(config_path):
        raise FileNotFoundError(f"{config_path} not found: is {run_dir} a folder written "
                                f"by '{PROG} train'?")
    config = read_json(config_path, "a run configuration")
    if "reproduce" in config:
        return runfolder.checked_stored_config(config, config_path)
    return checked_train_config(config, config_path)


def load_run(args, with_test_data=True):
    """The configuration, the trainer restored from the checkpoint, and the test loader.

    For a ``reproduce`` run folder, the trainer holds the best epoch on validation.
    """
    config = read_config(args.run_dir)
    checkpoint = CHECKPOINT
    if "reproduce" in config:
        if config.get("method") != "bbb":
            raise ValueError(f"{args.run_dir} holds the deterministic baseline "
                             f"{config['reproduce']}: only '{PROG} evaluate' applies to it")
        checkpoint = runfolder.FILES["bbb"]["best"]
    ctx = resolve_context(args.ctx)
    mx.random.seed(config["seed"])
    np.random.seed(config["seed"])
    test = None
    if with_test_data:
        test = data.get_loaders(config["dataset"], batch_size=config["batch_size"],
                                data_dir=args.data_dir or config["data_dir"],
                                preprocessing=config["preprocessing"],
                                subset=config["subset"], ctx=ctx)["test"]
    trainer = make_bbb_trainer(config, ctx)
    trainer.load(os.path.join(args.run_dir, checkpoint), optimizer=False)
    return config, trainer, test


def evaluate_command(args):
    """``gluon-bbb evaluate``: returns the exit code."""
    if "reproduce" in read_config(args.run_dir):
        return _evaluate_reproduce_run(args)
    _, trainer, test = load_run(args)
    mean_error = trainer.evaluate(test, num_samples=0)
    mc_error = trainer.evaluate(test, num_samples=args.num_samples)
    print(f"{args.run_dir} (epoch {trainer.epoch}, {test.num_examples} test examples)")
    print(result_line(mean_error, mc_error, args.num_samples))
    return 0


def _evaluate_reproduce_run(args):
    """``gluon-bbb evaluate`` on a reproduce run folder: the best epoch on validation."""
    config = runfolder.read_run_config(args.run_dir)
    errors = protocol.evaluate_run(args.run_dir, mc_samples=args.num_samples,
                                    data_dir=args.data_dir, ctx=args.ctx)
    print(f"{args.run_dir} ({config['reproduce']}, best epoch {errors['best_epoch']} on "
          f"validation, {errors['num_test']} test examples)")
    print(reproduce_line(errors))
    return 0


def reproduce_line(errors):
    if errors["test_error_mc"] is None:
        return f"test error: {100 * errors['test_error_mean']:.2f}% (deterministic network)"
    return result_line(errors["test_error_mean"], errors["test_error_mc"], errors["mc_samples"])


def prune_command(args):
    """``gluon-bbb prune``: prints the pruning table and writes pruning.json and pruning.md."""
    _, trainer, test = load_run(args)
    table = pruning.pruning_table(trainer, test, fractions=args.fractions, methods=args.methods)
    write_json(os.path.join(args.run_dir, PRUNING_JSON), {
        "epoch": trainer.epoch,
        "num_test_examples": test.num_examples,
        "rows": list(table),
    })
    heading = (f"Posterior-mean test error of {args.run_dir} (epoch {trainer.epoch}, "
               f"{test.num_examples} test examples) with weights removed; biases are kept.")
    text = f"{heading}\n\n{table.to_markdown()}\n"
    atomic_write_bytes(os.path.join(args.run_dir, PRUNING_MD), text.encode("utf-8"))
    print(text, end="")
    return 0


def plot_command(args):
    """``gluon-bbb plot``: writes the run's figures as PNGs into its folder."""
    config, trainer, _ = load_run(args, with_test_data=False)
    figures, cutoffs = {}, None
    pruning_path = os.path.join(args.run_dir, PRUNING_JSON)
    if os.path.isfile(pruning_path):
        rows = read_json(pruning_path, "a pruning table").get("rows")
        try:
            figures["pruning"] = plots.pruning_curve(rows)
        except (ValueError, TypeError, KeyError) as error:
            raise ValueError(f"{pruning_path} is not a pruning table ({error}): run "
                             f"'{PROG} prune' again") from None
        cutoffs = sorted({row["fraction"] for row in rows if 0 < row["fraction"] < 1}) or None
    mu, _ = pruning.posterior_parameters(trainer)
    figures["training"] = plots.training_curves(_run_history(args.run_dir, config, trainer))
    figures["snr"] = plots.log_snr_density(pruning.signal_to_noise(trainer), cutoffs=cutoffs)
    figures["weights"] = plots.weight_densities({
        "posterior sample": pruning.sample_weights(trainer, 1, seed=config["seed"]),
        "posterior mean": mu,
    })
    for key, figure in figures.items():
        path = os.path.join(args.run_dir, FIGURES[key])
        save_figure(figure, path)
        print(path)
    return 0


def _run_history(run_dir, config, trainer):
    """The per-epoch history to plot: for a ``reproduce`` folder the whole run from its
    ``result.json`` (the best checkpoint stops at the best epoch), with the evaluated split
    named 'validation_error'; otherwise the trainer's."""
    if "reproduce" not in config:
        return trainer.history
    if os.path.isfile(os.path.join(run_dir, runfolder.RESULT)):
        return runfolder.read_result(run_dir)["history"]
    return [runfolder.renamed_record(record) for record in trainer.history]
