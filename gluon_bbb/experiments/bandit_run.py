"""The paper's mushroom bandit experiment (section 5.3, Fig. 6) as a resumable run folder.

:func:`run_agents` plays Thompson sampling with Bayes by Backprop and epsilon-greedy agents
(epsilon 0, 1%, 5%) on the UCI mushrooms with the settings of the paper and of
``notebooks/08_bandit.ipynb``: reward networks of two hidden layers of 100 ReLUs, a buffer of
the last 4096 interactions, ``num_minibatches`` (the paper: 64) minibatches of 64 after every
interaction, Adam at 1e-3, and for the Bayesian agent the scale-mixture prior pi = 1/2,
-log sigma1 = 0, -log sigma2 = 6, two weight samples per training step and two averaged to
act. Each of these can be changed
(:func:`~gluon_bbb.experiments.bandit_settings.agent_settings`): the optimizer, its learning rate
and gradient clipping per kind of agent, and for the Bayesian agent the prior, the samples,
the initial rho (one value or a uniform range), the complexity weight and its weighting
across minibatches (Eq. 9), and whether it acts on averaged predictions or averaged weights.
Every agent is seeded the same way (``mx.random.seed(seed)``, agent seed, episode seed),
so all see the same mushrooms and coin flips, and an agent's result does not depend on which
agents ran before it.

The output folder holds:

``agent-<name>.json``
    Written atomically as soon as the agent finishes: its settings, final numbers, seconds,
    every action (from which :func:`gluon_bbb.apps.bandit.replay_history` rebuilds the whole
    history) and its cumulative regret curves, downsampled to at most
    :data:`MAX_CURVE_POINTS` points. A later run with the same settings skips the agent.
``agent-<name>.bbb``
    The agent's checkpoint (network, optimizer state, actions so far, seconds), written
    atomically after every :data:`~gluon_bbb.apps.bandit.SEGMENT_STEPS` steps. The same command
    resumes an interrupted agent from it, and a longer run of the same settings (more
    ``steps``) continues a finished one from its last checkpoint; either way the result is
    the uninterrupted run's. A damaged checkpoint is named in a warning and the agent is
    played from the start.
``bandit.json``, ``bandit.md``
    The final cumulative regret of each agent and the wall times.
``regret.png``
    The cumulative expected regret against steps (:func:`~gluon_bbb.apps.bandit.plot_cumulative_regret`).
"""
import hashlib
import json
import logging
import os
import time

import mxnet as mx
import numpy as np

from ..apps import bandit
from .. import plots
from ..io.checkpoint import CheckpointError, atomic_write_bytes, read_json, read_metadata, write_json
from .machine import machine_info
from ..data.mushroom import load_mushroom
from .runlock import RunFolderLock
from .bandit_settings import (AGENTS, GREEDY_SETTINGS, PAPER_SETTINGS, THOMPSON_SETTINGS,
                              agent_settings, check_agent, greedy_settings, make_agent,
                              thompson_settings, with_later_defaults)

__all__ = [
    "MAX_CURVE_POINTS",
    "read_agent_record",
    "recorded_histories",
    "recorded_agent",
    "checkpointed_history",
    "run_agents",
    "summary_table",
    "milestone_table",
    "milestones",
    "MILESTONES",
]

logger = logging.getLogger(__name__)

#: Steps at which ``bandit.md`` gives every agent's cumulative expected regret (the paper's
#: horizon is 50,000), with the last step of the run.
MILESTONES = (1_000, 5_000, 10_000, 25_000, 50_000)
#: The stored cumulative regret curves keep at most this many points.
MAX_CURVE_POINTS = 1000
#: An agent's checkpoint, ``agent-<name>.bbb``, written after every
#: :data:`~gluon_bbb.apps.bandit.SEGMENT_STEPS` steps.
CHECKPOINT_SUFFIX = ".bbb"
SUMMARY_JSON = "bandit.json"
SUMMARY_MD = "bandit.md"
FIGURE = "regret.png"


def _agent_path(output_dir, name):
    return os.path.join(output_dir, f"agent-{name}.json")


