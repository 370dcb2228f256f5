"""The mushroom contextual bandit of the paper (Blundell et al. 2015, section 5.3, Fig. 6).

- :mod:`~gluon_bbb.apps.bandit.environment`: the mushrooms, their rewards and the oracle;
- :mod:`~gluon_bbb.apps.bandit.agents`: Thompson sampling with Bayes by Backprop, and
  epsilon-greedy agents, each with a reward network trained from a replay buffer;
- :mod:`~gluon_bbb.apps.bandit.play`: the loop that plays an agent (resumable), the regret
  history and the figure.

Every public name of the three is available here, e.g. ``gluon_bbb.apps.bandit.ThompsonAgent``.
"""
from .environment import (EAT, EDIBLE_REWARD, NUM_ACTIONS, PASS, POISON_PROBABILITY,
                          POISONOUS_REWARD, MushroomBandit, action_inputs)
from .agents import EpsilonGreedyAgent, ReplayBuffer, ThompsonAgent
from .play import SEGMENT_STEPS, BanditHistory, plot_cumulative_regret, replay_history, run_bandit

__all__ = [
    "PASS",
    "EAT",
    "NUM_ACTIONS",
    "EDIBLE_REWARD",
    "POISONOUS_REWARD",
    "POISON_PROBABILITY",
    "MushroomBandit",
    "action_inputs",
    "ReplayBuffer",
    "ThompsonAgent",
    "EpsilonGreedyAgent",
    "SEGMENT_STEPS",
    "BanditHistory",
    "run_bandit",
    "replay_history",
    "plot_cumulative_regret",
]
