"""The mushroom contextual bandit of the paper (Blundell et al. 2015, section 5.3): the
environment.

At every step the agent is shown a random mushroom (its one-hot attributes, the context)
and either eats it or passes:

- eating an edible mushroom gives +5;
- eating a poisonous one gives -35 with probability 1/2 and +5 otherwise;
- passing gives 0.

The oracle eats exactly the edible mushrooms (+5 for those, 0 for the others); the regret
of a step is the oracle's reward minus the agent's.
"""
import numpy as np

from ..._checks import check_int

__all__ = [
    "PASS",
    "EAT",
    "NUM_ACTIONS",
    "EDIBLE_REWARD",
    "POISONOUS_REWARD",
    "POISON_PROBABILITY",
    "MushroomBandit",
    "action_inputs",
]

#: Actions: pass (do not eat), eat.
PASS, EAT = 0, 1
NUM_ACTIONS = 2
#: Reward for eating an edible mushroom, or a poisonous one that turns out harmless.
EDIBLE_REWARD = 5.0
#: Reward for eating a poisonous mushroom that turns out harmful.
POISONOUS_REWARD = -35.0
#: Probability that eating a poisonous mushroom is harmful.
POISON_PROBABILITY = 0.5


# ----------------------------------------------------------------------------
# Environment
# ----------------------------------------------------------------------------

class MushroomBandit:
    """The environment: contexts, rewards and the oracle.

    Parameters
    ----------
    contexts : array_like, (N, F)
        One-hot mushroom attributes, e.g. :func:`gluon_bbb.data.mushroom.load_mushroom`'s.
    edible : array_like of bool, (N,)
    """

    def __init__(self, contexts, edible):
        contexts = np.asarray(contexts, dtype=np.float32)
        edible = np.asarray(edible)
        if contexts.ndim != 2 or len(contexts) == 0:
            raise ValueError(f"contexts must have shape (N, F) with N >= 1, got {contexts.shape}")
        if edible.shape != (len(contexts),) or edible.dtype != bool:
            raise ValueError(f"edible must be a bool array of shape ({len(contexts)},), "
                             f"got {edible.dtype} {edible.shape}")
        self.contexts, self.edible = contexts, edible

    @property
    def num_features(self):
        """F, the length of a context."""
        return self.contexts.shape[1]

    def draw_episode(self, num_steps, seed=0):
        """Random mushrooms and coin flips for ``num_steps`` steps.

        The mushrooms and the coin flips come from two independent streams of ``seed``, so
        the first T steps of a longer episode are the episode of T steps: a run can be
        extended to more steps.

        Returns
        -------
        indices : numpy.ndarray of int, (num_steps,), uniformly drawn mushrooms
        harmful : numpy.ndarray of bool, (num_steps,)
            Whether eating that step's mushroom would hurt, if it is poisonous (prob. 1/2).
        """
        check_int("num_steps", num_steps)
        mushrooms, coins = (np.random.default_rng([int(seed), stream]) for stream in (0, 1))
        indices = mushrooms.integers(0, len(self.contexts), size=num_steps)
        return indices, coins.random(num_steps) < POISON_PROBABILITY

    def rewards(self, indices, actions, harmful):
        """Rewards received, vectorised over steps.

        Parameters
        ----------
        indices : array_like of int, (T,) mushrooms
        actions : array_like of int, (T,) PASS or EAT
        harmful : array_like of bool, (T,) the coin flips of :meth:`draw_episode`

        Returns
        -------
        numpy.ndarray of float64, (T,)
        """
        indices, actions = self._check_steps(indices, actions)
        harmful = np.asarray(harmful, dtype=bool)
        eaten = np.where(self.edible[indices] | ~harmful, EDIBLE_REWARD, POISONOUS_REWARD)
        return np.where(actions == EAT, eaten, 0.0)

    def expected_rewards(self, indices, actions):
        """Rewards averaged over the coin flip: eating a poisonous mushroom is worth -15."""
        indices, actions = self._check_steps(indices, actions)
        poisonous = POISON_PROBABILITY * POISONOUS_REWARD + (1 - POISON_PROBABILITY) * EDIBLE_REWARD
        eaten = np.where(self.edible[indices], EDIBLE_REWARD, poisonous)
        return np.where(actions == EAT, eaten, 0.0)

    def oracle_rewards(self, indices):
        """The oracle eats exactly the edible mushrooms: 5 for those, 0 otherwise."""
        indices = self._check_steps(indices, np.zeros(np.shape(indices), dtype=int))[0]
        return np.where(self.edible[indices], EDIBLE_REWARD, 0.0)

    def _check_steps(self, indices, actions):
        indices, actions = np.asarray(indices), np.asarray(actions)
        if indices.shape != actions.shape:
            raise ValueError(f"indices {indices.shape} and actions {actions.shape} differ in shape")
        if np.any((indices < 0) | (indices >= len(self.contexts))):
            raise ValueError(f"mushroom indices must lie in [0, {len(self.contexts)})")
        if np.any((actions != PASS) & (actions != EAT)):
            raise ValueError(f"actions must be PASS ({PASS}) or EAT ({EAT})")
        return indices.astype(np.int64), actions.astype(np.int64)


def action_inputs(contexts):
    """Network inputs for every (context, action) pair: the context, then a one-hot action.

    Parameters
    ----------
    contexts : array_like, (N, F)

    Returns
    -------
    numpy.ndarray of float32, (N * NUM_ACTIONS, F + NUM_ACTIONS)
        Row n * NUM_ACTIONS + a holds context n with action a.
    """
    contexts = np.asarray(contexts, dtype=np.float32)
    if contexts.ndim != 2:
        raise ValueError(f"contexts must have shape (N, F), got {contexts.shape}")
    repeated = np.repeat(contexts, NUM_ACTIONS, axis=0)
    actions = np.tile(np.eye(NUM_ACTIONS, dtype=np.float32), (len(contexts), 1))
    return np.concatenate([repeated, actions], axis=1)
