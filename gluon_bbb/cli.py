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

A run folder holds ``config.json`` (the options), ``checkpoint.bbb`` (written after every
epoch), ``train.log`` and, when training is finished, ``metrics.json``. ``prune`` adds
``pruning.json`` and ``pruning.md`` (the paper's Table 2), ``plot`` the PNG figures.
``reproduce`` run folders are described in :mod:`gluon_bbb.experiments.protocol`; ``evaluate``, ``prune``,
``plot`` and ``uncertainty`` use their best epoch on validation. ``uncertainty`` writes
``uncertainty.json`` and ``uncertainty.md`` (:mod:`gluon_bbb.experiments.uncertainty_eval`), ``bandit`` the
folder described in :mod:`gluon_bbb.experiments.bandit_run`.
"""
import argparse
import io
import logging
import math
import os
import shlex
import sys
import time

import mxnet as mx
import numpy as np
from mxnet import nd

from . import data, models, plots, pruning
from .checkpoint import CheckpointError, atomic_write_bytes, read_json, write_json
from .context import resolve_context
from .experiments import bandit_run, configs, protocol, runfolder, uncertainty_eval
from .experiments import search as grid_search
from .loss import BBBLoss
from .machine import machine_info
from .priors import GaussianPrior, ScaleMixturePrior
from .runlock import RunFolderLock
from .trainer import BBBTrainer, NonFiniteLossError
from .version import __version__

__all__ = ["build_parser", "main"]

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

logger = logging.getLogger("gluon_bbb.cli")


# ---------------------------------------------------------------------------- arguments
def _number(kind, low, inclusive):
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


def _fraction(text):
    """An argparse type: a float in [0, 1)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"invalid float value: {text!r}") from None
    if not 0.0 <= value < 1.0:
        raise argparse.ArgumentTypeError(f"must be a fraction in [0, 1), got {text}")
    return value


