"""Playing the mushroom bandit (Blundell et al. 2015, section 5.3, Fig. 6): the loop, the
history of regret, and the figure.

:func:`run_bandit` plays an agent for a number of steps; agents run with the same seed
see the same mushrooms and the same coin flips for poisonous ones.
"""
from dataclasses import dataclass

import numpy as np

from ..._checks import check_int
from ...plots import axes_for
from ...epochs import epoch_seed, print_in_notebook, progress_bar
from .environment import NUM_ACTIONS, action_inputs

__all__ = ["SEGMENT_STEPS", "BanditHistory", "run_bandit", "replay_history",
           "plot_cumulative_regret"]


@dataclass
class BanditHistory:
    """What happened at each of T steps.

    Attributes
    ----------
    indices : numpy.ndarray, (T,)
        Mushrooms shown.
    actions : numpy.ndarray, (T,)
        PASS or EAT.
    rewards : numpy.ndarray, (T,)
        Rewards received.
    regret : numpy.ndarray, (T,)
        Oracle reward - received reward (can be negative: a lucky poisonous meal).
    expected_regret : numpy.ndarray, (T,)
        Oracle reward - expected reward of the action (>= 0): 5 for passing on an edible
        mushroom, 15 for eating a poisonous one, else 0.
    """

    indices: np.ndarray
    actions: np.ndarray
    rewards: np.ndarray
    regret: np.ndarray
    expected_regret: np.ndarray

    @property
    def cumulative_regret(self):
        """(T,) running sum of ``regret``."""
        return np.cumsum(self.regret)

    @property
    def cumulative_expected_regret(self):
        """(T,) running sum of ``expected_regret``."""
        return np.cumsum(self.expected_regret)


#: Agents are reseeded at the start of every block of this many steps (see :func:`run_bandit`).
SEGMENT_STEPS = 1000
#: The :func:`~gluon_bbb.epochs.epoch_seed` stream of the agents' per-segment seeds.
SEGMENT_SEED_STREAM = 2


