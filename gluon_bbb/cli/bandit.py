"""``gluon-bbb bandit``: the paper's mushroom bandit (:mod:`gluon_bbb.experiments.bandit_run`)."""
import argparse
import logging
import math
import os

from ..apps import bandit
from .. import data
from ..data import mushroom
from ..context import resolve_context
from ..experiments import bandit_run, bandit_settings
from .common import HelpFormatter, log_to, number

__all__ = ["add_parsers", "bandit_command", "thompson_overrides", "greedy_overrides"]

logger = logging.getLogger("gluon_bbb.cli")


def add_parsers(commands):
    """The ``bandit`` command."""
    agents = bandit_settings.AGENTS
    play = commands.add_parser(
        "bandit", help="the paper's mushroom bandit: Thompson sampling vs epsilon-greedy",
        formatter_class=HelpFormatter,
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
                           f"${data.DATA_ENV_VAR}/mushroom/agaricus-lepiota.data, downloaded "
                           "if missing)")
    play.add_argument("--seed", type=number(int, 0, True), default=0,
                      help="seeds the episode and every agent")
    play.add_argument("--num-minibatches", type=number(int, 1, True), default=64,
                      help="training minibatches of 64 after each interaction")
    play.add_argument("--buffer-size", type=number(int, 1, True),
                      default=bandit_settings.PAPER_SETTINGS["buffer_size"],
                      help="the most recent interactions kept to train on")
    positive = number(float, 0, False)
    play.add_argument("--clip-gradient", type=positive, default=None, metavar="C",
                      help="every agent: clip each gradient element to [-C, C] before the "
                           "optimizer's update (None: no clipping)")
    paper = bandit_settings.THOMPSON_SETTINGS
    finite = number(float, -math.inf, False)
    thompson = play.add_argument_group(
        "the Thompson agent", "defaults: the paper's settings; other values are recorded in each "
        "agent's settings, so a folder never mixes runs")
    thompson.add_argument("--optimizer", choices=bandit.ThompsonAgent.OPTIMIZERS,
                          default=paper["optimizer"],
                          help="updates mu and rho: Adam, or plain SGD (no momentum) on the cost "
                               "summed over each minibatch")
    thompson.add_argument("--learning-rate", type=positive, default=paper["learning_rate"],
                          help="the optimizer's learning rate")
    thompson.add_argument("--action-samples", type=number(int, 1, True),
                          default=paper["num_action_samples"],
                          help="weight samples averaged to choose an action (1: textbook Thompson)")
    thompson.add_argument("--act-on", choices=bandit.ThompsonAgent.ACT_ON, default=paper["act_on"],
                          help="act on the predicted rewards averaged over the --action-samples "
                               "sampled networks, or on one network whose weights are the average "
                               "of --action-samples weight samples")
    thompson.add_argument("--train-samples", type=number(int, 1, True),
                          default=paper["num_train_samples"], help="weight samples per training step")
    thompson.add_argument("--rho-init", type=finite, nargs="+", action=_RhoInit,
                          default=paper["rho_init"], metavar="RHO",
                          help="initial rho of the posterior (sigma = softplus(rho)); two values "
                               "LOW HIGH draw every rho from U(LOW, HIGH)")
    thompson.add_argument("--kl-data", choices=bandit.ThompsonAgent.KL_DATA,
                          default=paper["kl_data"],
                          help="the complexity weight's data set: the buffer (pi = 64/4096), or every "
                               "interaction seen so far (pi = 64/max(4096, N))")
    thompson.add_argument("--kl-scale", type=number(float, 0, False), default=paper["kl_scale"],
                          help="multiplies the complexity weight (below 1: a tempered posterior)")
    thompson.add_argument("--kl-weighting", choices=bandit.ThompsonAgent.KL_WEIGHTINGS,
                          default=paper["kl_weighting"],
                          help="how an interaction's complexity weight M pi is shared among its M "
                               "minibatches: equally, or by Eq. (9), pi_i = M pi 2^(M-i)/(2^M-1)")
    thompson.add_argument("--prior-pi", type=number(float, 0, False), default=paper["prior"]["pi"],
                          help="weight of the wide component, in (0, 1)")
    thompson.add_argument("--prior-neg-log-sigma1", type=finite,
                          default=paper["prior"]["neg_log_sigma1"], help="-log sigma1")
    thompson.add_argument("--prior-neg-log-sigma2", type=finite,
                          default=paper["prior"]["neg_log_sigma2"], help="-log sigma2")
    greedy = play.add_argument_group(
        "the greedy agents", "defaults: the paper's settings; other values are recorded in each "
        "agent's settings")
    greedy.add_argument("--greedy-optimizer", choices=bandit.EpsilonGreedyAgent.OPTIMIZERS,
                        default=bandit_settings.GREEDY_SETTINGS["optimizer"],
                        help="updates the weights: Adam, or plain SGD (no momentum) on the cost "
                             "summed over each minibatch")
    greedy.add_argument("--greedy-learning-rate", type=positive,
                        default=bandit_settings.GREEDY_SETTINGS["learning_rate"],
                        help="the optimizer's learning rate")
    play.add_argument("--ctx", default="cpu", help="'cpu', 'gpu' or 'gpu(i)'")
    play.add_argument("--no-progress", action="store_true", help="no progress bar")
    play.set_defaults(func=bandit_command, command_line=None)


def bandit_command(args):
    """``gluon-bbb bandit``: plays the agents, writes bandit.json, bandit.md and regret.png."""
    resolve_context(args.ctx)
    with log_to(None):
        summary = bandit_run.run_agents(
            args.mushroom or mushroom.find_mushroom_file(progress=not args.no_progress), args.steps, args.output_dir,
            agents=args.agents, seed=args.seed, num_minibatches=args.num_minibatches,
            buffer_size=args.buffer_size,
            ctx=args.ctx, progress=not args.no_progress, command=args.command_line,
            thompson=thompson_overrides(args), greedy=greedy_overrides(args))
    print(bandit_run.summary_table(summary["agents"]), end="")
    return 0


def thompson_overrides(args):
    """The Thompson agent's settings given on the command line (all of them)."""
    return {"optimizer": args.optimizer, "learning_rate": args.learning_rate,
            "clip_gradient": args.clip_gradient,
            "num_action_samples": args.action_samples, "num_train_samples": args.train_samples,
            "act_on": args.act_on, "rho_init": args.rho_init, "kl_data": args.kl_data,
            "kl_scale": args.kl_scale, "kl_weighting": args.kl_weighting,
            "prior": {"pi": args.prior_pi, "neg_log_sigma1": args.prior_neg_log_sigma1,
                      "neg_log_sigma2": args.prior_neg_log_sigma2}}


def greedy_overrides(args):
    """The greedy agents' settings given on the command line (all of them)."""
    return {"optimizer": args.greedy_optimizer, "learning_rate": args.greedy_learning_rate,
            "clip_gradient": args.clip_gradient}


class _RhoInit(argparse.Action):
    """``--rho-init RHO`` (a float) or ``--rho-init LOW HIGH`` (a list, LOW < HIGH)."""

    def __call__(self, parser, namespace, values, option_string=None):
        if len(values) == 1:
            setattr(namespace, self.dest, values[0])
            return
        if len(values) != 2 or not values[0] < values[1]:
            parser.error(f"{option_string} takes one value, or two LOW HIGH with LOW < HIGH; "
                         f"got {' '.join(f'{value:g}' for value in values)}")
        setattr(namespace, self.dest, list(values))
