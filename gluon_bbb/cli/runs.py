"""``gluon-bbb evaluate``, ``prune`` and ``plot``: the commands that read a run folder (of
``train``, ``reproduce`` or a search trial: one format) and report on its best epoch."""
import argparse
import logging
import os

from .. import data, plots
from ..analysis import pruning
from ..io.checkpoint import atomic_write_bytes, read_json, write_json
from ..context import resolve_context
from ..experiments import protocol, runfolder
from .common import (FIGURES, MC_SAMPLES, PROG, HelpFormatter, PRUNING_JSON, PRUNING_MD, add_common, errors_line,
                     fraction, number)

__all__ = ["add_parsers", "load_run", "evaluate_command", "prune_command", "plot_command"]

logger = logging.getLogger("gluon_bbb.cli")


def add_parsers(commands):
    """The ``evaluate``, ``prune`` and ``plot`` commands."""
    evaluate = commands.add_parser("evaluate", help="test error of a trained run",
                                   formatter_class=HelpFormatter)
    evaluate.add_argument("run_dir", metavar="RUN_DIR",
                          help="run folder (of 'train', 'reproduce' or a search trial)")
    evaluate.add_argument("--num-samples", type=number(int, 1, True), default=MC_SAMPLES,
                          help="weight samples of the Monte Carlo average")
    evaluate.add_argument("--network", choices=protocol.NETWORKS, default="best",
                          help="the best epoch on validation, or the last epoch (the end of "
                               "training)")
    add_common(evaluate)
    evaluate.set_defaults(func=evaluate_command)

    prune = commands.add_parser(
        "prune", help="test error after removing weights (Table 2); writes pruning.json/.md",
        formatter_class=HelpFormatter)
    prune.add_argument("run_dir", metavar="RUN_DIR",
                       help="run folder of a Bayes-by-Backprop configuration")
    prune.add_argument("--fractions", type=fraction, nargs="+",
                       default=list(pruning.DEFAULT_FRACTIONS), metavar="FRACTION",
                       help="proportions of the weights to remove, each in [0, 1)")
    prune.add_argument("--method", dest="methods", choices=pruning.METHODS, nargs="+",
                       default=list(pruning.METHODS),
                       help="remove the lowest signal-to-noise ratio |mu|/sigma, or the "
                            "lowest |mu|, first")
    prune.add_argument("--network", choices=protocol.NETWORKS, default="best",
                       help="prune the best epoch on validation, or the last epoch (the paper's "
                            "Table 2 network; writes pruning-last.json/.md)")
    add_common(prune)
    prune.set_defaults(func=prune_command)

    plot = commands.add_parser("plot", help="PNG figures of a run, written into RUN_DIR",
                               formatter_class=HelpFormatter)
    plot.add_argument("run_dir", metavar="RUN_DIR",
                      help="run folder of a Bayes-by-Backprop configuration")
    plot.add_argument("--ctx", default="cpu", help="'cpu', 'gpu' or 'gpu(i)'")
    plot.set_defaults(func=plot_command)


def load_run(args, with_test_data=True, network="best"):
    """The configuration, a trainer holding the run's best epoch on validation (or its last
    epoch, ``network='last'``), and the test loader (None without ``with_test_data``)."""
    config = runfolder.read_run_config(args.run_dir)
    if config["method"] != "bbb":
        raise ValueError(f"{args.run_dir} holds the deterministic baseline "
                         f"{config['reproduce']}: only '{PROG} evaluate' applies to it")
    ctx = resolve_context(args.ctx)
    test = None
    if with_test_data:
        test = data.get_loaders(config["dataset"], batch_size=config["batch_size"],
                                data_dir=args.data_dir or config["data_dir"],
                                preprocessing=config["preprocessing"],
                                subset=config["subset"], ctx=ctx)["test"]
    _, trainer = protocol.load_network(args.run_dir, network=network, ctx=ctx)
    return config, trainer, test


def evaluate_command(args):
    """``gluon-bbb evaluate``: the test errors of a run folder's best epoch on validation."""
    config = runfolder.read_run_config(args.run_dir)
    errors = protocol.evaluate_run(args.run_dir, mc_samples=args.num_samples,
                                    data_dir=args.data_dir, ctx=args.ctx, network=args.network)
    which = "best epoch" if args.network == "best" else "last epoch"
    print(f"{args.run_dir} ({config['reproduce']}, {which} {errors['epoch']}"
          f"{' on validation' if args.network == 'best' else ''}, {errors['num_test']} test "
          "examples)")
    print(errors_line(errors))
    return 0


def prune_command(args):
    """``gluon-bbb prune``: prints the pruning table and writes pruning.json and pruning.md."""
    _, trainer, test = load_run(args, network=args.network)
    table = pruning.pruning_table(trainer, test, fractions=args.fractions, methods=args.methods)
    suffix = "" if args.network == "best" else "-last"
    json_name, md_name = (name.replace(".", f"{suffix}.", 1) for name in (PRUNING_JSON, PRUNING_MD))
    write_json(os.path.join(args.run_dir, json_name), {
        "epoch": trainer.epoch,
        "num_test_examples": test.num_examples,
        "rows": list(table),
    })
    heading = (f"Posterior-mean test error of {args.run_dir} (epoch {trainer.epoch}, "
               f"{test.num_examples} test examples) with weights removed; biases are kept.")
    text = f"{heading}\n\n{table.to_markdown()}\n"
    atomic_write_bytes(os.path.join(args.run_dir, md_name), text.encode("utf-8"))
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
    figures["training"] = plots.training_curves(_run_history(args.run_dir, trainer))
    figures["snr"] = plots.log_snr_density(pruning.signal_to_noise(trainer), cutoffs=cutoffs)
    figures["weights"] = plots.weight_densities({
        "posterior sample": pruning.sample_weights(trainer, 1, seed=config["seed"]),
        "posterior mean": mu,
    })
    for key, figure in figures.items():
        path = os.path.join(args.run_dir, FIGURES[key])
        plots.save_png(figure, path)
        print(path)
    return 0


def _run_history(run_dir, trainer):
    """The per-epoch history to plot, with the evaluated split named 'validation_error': the
    whole run from ``result.json`` when there is one (the best checkpoint stops at the best
    epoch), else the best checkpoint's."""
    if os.path.isfile(os.path.join(run_dir, runfolder.RESULT)):
        return runfolder.read_result(run_dir)["history"]
    return [runfolder.renamed_record(record) for record in trainer.history]
