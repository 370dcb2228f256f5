"""The ``gluon-bbb`` command line: train an MLP with Bayes by Backprop, evaluate, prune and
plot a run; reproduce the paper's MNIST configurations and search its hyperparameter grid.

Examples::

    gluon-bbb train --dataset mnist --hidden 400 400 --epochs 10
    gluon-bbb train --output-dir runs/a --epochs 20 --resume     # continue runs/a
    gluon-bbb evaluate runs/a --num-samples 100
    gluon-bbb prune runs/a --fractions 0 0.5 0.75 0.95 0.98 --method snr naive
    gluon-bbb plot runs/a
    gluon-bbb reproduce --list                                   # the paper's configurations
    gluon-bbb reproduce bbb-mixture-1200 --epochs 600            # -> results/bbb-mixture-1200
    gluon-bbb evaluate results/bbb-mixture-1200                  # re-check its best epoch
    gluon-bbb search --epochs 20 --max-trials 10 --output-dir results/search
    gluon-bbb uncertainty results/bbb-mixture-400 results/sgd-400 --output-dir docs/uncertainty
    gluon-bbb bandit --steps 2000 --output-dir results/bandit     # the mushroom bandit
    gluon-bbb continual --setting vcl --tasks 10 --run-dir runs/vcl  # resumable, task by task
    gluon-bbb data fetch                                         # every data set, verified

``train`` (hyperparameters of your own), ``reproduce`` (one of the paper's configurations) and
each ``search`` trial write one run-folder format, described in
:mod:`gluon_bbb.experiments.protocol`: ``config.json``, ``checkpoint.bbb`` (every epoch),
``best.bbb`` (the best epoch on validation), ``sessions.json``, ``train.log`` and
``result.json``. ``evaluate``, ``prune``, ``plot``, ``uncertainty`` and ``reproduce-report``
read any of them and use the best epoch. ``prune`` adds ``pruning.json`` and ``pruning.md``
(the paper's Table 2), ``plot`` the PNG figures, ``uncertainty`` ``uncertainty.json`` and
``uncertainty.md`` (:mod:`gluon_bbb.experiments.uncertainty_eval`); ``bandit`` writes the
folder described in :mod:`gluon_bbb.experiments.bandit_run`, ``continual`` the one described in
:mod:`gluon_bbb.experiments.continual`.

Each command group is one module of this package, owning its parser and its command:
``train``, ``runs`` (evaluate, prune, plot), ``reproduce`` (reproduce, reproduce-report),
``search`` (search, search-report), ``uncertainty``, ``bandit``, ``continual`` and ``data`` (fetch, list,
verify); ``common`` holds what they share.
"""
import argparse
import sys

from ..experiments.machine import recorded_command
from ..io.locks import LockTimeout
from ..trainer import NonFiniteLossError
from ..version import __version__
from . import bandit, continual, data, reproduce, runs, search, train, uncertainty
from .common import PROG

__all__ = ["build_parser", "main"]


def build_parser():
    """The argument parser of ``gluon-bbb``: each command module adds its own commands."""
    parser = argparse.ArgumentParser(prog=PROG, description="Bayes by Backprop for MXNet Gluon.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True

    for module in (train, runs, reproduce, search, uncertainty, bandit, continual, data):
        module.add_parsers(commands)
    return parser


def main(argv=None):
    """Run ``gluon-bbb``.

    Parameters
    ----------
    argv : list of str, optional
        Arguments without the program name; default ``sys.argv[1:]``.

    Returns
    -------
    int
        0 on success; 2 for a usage error (bad option, missing data or GPU, bad prior) or a
        lock another process held too long; 1 when training diverged; 130 when interrupted.
    """
    argv = sys.argv[1:] if argv is None else [str(arg) for arg in argv]
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as stop:  # --help, --version or a usage error already printed
        return stop.code if isinstance(stop.code, int) else 2
    if hasattr(args, "command_line"):  # recorded in the run folders, without passwords
        args.command_line = recorded_command([PROG] + argv)
        args.argv = argv  # what reruns it (the search's worker processes), passwords and all
    try:
        return args.func(args)
    except (FileNotFoundError, ValueError, LockTimeout) as error:  # includes DataNotFoundError
        return _fail(error, 2)
    except NonFiniteLossError as error:
        return _fail(error, 1)
    except KeyboardInterrupt:
        return _fail(getattr(args, "interrupted", None)
                     or "interrupted (the last completed epoch's checkpoint is intact)", 130)


def _fail(error, code):
    print(f"{PROG}: error: {error}", file=sys.stderr)
    return code
