"""``gluon-bbb search`` and ``search-report``: the hyperparameter search on Optuna
(:mod:`gluon_bbb.experiments.search`), on one machine or many sharing one database."""
import argparse
import logging
import os
import shutil
import subprocess
import sys
import tempfile

from ..context import resolve_context
from ..experiments import configs, spaces
from .common import (MC_SAMPLES, PROG, HelpFormatter, add_common, add_overrides, add_training_options, log_to,
                     number, overrides_of)

__all__ = ["add_parsers", "search_command", "search_report_command"]

logger = logging.getLogger("gluon_bbb.cli")


SEARCH_LOG = "search.log"


def add_parsers(commands):
    """The ``search`` and ``search-report`` commands."""
    search = commands.add_parser(
        "search", help="hyperparameter search of the paper's protocol on Optuna (resumable)",
        formatter_class=HelpFormatter,
        description="Train settings of a configuration (Bayes by Backprop with either prior, "
                    "or an SGD or dropout baseline), each an ordinary "
                    "resumable run folder under OUTPUT_DIR/trials, and record their best "
                    "validation errors in an Optuna study (OUTPUT_DIR/study.db, or --storage). "
                    "Run the same command on several machines with one --storage URL to share "
                    "the study. The test set is never touched: see 'search-report'.")
    search.add_argument("--epochs", type=number(int, 1, True), required=True,
                        help="epochs of every trial (Hyperband's maximum)")
    search.add_argument("--output-dir", default=os.path.join("results", "search"))
    search.add_argument("--base", default="bbb-mixture-400",
                        help="the configuration the settings modify; its kind decides the keys "
                             "searched: " + "; ".join(f"{kind}: {', '.join(keys)}" for kind, keys
                                                      in spaces.SPACE_KEYS.items()))
    grid = configs.PAPER_GRID
    default = " (a scale-mixture base: the paper's grid, {}; other bases: the base's value)"
    search.add_argument("--lr", type=number(float, 0, False), nargs="+", default=None,
                        help="learning rates" + default.format(grid["lr"]))
    search.add_argument("--num-samples", type=number(int, 1, True), nargs="+", default=None,
                        help="samples per step" + default.format(grid["num_samples"]))
    search.add_argument("--pi", type=float, nargs="+", default=None,
                        help="mixture weights" + default.format(grid["pi"]))
    search.add_argument("--neg-log-sigma1", type=float, nargs="+", default=None,
                        help="values of -log sigma1" + default.format(grid["neg_log_sigma1"]))
    search.add_argument("--neg-log-sigma2", type=float, nargs="+", default=None,
                        help="values of -log sigma2" + default.format(grid["neg_log_sigma2"]))
    search.add_argument("--sigma", type=number(float, 0, False), nargs="+", default=None,
                        help="the Gaussian prior's sigma (a Gaussian base)")
    search.add_argument("--momentum", type=float, nargs="+", default=None,
                        help="SGD momentum (a baseline)")
    search.add_argument("--dropout", type=float, nargs="+", default=None,
                        help="dropout rates (a dropout baseline)")
    search.add_argument("--optimizer", nargs="+", default=None,
                        help="optimizers to search; None keeps the base's")
    search.add_argument("--lr-decay", type=float, nargs="+", default=None,
                        help="per-epoch learning-rate decays to search; None keeps the base's")
    search.add_argument("--sampler", choices=spaces.SAMPLERS, default="grid",
                        help="grid: every setting once (or a seeded sample of --max-trials); "
                             "tpe or random: --max-trials sampled settings")
    search.add_argument("--pruner", choices=spaces.PRUNERS, default="hyperband",
                        help="stop unpromising trials early on their per-epoch validation error")
    search.add_argument("--max-trials", type=number(int, 1, True), default=None,
                        help="distinct settings of tpe/random (a setting drawn again replays its "
                             "trial and does not count); for grid, a seeded random sample of the grid")
    search.add_argument("--search-seed", type=number(int, 0, True), default=0,
                        help="seeds the grid's sample and the sampler of the study's creator "
                             "(workers that join add a salt of their host and process)")
    search.add_argument("--storage", default=None, metavar="URL",
                        help="SQLAlchemy URL of the study's database, e.g. "
                             "postgresql://user@host/db with the password in ~/.pgpass or "
                             "PGPASSWORD (a password in the URL is hidden in what the search "
                             "writes) (default: sqlite:///OUTPUT_DIR/study.db)")
    search.add_argument("--workers", type=number(int, 1, True), default=1,
                        help="worker processes on this machine")
    search.add_argument("--heartbeat", type=number(int, 1, True), default=60,
                        help="seconds between a running trial's heartbeats; a trial silent for "
                             "3 of them is failed and retried, resuming its run folder")
    search.add_argument("--worker-index", type=number(int, 0, True), default=0,
                        help=argparse.SUPPRESS)
    search.add_argument("--start-together", default=None, help=argparse.SUPPRESS)  # FOLDER:N
    search.add_argument("--dry-run", action="store_true",
                        help="print the grid's settings and exit without training")
    add_overrides(search)
    add_training_options(search)
    search.set_defaults(func=search_command, command_line=None)

    report = commands.add_parser(
        "search-report", help="search.md and figures of a search; its best trial on the test set",
        formatter_class=HelpFormatter)
    report.add_argument("search_dir", metavar="SEARCH_DIR", help="folder written by 'search'")
    report.add_argument("--storage", default=None, metavar="URL",
                        help="the study's database (default: SEARCH_DIR/study.db)")
    report.add_argument("--mc-samples", type=number(int, 1, True), default=MC_SAMPLES,
                        help="weight samples of the best trial's Monte Carlo test error")
    report.add_argument("--no-figures", action="store_true", help="write search.md only")
    report.add_argument("--print-best", action="store_true",
                        help="only print the best trial's setting as KEY=VALUE,... (what "
                             "'reproduce --set' takes), without touching the test set")
    add_common(report)
    report.set_defaults(func=search_report_command, command_line=None)