def read_agent_record(output_dir, name):
    """The stored record of agent ``name`` in ``output_dir``, or None if there is none.

    A record that is not valid JSON, or whose fields do not have the types and sizes this
    module writes, is reported in one warning that names the file, and treated as absent (the
    agent is played again).
    """
    path = _agent_path(output_dir, name)
    if not os.path.isfile(path):
        return None
    try:
        record = _checked_record(read_json(path, "an agent's record"), path)
        record["settings"] = with_later_defaults(record["settings"])
        return record
    except CheckpointError as error:
        logger.warning("%s; the agent is played again", error)
        return None


def recorded_histories(output_dir, env):
    """The history of every agent recorded in ``output_dir``, rebuilt from its actions.

    Parameters
    ----------
    output_dir : str, a folder :func:`run_agents` wrote (e.g. the committed ``docs/bandit``)
    env : gluon_bbb.apps.bandit.MushroomBandit, on the mushrooms the agents played

    Returns
    -------
    dict
        Label (e.g. ``'0% greedy'``) -> :class:`~gluon_bbb.apps.bandit.BanditHistory` of its
        (T,) steps, in the order of :data:`AGENTS`; agents without a record are left out.

    Raises
    ------
    ValueError
        No agent's record in ``output_dir``, or records of another mushroom file (their
        actions do not replay on ``env``), named.
    """
    histories = {}
    for name in AGENTS:
        record = read_agent_record(output_dir, name)
        if record is None:
            continue
        try:
            history = bandit.replay_history(env, record["actions"], record["settings"]["seed"])
        except (ValueError, IndexError) as error:
            raise ValueError(f"{_agent_path(output_dir, name)} does not replay on these "
                             f"mushrooms: {error}") from None
        curve = record.get("curve") or {}
        steps = curve.get("step") or []
        replayed = history.cumulative_expected_regret[np.asarray(steps, dtype=int) - 1] \
            if steps and all(1 <= step <= len(history.actions) for step in steps) else None
        if replayed is None or replayed.tolist() != curve.get("cumulative_expected_regret") \
                or _final_numbers(history, env) != record["final"]:
            raise ValueError(f"{_agent_path(output_dir, name)} was played on other mushrooms: "
                             f"its actions do not give its recorded regret here")
        histories[record["label"]] = history
    if not histories:
        raise ValueError(f"{output_dir} holds no agent's record (agent-<name>.json)")
    return histories


def recorded_agent(output_dir, name, num_features, ctx=None):
    """Agent ``name`` as it ended its recorded run in ``output_dir``, from its checkpoint.

    Parameters
    ----------
    output_dir : str, a folder :func:`run_agents` wrote
    name : str, a key of :data:`AGENTS`
    num_features : int, the contexts' one-hot features (117 for the UCI mushrooms)
    ctx : mx.Context or str, optional

    Returns
    -------
    (agent, record)
        The agent (a ``ThompsonAgent`` or ``EpsilonGreedyAgent``) with the network and
        optimizer state of the last step of its record, and the record
        (:func:`read_agent_record`).

    Raises
    ------
    ValueError
        No record, or a checkpoint that is missing, damaged or not of the record's last step,
        named.
    """
    check_agent(name)
    record = read_agent_record(output_dir, name)
    if record is None:
        raise ValueError(f"{_agent_path(output_dir, name)}: no readable record of agent {name!r}")
    path = _checkpoint_path(output_dir, name)
    if not os.path.isfile(path):
        raise ValueError(f"{path}: no checkpoint of agent {name!r}")
    agent = make_agent(record["settings"], num_features, ctx)
    extra = agent.load(path)  # a damaged file: a CheckpointError (a ValueError) naming it
    actions = extra.get("actions") if isinstance(extra, dict) else None
    if not (_same_run(extra.get("settings"), record["settings"]) and actions == record["actions"]):
        raise ValueError(f"{path} is not the checkpoint of the last step of "
                         f"{_agent_path(output_dir, name)}")
    return agent, record


