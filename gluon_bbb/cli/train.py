"""``gluon-bbb train``: train an MLP with Bayes by Backprop, with hyperparameters of your own,
into a run folder (resumable).

The run is a custom configuration (:func:`gluon_bbb.experiments.custom_config`) trained by the
paper's protocol (:func:`gluon_bbb.experiments.run`): the best epoch on a validation split is
kept and its test error reported, and the folder is the one format every command reads.
"""
import argparse
import logging
import os
import time

from .. import data
from ..context import resolve_context
from ..experiments import configs, runfolder, wording
from .common import MC_SAMPLES, HelpFormatter, add_training_options, number, train_into

__all__ = ["add_parsers", "train_command", "train_config"]

logger = logging.getLogger("gluon_bbb.cli")


def add_parsers(commands):
    """The ``train`` command."""
    train = commands.add_parser("train", help="train an MLP on MNIST or Fashion-MNIST",
                                formatter_class=HelpFormatter)
    train.add_argument("--dataset", choices=data.DATASETS, default="mnist")
    train.add_argument("--hidden", type=number(int, 1, True), nargs="+", default=[400, 400],
                       metavar="UNITS", help="units of each hidden layer")
    train.add_argument("--prior", choices=configs.CHOICES["prior"], default="scale-mixture")
    train.add_argument("--sigma", type=float, default=1.0, help="std of the Gaussian prior")
    train.add_argument("--pi", type=float, default=0.5, help="weight of the wide mixture component")
    train.add_argument("--neg-log-sigma1", type=float, default=0.0,
                       help="-log sigma1 of the wide mixture component (the paper's convention)")
    train.add_argument("--neg-log-sigma2", type=float, default=6.0,
                       help="-log sigma2 of the narrow mixture component")
    train.add_argument("--learn-prior", action="store_true",
                       help="learn the prior's values with the posterior (empirical Bayes), "
                            "starting from the ones given")
    train.add_argument("--epochs", type=number(int, 1, True), default=10,
                       help="total number of epochs (a resumed run trains only the missing ones)")
    train.add_argument("--batch-size", type=number(int, 1, True), default=128)
    train.add_argument("--lr", type=number(float, 0, False), default=1e-3, help="learning rate")
    train.add_argument("--lr-decay", type=float, default=1.0,
                       help="the learning rate of epoch e (from 0) is lr * lr_decay**e")
    train.add_argument("--lr-steps", type=number(int, 1, True), nargs="*", default=[],
                       metavar="EPOCH", help="multiply the learning rate by --lr-step-factor "
                                             "after each of these epochs (the paper's: 300)")
    train.add_argument("--lr-step-factor", type=float, default=0.1,
                       help="the factor of each --lr-steps step")
    train.add_argument("--optimizer", default="adam", help="any MXNet optimizer name")
    train.add_argument("--num-samples", type=number(int, 1, True), default=1,
                       help="weight samples per training step")
    train.add_argument("--kl-weighting", choices=configs.CHOICES["kl_weighting"], default="uniform")
    train.add_argument("--network", choices=configs.CHOICES["network"], default="mlp",
                       help="the MLP of --hidden, or a LeNet-5 style convolutional network")
    train.add_argument("--estimator", choices=configs.CHOICES["estimator"], default="weights",
                       help="training noise of the Dense/Conv2D layers: the paper's weight "
                            "sample, the local reparameterisation, or Flipout")
    train.add_argument("--kl-scale", type=number(float, 0, False), default=1.0,
                       help="multiplies the complexity cost; below 1 tempers the posterior")
    train.add_argument("--rho-init", type=float, nargs="+", default=[-5.0], metavar="RHO",
                       help="initial rho (sigma = softplus(rho)), or LOW HIGH for rho ~ U(LOW, HIGH)")
    train.add_argument("--mu-init", default="net", metavar="A",
                       help="'net': mu starts at the MLP's Xavier initialisation; a number A: "
                            "mu ~ U(-A, A)")
    train.add_argument("--seed", type=number(int, 0, True), default=0, help="seeds MXNet, NumPy and the trainer")
    train.add_argument("--preprocessing", choices=data.PREPROCESSING_METHODS, default="paper")
    train.add_argument("--num-validation", type=number(int, 1, True), default=10000,
                       help="last training images held out for validation: the epoch with the "
                            "lowest validation error is kept and reported on the test set")
    train.add_argument("--subset", type=number(int, 1, True), default=None,
                       help="keep only the first N examples of each split (smoke runs)")
    train.add_argument("--output-dir", default=None,
                       help="run folder (default: runs/<dataset>-<prior>-<timestamp>)")
    train.add_argument("--resume", action="store_true",
                       help="continue the run in --output-dir (same options), if there is one")
    train.add_argument("--mc-samples", type=number(int, 1, True), default=MC_SAMPLES,
                       help="weight samples of the Monte Carlo test error")
    add_training_options(train)
    train.set_defaults(func=train_command, command_line=None)


def train_command(args):
    """``gluon-bbb train``: returns the exit code."""
    config = train_config(args)
    out = args.output_dir
    if out is None:
        stamp = time.strftime("%Y%m%d-%H%M%S")
        out = os.path.join("runs", f"{args.dataset}-{args.prior}-{stamp}")
    resolve_context(args.ctx)  # fail on a missing GPU before creating the folder
    if os.path.exists(os.path.join(out, runfolder.CONFIG)) and not args.resume:
        raise ValueError(f"{out} already holds a run: pass --resume to continue it, "
                         "or choose another --output-dir")
    runfolder.check_run_dir(out, config)  # refuses another configuration
    train_into(config, args.epochs, out, args)
    return 0


def train_config(args):
    """The custom configuration of ``train``'s options (the chosen prior's keys only)."""
    keys = ["dataset", "hidden", "prior", "optimizer", "lr", "lr_decay", "lr_steps",
            "lr_step_factor", "num_samples", "kl_weighting", "kl_scale", "seed", "batch_size",
            "preprocessing", "num_validation", "subset", "estimator", "network",
            "learn_prior"] + list(configs.PRIOR_KEYS[args.prior])
    values = {key: getattr(args, key) for key in keys}
    if len(args.rho_init) > 2:
        raise ValueError(f"--rho-init takes one value or two (a range), got {len(args.rho_init)}")
    values["rho_init"] = args.rho_init[0] if len(args.rho_init) == 1 else list(args.rho_init)
    values["mu_init"] = args.mu_init if args.mu_init == "net" else \
        wording.parse_setting(f"mu_init={args.mu_init}", ("mu_init",))["mu_init"]
    return configs.custom_config(**values)