def run_bandit(agent, env, num_steps, seed=0, progress=False, actions=None, on_segment=None):
    """Play ``num_steps`` steps: show a mushroom, act, get the reward, train.

    The steps are played in segments of :data:`SEGMENT_STEPS`; at the start of segment k the
    agent is reseeded (``agent.reseed``, where it has one) from (seed, k). After a segment,
    an agent saved with its actions can later continue exactly as if never stopped: pass
    those actions back (``actions``) to an agent restored with ``agent.load``.

    Parameters
    ----------
    agent : ThompsonAgent or EpsilonGreedyAgent (anything with act and observe)
    env : MushroomBandit
    num_steps : int, >= 1
    seed : int
        Seeds the mushrooms and coin flips (:meth:`MushroomBandit.draw_episode`) and the
        agent's segments; the same seed gives every agent the same episode.
    progress : bool
        Show a progress bar over the steps (ipywidgets' in a Jupyter kernel, text on stderr
        elsewhere; :func:`gluon_bbb.epochs.progress_bar`) and, in a Jupyter kernel only, print
        the agent's cumulative expected regret at the end.
    actions : array_like of int, optional
        The first T actions of this episode, already played by ``agent`` (restored to its
        state after step T), T a multiple of :data:`SEGMENT_STEPS` and at most ``num_steps``.
        The agent's buffer is rebuilt from them, and play resumes at step T.
    on_segment : callable, optional
        Called as ``on_segment(num_done, actions)`` after every complete segment, with the
        number of steps done and their actions (num_done,), e.g. to save the agent.

    Returns
    -------
    BanditHistory
    """
    check_int("num_steps", num_steps)
    indices, harmful = env.draw_episode(num_steps, seed)
    played = np.zeros(num_steps, dtype=np.int64)
    first = 0
    if actions is not None:
        first = _resume(agent, env, indices, harmful, played, actions)
    steps = progress_bar(range(first, num_steps), progress, initial=first, total=num_steps,
                         leave=False)
    for step in steps:
        if step % SEGMENT_STEPS == 0 and hasattr(agent, "reseed"):
            agent.reseed(epoch_seed(seed, step // SEGMENT_STEPS, stream=SEGMENT_SEED_STREAM))
        index = indices[step]
        played[step] = agent.act(env.contexts[index])  # the one host sync of a step
        reward = env.rewards(index, played[step], harmful[step])
        agent.observe(env.contexts[index], int(played[step]), float(reward))
        if on_segment is not None and (step + 1) % SEGMENT_STEPS == 0:
            on_segment(step + 1, played[:step + 1].copy())
    history = replay_history(env, played, seed)
    print_in_notebook(f"{type(agent).__name__}: {num_steps:,} steps, cumulative expected regret "
                      f"{history.cumulative_expected_regret[-1]:,.0f}", progress)
    return history


def _resume(agent, env, indices, harmful, played, actions):
    """Check the actions of a resumed run, copy them into ``played``, rebuild the buffer."""
    actions = np.asarray(actions)
    done = len(actions)
    if actions.ndim != 1 or done % SEGMENT_STEPS or done > len(played):
        raise ValueError(f"a run resumes after a whole number of segments of {SEGMENT_STEPS} "
                         f"steps, at most num_steps={len(played)}; got {done} actions")
    rewards = env.rewards(indices[:done], actions, harmful[:done])  # checks the actions too
    played[:done] = actions
    rows = np.arange(done) * NUM_ACTIONS + played[:done]  # each step's (context, action) row
    agent.buffer.fill(action_inputs(env.contexts[indices[:done]])[rows], rewards)
    return done


def replay_history(env, actions, seed=0):
    """The :class:`BanditHistory` of given actions in the episode that ``seed`` draws.

    Rebuilds a history from its actions alone (e.g. stored by :mod:`gluon_bbb.experiments.bandit_run`):
    the mushrooms and coin flips are :meth:`MushroomBandit.draw_episode`'s for ``seed``.

    Parameters
    ----------
    env : MushroomBandit
    actions : array_like of int, (T,) PASS or EAT at each step
    seed : int
        The seed the episode was played with (see :func:`run_bandit`).

    Returns
    -------
    BanditHistory
    """
    actions = np.asarray(actions, dtype=np.int64)
    if actions.ndim != 1:
        raise ValueError(f"actions must be a 1-d array, got shape {actions.shape}")
    indices, harmful = env.draw_episode(len(actions), seed)
    rewards = env.rewards(indices, actions, harmful)
    oracle = env.oracle_rewards(indices)
    return BanditHistory(indices, actions, rewards, oracle - rewards,
                         oracle - env.expected_rewards(indices, actions))


def plot_cumulative_regret(histories, expected=True, ax=None):
    """Cumulative regret against steps on a log scale, one line per agent (like Fig. 6); on
    a linear scale while no agent has any regret yet (a log scale has nothing to show).

    Parameters
    ----------
    histories : dict of str -> BanditHistory
    expected : bool
        Plot the expected regret (smooth, never decreasing); False plots the realised one.
    ax : matplotlib Axes, optional
        Drawn into; default a new Figure.

    Returns
    -------
    matplotlib.figure.Figure
    """
    if not isinstance(histories, dict) or not histories:
        raise ValueError("histories must be a non-empty dict of name -> BanditHistory")
    ax = axes_for(ax)
    any_regret = False
    for name, history in histories.items():
        curve = history.cumulative_expected_regret if expected else history.cumulative_regret
        ax.plot(np.arange(1, len(curve) + 1), curve, label=name)
        any_regret = any_regret or bool(np.any(np.asarray(curve) > 0))
    if any_regret:
        ax.set_yscale("log")
    ax.set(xlabel="step", ylabel=("expected " if expected else "") + "cumulative regret")
    ax.legend()
    return ax.figure