def checkpointed_history(output_dir, name, env):
    """The steps agent ``name`` has played so far, from its checkpoint in ``output_dir``.

    For watching a run that is still under way (or was stopped): the checkpoint is written
    after every :data:`~gluon_bbb.apps.bandit.SEGMENT_STEPS` steps, with the actions so far.
    Only the checkpoint's metadata is read; its arrays are not.

    Parameters
    ----------
    output_dir : str, a folder :func:`run_agents` writes
    name : str, a key of :data:`AGENTS`
    env : gluon_bbb.apps.bandit.MushroomBandit, on the mushrooms the agent plays

    Returns
    -------
    (settings, history, seconds) or None
        The run's settings (``settings['steps']`` is the length asked for), the
        :class:`~gluon_bbb.apps.bandit.BanditHistory` of the (T,) steps played so far and the
        agent's seconds up to its checkpoint; None where the agent has no checkpoint.

    Raises
    ------
    ValueError
        A checkpoint that is damaged, not a bandit agent's, or whose actions do not replay on
        ``env``, named.
    """
    check_agent(name)
    path = _checkpoint_path(output_dir, name)
    if not os.path.isfile(path):
        return None
    extra = read_metadata(path).get("extra")  # a damaged file: a CheckpointError naming it
    if not (isinstance(extra, dict) and isinstance(extra.get("settings"), dict)
            and isinstance(extra.get("seconds"), (int, float)) and _are_actions(extra.get("actions"))
            and isinstance(extra["settings"].get("seed"), int)
            and extra["settings"].get("agent") == name):
        raise CheckpointError(f"{path} is not a checkpoint of bandit agent {name!r}")
    try:
        history = bandit.replay_history(env, extra["actions"], extra["settings"]["seed"])
    except (ValueError, IndexError) as error:
        raise ValueError(f"{path} does not replay on these mushrooms: {error}") from None
    return with_later_defaults(extra["settings"]), history, float(extra["seconds"])


def _checked_record(record, path):
    """``record`` if it has the fields and types of :func:`_record`, else a CheckpointError."""
    settings, final = record.get("settings"), record.get("final")
    actions = record.get("actions")
    numbers_ok = isinstance(final, dict) and all(
        isinstance(final.get(key), (int, float)) and not isinstance(final.get(key), bool)
        for key in ("cumulative_expected_regret", "cumulative_regret", "eaten",
                    "poisonous_eaten", "edible_passed"))
    if not (isinstance(settings, dict) and isinstance(settings.get("steps"), int)
            and isinstance(settings.get("seed"), int) and numbers_ok
            and isinstance(record.get("label"), str) and isinstance(record.get("agent"), str)
            and isinstance(record.get("seconds"), (int, float))
            and _are_actions(actions) and len(actions) == settings["steps"]):
        raise CheckpointError(f"{path} is not an agent's record of this format")
    return record


def _are_actions(values):
    """Whether ``values`` (from a JSON file) is a list of PASS and EAT."""
    return isinstance(values, list) and all(
        value in (bandit.PASS, bandit.EAT) and not isinstance(value, bool) for value in values)


def _downsampled(values, max_points=MAX_CURVE_POINTS):
    """(steps from 1, values) at at most ``max_points`` evenly spaced steps, the last included."""
    steps = np.unique(np.linspace(1, len(values), min(len(values), max_points)).round().astype(int))
    return steps.tolist(), np.asarray(values)[steps - 1].tolist()


def _final_numbers(history, env):
    eaten = history.actions == bandit.EAT
    edible = env.edible[history.indices]
    return {"cumulative_expected_regret": float(history.cumulative_expected_regret[-1]),
            "cumulative_regret": float(history.cumulative_regret[-1]),
            "eaten": int(eaten.sum()),
            "poisonous_eaten": int(np.sum(eaten & ~edible)),
            "edible_passed": int(np.sum(~eaten & edible))}


