#!/usr/bin/env python
"""Where the time of one mushroom-bandit interaction goes, for each kind of agent.

An interaction is ``agent.act(context)`` (predict the reward of both actions, pick one: the
step's one host sync), then ``agent.observe(context, action, reward)``: store it in the
buffer, draw 64 minibatches of 64 and copy them to the device, then 64 training steps.
This script plays the agents of ``gluon-bbb bandit`` (the paper's settings,
:mod:`gluon_bbb.experiments.bandit_run`) on the real mushrooms and times each part, waiting
for MXNet's queue at the end of each part so that work is charged where it is queued:

- ``act``: ``agent.act``;
- ``buffer and copies``: ``observe`` less its training steps;
- ``training steps``: the 64 calls of the agent's training step (wrapped by this script).

After ``--warmup`` interactions it times ``--interactions`` more and prints milliseconds per
interaction, and the hours 50,000 interactions would take at that rate.

Usage::

    GLUON_BBB_DATA=../shared/data python benchmarks/bandit_interaction.py [--interactions 100] [--json out.json]
"""
import argparse
import json
import sys
import time

import numpy as np
from mxnet import nd

from gluon_bbb import bandit
from gluon_bbb.experiments import bandit_run, bandit_settings
from gluon_bbb.experiments.machine import machine_info
from gluon_bbb.data.mushroom import load_mushroom


class TimedSteps:
    """Wraps an agent's training step, adding up its wall time (queue drained at the end of
    each interaction's steps by :func:`play`)."""

    def __init__(self, agent, steps_per_interaction):
        self.step, self.seconds, self.calls = agent._train_step, 0.0, 0  # noqa: SLF001 -- instrumented
        self.steps_per_interaction = steps_per_interaction
        agent._train_step = self  # noqa: SLF001

    def __call__(self, *args):
        start = time.perf_counter()
        self.step(*args)
        if self.calls % self.steps_per_interaction == self.steps_per_interaction - 1:
            nd.waitall()
        self.seconds += time.perf_counter() - start
        self.calls += 1


def play(agent, env, indices, harmful, timed_steps):
    """Seconds of (act, observe) over the given steps."""
    act_seconds = observe_seconds = 0.0
    for index, harm in zip(indices, harmful):
        start = time.perf_counter()
        action = agent.act(env.contexts[index])
        middle = time.perf_counter()
        agent.observe(env.contexts[index], action, float(env.rewards(index, action, harm)))
        nd.waitall()
        act_seconds += middle - start
        observe_seconds += time.perf_counter() - middle
    return act_seconds, observe_seconds


def measure(name, env, warmup, interactions):
    settings = bandit_settings.agent_settings(name, warmup + interactions)
    agent = bandit_settings.make_agent(settings, env.num_features)
    indices, harmful = env.draw_episode(warmup + interactions, seed=0)
    timed = TimedSteps(agent, settings["num_minibatches"])
    play(agent, env, indices[:warmup], harmful[:warmup], timed)
    timed.seconds = 0.0
    act, observe = play(agent, env, indices[warmup:], harmful[warmup:], timed)
    per = {"act": act, "buffer and copies": observe - timed.seconds,
           "training steps": timed.seconds, "total": act + observe}
    return {part: seconds / interactions * 1e3 for part, seconds in per.items()}


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--agents", nargs="+", default=["thompson", "greedy-0"],
                        choices=list(bandit_settings.AGENTS))
    parser.add_argument("--warmup", type=int, default=20)
    parser.add_argument("--interactions", type=int, default=100)
    parser.add_argument("--json", default=None)
    args = parser.parse_args(argv)
    data = load_mushroom()
    env = bandit.MushroomBandit(data.contexts, data.edible)
    results = {"command": " ".join(["python"] + sys.argv), "machine": machine_info(), "agents": {}}
    parts = ("act", "buffer and copies", "training steps", "total")
    print("| agent | " + " | ".join(f"{part} ms" for part in parts) + " | 50,000 interactions |")
    print("|---|" + "---:|" * (len(parts) + 1))
    for name in args.agents:
        row = measure(name, env, args.warmup, args.interactions)
        results["agents"][name] = row
        hours = row["total"] * 50_000 / 1e3 / 3600
        print(f"| {bandit_settings.AGENTS[name][0]} | " + " | ".join(f"{row[p]:.1f}" for p in parts)
              + f" | {hours:.2f} h |", flush=True)
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(results, handle, indent=2)
    return results


if __name__ == "__main__":
    main()
