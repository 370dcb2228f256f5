"""What the command modules share: option types and groups, file names, one-line results, the
logging of a command to its run folder and the training of a configuration into one."""
import argparse
import logging
import math
import os
import sys

from .. import data
from ..experiments import configs, protocol, runfolder, wording
from ..experiments.runlock import RunFolderLock

__all__ = ["PROG", "HelpFormatter", "PRUNING_JSON", "PRUNING_MD", "FIGURES", "MC_SAMPLES", "number", "fraction",
           "add_overrides", "overrides_of", "add_common", "add_training_options", "result_line",
           "errors_line",
           "log_to", "train_into"]

logger = logging.getLogger("gluon_bbb.cli")


PROG = "gluon-bbb"


class HelpFormatter(argparse.ArgumentDefaultsHelpFormatter):
    """Each option's help ends with its default, unless the help already says it or there is
    none to say (a default of None or False)."""

    def _get_help_string(self, action):
        text = action.help or ""
        if "default" in text or action.default is None or action.default is False \
                or action.default is argparse.SUPPRESS:
            return text
        return super()._get_help_string(action)


PRUNING_JSON = "pruning.json"


PRUNING_MD = "pruning.md"


FIGURES = {
    "training": "training_curves.png",
    "snr": "snr_density.png",
    "weights": "weight_density.png",
    "pruning": "pruning_curve.png",
}


#: Weight samples of a Monte Carlo test error, the protocol's.
MC_SAMPLES = protocol.MC_SAMPLES


def number(kind, low, inclusive):
    """An argparse type: ``kind`` values >= low (or > low), finite."""
    def parse(text):
        try:
            value = kind(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"invalid {kind.__name__} value: {text!r}") from None
        if not (math.isfinite(value) and (value >= low if inclusive else value > low)):
            raise argparse.ArgumentTypeError(f"must be {'>=' if inclusive else '>'} {low}, got {text}")
        return value
    return parse


def fraction(text):
    """An argparse type: a float in [0, 1)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid float value: {text!r}") from None
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"must be a fraction in [0, 1), got {text}")
    return value


def add_overrides(parser):
    """Options that change a reproduce configuration (smoke runs, replicates)."""
    parser.add_argument("--hidden", type=number(int, 1, True), nargs="+", default=None,
                        metavar="UNITS", help="override the hidden layers (smoke runs)")
    parser.add_argument("--subset", type=number(int, 1, True), default=None,
                        help="keep only the first N examples of each split (smoke runs)")
    parser.add_argument("--seed", type=number(int, 0, True), default=None,
                        help="override the seed (default 0), e.g. for replicates")
    parser.add_argument("--set", dest="assignments", nargs="+", default=None,
                        metavar="KEY=VALUE",
                        help="override hyperparameters, e.g. lr=1e-4,pi=0.25 lr_decay=0.98; keys: "
                             + ", ".join(configs.SEARCH_KEYS + configs.EXTRA_KEYS))


def overrides_of(args):
    """The configuration overrides of :func:`add_overrides`' options."""
    overrides = {key: getattr(args, key) for key in ("hidden", "subset", "seed")
                 if getattr(args, key) is not None}
    for text in args.assignments or ():
        overrides.update(wording.parse_setting(text, configs.SEARCH_KEYS + configs.EXTRA_KEYS))
    return overrides


def add_common(parser):
    parser.add_argument("--ctx", default="cpu", help="'cpu', 'gpu' or 'gpu(i)'")
    parser.add_argument("--data-dir", default=None,
                        help=f"folder holding the data set (default: ${data.DATA_ENV_VAR}/<dataset>, "
                             "then MXNet's cache)")


def add_training_options(parser):
    """The options of every command that trains: :func:`add_common` and ``--no-progress``."""
    add_common(parser)
    parser.add_argument("--no-progress", action="store_true", help="no progress bar")


def result_line(mean_error, mc_error, num_samples):
    return (f"test error: {100 * mean_error:.2f}% (posterior mean), "
            f"{100 * mc_error:.2f}% (MC {num_samples} samples)")


def errors_line(errors):
    """The test errors of a run's report or evaluation, on one line."""
    if errors["test_error_mc"] is None:
        return f"test error: {100 * errors['test_error_mean']:.2f}% (deterministic network)"
    return result_line(errors["test_error_mean"], errors["test_error_mc"], errors["mc_samples"])


def train_into(config, epochs, out, args):
    """Train ``config`` to ``epochs`` epochs in run folder ``out`` (continuing it) with
    :func:`gluon_bbb.experiments.run`, holding its writer lock and logging to its
    ``train.log``; prints the best epoch and its test errors. Used by ``train`` and
    ``reproduce``; ``args`` gives ``data_dir``, ``ctx``, ``mc_samples``, ``no_progress`` and
    ``command_line``."""
    with RunFolderLock(out), log_to(os.path.join(out, runfolder.LOG)):
        # found, or downloaded here, where --no-progress quiets the download's bar too
        data.find_or_fetch(config["dataset"], args.data_dir, progress=not args.no_progress)
        result = protocol.run(config, epochs, out, data_dir=args.data_dir, ctx=args.ctx,
                              mc_samples=args.mc_samples, progress=not args.no_progress,
                              command=args.command_line)
        logger.info("finish: %s; best epoch %d of %d, %.1f s; %s", errors_line(result),
                    result["best_epoch"], result["epochs_run"], result["total_wall_seconds"],
                    os.path.join(out, runfolder.RESULT))
    print(f"{out}: best epoch {result['best_epoch']} of {result['epochs_run']}, validation "
          f"error {100 * result['validation_error']:.2f}%")
    print(errors_line(result))
    return result


class log_to:  # noqa: N801 -- used like a function: ``with log_to(path):``
    """Send the 'gluon_bbb' logger's INFO records to a file (unless path is None) and to
    stderr while active."""

    def __init__(self, path):
        self.path = path

    def __enter__(self):
        self.logger = logging.getLogger("gluon_bbb")
        self.old_level = self.logger.level
        file_handler = (logging.NullHandler() if self.path is None
                        else logging.FileHandler(self.path, encoding="utf-8"))
        self.handlers = [file_handler, logging.StreamHandler(sys.stderr)]
        self.handlers[0].setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s: %(message)s"))
        self.handlers[1].setFormatter(logging.Formatter(f"{PROG}: %(message)s"))
        for handler in self.handlers:
            self.logger.addHandler(handler)
        self.logger.setLevel(logging.INFO)
        return self

    def __exit__(self, *exc_info):
        file_handler, console = self.handlers
        self.logger.removeHandler(console)  # main() reports the error on the console
        if exc_info[0] is not None:
            self.logger.error("stopped by %s: %s", exc_info[0].__name__, exc_info[1])
        self.logger.removeHandler(file_handler)
        file_handler.close()
        self.logger.setLevel(self.old_level)
        return False