def _record(settings, history, env, seconds):
    steps, expected = _downsampled(history.cumulative_expected_regret)
    _, realised = _downsampled(history.cumulative_regret)
    return {"agent": settings["agent"], "label": settings["label"], "settings": settings,
            "final": _final_numbers(history, env), "seconds": seconds,
            "finished": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            "actions": history.actions.tolist(),
            "curve": {"step": steps, "cumulative_expected_regret": expected,
                      "cumulative_regret": realised}}


def _write_compact_json(path, payload):
    text = json.dumps(payload, separators=(",", ":"), sort_keys=True, allow_nan=False)
    atomic_write_bytes(path, (text + "\n").encode("utf-8"))


def _checkpoint_path(output_dir, name):
    return os.path.join(output_dir, f"agent-{name}{CHECKPOINT_SUFFIX}")


def _same_run(stored, settings):
    """Whether stored settings describe the same run as ``settings``, up to its length."""
    stored = with_later_defaults(stored)
    return isinstance(stored, dict) and {k: v for k, v in stored.items() if k != "steps"} == \
        {k: v for k, v in settings.items() if k != "steps"}


def _resume_point(settings, env, path, ctx):
    """(agent, actions, seconds, checkpoint_steps): a fresh agent, or one restored from the
    checkpoint at ``path`` with the actions and seconds of the steps it has played; and how
    many steps that checkpoint of the same run holds (0 if none), used or not."""
    agent = make_agent(settings, env.num_features, ctx)
    if not os.path.exists(path):
        return agent, None, 0.0, 0
    try:
        extra = agent.load(path)
        if not (isinstance(extra, dict) and isinstance(extra.get("actions"), list)
                and isinstance(extra.get("seconds"), (int, float))):
            raise CheckpointError(f"{path} is not a bandit agent's checkpoint of this format")
        if not _same_run(extra.get("settings"), settings):
            logger.info("%s holds another run's agent; playing from the start", path)
            return make_agent(settings, env.num_features, ctx), None, 0.0, 0
        actions = extra["actions"]
        if len(actions) > settings["steps"]:
            logger.info("%s is %d steps in, past the %d asked for; playing from the start",
                        path, len(actions), settings["steps"])
            return make_agent(settings, env.num_features, ctx), None, 0.0, len(actions)
        if not _are_actions(actions) or len(actions) % bandit.play.SEGMENT_STEPS:
            raise CheckpointError(f"{path}: its actions are not a whole number of segments "
                                  f"of PASS/EAT")
        logger.info("%s: resuming after step %d", settings["label"], len(actions))
        return agent, actions, float(extra["seconds"]), len(actions)
    except CheckpointError as error:  # a bad file: say which, and start afresh
        logger.warning("%s; the agent is played from the start", error)
        return make_agent(settings, env.num_features, ctx), None, 0.0, 0


def _play(settings, env, output_dir, ctx, progress):
    """Play one agent (resuming from its checkpoint) and store its record; returns it."""
    start = time.time()
    path = _checkpoint_path(output_dir, settings["agent"])
    agent, actions, seconds_before, checkpoint_steps = _resume_point(settings, env, path, ctx)

    def save(num_done, actions_done):
        if num_done > checkpoint_steps:  # a checkpoint of this run never moves back
            agent.save(path, extra={"settings": settings, "actions": actions_done.tolist(),
                                    "seconds": seconds_before + time.time() - start})

    history = bandit.run_bandit(agent, env, settings["steps"], seed=settings["seed"],
                                progress=progress, actions=actions, on_segment=save)
    record = _record(settings, history, env, seconds_before + time.time() - start)
    _write_compact_json(_agent_path(output_dir, settings["agent"]), record)
    return record