def _optuna_modules():
    """The search and its report, which need Optuna (the ``search`` extra): imported when a
    search command runs, so the other commands start without it."""
    try:
        from ..experiments import search, search_report
    except ModuleNotFoundError as error:
        if error.name and error.name.split(".")[0] in ("optuna", "sqlalchemy"):
            raise ValueError("the search needs Optuna: pip install 'gluon_bbb[search]'") from None
        raise
    return search, search_report


def _storage_errors(args, folder):
    """``with _storage_errors(args, folder):`` -- errors and log records of the study's storage
    with its password hidden (:func:`gluon_bbb.experiments.search.storage_errors`)."""
    optuna_search, _ = _optuna_modules()
    return optuna_search.storage_errors(optuna_search.storage_url(folder, args.storage))


def _space(args):
    keys = dict.fromkeys(key for kind_keys in spaces.SPACE_KEYS.values() for key in kind_keys)
    values = {key: getattr(args, key) for key in keys if getattr(args, key) is not None}
    return spaces.search_space(args.base, **values)


def search_command(args):
    """``gluon-bbb search``: work on the study (with ``--workers`` processes); exit code."""
    space = _space(args)
    if args.dry_run:
        settings = spaces.grid_settings(space, args.base)
        if args.max_trials is not None:
            settings = spaces.sample_settings(settings, args.max_trials, seed=args.search_seed)
        for setting in settings:
            print(spaces.format_setting(setting))
        return 0
    resolve_context(args.ctx)
    optuna_search, _ = _optuna_modules()
    options = dict(base=args.base, overrides=overrides_of(args), sampler=args.sampler,
                   pruner=args.pruner, max_trials=args.max_trials, seed=args.search_seed,
                   storage=args.storage, heartbeat_interval=args.heartbeat,
                   data_dir=args.data_dir, ctx=args.ctx, progress=not args.no_progress,
                   command=args.command_line)
    optuna_search.study_settings(space, args.epochs, args.base, options["overrides"],
                                 args.sampler, args.pruner, args.max_trials, args.search_seed)
    if args.storage:  # a bad URL is refused before the folder exists
        optuna_search.open_storage(args.storage)
    os.makedirs(args.output_dir, exist_ok=True)
    if args.workers > 1:
        return _spawn_workers(args, space, options)
    with log_to(os.path.join(args.output_dir, SEARCH_LOG)):
        start_together = None
        if args.start_together:  # set by _spawn_workers
            folder, _, count = args.start_together.rpartition(":")
            start_together = (folder, int(count))
        study = optuna_search.search(space, args.epochs, args.output_dir,
                                     worker=args.worker_index, start_together=start_together,
                                     **options)
    with _storage_errors(args, args.output_dir):
        _print_summary(study, args.output_dir)
    return 0


