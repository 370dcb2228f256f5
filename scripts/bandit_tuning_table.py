#!/usr/bin/env python
"""A table of short bandit runs side by side: the cumulative expected regret of every agent
recorded in each folder at chosen steps, its poisonous meals, the edible mushrooms it passed
and its seconds, with the settings that differ from the paper's defaults; with
``--in-progress``, also of the agents still playing, from their checkpoints.

Each folder is the output of one ``gluon-bbb bandit`` command (``agent-<name>.json`` per
finished agent); the histories are rebuilt from the recorded actions
(:func:`gluon_bbb.experiments.bandit_run.recorded_histories`, which checks them against each
record's regret), so any step can be tabulated, not only the summary's milestones.

Usage::

    GLUON_BBB_DATA=/work/shared/data python scripts/bandit_tuning_table.py runs/bt/* \\
        --steps 1000 2000 3000 5000
"""
import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))
from gluon_bbb.apps import bandit  # noqa: E402
from gluon_bbb.data.mushroom import load_mushroom  # noqa: E402
from gluon_bbb.experiments import bandit_run, bandit_settings  # noqa: E402


def changed_settings(settings):
    """The settings of a recorded agent that differ from the paper's defaults, as text."""
    defaults = bandit_settings.THOMPSON_SETTINGS if settings["epsilon"] is None \
        else bandit_settings.GREEDY_SETTINGS
    changed = []
    for key, default in defaults.items():
        value = settings[key]
        if key == "prior":
            changed += [f"{name} {value[name]:g}" for name in default if value[name] != default[name]]
        elif value != default:
            changed.append(f"{key} {value}")
    if settings["buffer_size"] != bandit_settings.PAPER_SETTINGS["buffer_size"]:
        changed.append(f"buffer_size {settings['buffer_size']}")
    return ", ".join(changed) or "the paper's"


def agent_rows(folder, env, in_progress=False):
    """(label, settings, history, seconds) of each agent recorded in ``folder``; with
    ``in_progress``, also of each agent that has only a checkpoint so far (its label says how
    far it is). A folder that cannot be read is reported as an HTML comment and skipped."""
    records = {name: bandit_run.read_agent_record(folder, name) for name in bandit_settings.AGENTS}
    histories = {}
    if any(records.values()) or not in_progress:  # none recorded: only the checkpoints to show
        try:
            histories = bandit_run.recorded_histories(folder, env)
        except ValueError as error:
            print(f"<!-- {error} -->")
            return []
    rows = []
    for name, record in records.items():
        if record is not None:
            rows.append((record["label"], record["settings"], histories[record["label"]],
                         record["seconds"]))
            continue
        if not in_progress:
            continue
        try:
            played = bandit_run.checkpointed_history(folder, name, env)
        except ValueError as error:
            print(f"<!-- {error} -->")
            continue
        if played is not None:
            settings, history, seconds = played
            rows.append((f"{settings['label']} (in progress: {len(history.actions):,} of "
                         f"{settings['steps']:,} steps)", settings, history, seconds))
    return rows


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("folders", nargs="+", help="output folders of gluon-bbb bandit")
    parser.add_argument("--steps", type=int, nargs="+", default=[1000, 2000, 3000, 5000],
                        help="steps at which to give the cumulative expected regret")
    parser.add_argument("--in-progress", action="store_true",
                        help="also agents still playing (or stopped): their steps so far, "
                             "from their checkpoints")
    parser.add_argument("--mushroom", default=None,
                        help="agaricus-lepiota.data (default: $GLUON_BBB_DATA/mushroom/...)")
    args = parser.parse_args(argv)
    path = args.mushroom or os.path.join(os.environ.get("GLUON_BBB_DATA", ""), "mushroom",
                                         "agaricus-lepiota.data")
    data = load_mushroom(path)
    env = bandit.MushroomBandit(data.contexts, data.edible)
    print("| folder | agent | seed | settings | " + " | ".join(f"{s:,}" for s in args.steps)
          + " | poisonous eaten (whole run) | edible passed (whole run) | seconds |")
    print("|---|---|---:|---|" + "---:|" * (len(args.steps) + 3))
    for folder in args.folders:
        for label, settings, history, seconds in agent_rows(folder, env, args.in_progress):
            curve = history.cumulative_expected_regret
            cells = [f"{curve[s - 1]:,.0f}" if s <= len(curve) else "" for s in args.steps]
            eaten, edible = history.actions == bandit.EAT, env.edible[history.indices]
            print(f"| {os.path.basename(os.path.normpath(folder))} | {label} | "
                  f"{settings['seed']} | {changed_settings(settings)} | " + " | ".join(cells)
                  + f" | {int(np.sum(eaten & ~edible)):,} | {int(np.sum(~eaten & edible)):,} | "
                  f"{seconds:,.0f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