def run_agents(mushroom_path, steps, output_dir, agents=tuple(AGENTS), seed=0, num_minibatches=64,
               ctx=None, progress=False, command=None, thompson=None,
               buffer_size=PAPER_SETTINGS["buffer_size"], greedy=None):
    """Play each agent for ``steps`` steps (skipping those already stored) and summarise.

    Parameters
    ----------
    mushroom_path : str, ``agaricus-lepiota.data``
    steps : int, interactions per agent (the paper: 50,000)
    output_dir : str
    agents : sequence of str, keys of :data:`AGENTS`
    seed : int
    num_minibatches : int, the paper: 64
    ctx : mx.Context or str, optional
    progress : bool, progress bars, as :func:`gluon_bbb.bandit.run_bandit` shows them
    command : str, optional, recorded in ``bandit.json``
    thompson : dict, optional
        Settings of the Thompson agent replacing the paper's (:func:`thompson_settings`).
    buffer_size : int, the most recent interactions every agent trains on (the paper: 4096)
    greedy : dict, optional
        Settings of the epsilon-greedy agents replacing the paper's (:func:`greedy_settings`).

    Returns
    -------
    dict, the contents of ``bandit.json``; its 'agents' rows say whether each was 'skipped'.
    """
    start = time.time()
    thompson_settings(thompson)  # checked before anything runs
    greedy_settings(greedy)
    agents = list(dict.fromkeys(agents))
    if not agents:
        raise ValueError("no agents to play")
    for name in agents:
        check_agent(name)
    data = load_mushroom(mushroom_path)  # a clear error for a missing or malformed file
    with open(mushroom_path, "rb") as handle:
        sha256 = hashlib.sha256(handle.read()).hexdigest()
    env = bandit.MushroomBandit(data.contexts, data.edible)
    all_settings = [agent_settings(name, steps, seed, num_minibatches, sha256, thompson,
                                   buffer_size, greedy) for name in agents]
    with RunFolderLock(output_dir):  # one writer per folder
        return _run_agents_locked(all_settings, env, data, mushroom_path, steps, output_dir, ctx,
                                  progress, command, start)


def _run_agents_locked(all_settings, env, data, mushroom_path, steps, output_dir, ctx, progress,
                       command, start):
    records, skipped = [], []
    for settings in all_settings:
        record = read_agent_record(output_dir, settings["agent"])
        if record is not None and record.get("settings") == settings:
            logger.info("%s: finished earlier with the same settings, skipped", settings["label"])
            skipped.append(settings["agent"])
        else:
            logger.info("%s: playing %d steps", settings["label"], steps)
            record = _play(settings, env, output_dir, ctx, progress)
            logger.info("%s: cumulative expected regret %.0f after %d steps, %.1f s",
                        settings["label"], record["final"]["cumulative_expected_regret"],
                        steps, record["seconds"])
        records.append(record)
    summary = _summary(records, skipped, env, data, mushroom_path, command, time.time() - start)
    _write_summary(output_dir, summary, records, env)
    return summary


def milestones(steps):
    """The steps of :data:`MILESTONES` up to ``steps``, and ``steps`` itself."""
    return sorted({m for m in MILESTONES if m < steps} | {int(steps)})


def _regret_at(record, env, marks):
    """{step: cumulative expected regret} of an agent's record at the given steps."""
    curve = bandit.replay_history(env, record["actions"], record["settings"]["seed"]) \
        .cumulative_expected_regret
    return {str(m): float(curve[m - 1]) for m in marks if m <= len(curve)}


def _summary(records, skipped, env, data, mushroom_path, command, seconds):
    rows = [dict(record["final"], agent=record["agent"], label=record["label"],
                 steps=record["settings"]["steps"], seconds=record["seconds"],
                 skipped=record["agent"] in skipped,
                 expected_regret_at=_regret_at(record, env, milestones(record["settings"]["steps"])))
            for record in records]
    settings = {key: value for key, value in records[0]["settings"].items()
                if key not in ("agent", "label", "epsilon")}
    for key in (*THOMPSON_SETTINGS, *GREEDY_SETTINGS):  # each kind's own, below
        settings.pop(key, None)
    thompson = next(({key: record["settings"][key] for key in THOMPSON_SETTINGS}
                     for record in records if record["settings"]["epsilon"] is None), None)
    greedy = next(({key: record["settings"][key] for key in GREEDY_SETTINGS}
                   for record in records if record["settings"]["epsilon"] is not None), None)
    return {"agents": rows, "settings": settings, "thompson": thompson, "greedy": greedy,
            "mushroom_path": os.path.abspath(mushroom_path), "num_mushrooms": len(env.edible),
            "edible_fraction": float(data.edible.mean()), "num_features": env.num_features,
            "agent_seconds_total": float(sum(row["seconds"] for row in rows)),
            "wall_seconds": seconds, "command": command, "machine": machine_info(),
            "written": time.strftime("%Y-%m-%dT%H:%M:%S%z")}


