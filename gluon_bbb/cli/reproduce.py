"""``gluon-bbb reproduce`` and ``reproduce-report``: the paper's protocol
(:mod:`gluon_bbb.experiments`) on the command line."""
import argparse
import logging
import os

from ..context import resolve_context
from ..experiments import configs, protocol, runfolder
from .common import (MC_SAMPLES, HelpFormatter, add_common, add_overrides, add_training_options, number,
                     overrides_of, train_into)

__all__ = ["add_parsers", "reproduce_command", "reproduce_report_command"]

logger = logging.getLogger("gluon_bbb.cli")


def add_parsers(commands):
    """The ``reproduce`` and ``reproduce-report`` commands."""
    rerun = commands.add_parser(
        "reproduce", help="train a configuration of the paper's MNIST Table 1 (resumable)",
        formatter_class=HelpFormatter,
        description="Train on the first 50,000 MNIST training images, keep the best epoch on "
                    "the last 10,000, report its test error (result.json). Running the same "
                    "command again continues after the last completed epoch.")
    rerun.add_argument("name", nargs="?", metavar="NAME", help="configuration (see --list)")
    rerun.add_argument("--list", action="store_true", help="list the configurations and exit")
    rerun.add_argument("--epochs", type=number(int, 1, True), default=None,
                       help="total number of epochs (default: those of the run in --output-dir)")
    rerun.add_argument("--output-dir", default=None, help="run folder (default: results/NAME)")
    rerun.add_argument("--mc-samples", type=number(int, 1, True), default=MC_SAMPLES,
                       help="weight samples of the Monte Carlo test error")
    add_overrides(rerun)
    add_training_options(rerun)
    rerun.set_defaults(func=reproduce_command, command_line=None)

    rereport = commands.add_parser(
        "reproduce-report", help="test errors of the best epoch of runs (rewrites their result.json)",
        formatter_class=HelpFormatter)
    rereport.add_argument("run_dirs", nargs="+", metavar="RUN_DIR",
                          help="run folders (of 'train', 'reproduce' or a search trial)")
    rereport.add_argument("--mc-samples", type=number(int, 1, True), default=MC_SAMPLES,
                          help="weight samples of the Monte Carlo test error")
    rereport.add_argument("--recorded", action="store_true",
                          help="evaluate nothing: read each folder's result.json and print one "
                               "row per configuration and setting over its seeds (each seed's "
                               "test error, mean, spread, the seed chosen on validation)")
    rereport.add_argument("--curves", metavar="PNG",
                          help="also draw every run's validation error against epoch, zoomed "
                               "on the last tenths of a percent, beside the paper's numbers "
                               "(Figure 2), into this PNG")
    rereport.add_argument("--widths", metavar="PNG",
                          help="also draw the posterior's median sigma and share of weights "
                               "with SNR < 1 against epoch into this PNG")
    add_common(rereport)
    rereport.set_defaults(func=reproduce_report_command, command_line=None)


def reproduce_command(args):
    """``gluon-bbb reproduce``: trains (or continues) a configuration and writes result.json."""
    if args.list:
        print(_configurations_table())
        return 0
    if args.name is None:
        raise ValueError("give a configuration NAME (see 'gluon-bbb reproduce --list')")
    config = configs.get_config(args.name, **overrides_of(args))
    out = args.output_dir or os.path.join("results", args.name)
    stored = runfolder.check_run_dir(out, config)  # refuses another configuration
    epochs = args.epochs
    if epochs is None:
        if stored is None or not stored.get("epochs"):
            raise ValueError("--epochs is required for a new run")
        epochs = int(stored["epochs"])
    resolve_context(args.ctx)  # fail on a missing GPU before creating the folder
    train_into(config, epochs, out, args)
    return 0


def _configurations_table():
    lines = [f"{'NAME':<18} {'PAPER':>6}  DESCRIPTION"]
    for name, description in configs.DESCRIPTIONS.items():
        paper = configs.PAPER_TEST_ERROR.get(name)
        lines.append(f"{name:<18} {'' if paper is None else f'{paper:.2f}%':>6}  {description}")
    return "\n".join(lines)


def reproduce_report_command(args):
    """``gluon-bbb reproduce-report``: rewrites result.json of each folder, prints a table;
    with ``--recorded``, reads the result.json files and prints the table over seeds."""
    if args.recorded:
        print(protocol.seeds_table([protocol.recorded_result(run_dir)
                                    for run_dir in args.run_dirs]), end="")
    else:
        results = []
        for run_dir in args.run_dirs:
            results.append(protocol.report(run_dir, mc_samples=args.mc_samples,
                                            data_dir=args.data_dir, ctx=args.ctx,
                                            command=args.command_line))
        print(protocol.results_table(results), end="")
    if args.curves or args.widths:
        _draw_curves(args.run_dirs, args.curves, args.widths)
    return 0


def _draw_curves(run_dirs, curves_path, widths_path):
    """The figures of ``reproduce-report --curves/--widths`` from the folders' result.json."""
    from .. import plots  # matplotlib only when a figure is asked for

    histories = {}
    for run_dir in run_dirs:
        label, history = protocol.recorded_history(run_dir)
        histories[label if label not in histories else f"{label} [{run_dir}]"] = history
    if curves_path:
        paper = {}
        for run_dir in run_dirs:
            result = protocol.recorded_result(run_dir)
            if result.get("paper_test_error") is not None:
                paper[f"paper, {result['config']} (test)"] = result["paper_test_error"]
        plots.save_png(plots.error_curves(histories, reference=paper), curves_path)
        print(f"wrote {curves_path}")
    if widths_path:
        plots.save_png(plots.posterior_widths(histories), widths_path)
        print(f"wrote {widths_path}")
