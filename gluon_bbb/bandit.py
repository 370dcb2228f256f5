"""The mushroom contextual bandit of the paper (Blundell et al. 2015, section 5.3, Fig. 6).

At every step the agent is shown a random mushroom (its one-hot attributes, the context)
and either eats it or passes:

- eating an edible mushroom gives +5;
- eating a poisonous one gives -35 with probability 1/2 and +5 otherwise;
- passing gives 0.

The oracle eats exactly the edible mushrooms (+5 for those, 0 for the others); the regret
of a step is the oracle's reward minus the agent's.

Each agent models the expected reward with a network on the context concatenated with a
one-hot action, trained after every interaction on minibatches from a buffer of the most
recent interactions:

- :class:`ThompsonAgent`: Bayes by Backprop through :meth:`BBBTrainer.step`; it acts
  greedily on the rewards predicted by networks sampled from the posterior (Thompson
  sampling), averaging the predictions of ``num_action_samples`` samples;
- :class:`EpsilonGreedyAgent`: the same network trained by maximum likelihood; it acts
  greedily, except that with probability epsilon it picks a random action.

:func:`run_bandit` plays an agent for a number of steps; agents run with the same seed
see the same mushrooms and the same coin flips for poisonous ones.
"""
from dataclasses import dataclass
import math

import mxnet as mx
import numpy as np

from mxnet import autograd, gluon, nd
from tqdm import tqdm