def _spawn_workers(args, space, options):
    """Create the study here (so its grid is enqueued once), then run ``--workers`` copies of
    this command, each one worker; the exit code is the worst of theirs. The copies run the
    arguments as given (``args.argv``): the recorded command line hides passwords."""
    optuna_search, search_report = _optuna_modules()
    url = optuna_search.storage_url(args.output_dir, args.storage)
    settings = optuna_search.study_settings(space, args.epochs, options["base"],
                                             options["overrides"], args.sampler, args.pruner,
                                             args.max_trials, args.search_seed)
    with optuna_search.storage_errors(url):
        optuna_search.open_study(optuna_search.open_storage(url, args.heartbeat), settings)
    # the workers meet before their first trial, so each takes one of the first ones
    barrier = tempfile.mkdtemp(prefix=".start-", dir=args.output_dir)
    processes = []
    try:
        for index in range(args.workers):
            command = [sys.executable, "-m", "gluon_bbb"] + args.argv + [
                "--workers", "1", "--worker-index", str(index),
                "--start-together", f"{barrier}:{args.workers}"]
            processes.append(subprocess.Popen(command))
        codes = [process.wait() for process in processes]
    finally:
        shutil.rmtree(barrier, ignore_errors=True)
    worst = max(codes, key=abs)
    with optuna_search.storage_errors(url):
        _print_summary(search_report.load_search(args.output_dir, args.storage), args.output_dir)
    return worst


def _print_summary(study, output_dir):
    _, search_report = _optuna_modules()
    rows = search_report.trial_rows(study)
    counts = {}
    for row in rows:
        counts[row["state"]] = counts.get(row["state"], 0) + 1
    line = ", ".join(f"{count} {state}" for state, count in sorted(counts.items()))
    print(f"{output_dir}: {len(rows)} trials ({line})")
    best = search_report.best_row(rows)
    if best is not None:
        print(f"best validation error {100 * best['value']:.2f}%: trial {best['number']}, "
              f"{best['folder']}")
    print(f"'{PROG} search-report {output_dir}' writes search.md and the figures")


def search_report_command(args):
    """``gluon-bbb search-report``: writes search.md and the figures; prints search.md (or,
    with ``--print-best``, only the best setting)."""
    _, search_report = _optuna_modules()
    if args.print_best:
        with _storage_errors(args, args.search_dir):
            print(search_report.best_setting(search_report.load_search(args.search_dir,
                                                                       args.storage)))
        return 0
    search_report.report_search(args.search_dir, storage=args.storage,
                                mc_samples=args.mc_samples, data_dir=args.data_dir,
                                ctx=args.ctx, figures=not args.no_figures,
                                command=args.command_line)
    with open(os.path.join(args.search_dir, search_report.SEARCH_MD), encoding="utf-8") as handle:
        print(handle.read(), end="")
    return 0