def summary_table(rows):
    """A markdown table of the ``agents`` rows of ``bandit.json``."""
    lines = ["| agent | steps | cumulative expected regret | cumulative realised regret "
             "| mushrooms eaten | poisonous eaten | edible passed | seconds |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for row in rows:
        lines.append(f"| {row['label']} | {row['steps']:,} | {row['cumulative_expected_regret']:,.0f} "
                     f"| {row['cumulative_regret']:,.0f} | {row['eaten']:,} | "
                     f"{row['poisonous_eaten']:,} | {row['edible_passed']:,} | "
                     f"{row['seconds']:.0f} |")
    return "\n".join(lines) + "\n"


def milestone_table(rows):
    """A markdown table of the cumulative expected regret of the ``agents`` rows of
    ``bandit.json`` at each of their milestones."""
    marks = sorted({int(m) for row in rows for m in row["expected_regret_at"]})
    lines = ["| agent | " + " | ".join(f"{m:,}" for m in marks) + " |",
             "| --- |" + " ---: |" * len(marks)]
    for row in rows:
        cells = [row["expected_regret_at"].get(str(m)) for m in marks]
        lines.append(f"| {row['label']} | " + " | ".join(
            "" if cell is None else f"{cell:,.0f}" for cell in cells) + " |")
    return "\n".join(lines) + "\n"


def _optimizer_text(settings):
    """An agent's optimizer in words, e.g. 'adam at learning rate 0.001'."""
    text = f"{settings['optimizer']} at learning rate {settings['learning_rate']:g}"
    clip = settings["clip_gradient"]
    if clip is not None:
        text += f", gradients clipped to [-{clip:g}, {clip:g}]"
    return text


def _training_text(summary):
    """', trained with ...' naming each kind's optimizer, for ``bandit.md``."""
    kinds = [(label, summary[key]) for key, label in (("thompson", "Thompson sampling"),
                                                       ("greedy", "the greedy agents"))
             if summary[key] is not None]
    return ", trained with " + "; ".join(f"{_optimizer_text(settings)} ({label})"
                                         for label, settings in kinds)


def _write_summary(output_dir, summary, records, env):
    write_json(os.path.join(output_dir, SUMMARY_JSON), summary)
    settings = summary["settings"]
    text = (f"# Mushroom bandit\n\n"
            f"Mushroom bandit (Blundell et al. 2015, section 5.3): {settings['steps']:,} steps per "
            f"agent, seed {settings['seed']}, networks {'x'.join(map(str, settings['hidden']))} "
            f"ReLU, buffer {settings['buffer_size']}, {settings['num_minibatches']} minibatches of "
            f"{settings['batch_size']} per interaction{_training_text(summary)}. Regret is the "
            f"oracle's reward minus the agent's; the expected regret averages the coin flip of a "
            f"poisonous meal.\n\n"
            f"{summary_table(summary['agents'])}\n"
            f"Cumulative expected regret after each number of steps:\n\n"
            f"{milestone_table(summary['agents'])}\n"
            f"Agents' time {summary['agent_seconds_total']:.0f} s in all (this invocation "
            f"{summary['wall_seconds']:.0f} s wall); command: `{summary['command']}`\n")
    atomic_write_bytes(os.path.join(output_dir, SUMMARY_MD), text.encode("utf-8"))
    histories = {record["label"]: bandit.replay_history(env, record["actions"],
                                                        record["settings"]["seed"])
                 for record in records}
    figure = bandit.plot_cumulative_regret(histories)
    figure.axes[0].set_title(f"Mushroom bandit, seed {settings['seed']}\n"
                             "cumulative expected regret (lower is better)")
    plots.save_png(figure, os.path.join(output_dir, FIGURE))