from ._checks import check_int
from .context import resolve_context
from .loss import BBBLoss
from .models import mlp
from .plots import axes_for
from .priors import Prior, ScaleMixturePrior
from .trainer import BBBTrainer
from .uncertainty import sample_network_outputs

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
    "BanditHistory",
    "run_bandit",
    "replay_history",
    "plot_cumulative_regret",
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
        One-hot mushroom attributes, e.g. :func:`gluon_bbb.mushroom.load_mushroom`'s.
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

        Returns
        -------
        indices : numpy.ndarray of int, (num_steps,), uniformly drawn mushrooms
        harmful : numpy.ndarray of bool, (num_steps,)
            Whether eating that step's mushroom would hurt, if it is poisonous (prob. 1/2).
        """
        check_int("num_steps", num_steps)
        rng = np.random.default_rng(seed)
        indices = rng.integers(0, len(self.contexts), size=num_steps)
        return indices, rng.random(num_steps) < POISON_PROBABILITY

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


# ----------------------------------------------------------------------------
# Agents
# ----------------------------------------------------------------------------

class ReplayBuffer:
    """The most recent ``capacity`` (network input, reward) pairs, in a ring.

    Parameters
    ----------
    capacity : int, >= 1
    num_inputs : int, length of a network input (F + NUM_ACTIONS)
    """

    def __init__(self, capacity, num_inputs):
        check_int("capacity", capacity)
        self.inputs = np.zeros((capacity, num_inputs), dtype=np.float32)
        self.rewards = np.zeros(capacity, dtype=np.float32)
        self.capacity, self.size, self._next = int(capacity), 0, 0

    def __len__(self):
        return self.size

    def add(self, network_input, reward):
        """Store one interaction, overwriting the oldest one when full."""
        self.inputs[self._next] = network_input
        self.rewards[self._next] = reward
        self._next = (self._next + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)

    def sample(self, num, rng):
        """``num`` interactions drawn uniformly with replacement: (num, num_inputs), (num,)."""
        if self.size == 0:
            raise ValueError("the buffer is empty")
        index = rng.integers(0, self.size, size=num)
        return self.inputs[index], self.rewards[index]


class _NetworkAgent:
    """Shared parts: the reward network, the buffer, and training after each interaction.

    The network is an :func:`~gluon_bbb.models.mlp` with one output, initialised with
    ``mx.init.Xavier()`` from MXNet's generator (call ``mx.random.seed`` first for a
    reproducible run): with gluon's default small uniform initialisation, the large negative
    rewards of poisonous mushrooms easily silence every ReLU for some contexts.
    """

    def __init__(self, num_features, hidden_sizes, buffer_size, num_minibatches, batch_size,
                 noise_sigma, learning_rate, seed, ctx):
        check_int("num_features", num_features)
        check_int("num_minibatches", num_minibatches)
        check_int("batch_size", batch_size)
        if not (float(noise_sigma) > 0 and math.isfinite(float(noise_sigma))):
            raise ValueError(f"noise_sigma must be a positive finite number, got {noise_sigma!r}")
        self.num_minibatches, self.batch_size = int(num_minibatches), int(batch_size)
        self.noise_sigma, self.learning_rate = float(noise_sigma), float(learning_rate)
        self.ctx = resolve_context(ctx)
        self.rng = np.random.default_rng(seed)
        self.num_features = int(num_features)
        num_inputs = self.num_features + NUM_ACTIONS
        self.buffer = ReplayBuffer(buffer_size, num_inputs)
        self.net = mlp(hidden_sizes, num_outputs=1)
        self.net.initialize(mx.init.Xavier(), ctx=self.ctx)
        self.net(nd.zeros((1, num_inputs), ctx=self.ctx))  # resolves the deferred shapes

    def act(self, context):
        """PASS or EAT for one context (F,)."""
        rewards = self.predicted_rewards(action_inputs(self._checked(context)[None]))
        return int(np.argmax(rewards))

    def observe(self, context, action, reward):
        """Store the interaction and train on ``num_minibatches`` minibatches of the buffer."""
        if action not in (PASS, EAT):
            raise ValueError(f"action must be PASS ({PASS}) or EAT ({EAT}), got {action!r}")
        self.buffer.add(action_inputs(self._checked(context)[None])[action], reward)
        inputs, rewards = self.buffer.sample(self.num_minibatches * self.batch_size, self.rng)
        inputs = nd.array(inputs, ctx=self.ctx)  # one copy per interaction, then slices
        rewards = nd.array(rewards, ctx=self.ctx)
        for start in range(0, len(inputs), self.batch_size):
            stop = start + self.batch_size
            self._train_step(inputs[start:stop], rewards[start:stop])

    def _checked(self, context):
        context = np.asarray(context, dtype=np.float32)
        if context.shape != (self.num_features,):
            raise ValueError(f"a context must have shape ({self.num_features},), got {context.shape}")
        return context

    def predicted_rewards(self, inputs):
        raise NotImplementedError

    def _train_step(self, inputs, rewards):
        raise NotImplementedError


class ThompsonAgent(_NetworkAgent):
    """Thompson sampling with a Bayes-by-Backprop reward network.

    Parameters
    ----------
    num_features : int, the context length F
    hidden_sizes : sequence of int
        The paper: two hidden layers of 100 ReLU units.
    prior : Prior, optional
        Default ScaleMixturePrior(0.5, 1, exp(-6)).
    noise_sigma : float
        Standard deviation of the Gaussian reward likelihood.
    num_action_samples : int
        Weight samples whose predicted rewards are averaged to pick an action.
    num_train_samples : int
        Weight samples per training step (``BBBTrainer(num_samples=...)``).
    buffer_size, num_minibatches, batch_size : int
        Train on ``num_minibatches`` minibatches of ``batch_size`` interactions drawn from
        the last ``buffer_size`` after every interaction (the paper: 4096, 64, 64).
    learning_rate : float
        Adam's learning rate.
    rho_init : float
        Initial rho of the posterior (sigma = softplus(rho)).
    seed : int
        Seeds the buffer sampling and the trainer's weight noise.
    ctx : mx.Context or str, optional

    Notes
    -----
    The complexity weight of every minibatch is pi = batch_size / buffer_size: the buffer at
    its full size is the data set of Eq. (1), cut into buffer_size / batch_size minibatches.
    Weighting by the buffer's current fill instead (pi = batch_size / len(buffer)) would make
    the complexity cost dominate the first interactions (pi = 64 after the first one with
    the paper's settings), and the network collapses onto the prior's narrow component
    before it has seen any data.
    """

    def __init__(self, num_features, hidden_sizes=(100, 100), prior=None, noise_sigma=1.0,
                 num_action_samples=2, num_train_samples=2, buffer_size=4096, num_minibatches=64,
                 batch_size=64, learning_rate=1e-3, rho_init=-5.0, seed=0, ctx=None):
        super().__init__(num_features, hidden_sizes, buffer_size, num_minibatches, batch_size,
                         noise_sigma, learning_rate, seed, ctx)
        check_int("num_action_samples", num_action_samples)
        prior = ScaleMixturePrior(0.5, 1.0, math.exp(-6)) if prior is None else prior
        if not isinstance(prior, Prior):
            raise ValueError(f"prior must be a GaussianPrior or ScaleMixturePrior, got {prior!r}")
        self.num_action_samples = int(num_action_samples)
        loss = BBBLoss(prior, likelihood="gaussian", noise_sigma=noise_sigma)
        self.trainer = BBBTrainer(self.net, loss, optimizer_params={"learning_rate": self.learning_rate},
                                  num_samples=num_train_samples, rho_init=rho_init, seed=seed, ctx=self.ctx)

    def predicted_rewards(self, inputs):
        """Rewards predicted for network inputs (M, F + 2), averaged over sampled networks."""
        outputs, _ = sample_network_outputs(self.trainer, inputs, self.num_action_samples)
        return outputs.mean(axis=0).reshape((-1,)).asnumpy()

    def _train_step(self, inputs, rewards):
        kl_weight = self.batch_size / self.buffer.capacity
        self.trainer.step(inputs, rewards, kl_weight)


class EpsilonGreedyAgent(_NetworkAgent):
    """The same reward network trained by maximum likelihood, with epsilon-greedy actions.

    Parameters
    ----------
    num_features : int
    epsilon : float in [0, 1]
        Probability of a uniformly random action (the paper: 0, 0.01, 0.05).
    hidden_sizes, noise_sigma, buffer_size, num_minibatches, batch_size, learning_rate, seed, ctx
        As for :class:`ThompsonAgent`.
    """

    def __init__(self, num_features, epsilon, hidden_sizes=(100, 100), noise_sigma=1.0,
                 buffer_size=4096, num_minibatches=64, batch_size=64, learning_rate=1e-3, seed=0,
                 ctx=None):
        super().__init__(num_features, hidden_sizes, buffer_size, num_minibatches, batch_size,
                         noise_sigma, learning_rate, seed, ctx)
        epsilon = float(epsilon)
        if not 0.0 <= epsilon <= 1.0:
            raise ValueError(f"epsilon must lie in [0, 1], got {epsilon!r}")
        self.epsilon = epsilon
        self.net.hybridize()
        self.trainer = gluon.Trainer(self.net.collect_params(), "adam",
                                     {"learning_rate": self.learning_rate})

    def act(self, context):
        if self.epsilon > 0 and self.rng.random() < self.epsilon:
            return int(self.rng.integers(0, NUM_ACTIONS))
        return super().act(context)

    def predicted_rewards(self, inputs):
        """The network's predicted rewards for inputs (M, F + 2)."""
        return self.net(nd.array(inputs, ctx=self.ctx)).reshape((-1,)).asnumpy()

    def _train_step(self, inputs, rewards):
        with autograd.record():
            residual = self.net(inputs).reshape((-1,)) - rewards
            nll = nd.sum(nd.square(residual)) * (0.5 / self.noise_sigma ** 2)  # Gaussian, up to a constant
        nll.backward()
        self.trainer.step(1)


# ----------------------------------------------------------------------------
# Playing and plotting
# ----------------------------------------------------------------------------

@dataclass
class BanditHistory:
    """What happened at each of T steps.

    Attributes
    ----------
    indices : (T,) mushrooms shown
    actions : (T,) PASS or EAT
    rewards : (T,) rewards received
    regret : (T,) oracle reward - received reward (can be negative: a lucky poisonous meal)
    expected_regret : (T,) oracle reward - expected reward of the action (>= 0):
        5 for passing on an edible mushroom, 15 for eating a poisonous one, else 0
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


def run_bandit(agent, env, num_steps, seed=0, progress=False):
    """Play ``num_steps`` steps: show a mushroom, act, get the reward, train.

    Parameters
    ----------
    agent : ThompsonAgent or EpsilonGreedyAgent (anything with act and observe)
    env : MushroomBandit
    num_steps : int, >= 1
    seed : int
        Seeds the mushrooms and coin flips (:meth:`MushroomBandit.draw_episode`); the same
        seed gives every agent the same episode.
    progress : bool
        Show a tqdm progress bar.

    Returns
    -------
    BanditHistory
    """
    indices, harmful = env.draw_episode(num_steps, seed)
    actions = np.zeros(num_steps, dtype=np.int64)
    for step in tqdm(range(num_steps), disable=not progress, leave=False):
        index = indices[step]
        actions[step] = agent.act(env.contexts[index])  # the one host sync of a step
        reward = env.rewards(index, actions[step], harmful[step])
        agent.observe(env.contexts[index], int(actions[step]), float(reward))
    return replay_history(env, actions, seed)


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
    """Cumulative regret against steps on a log scale, one line per agent (like Fig. 6).

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
    for name, history in histories.items():
        curve = history.cumulative_expected_regret if expected else history.cumulative_regret
        ax.plot(np.arange(1, len(curve) + 1), curve, label=name)
    ax.set_yscale("log")
    ax.set(xlabel="step", ylabel=("expected " if expected else "") + "cumulative regret")
    ax.legend()
    return ax.figure
