"""``gluon-bbb train``: train an MLP with Bayes by Backprop into a run folder (resumable)."""
import argparse
import logging
import os
import time

import mxnet as mx
import numpy as np

from .. import data
from ..checkpoint import CheckpointError, read_json, write_json
from ..context import resolve_context
from ..experiments import configs
from ..experiments.runners import make_bbb_trainer
from ..runlock import RunFolderLock
from ..version import __version__
from .common import (CHECKPOINT, CONFIG, LOG, MC_SAMPLES, METRICS, add_common, add_trust, log_to,
                     number, result_line)

__all__ = ["add_parsers", "train_command", "TRAIN_KEYS", "TRAIN_CHOICES", "checked_train_config"]

logger = logging.getLogger("gluon_bbb.cli")


def add_parsers(commands):
    """The ``train`` command."""
    train = commands.add_parser("train", help="train an MLP on MNIST or Fashion-MNIST",
                                formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    train.add_argument("--dataset", choices=data.DATASETS, default="mnist")
    train.add_argument("--hidden", type=number(int, 1, True), nargs="+", default=[400, 400],
                       metavar="UNITS", help="units of each hidden layer")
    train.add_argument("--prior", choices=("gaussian", "scale-mixture"), default="scale-mixture")
    train.add_argument("--sigma", type=float, default=1.0, help="std of the Gaussian prior")
    train.add_argument("--pi", type=float, default=0.5, help="weight of the wide mixture component")
    train.add_argument("--log-sigma1", type=float, default=0.0,
                       help="-log sigma1 of the wide mixture component (the paper's convention)")
    train.add_argument("--log-sigma2", type=float, default=6.0,
                       help="-log sigma2 of the narrow mixture component")
    train.add_argument("--epochs", type=number(int, 1, True), default=10,
                       help="total number of epochs (a resumed run trains only the missing ones)")
    train.add_argument("--batch-size", type=number(int, 1, True), default=128)
    train.add_argument("--lr", type=number(float, 0, False), default=1e-3, help="learning rate")
    train.add_argument("--optimizer", default="adam", help="any MXNet optimizer name")
    train.add_argument("--num-samples", type=number(int, 1, True), default=1,
                       help="weight samples per training step")
    train.add_argument("--kl-weighting", choices=("uniform", "blundell"), default="uniform")
    train.add_argument("--kl-scale", type=number(float, 0, False), default=1.0,
                       help="multiplies the complexity cost; below 1 tempers the posterior")
    train.add_argument("--rho-init", type=float, default=-5.0, help="initial rho, sigma = softplus(rho)")
    train.add_argument("--seed", type=int, default=0, help="seeds MXNet, NumPy and the trainer")
    add_common(train)
    train.add_argument("--preprocessing", choices=data.PREPROCESSING_METHODS, default="paper")
    train.add_argument("--num-validation", type=number(int, 0, True), default=0,
                       help="last training images held out; if > 0 they replace the test set "
                            "in the per-epoch evaluation")
    train.add_argument("--subset", type=number(int, 1, True), default=None,
                       help="keep only the first N examples of each split (smoke runs)")
    train.add_argument("--output-dir", default=None,
                       help="run folder (default: runs/<dataset>-<prior>-<timestamp>)")
    train.add_argument("--resume", action="store_true",
                       help="continue from the checkpoint in --output-dir, if there is one")
    train.add_argument("--no-progress", action="store_true", help="no progress bar")
    add_trust(train)
    train.set_defaults(func=train_command)


def train_command(args):
    """``gluon-bbb train``: returns the exit code."""
    start = time.time()
    config = {key: value for key, value in vars(args).items() if key not in ("func", "command")}
    if config["output_dir"] is None:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        config["output_dir"] = os.path.join("runs", f"{args.dataset}-{args.prior}-{stamp}")
    out = config["output_dir"]
    ctx = resolve_context(args.ctx)
    configs.make_prior(config)  # fail on a bad prior or optimizer before loading any data
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
    trainer = make_bbb_trainer(config, ctx)
    os.makedirs(out, exist_ok=True)
    with log_to(os.path.join(out, LOG)):
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
        line = result_line(metrics["test_error_mean"], metrics["test_error_mc"], MC_SAMPLES)
        logger.info("finish: %s at epoch %d, %.1f s; run folder %s", line, trainer.epoch,
                    metrics["seconds"], out)
    print(line)
    return 0


def _warn_about_changed_options(config_path, config):
    if not os.path.exists(config_path):
        return
    saved = checked_train_config(read_json(config_path, "a run configuration"), config_path)
    ignored = {"epochs", "resume", "no_progress", "ctx", "data_dir", "trust_pickled_state"}
    changed = sorted(k for k in config if k not in ignored and k in saved and saved[k] != config[k])
    if changed:
        logger.warning("resuming with options that differ from %s: %s", config_path,
                       ", ".join(f"{k}: {saved[k]!r} -> {config[k]!r}" for k in changed))


#: The keys of a ``train`` configuration that rebuild its run, with the checks they get.
TRAIN_KEYS = ("hidden", "sigma", "pi", "log_sigma1", "log_sigma2", "lr", "num_samples",
               "rho_init", "seed", "batch_size")


TRAIN_CHOICES = {"prior": ("gaussian", "scale-mixture"), "kl_weighting": ("uniform", "blundell"),
                  "dataset": data.DATASETS, "preprocessing": data.PREPROCESSING_METHODS}


def checked_train_config(config, source):
    """A ``train`` configuration read from a run folder, checked as the parser checks the
    options, or a CheckpointError naming ``source``."""
    checked = dict(config)
    try:
        for key in TRAIN_KEYS:
            if key not in config:
                raise ValueError(f"it lacks the option {key!r}")
            checked[key] = configs.check_hyperparameter(key, config[key])
        for key, choices in TRAIN_CHOICES.items():
            if config.get(key) not in choices:
                raise ValueError(f"{key} must be one of {', '.join(choices)}, got {config.get(key)!r:.60}")
        if config.get("optimizer") not in mx.optimizer.Optimizer.opt_registry:
            raise ValueError(f"optimizer {config.get('optimizer')!r:.60} is not an MXNet optimizer")
        checked["kl_scale"] = configs.check_hyperparameter("kl_scale", config.get("kl_scale", 1.0))
        checked["subset"] = configs.check_hyperparameter("subset", config.get("subset"))
        if not isinstance(config.get("data_dir"), (str, type(None))):
            raise ValueError("data_dir must be a folder name or null")
        configs.make_prior(checked)
    except (ValueError, OverflowError) as error:
        raise CheckpointError(f"{source}: {error}") from None
    return checked
