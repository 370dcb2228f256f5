#!/usr/bin/env python
"""What a Thompson agent's posterior believes about every mushroom (issue 17).

Reads the Thompson agent of a ``gluon-bbb bandit`` output folder (its settings from
``agent-thompson.json``, or from the checkpoint of an agent still playing, its network from the
checkpoint ``agent-thompson.bbb``) and, for all
8,124 mushrooms, draws ``--samples`` networks from the posterior: the share of draws that
prefer eating (Thompson sampling with one draw eats with that probability), and the decision
of the posterior-mean network. It prints, for poisonous and edible mushrooms, how often they
would be eaten or passed, so that the regret of the next steps can be told apart into
exploration (draws that disagree with the mean) and a wrong mean.

Usage::

    GLUON_BBB_DATA=/work/shared/data python scripts/bandit_posterior_check.py runs/bandit-investigation/paper
"""
import argparse
import os
import sys

import numpy as np
from mxnet import nd

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from gluon_bbb.apps.bandit.environment import EAT, PASS, action_inputs  # noqa: E402
from gluon_bbb.io.checkpoint import read_json, read_metadata  # noqa: E402
from gluon_bbb.experiments import bandit_run, bandit_settings  # noqa: E402
from gluon_bbb.data.mushroom import load_mushroom  # noqa: E402
from gluon_bbb.analysis.uncertainty import sample_network_outputs  # noqa: E402


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folder")
    parser.add_argument("--samples", type=int, default=100)
    args = parser.parse_args(argv)
    record_path = os.path.join(args.folder, "agent-thompson.json")
    if os.path.isfile(record_path):  # a finished agent
        record = read_json(record_path, "a bandit agent's record")
    else:  # an agent still playing: its last checkpoint holds the settings
        record = read_metadata(os.path.join(args.folder, "agent-thompson.bbb")).get("extra")
    stored = record.get("settings") if isinstance(record, dict) else None
    if not isinstance(stored, dict):
        sys.exit(f"{args.folder}/agent-thompson.json holds no agent settings")
    settings = dict(bandit_settings.THOMPSON_SETTINGS, **stored)
    data = load_mushroom()
    contexts, edible = data.contexts, data.edible
    agent = bandit_settings.make_agent(settings, contexts.shape[1])
    extra = agent.load(os.path.join(args.folder, "agent-thompson.bbb"))
    steps = len(extra["actions"]) if isinstance(extra, dict) and "actions" in extra else "?"
    inputs = action_inputs(contexts)
    outputs, _ = sample_network_outputs(agent.trainer, inputs, args.samples)
    rewards = outputs.asnumpy().reshape(args.samples, len(contexts), 2)
    p_eat = (rewards[:, :, EAT] > rewards[:, :, PASS]).mean(axis=0)
    agent.trainer.set_mean()
    mean = agent.net(nd.array(inputs)).asnumpy().reshape(len(contexts), 2)
    mean_eats = mean[:, EAT] > mean[:, PASS]
    poisonous = ~edible
    print(f"{args.folder}: Thompson agent after {steps} steps, {args.samples} posterior draws")
    print(f"poisonous mushrooms ({poisonous.sum():,}): the posterior mean eats "
          f"{mean_eats[poisonous].mean():.1%}; a draw eats {p_eat[poisonous].mean():.1%} on average; "
          f"{(p_eat[poisonous] > 0.05).mean():.1%} are eaten by more than 5% of the draws")
    print(f"edible mushrooms ({edible.sum():,}): the posterior mean passes "
          f"{(~mean_eats[edible]).mean():.1%}; a draw passes {1 - p_eat[edible].mean():.1%} on average")
    print(f"predicted reward for eating, averaged over the draws: poisonous {rewards[:, poisonous, EAT].mean():.1f} "
          f"(true expectation -15), edible {rewards[:, edible, EAT].mean():.2f} (true 5); standard "
          f"deviation over the draws: poisonous {rewards[:, poisonous, EAT].std(axis=0).mean():.2f}, "
          f"edible {rewards[:, edible, EAT].std(axis=0).mean():.2f}")


if __name__ == "__main__":
    try:
        main()
    except ValueError as error:  # a bad record or checkpoint: one line naming the file
        print(f"bandit_posterior_check: {error}", file=sys.stderr)
        sys.exit(2)
