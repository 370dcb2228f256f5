"""``gluon-bbb reproduce``, ``reproduce-report`` and ``search``: the paper's protocol
(:mod:`gluon_bbb.experiments`) on the command line."""
import argparse
import logging
import os

from ..context import resolve_context
from ..experiments import configs, protocol, runfolder
from ..experiments import search as grid_search
from .common import (MC_SAMPLES, add_common, add_overrides, add_trust, log_to, number,
                     train_into)

__all__ = ["add_parsers", "reproduce_command", "reproduce_report_command", "search_command"]

logger = logging.getLogger("gluon_bbb.cli")


def add_parsers(commands):
    """The ``reproduce``, ``reproduce-report`` and ``search`` commands."""
    rerun = commands.add_parser(
        "reproduce", help="train a configuration of the paper's MNIST Table 1 (resumable)",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
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
    add_common(rerun)
    rerun.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_trust(rerun)
    rerun.set_defaults(func=reproduce_command, command_line=None)

    rereport = commands.add_parser(
        "reproduce-report", help="test errors of the best epoch of runs (rewrites their result.json)",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    rereport.add_argument("run_dirs", nargs="+", metavar="RUN_DIR",
                          help="run folders (of 'train', 'reproduce' or a search trial)")
    rereport.add_argument("--mc-samples", type=number(int, 1, True), default=MC_SAMPLES,
                          help="weight samples of the Monte Carlo test error")
    add_common(rereport)
    rereport.set_defaults(func=reproduce_report_command, command_line=None)

    search = commands.add_parser(
        "search", help="validation errors of settings of the paper's hyperparameter grid",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        description="Train each setting for --epochs epochs (resumable) and tabulate the best "
                    "validation error of each in OUTPUT_DIR/search.json and search.md. The "
                    "settings are --settings, else the grid of the value lists below (default "
                    "the paper's), sampled down to --max-trials.")
    search.add_argument("--epochs", type=number(int, 1, True), required=True,
                        help="epochs of every setting")
    search.add_argument("--output-dir", default=os.path.join("results", "search"))
    search.add_argument("--base", default="bbb-mixture-400",
                        help="the Bayes-by-Backprop configuration the settings modify")
    search.add_argument("--settings", nargs="+", default=None, metavar="SETTING",
                        help="explicit settings such as lr=1e-4,num_samples=2,pi=0.25,"
                             "log_sigma1=1,log_sigma2=7 (keys left out keep --base's values)")
    grid = configs.PAPER_GRID
    search.add_argument("--lr", type=number(float, 0, False), nargs="+", default=grid["lr"])
    search.add_argument("--num-samples", type=number(int, 1, True), nargs="+",
                        default=grid["num_samples"])
    search.add_argument("--pi", type=float, nargs="+", default=grid["pi"])
    search.add_argument("--log-sigma1", type=float, nargs="+", default=grid["log_sigma1"],
                        help="values of -log sigma1")
    search.add_argument("--log-sigma2", type=float, nargs="+", default=grid["log_sigma2"],
                        help="values of -log sigma2")
    search.add_argument("--max-trials", type=number(int, 1, True), default=None,
                        help="run a seeded random sample of this many grid settings")
    search.add_argument("--search-seed", type=int, default=0, help="seed of that sample")
    search.add_argument("--dry-run", action="store_true",
                        help="print the settings and exit without training")
    add_overrides(search)
    add_common(search)
    search.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_trust(search)
    search.set_defaults(func=search_command, command_line=None)


def _overrides(args):
    overrides = {key: getattr(args, key) for key in ("hidden", "subset", "seed")
                 if getattr(args, key) is not None}
    for text in args.assignments or ():
        overrides.update(configs.parse_setting(text, configs.SEARCH_KEYS + configs.EXTRA_KEYS))
    return overrides


def reproduce_command(args):
    """``gluon-bbb reproduce``: trains (or continues) a configuration and writes result.json."""
    if args.list:
        print(_configurations_table())
        return 0
    if args.name is None:
        raise ValueError("give a configuration NAME (see 'gluon-bbb reproduce --list')")
    config = configs.get_config(args.name, **_overrides(args))
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
    """``gluon-bbb reproduce-report``: rewrites result.json of each folder, prints a table."""
    results = []
    for run_dir in args.run_dirs:
        results.append(protocol.report(run_dir, mc_samples=args.mc_samples,
                                        data_dir=args.data_dir, ctx=args.ctx,
                                        command=args.command_line))
    print(protocol.results_table(results), end="")
    return 0


def search_command(args):
    """``gluon-bbb search``: trains each setting and writes search.json and search.md."""
    if args.settings:
        settings = [configs.parse_setting(text) for text in args.settings]
    else:
        settings = grid_search.grid_settings({"lr": args.lr, "num_samples": args.num_samples,
                                            "pi": args.pi, "log_sigma1": args.log_sigma1,
                                            "log_sigma2": args.log_sigma2})
        if not settings:
            raise ValueError("the grid has no setting with --log-sigma2 > --log-sigma1")
        if args.max_trials is not None:
            settings = grid_search.sample_settings(settings, args.max_trials, seed=args.search_seed)
    if args.dry_run:
        for setting in settings:
            print(",".join(f"{key}={value:g}" for key, value in setting.items()))
        return 0
    resolve_context(args.ctx)
    if args.base not in configs.CONFIGS or configs.CONFIGS[args.base]["method"] != "bbb":
        # checked before any folder exists
        raise ValueError(f"the search base must be a Bayes-by-Backprop configuration, got {args.base!r}")
    os.makedirs(args.output_dir, exist_ok=True)
    with log_to(os.path.join(args.output_dir, "search.log")):
        grid_search.search(settings, args.epochs, args.output_dir, base=args.base,
                         overrides=_overrides(args), data_dir=args.data_dir, ctx=args.ctx,
                         progress=not args.no_progress, command=args.command_line,
                         trust_pickled_state=args.trust_pickled_state)
    with open(os.path.join(args.output_dir, grid_search.SEARCH_MD), encoding="utf-8") as handle:
        print(handle.read(), end="")
    return 0
