"""What the command modules share: option types and groups, file names, one-line results and the
logging of a command to its run folder."""
import argparse
import io
import logging
import math
import sys

from .. import data
from ..checkpoint import atomic_write_bytes
from ..experiments import configs

__all__ = ["PROG", "CHECKPOINT", "CONFIG", "METRICS", "LOG", "PRUNING_JSON", "PRUNING_MD",
           "FIGURES", "INPUT_SIZE", "MC_SAMPLES", "number", "fraction", "add_overrides",
           "add_trust", "add_common", "result_line", "save_figure", "log_to"]

logger = logging.getLogger("gluon_bbb.cli")


PROG = "gluon-bbb"


CHECKPOINT = "checkpoint.bbb"


CONFIG = "config.json"


METRICS = "metrics.json"


LOG = "train.log"


PRUNING_JSON = "pruning.json"


PRUNING_MD = "pruning.md"


FIGURES = {
    "training": "training_curves.png",
    "snr": "snr_density.png",
    "weights": "weight_density.png",
    "pruning": "pruning_curve.png",
}


INPUT_SIZE = 784


MC_SAMPLES = 10


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


def add_trust(parser):
    parser.add_argument(
        "--trust-pickled-state", action="store_true",
        help="when resuming from a checkpoint written by gluon_bbb before checkpoint format 2, "
             "unpickle its optimizer state instead of starting the optimizer afresh. "
             "Unpickling RUNS CODE FROM THE FILE: only for checkpoints you wrote yourself")


def add_common(parser):
    parser.add_argument("--ctx", default="cpu", help="'cpu', 'gpu' or 'gpu(i)'")
    parser.add_argument("--data-dir", default=None,
                        help=f"folder holding the data set (default: ${data.DATA_ENV_VAR}/<dataset>, "
                             "then MXNet's cache)")


def result_line(mean_error, mc_error, num_samples):
    return (f"test error: {100 * mean_error:.2f}% (posterior mean), "
            f"{100 * mc_error:.2f}% (MC {num_samples} samples)")


def save_figure(figure, path):
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=120)
    atomic_write_bytes(path, buffer.getvalue())


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