def build_parser():
    """The argument parser of ``gluon-bbb`` and its train, evaluate, prune and plot commands."""
    parser = argparse.ArgumentParser(prog=PROG, description="Bayes by Backprop for MXNet Gluon.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    commands.required = True

    train = commands.add_parser("train", help="train an MLP on MNIST or Fashion-MNIST",
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    train.add_argument("--dataset", choices=data.DATASETS, default="mnist")
    train.add_argument("--hidden", type=_number(int, 1, True), nargs="+", default=[400, 400],
                       metavar="UNITS", help="units of each hidden layer")
    train.add_argument("--prior", choices=("gaussian", "scale-mixture"), default="scale-mixture")
    train.add_argument("--sigma", type=float, default=1.0, help="std of the Gaussian prior")
    train.add_argument("--pi", type=float, default=0.5, help="weight of the wide mixture component")
    train.add_argument("--log-sigma1", type=float, default=0.0,
                       help="-log sigma1 of the wide mixture component (the paper's convention)")
    train.add_argument("--log-sigma2", type=float, default=6.0,
                       help="-log sigma2 of the narrow mixture component")
    train.add_argument("--epochs", type=_number(int, 1, True), default=10,
                       help="total number of epochs (a resumed run trains only the missing ones)")
    train.add_argument("--batch-size", type=_number(int, 1, True), default=128)
    train.add_argument("--lr", type=_number(float, 0, False), default=1e-3, help="learning rate")
    train.add_argument("--optimizer", default="adam", help="any MXNet optimizer name")
    train.add_argument("--num-samples", type=_number(int, 1, True), default=1,
                       help="weight samples per training step")
    train.add_argument("--kl-weighting", choices=("uniform", "blundell"), default="uniform")
    train.add_argument("--kl-scale", type=_number(float, 0, False), default=1.0,
                       help="multiplies the complexity cost; below 1 tempers the posterior")
    train.add_argument("--rho-init", type=float, default=-5.0, help="initial rho, sigma = softplus(rho)")
    train.add_argument("--seed", type=int, default=0, help="seeds MXNet, NumPy and the trainer")
    _add_common(train)
    train.add_argument("--preprocessing", choices=data.PREPROCESSING_METHODS, default="paper")
    train.add_argument("--num-validation", type=_number(int, 0, True), default=0,
                       help="last training images held out; if > 0 they replace the test set "
                            "in the per-epoch evaluation")
    train.add_argument("--subset", type=_number(int, 1, True), default=None,
                       help="keep only the first N examples of each split (smoke runs)")
    train.add_argument("--output-dir", default=None,
                       help="run folder (default: runs/<dataset>-<prior>-<timestamp>)")
    train.add_argument("--resume", action="store_true",
                       help="continue from the checkpoint in --output-dir, if there is one")
    train.add_argument("--no-progress", action="store_true", help="no progress bar")
    _add_trust(train)
    train.set_defaults(func=train_command)

    evaluate = commands.add_parser("evaluate", help="test error of a trained run",
                                   formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    evaluate.add_argument("run_dir", metavar="RUN_DIR",
                          help="folder written by 'train' or 'reproduce' (its best epoch)")
    evaluate.add_argument("--num-samples", type=_number(int, 1, True), default=MC_SAMPLES,
                          help="weight samples of the Monte Carlo average")
    _add_common(evaluate)
    evaluate.set_defaults(func=evaluate_command)

    prune = commands.add_parser(
        "prune", help="test error after removing weights (Table 2); writes pruning.json/.md",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    prune.add_argument("run_dir", metavar="RUN_DIR", help="folder written by 'train'")
    prune.add_argument("--fractions", type=_fraction, nargs="+",
                       default=list(pruning.DEFAULT_FRACTIONS), metavar="FRACTION",
                       help="proportions of the weights to remove, each in [0, 1)")
    prune.add_argument("--method", dest="methods", choices=pruning.METHODS, nargs="+",
                       default=list(pruning.METHODS),
                       help="remove the lowest signal-to-noise ratio |mu|/sigma, or the "
                            "lowest |mu|, first")
    _add_common(prune)
    prune.set_defaults(func=prune_command)

    plot = commands.add_parser("plot", help="PNG figures of a run, written into RUN_DIR",
                               formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    plot.add_argument("run_dir", metavar="RUN_DIR", help="folder written by 'train'")
    plot.add_argument("--ctx", default="cpu", help="'cpu', 'gpu' or 'gpu(i)'")
    plot.set_defaults(func=plot_command)

    rerun = commands.add_parser(
        "reproduce", help="train a configuration of the paper's MNIST Table 1 (resumable)",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        description="Train on the first 50,000 MNIST training images, keep the best epoch on "
                    "the last 10,000, report its test error (result.json). Running the same "
                    "command again continues after the last completed epoch.")
    rerun.add_argument("name", nargs="?", metavar="NAME", help="configuration (see --list)")
    rerun.add_argument("--list", action="store_true", help="list the configurations and exit")
    rerun.add_argument("--epochs", type=_number(int, 1, True), default=None,
                       help="total number of epochs (default: those of the run in --output-dir)")
    rerun.add_argument("--output-dir", default=None, help="run folder (default: results/NAME)")
    rerun.add_argument("--mc-samples", type=_number(int, 1, True), default=MC_SAMPLES,
                       help="weight samples of the Monte Carlo test error")
    _add_overrides(rerun)
    _add_common(rerun)
    rerun.add_argument("--no-progress", action="store_true", help="no progress bar")
    _add_trust(rerun)
    rerun.set_defaults(func=reproduce_command, command_line=None)

    rereport = commands.add_parser(
        "reproduce-report", help="test errors of the best epoch of reproduce runs (result.json)",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    rereport.add_argument("run_dirs", nargs="+", metavar="RUN_DIR",
                          help="folders written by 'reproduce'")
    rereport.add_argument("--mc-samples", type=_number(int, 1, True), default=MC_SAMPLES,
                          help="weight samples of the Monte Carlo test error")
    _add_common(rereport)
    rereport.set_defaults(func=reproduce_report_command, command_line=None)

    search = commands.add_parser(
        "search", help="validation errors of settings of the paper's hyperparameter grid",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        description="Train each setting for --epochs epochs (resumable) and tabulate the best "
                    "validation error of each in OUTPUT_DIR/search.json and search.md. The "
                    "settings are --settings, else the grid of the value lists below (default "
                    "the paper's), sampled down to --max-trials.")
    search.add_argument("--epochs", type=_number(int, 1, True), required=True,
                        help="epochs of every setting")
    search.add_argument("--output-dir", default=os.path.join("results", "search"))
    search.add_argument("--base", default="bbb-mixture-400",
                        help="the Bayes-by-Backprop configuration the settings modify")
    search.add_argument("--settings", nargs="+", default=None, metavar="SETTING",
                        help="explicit settings such as lr=1e-4,num_samples=2,pi=0.25,"
                             "log_sigma1=1,log_sigma2=7 (keys left out keep --base's values)")
    grid = configs.PAPER_GRID
    search.add_argument("--lr", type=_number(float, 0, False), nargs="+", default=grid["lr"])
    search.add_argument("--num-samples", type=_number(int, 1, True), nargs="+",
                        default=grid["num_samples"])
    search.add_argument("--pi", type=float, nargs="+", default=grid["pi"])
    search.add_argument("--log-sigma1", type=float, nargs="+", default=grid["log_sigma1"],
                        help="values of -log sigma1")
    search.add_argument("--log-sigma2", type=float, nargs="+", default=grid["log_sigma2"],
                        help="values of -log sigma2")
    search.add_argument("--max-trials", type=_number(int, 1, True), default=None,
                        help="run a seeded random sample of this many grid settings")
    search.add_argument("--search-seed", type=int, default=0, help="seed of that sample")
    search.add_argument("--dry-run", action="store_true",
                        help="print the settings and exit without training")
    _add_overrides(search)
    _add_common(search)
    search.add_argument("--no-progress", action="store_true", help="no progress bar")
    _add_trust(search)
    search.set_defaults(func=search_command, command_line=None)
    _add_uncertainty(commands)
    _add_bandit(commands)
    return parser


def _add_uncertainty(commands):
    uncertain = commands.add_parser(
        "uncertainty", help="calibration, OOD detection and refusal of MNIST reproduce runs",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        description="For the best epoch of each run folder (trained on MNIST): test error and "
                    "expected calibration error, AUROC of entropy (and mutual information) "
                    "against Fashion-MNIST and uniform noise, error after refusing the least "
                    "confident test images. Prints a table and writes uncertainty.json and "
                    "uncertainty.md to --output-dir.")
    uncertain.add_argument("run_dirs", nargs="+", metavar="RUN_DIR",
                           help="folders written by 'reproduce' for MNIST configurations")
    uncertain.add_argument("--mc-samples", type=_number(int, 1, True), default=MC_SAMPLES,
                           help="weight samples of the Monte Carlo average (BBB runs)")
    uncertain.add_argument("--num-noise", type=_number(int, 1, True), default=10000,
                           help="uniform-noise images")
    uncertain.add_argument("--seed", type=_number(int, 0, True), default=0,
                           help="seed of the noise images")
    uncertain.add_argument("--ood-data-dir", default=None,
                           help="folder holding Fashion-MNIST (default: as --data-dir)")
    uncertain.add_argument("--output-dir", default=".",
                           help="where uncertainty.json, uncertainty.md (and figures) go")
    uncertain.add_argument("--figures", action="store_true",
                           help="also write reliability.png and entropy_<run>.png")
    _add_common(uncertain)
    uncertain.set_defaults(func=uncertainty_command, command_line=None)


def _add_bandit(commands):
    agents = bandit_run.AGENTS
    play = commands.add_parser(
        "bandit", help="the paper's mushroom bandit: Thompson sampling vs epsilon-greedy",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        description="Play each agent for --steps interactions on the UCI mushrooms with the "
                    "paper's settings (2x100 ReLU, buffer 4096, minibatches of 64, 2 weight "
                    "samples for Thompson). Each finished agent is saved at once; running the "
                    "same command again skips them. Writes bandit.json, bandit.md, regret.png.")
    play.add_argument("--steps", type=_number(int, 1, True), required=True,
                      help="interactions per agent (the paper: 50000)")
    play.add_argument("--output-dir", default=os.path.join("results", "bandit"),
                      help="agent-<name>.json per agent, bandit.json, bandit.md, regret.png")
    play.add_argument("--agents", nargs="+", choices=list(agents), default=list(agents),
                      help="; ".join(f"{name}: {label}" for name, (label, _) in agents.items())
                      .replace("%", "%%"))  # argparse formats help strings with %
    play.add_argument("--mushroom", default=None,
                      help="agaricus-lepiota.data (None: "
                           f"${data.DATA_ENV_VAR}/mushroom/agaricus-lepiota.data)")
    play.add_argument("--seed", type=_number(int, 0, True), default=0,
                      help="seeds the episode and every agent")
    play.add_argument("--num-minibatches", type=_number(int, 1, True), default=64,
                      help="training minibatches of 64 after each interaction")
    play.add_argument("--ctx", default="cpu", help="'cpu', 'gpu' or 'gpu(i)'")
    play.add_argument("--no-progress", action="store_true", help="no progress bar")
    play.set_defaults(func=bandit_command, command_line=None)


def _add_overrides(parser):
    """Options that change a reproduce configuration (smoke runs, replicates)."""
    parser.add_argument("--hidden", type=_number(int, 1, True), nargs="+", default=None,
                        metavar="UNITS", help="override the hidden layers (smoke runs)")
    parser.add_argument("--subset", type=_number(int, 1, True), default=None,
                        help="keep only the first N examples of each split (smoke runs)")
    parser.add_argument("--seed", type=_number(int, 0, True), default=None,
                        help="override the seed (default 0), e.g. for replicates")
    parser.add_argument("--set", dest="assignments", nargs="+", default=None,
                        metavar="KEY=VALUE",
                        help="override hyperparameters, e.g. lr=1e-4,pi=0.25 lr_decay=0.98; keys: "
                             + ", ".join(configs.SEARCH_KEYS + configs.EXTRA_KEYS))


def _add_trust(parser):
    parser.add_argument(
        "--trust-pickled-state", action="store_true",
        help="when resuming from a checkpoint written by gluon_bbb before checkpoint format 2, "
             "unpickle its optimizer state instead of starting the optimizer afresh. "
             "Unpickling RUNS CODE FROM THE FILE: only for checkpoints you wrote yourself")


def _add_common(parser):
    parser.add_argument("--ctx", default="cpu", help="'cpu', 'gpu' or 'gpu(i)'")
    parser.add_argument("--data-dir", default=None,
                        help=f"folder holding the data set (default: ${data.DATA_ENV_VAR}/<dataset>, "
                             "then MXNet's cache)")


def main(argv=None):
    """Run ``gluon-bbb``.

    Parameters
    ----------
    argv : list of str, optional
        Arguments without the program name; default ``sys.argv[1:]``.

    Returns
    -------
    int
        0 on success; 2 for a usage error (bad option, missing data or GPU, bad prior); 1
        when training diverged; 130 when interrupted.
    """
    argv = sys.argv[1:] if argv is None else [str(arg) for arg in argv]
    try:
        args = build_parser().parse_args(argv)
    except SystemExit as stop:  # --help, --version or a usage error already printed
        return stop.code if isinstance(stop.code, int) else 2
    if hasattr(args, "command_line"):  # recorded by reproduce, reproduce-report and search
        args.command_line = " ".join(shlex.quote(arg) for arg in [PROG] + argv)
    try:
        return args.func(args)
    except (FileNotFoundError, ValueError) as error:  # includes DataNotFoundError
        return _fail(error, 2)
    except NonFiniteLossError as error:
        return _fail(error, 1)
    except KeyboardInterrupt:
        return _fail("interrupted (the last completed epoch's checkpoint is intact)", 130)


def _fail(error, code):
    print(f"{PROG}: error: {error}", file=sys.stderr)
    return code


# ---------------------------------------------------------------------------- train
def make_prior(config):
    """The prior named by a ``train`` configuration (``--prior`` and its parameters)."""
    if config["prior"] == "gaussian":
        return GaussianPrior(config["sigma"])
    try:
        sigma1, sigma2 = math.exp(-config["log_sigma1"]), math.exp(-config["log_sigma2"])
    except OverflowError:
        raise ValueError("--log-sigma1/--log-sigma2 are -log sigma: values below -700 overflow") from None
    if not sigma2 < sigma1:
        raise ValueError(f"the scale-mixture prior needs sigma2 < sigma1, i.e. --log-sigma2 > "
                         f"--log-sigma1 (they are -log sigma); got sigma2 = e^-{config['log_sigma2']} "
                         f"and sigma1 = e^-{config['log_sigma1']}")
    return ScaleMixturePrior(config["pi"], sigma1, sigma2)


def make_trainer(config, ctx):
    """Network, prior, loss and :class:`BBBTrainer` for a ``train`` configuration.

    The network is initialised and run once on a zero batch, so that its shapes are known
    and a checkpoint can be loaded into the trainer.
    """
    prior = make_prior(config)
    net = models.mlp(config["hidden"])
    net.initialize(mx.init.Xavier(), ctx=ctx)
    net(nd.zeros((1, INPUT_SIZE), ctx=ctx))
    return BBBTrainer(net, BBBLoss(prior), optimizer=config["optimizer"],
                      optimizer_params={"learning_rate": config["lr"]},
                      num_samples=config["num_samples"], kl_weighting=config["kl_weighting"],
                      kl_scale=config.get("kl_scale", 1.0), ctx=ctx, rho_init=config["rho_init"],
                      seed=config["seed"])


def train_command(args):
    """``gluon-bbb train``: returns the exit code."""
    start = time.time()
    config = {key: value for key, value in vars(args).items() if key not in ("func", "command")}
    if config["output_dir"] is None:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        config["output_dir"] = os.path.join("runs", f"{args.dataset}-{args.prior}-{stamp}")
    out = config["output_dir"]
    ctx = resolve_context(args.ctx)
    make_prior(config)  # fail on a bad prior or optimizer before loading any data
    if args.optimizer.lower() not in mx.optimizer.Optimizer.opt_registry:
        raise ValueError(f"unknown optimizer {args.optimizer!r}; MXNet has "
                         f"{', '.join(sorted(mx.optimizer.Optimizer.opt_registry))}")
    with RunFolderLock(out):  # one writer per run folder
        return _train_locked(args, config, out, ctx, start)


def _train_locked(args, config, out, ctx, start):
    checkpoint = os.path.join(out, CHECKPOINT)
    if os.path.exists(checkpoint) and not args.resume:
        raise ValueError(f"{out} already holds a checkpoint: pass --resume to continue it, "
                         "or choose another --output-dir")
    mx.random.seed(args.seed)
    np.random.seed(args.seed)
    loaders = data.get_loaders(args.dataset, batch_size=args.batch_size, data_dir=args.data_dir,
                               preprocessing=args.preprocessing, num_validation=args.num_validation,
                               subset=args.subset, ctx=ctx, seed=args.seed)
    trainer = make_trainer(config, ctx)
    os.makedirs(out, exist_ok=True)
    with _log_to(os.path.join(out, LOG)):
        if args.resume and os.path.exists(checkpoint):
            _warn_about_changed_options(os.path.join(out, CONFIG), config)
            trainer.load(checkpoint, trust_pickled_state=args.trust_pickled_state)
            # load() restores the optimizer, learning rate included; honour --lr.
            trainer.trainer.set_learning_rate(args.lr)
            logger.info("resuming %s after epoch %d", checkpoint, trainer.epoch)
        write_json(os.path.join(out, CONFIG), config)
        logger.info("start: %s, hidden %s, %s prior, to epoch %d on %s; run folder %s",
                    args.dataset, args.hidden, args.prior, args.epochs, ctx, out)
        eval_split = "validation" if "validation" in loaders else "test"
        train_data = data.EpochShuffled(loaders["train"], args.seed, lambda: trainer.epoch)
        trainer.fit(train_data, args.epochs, eval_data=loaders[eval_split],
                    checkpoint_path=checkpoint, progress=not args.no_progress,
                    eval_label=eval_split)
        metrics = {
            "config": config,
            "history": trainer.history,
            "eval_split": eval_split,
            "test_error_mean": trainer.evaluate(loaders["test"], num_samples=0),
            "test_error_mc": trainer.evaluate(loaders["test"], num_samples=MC_SAMPLES),
            "mc_samples": MC_SAMPLES,
            "num_weights": trainer.posterior.num_weights,
            "seconds": time.time() - start,
            "version": __version__,
        }
        if "validation" in loaders:
            metrics["validation_error_mean"] = trainer.evaluate(loaders["validation"])
        write_json(os.path.join(out, METRICS), metrics)
        line = _result_line(metrics["test_error_mean"], metrics["test_error_mc"], MC_SAMPLES)
        logger.info("finish: %s at epoch %d, %.1f s; run folder %s", line, trainer.epoch,
                    metrics["seconds"], out)
    print(line)
    return 0


def _warn_about_changed_options(config_path, config):
    if not os.path.exists(config_path):
        return
    saved = _checked_train_config(read_json(config_path, "a run configuration"), config_path)
    ignored = {"epochs", "resume", "no_progress", "ctx", "data_dir", "trust_pickled_state"}
    changed = sorted(k for k in config if k not in ignored and k in saved and saved[k] != config[k])
    if changed:
        logger.warning("resuming with options that differ from %s: %s", config_path,
                       ", ".join(f"{k}: {saved[k]!r} -> {config[k]!r}" for k in changed))


# ---------------------------------------------------------------------------- evaluate
def _read_config(run_dir):
    """The ``config.json`` of a run folder, or a FileNotFoundError that says what is wrong."""
    config_path = os.path.join(run_dir, CONFIG)
    if not os.path.isfile(config_path):
        raise FileNotFoundError(f"{config_path} not found: is {run_dir} a folder written "
                                f"by '{PROG} train'?")
    config = read_json(config_path, "a run configuration")
    if "reproduce" in config:
        return runfolder.checked_stored_config(config, config_path)
    return _checked_train_config(config, config_path)


#: The keys of a ``train`` configuration that rebuild its run, with the checks they get.
_TRAIN_KEYS = ("hidden", "sigma", "pi", "log_sigma1", "log_sigma2", "lr", "num_samples",
               "rho_init", "seed", "batch_size")
_TRAIN_CHOICES = {"prior": ("gaussian", "scale-mixture"), "kl_weighting": ("uniform", "blundell"),
                  "dataset": data.DATASETS, "preprocessing": data.PREPROCESSING_METHODS}


def _checked_train_config(config, source):
    """A ``train`` configuration read from a run folder, checked as the parser checks the
    options, or a CheckpointError naming ``source``."""
    checked = dict(config)
    try:
        for key in _TRAIN_KEYS:
            if key not in config:
                raise ValueError(f"it lacks the option {key!r}")
            checked[key] = configs.check_hyperparameter(key, config[key])
        for key, choices in _TRAIN_CHOICES.items():
            if config.get(key) not in choices:
                raise ValueError(f"{key} must be one of {', '.join(choices)}, got {config.get(key)!r:.60}")
        if config.get("optimizer") not in mx.optimizer.Optimizer.opt_registry:
            raise ValueError(f"optimizer {config.get('optimizer')!r:.60} is not an MXNet optimizer")
        checked["kl_scale"] = configs.check_hyperparameter("kl_scale", config.get("kl_scale", 1.0))
        checked["subset"] = configs.check_hyperparameter("subset", config.get("subset"))
        if not isinstance(config.get("data_dir"), (str, type(None))):
            raise ValueError("data_dir must be a folder name or null")
        make_prior(checked)
    except (ValueError, OverflowError) as error:
        raise CheckpointError(f"{source}: {error}") from None
    return checked


def _load_run(args, with_test_data=True):
    """The configuration, the trainer restored from the checkpoint, and the test loader.

    For a ``reproduce`` run folder, the trainer holds the best epoch on validation.
    """
    config = _read_config(args.run_dir)
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
    trainer = make_trainer(config, ctx)
    trainer.load(os.path.join(args.run_dir, checkpoint), optimizer=False)
    return config, trainer, test


def evaluate_command(args):
    """``gluon-bbb evaluate``: returns the exit code."""
    if "reproduce" in _read_config(args.run_dir):
        return _evaluate_reproduce_run(args)
    _, trainer, test = _load_run(args)
    mean_error = trainer.evaluate(test, num_samples=0)
    mc_error = trainer.evaluate(test, num_samples=args.num_samples)
    print(f"{args.run_dir} (epoch {trainer.epoch}, {test.num_examples} test examples)")
    print(_result_line(mean_error, mc_error, args.num_samples))
    return 0


def _evaluate_reproduce_run(args):
    """``gluon-bbb evaluate`` on a reproduce run folder: the best epoch on validation."""
    config = runfolder.read_run_config(args.run_dir)
    errors = protocol.evaluate_run(args.run_dir, mc_samples=args.num_samples,
                                    data_dir=args.data_dir, ctx=args.ctx)
    print(f"{args.run_dir} ({config['reproduce']}, best epoch {errors['best_epoch']} on "
          f"validation, {errors['num_test']} test examples)")
    print(_reproduce_line(errors))
    return 0


def _reproduce_line(errors):
    if errors["test_error_mc"] is None:
        return f"test error: {100 * errors['test_error_mean']:.2f}% (deterministic network)"
    return _result_line(errors["test_error_mean"], errors["test_error_mc"], errors["mc_samples"])


# ---------------------------------------------------------------------------- reproduce
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
    with RunFolderLock(out), _log_to(os.path.join(out, runfolder.LOG)):
        result = protocol.run(config, epochs, out, data_dir=args.data_dir, ctx=args.ctx,
                               mc_samples=args.mc_samples, progress=not args.no_progress,
                               command=args.command_line,
                               trust_pickled_state=args.trust_pickled_state)
        logger.info("finish: %s; best epoch %d of %d, %.1f s; %s", _reproduce_line(result),
                    result["best_epoch"], result["epochs_run"], result["total_wall_seconds"],
                    os.path.join(out, runfolder.RESULT))
    print(f"{out}: best epoch {result['best_epoch']} of {result['epochs_run']}, validation "
          f"error {100 * result['validation_error']:.2f}%")
    print(_reproduce_line(result))
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
    with _log_to(os.path.join(args.output_dir, "search.log")):
        grid_search.search(settings, args.epochs, args.output_dir, base=args.base,
                         overrides=_overrides(args), data_dir=args.data_dir, ctx=args.ctx,
                         progress=not args.no_progress, command=args.command_line,
                         trust_pickled_state=args.trust_pickled_state)
    with open(os.path.join(args.output_dir, grid_search.SEARCH_MD), encoding="utf-8") as handle:
        print(handle.read(), end="")
    return 0


# ---------------------------------------------------------------------------- uncertainty
UNCERTAINTY_JSON = "uncertainty.json"
UNCERTAINTY_MD = "uncertainty.md"


def uncertainty_command(args):
    """``gluon-bbb uncertainty``: prints the table, writes uncertainty.json/.md (and figures)."""
    start = time.time()
    ctx = resolve_context(args.ctx)
    runs, results = [], []
    for run_dir in args.run_dirs:
        run = uncertainty_eval.predict_run(run_dir, mc_samples=args.mc_samples,
                                           data_dir=args.data_dir, ood_data_dir=args.ood_data_dir,
                                           num_noise=args.num_noise, seed=args.seed, ctx=ctx)
        results.append(uncertainty_eval.summarize(run))
        if args.figures:
            runs.append(run)
    table = uncertainty_eval.uncertainty_table(results)
    figures = {}
    if args.figures:
        figures["reliability.png"] = uncertainty_eval.reliability_figure(runs)
        for run in runs:
            figures[f"entropy_{uncertainty_eval.figure_name(run)}.png"] = \
                uncertainty_eval.entropy_figure(run)
    seconds = time.time() - start
    write_json(os.path.join(args.output_dir, UNCERTAINTY_JSON), {
        "runs": results, "command": args.command_line, "wall_seconds": seconds,
        "num_noise": args.num_noise, "seed": args.seed, "coverages": list(uncertainty_eval.COVERAGES),
        "machine": machine_info(ctx), "figures": sorted(figures),
        "written": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
    text = (f"Best epoch on validation of each run, MNIST test set (in distribution) against "
            f"Fashion-MNIST test and {args.num_noise} uniform-noise images (seed {args.seed}). "
            f"ECE: {uncertainty_eval.NUM_BINS} bins. AUROC of the predictive entropy (H) and of "
            f"the mutual information (MI) for telling the out-of-distribution images apart. "
            f"'error kept x%': error among the x% most confident test images.\n\n{table}\n"
            f"Command: `{args.command_line}`; {seconds:.0f} s.\n")
    atomic_write_bytes(os.path.join(args.output_dir, UNCERTAINTY_MD), text.encode("utf-8"))
    for name, figure in figures.items():
        _save_figure(figure, os.path.join(args.output_dir, name))
    print(table, end="")
    return 0


# ---------------------------------------------------------------------------- bandit
def bandit_command(args):
    """``gluon-bbb bandit``: plays the agents, writes bandit.json, bandit.md and regret.png."""
    resolve_context(args.ctx)
    with _log_to(None):
        summary = bandit_run.run_agents(
            args.mushroom or bandit_run.default_mushroom_path(), args.steps, args.output_dir,
            agents=args.agents, seed=args.seed, num_minibatches=args.num_minibatches,
            ctx=args.ctx, progress=not args.no_progress, command=args.command_line)
    print(bandit_run.summary_table(summary["agents"]), end="")
    return 0


# ---------------------------------------------------------------------------- prune
def prune_command(args):
    """``gluon-bbb prune``: prints the pruning table and writes pruning.json and pruning.md."""
    _, trainer, test = _load_run(args)
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


# ---------------------------------------------------------------------------- plot
def plot_command(args):
    """``gluon-bbb plot``: writes the run's figures as PNGs into its folder."""
    config, trainer, _ = _load_run(args, with_test_data=False)
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
        _save_figure(figure, path)
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


def _save_figure(figure, path):
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=120)
    atomic_write_bytes(path, buffer.getvalue())


# ---------------------------------------------------------------------------- helpers
def _result_line(mean_error, mc_error, num_samples):
    return (f"test error: {100 * mean_error:.2f}% (posterior mean), "
            f"{100 * mc_error:.2f}% (MC {num_samples} samples)")


class _log_to:  # noqa: N801 -- used like a function: ``with _log_to(path):``
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
