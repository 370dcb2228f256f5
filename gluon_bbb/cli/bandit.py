"""``gluon-bbb bandit``: the paper's mushroom bandit (:mod:`gluon_bbb.experiments.bandit_run`)."""
import argparse
import logging
import math
import os

from .. import bandit, data, mushroom
from ..context import resolve_context
from ..experiments import bandit_run
from .common import log_to, number

__all__ = ["add_parsers", "bandit_command", "thompson_overrides"]

logger = logging.getLogger("gluon_bbb.cli")


def add_parsers(commands):
    """The ``bandit`` command."""
    agents = bandit_run.AGENTS
    play = commands.add_parser(
        "bandit", help="the paper's mushroom bandit: Thompson sampling vs epsilon-greedy",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
        description="Play each agent for --steps interactions on the UCI mushrooms with the "
                    "paper's settings (2x100 ReLU, buffer 4096, minibatches of 64, 2 weight "
                    "samples for Thompson). Each finished agent is saved at once; running the "
                    "same command again skips them. Writes bandit.json, bandit.md, regret.png.")
    play.add_argument("--steps", type=number(int, 1, True), required=True,
                      help="interactions per agent (the paper: 50000)")
    play.add_argument("--output-dir", default=os.path.join("results", "bandit"),
                      help="agent-<name>.json per agent, bandit.json, bandit.md, regret.png")
    play.add_argument("--agents", nargs="+", choices=list(agents), default=list(agents),
                      help="; ".join(f"{name}: {label}" for name, (label, _) in agents.items())
                      .replace("%", "%%"))  # argparse formats help strings with %
    play.add_argument("--mushroom", default=None,
                      help="agaricus-lepiota.data (None: "
                           f"${data.DATA_ENV_VAR}/mushroom/agaricus-lepiota.data)")
    play.add_argument("--seed", type=number(int, 0, True), default=0,
                      help="seeds the episode and every agent")
    play.add_argument("--num-minibatches", type=number(int, 1, True), default=64,
                      help="training minibatches of 64 after each interaction")
    play.add_argument("--buffer-size", type=number(int, 1, True),
                      default=bandit_run.PAPER_SETTINGS["buffer_size"],
                      help="the most recent interactions kept to train on")
    paper = bandit_run.THOMPSON_SETTINGS
    finite = number(float, -math.inf, False)
    thompson = play.add_argument_group(
        "the Thompson agent", "defaults: the paper's settings; other values are recorded in each "
        "agent's settings, so a folder never mixes runs")
    thompson.add_argument("--action-samples", type=number(int, 1, True),
                          default=paper["num_action_samples"],
                          help="weight samples averaged to choose an action (1: textbook Thompson)")
    thompson.add_argument("--train-samples", type=number(int, 1, True),
                          default=paper["num_train_samples"], help="weight samples per training step")
    thompson.add_argument("--rho-init", type=finite, default=paper["rho_init"],
                          help="initial rho of the posterior (sigma = softplus(rho))")
    thompson.add_argument("--kl-data", choices=bandit.ThompsonAgent.KL_DATA,
                          default=paper["kl_data"],
                          help="the complexity weight's data set: the buffer (pi = 64/4096), or every "
                               "interaction seen so far (pi = 64/max(4096, N))")
    thompson.add_argument("--kl-scale", type=number(float, 0, False), default=paper["kl_scale"],
                          help="multiplies the complexity weight (below 1: a tempered posterior)")
    thompson.add_argument("--prior-pi", type=number(float, 0, False), default=paper["prior"]["pi"],
                          help="weight of the wide component, in (0, 1)")
    thompson.add_argument("--prior-log-sigma1", type=finite,
                          default=paper["prior"]["log_sigma1"], help="-log sigma1")
    thompson.add_argument("--prior-log-sigma2", type=finite,
                          default=paper["prior"]["log_sigma2"], help="-log sigma2")
    play.add_argument("--ctx", default="cpu", help="'cpu', 'gpu' or 'gpu(i)'")
    play.add_argument("--no-progress", action="store_true", help="no progress bar")
    play.set_defaults(func=bandit_command, command_line=None)


def bandit_command(args):
    """``gluon-bbb bandit``: plays the agents, writes bandit.json, bandit.md and regret.png."""
    resolve_context(args.ctx)
    with log_to(None):
        summary = bandit_run.run_agents(
            args.mushroom or mushroom.default_mushroom_path(), args.steps, args.output_dir,
            agents=args.agents, seed=args.seed, num_minibatches=args.num_minibatches,
            buffer_size=args.buffer_size,
            ctx=args.ctx, progress=not args.no_progress, command=args.command_line,
            thompson=thompson_overrides(args))
    print(bandit_run.summary_table(summary["agents"]), end="")
    return 0


def thompson_overrides(args):
    """The Thompson agent's settings given on the command line (all of them)."""
    return {"num_action_samples": args.action_samples, "num_train_samples": args.train_samples,
            "rho_init": args.rho_init, "kl_data": args.kl_data,
            "kl_scale": args.kl_scale,
            "prior": {"pi": args.prior_pi, "log_sigma1": args.prior_log_sigma1,
                      "log_sigma2": args.prior_log_sigma2}}
