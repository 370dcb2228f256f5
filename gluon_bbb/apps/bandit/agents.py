"""The mushroom bandit's agents (Blundell et al. 2015, section 5.3).

Each agent models the expected reward with a network on the context concatenated with a
one-hot action, trained after every interaction on minibatches from a buffer of the most
recent interactions:

- :class:`ThompsonAgent`: Bayes by Backprop through :meth:`BBBTrainer.step`; it acts
  greedily on the rewards predicted by networks sampled from the posterior (Thompson
  sampling), averaging the predictions of ``num_action_samples`` samples (or predicting with
  one network, the average of ``num_action_samples`` weight samples);
- :class:`EpsilonGreedyAgent`: the same network trained by maximum likelihood; it acts
  greedily, except that with probability epsilon it picks a random action.

Both train with Adam (the default) or plain SGD, on costs summed over each minibatch, with
optional elementwise gradient clipping.

Both can be reseeded, saved and loaded, so a long run resumes exactly
(:func:`gluon_bbb.apps.bandit.run_bandit`).
"""
import math

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon, nd

from ... import weighting
from ..._checks import check_int, check_positive
from ...context import resolve_context
from ...fused.optimizers import adam as fused_adam, sgd as fused_sgd
from ...loss import BBBLoss
from ...models import mlp
from ...io.persistence import load_plain_network, save_plain_network
from ...posterior import assign_arrays
from ...priors import Prior, ScaleMixturePrior
from ...trainer import BBBTrainer
from ...analysis.uncertainty import sample_network_outputs
from .environment import EAT, NUM_ACTIONS, PASS, action_inputs

__all__ = ["ReplayBuffer", "ThompsonAgent", "EpsilonGreedyAgent"]


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
        self.num_added = 0  # every interaction ever stored, kept or overwritten since

    def __len__(self):
        return self.size

    def add(self, network_input, reward):
        """Store one interaction, overwriting the oldest one when full."""
        self.inputs[self._next] = network_input
        self.rewards[self._next] = reward
        self._next = (self._next + 1) % self.capacity
        self.size = min(self.size + 1, self.capacity)
        self.num_added += 1

    def fill(self, inputs, rewards):
        """Empty the buffer, then store the rows of ``inputs`` (T, num_inputs) and ``rewards``
        (T,) in order: the state :meth:`add` leaves after those T calls, in one step (to
        rebuild the buffer of a resumed run from its history)."""
        inputs = np.asarray(inputs, dtype=np.float32)
        rewards = np.asarray(rewards, dtype=np.float32)
        if inputs.ndim != 2 or inputs.shape[1] != self.inputs.shape[1] or rewards.shape != inputs.shape[:1]:
            raise ValueError(f"need inputs (T, {self.inputs.shape[1]}) and rewards (T,), got "
                             f"{inputs.shape} and {rewards.shape}")
        total = len(inputs)
        self.inputs[:], self.rewards[:] = 0.0, 0.0
        kept = np.arange(max(0, total - self.capacity), total)
        self.inputs[kept % self.capacity] = inputs[kept]
        self.rewards[kept % self.capacity] = rewards[kept]
        self.size, self._next = min(total, self.capacity), total % self.capacity
        self.num_added = total

    def sample(self, num, rng, out=None):
        """``num`` interactions drawn uniformly with replacement: (num, num_inputs), (num,).

        ``out``, a pair of arrays of those shapes (float32), receives them instead of new
        arrays: a caller that samples often then allocates nothing.
        """
        if self.size == 0:
            raise ValueError("the buffer is empty")
        index = rng.integers(0, self.size, size=num)
        if out is None:
            return self.inputs[index], self.rewards[index]
        np.take(self.inputs, index, axis=0, out=out[0])
        np.take(self.rewards, index, out=out[1])
        return out


class _NetworkAgent:
    """Shared parts: the reward network, the buffer, and training after each interaction.

    The network is an :func:`~gluon_bbb.models.mlp` with one output, initialised with
    ``mx.init.Xavier()`` from MXNet's generator (call ``mx.random.seed`` first for a
    reproducible run): with gluon's default small uniform initialisation, the large negative
    rewards of poisonous mushrooms easily silence every ReLU for some contexts.
    """

    #: The optimizers an agent can train with: MXNet's Adam, and SGD without momentum.
    OPTIMIZERS = ("adam", "sgd")

    def __init__(self, num_features, hidden_sizes, buffer_size, num_minibatches, batch_size,
                 noise_sigma, optimizer, learning_rate, clip_gradient, seed, ctx):
        check_int("num_features", num_features)
        check_int("num_minibatches", num_minibatches)
        check_int("batch_size", batch_size)
        if not (float(noise_sigma) > 0 and math.isfinite(float(noise_sigma))):
            raise ValueError(f"noise_sigma must be a positive finite number, got {noise_sigma!r}")
        if optimizer not in self.OPTIMIZERS:
            raise ValueError(f"optimizer must be one of {self.OPTIMIZERS}, got {optimizer!r}")
        self.optimizer = optimizer
        self.learning_rate = check_positive("learning_rate", learning_rate)
        self.clip_gradient = None if clip_gradient is None else \
            check_positive("clip_gradient", clip_gradient)
        self.num_minibatches, self.batch_size = int(num_minibatches), int(batch_size)
        self.noise_sigma = float(noise_sigma)
        self.ctx = resolve_context(ctx)
        self.rng = np.random.default_rng(seed)
        self.num_features = int(num_features)
        num_inputs = self.num_features + NUM_ACTIONS
        self.buffer = ReplayBuffer(buffer_size, num_inputs)
        # Each interaction's minibatches (the paper's 64 x 64 rows), on the host and on the
        # device, allocated once instead of twice per interaction.
        num_rows = self.num_minibatches * self.batch_size
        self._host_batch = (np.zeros((num_rows, num_inputs), np.float32), np.zeros(num_rows, np.float32))
        self._device_batch = (nd.zeros((num_rows, num_inputs), ctx=self.ctx),
                              nd.zeros((num_rows,), ctx=self.ctx))
        # ... and the minibatches as views of it, made once: a step creates no array for its input
        self._minibatches = [(self._device_batch[0][start:start + self.batch_size],
                              self._device_batch[1][start:start + self.batch_size])
                             for start in range(0, num_rows, self.batch_size)]
        self.net = mlp(hidden_sizes, num_outputs=1)
        self.net.initialize(mx.init.Xavier(), ctx=self.ctx)
        self.net(nd.zeros((1, num_inputs), ctx=self.ctx))  # resolves the deferred shapes

    @property
    def optimizer_params(self):
        """The optimizer's hyperparameters: the learning rate, and ``clip_gradient`` where
        gradients are clipped (each element to [-clip_gradient, clip_gradient])."""
        params = {"learning_rate": self.learning_rate}
        if self.clip_gradient is not None:
            params["clip_gradient"] = self.clip_gradient
        return params

    def act(self, context):
        """PASS or EAT for one context (F,)."""
        rewards = self.predicted_rewards(action_inputs(self._checked(context)[None]))
        return int(np.argmax(rewards))

    def observe(self, context, action, reward):
        """Store the interaction and train on ``num_minibatches`` minibatches of the buffer."""
        if action not in (PASS, EAT):
            raise ValueError(f"action must be PASS ({PASS}) or EAT ({EAT}), got {action!r}")
        self.buffer.add(action_inputs(self._checked(context)[None])[action], reward)
        self.buffer.sample(len(self._host_batch[1]), self.rng, out=self._host_batch)
        inputs, rewards = self._device_batch
        inputs[:] = self._host_batch[0]  # one copy per interaction (after the last reads)
        rewards[:] = self._host_batch[1]
        for minibatch, (minibatch_inputs, minibatch_rewards) in enumerate(self._minibatches):
            self._train_step(minibatch, minibatch_inputs, minibatch_rewards)

    def reseed(self, seed):
        """Restart every random stream of the agent from ``seed``: the buffer sampling and
        epsilon draws, and MXNet's generator on the agent's context. A run that reseeds at
        fixed steps can stop at one of them and resume exactly (:func:`run_bandit`)."""
        self.rng = np.random.default_rng(int(seed))
        mx.random.seed(int(seed), ctx=self.ctx)

    def save(self, path, extra=None):
        """Atomically write the network, the optimizer state and ``extra`` (JSON) to a
        checkpoint file (no pickle)."""
        raise NotImplementedError

    def load(self, path):
        """Restore a :meth:`save` file into this agent, checking it first; returns its
        ``extra``. A bad file raises a :class:`~gluon_bbb.io.checkpoint.CheckpointError`
        (a ValueError) naming it, and leaves the agent unchanged."""
        raise NotImplementedError

    def _checked(self, context):
        context = np.asarray(context, dtype=np.float32)
        if context.shape != (self.num_features,):
            raise ValueError(f"a context must have shape ({self.num_features},), got {context.shape}")
        return context

    def predicted_rewards(self, inputs):
        raise NotImplementedError

    def _train_step(self, minibatch, inputs, rewards):
        """Train on minibatch number ``minibatch`` (from 0) of an interaction."""
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
        Weight samples used to pick an action (see ``act_on``).
    num_train_samples : int
        Weight samples per training step (``BBBTrainer(num_samples=...)``).
    buffer_size, num_minibatches, batch_size : int
        Train on ``num_minibatches`` minibatches of ``batch_size`` interactions drawn from
        the last ``buffer_size`` after every interaction (the paper: 4096, 64, 64).
    optimizer : {'adam', 'sgd'}
        Updates mu and rho: Adam, or plain SGD (no momentum) on the cost of Eq. (8), which is
        summed over the minibatch, not averaged.
    learning_rate : float, > 0
        The optimizer's learning rate.
    clip_gradient : float, > 0, optional
        Clip every element of the gradient to [-clip_gradient, clip_gradient] before the
        update (the optimizer's ``clip_gradient``); default no clipping.
    rho_init : float or (float, float)
        Initial rho of the posterior (sigma = softplus(rho)): one value, or the bounds
        (low, high) of a uniform draw for every rho (from MXNet's generator).
    kl_data : {'buffer', 'seen'}
        What the complexity weight counts as the data set (see Notes).
    kl_scale : float, > 0
        Multiplies the complexity weight (1: the paper's cost; below 1 a tempered posterior,
        as ``kl_scale`` in :mod:`gluon_bbb.experiments.configs`).
    kl_weighting : {'uniform', 'blundell'}
        How the complexity weight of an interaction is shared among its ``num_minibatches``
        minibatches: equally, or as in the paper's Eq. (9) (see Notes).
    act_on : {'outputs', 'weights'}
        'outputs': act on the predicted rewards averaged over ``num_action_samples`` sampled
        networks. 'weights': act on the rewards predicted by one network whose weights are
        the average of ``num_action_samples`` weight samples, mu + sigma * mean_s eps_s.
        Both draw from the trainer's random stream; with one sample they agree.
    seed : int
        Seeds the buffer sampling and the trainer's weight noise.
    ctx : mx.Context or str, optional

    Notes
    -----
    With ``kl_data='buffer'`` (the default) the complexity weight of every minibatch is
    pi = batch_size / buffer_size: the buffer at its full size is the data set of Eq. (1), cut
    into buffer_size / batch_size minibatches. The posterior then never gets narrower than
    buffer_size interactions allow, and what leaves the buffer is forgotten: the complexity
    cost pulls the weights it no longer constrains back to the prior, and Thompson sampling
    explores those mushrooms again.

    With ``kl_data='seen'`` the buffer stands for every interaction seen so far, N of them,
    as a uniform sample of them would: pi = batch_size / max(buffer_size, N). The complexity
    cost then shrinks as 1/N, as it would with all N interactions as the data set.

    Weighting by the buffer's current fill instead (pi = batch_size / len(buffer)) would make
    the complexity cost dominate the first interactions (pi = 64 after the first one with
    the paper's settings), and the network collapses onto the prior's narrow component
    before it has seen any data; both choices above keep pi <= batch_size / buffer_size.

    Each interaction trains on M = ``num_minibatches`` minibatches, i = 1..M in order, and
    pi above (times ``kl_scale``, :attr:`kl_weight`) is the weight of each with
    ``kl_weighting='uniform'``. With ``kl_weighting='blundell'`` the interaction's total, M pi,
    is shared as in Eq. (9) of the paper instead (:attr:`kl_weights`):

        pi_i = M pi 2^(M-i) / (2^M - 1),

    so the first minibatch carries half of it and the last almost none. With the paper's
    settings (M = 64 minibatches of 64 from a buffer of 4096, ``kl_data='buffer'``,
    ``kl_scale=1``) M pi = 1 and pi_i = 2^(M-i) / (2^M - 1): every interaction is an epoch
    of Eq. (9) over its M minibatches.
    """

    KL_DATA = ("buffer", "seen")
    #: How the complexity weight is shared among an interaction's minibatches.
    KL_WEIGHTINGS = weighting.KL_WEIGHTINGS
    #: What the agent acts on: averaged predicted rewards, or one network of averaged weights.
    ACT_ON = ("outputs", "weights")

    def __init__(self, num_features, hidden_sizes=(100, 100), prior=None, noise_sigma=1.0,
                 num_action_samples=2, num_train_samples=2, buffer_size=4096, num_minibatches=64,
                 batch_size=64, learning_rate=1e-3, rho_init=-5.0, kl_data="buffer", kl_scale=1.0,
                 seed=0, ctx=None, optimizer="adam", clip_gradient=None, kl_weighting="uniform",
                 act_on="outputs"):
        super().__init__(num_features, hidden_sizes, buffer_size, num_minibatches, batch_size,
                         noise_sigma, optimizer, learning_rate, clip_gradient, seed, ctx)
        check_int("num_action_samples", num_action_samples)
        if kl_data not in self.KL_DATA:
            raise ValueError(f"kl_data must be one of {self.KL_DATA}, got {kl_data!r}")
        if kl_weighting not in self.KL_WEIGHTINGS:
            raise ValueError(f"kl_weighting must be one of {self.KL_WEIGHTINGS}, "
                             f"got {kl_weighting!r}")
        if act_on not in self.ACT_ON:
            raise ValueError(f"act_on must be one of {self.ACT_ON}, got {act_on!r}")
        self.kl_data, self.kl_weighting, self.act_on = kl_data, kl_weighting, act_on
        self._minibatch_weights = None  # (kl_weight, the (1,) weight of each minibatch on ctx)
        if not 0 < float(kl_scale) < math.inf:
            raise ValueError(f"kl_scale must be a positive finite number, got {kl_scale!r}")
        self.kl_scale = float(kl_scale)
        prior = ScaleMixturePrior(0.5, 1.0, math.exp(-6)) if prior is None else prior
        if not isinstance(prior, Prior):
            raise ValueError(f"prior must be a GaussianPrior or ScaleMixturePrior, got {prior!r}")
        self.num_action_samples = int(num_action_samples)
        loss = BBBLoss(prior, likelihood="gaussian", noise_sigma=noise_sigma)
        self.trainer = BBBTrainer(self.net, loss, optimizer=self.optimizer,
                                  optimizer_params=self.optimizer_params,
                                  num_samples=num_train_samples, rho_init=rho_init, seed=seed,
                                  ctx=self.ctx)

    def predicted_rewards(self, inputs):
        """Rewards predicted for network inputs (N, F + 2), (N,): averaged over sampled
        networks, or by the network of averaged weight samples (``act_on``)."""
        if self.act_on == "weights":
            return self._averaged_network_rewards(inputs)
        outputs, _ = sample_network_outputs(self.trainer, inputs, self.num_action_samples)
        return outputs.mean(axis=0).reshape((-1,)).asnumpy()

    def averaged_weights(self):
        """The average of ``num_action_samples`` weight samples w_s = mu + sigma * eps_s, drawn
        from the trainer's random stream (:meth:`BBBTrainer.draw_network`); one NDArray per
        weight tensor, in the order of ``trainer.posterior.targets``. The network holds the
        posterior means afterwards."""
        targets = self.trainer.posterior.targets
        try:
            sums = None
            for _ in range(self.num_action_samples):
                self.trainer.draw_network()
                draws = [target.data() for target in targets]
                sums = draws if sums is None else [total + draw for total, draw in zip(sums, draws)]
            return [total / self.num_action_samples for total in sums]
        finally:
            self.trainer.set_mean()

    def _averaged_network_rewards(self, inputs):
        """Rewards (N,) predicted for inputs (N, F + 2) by the network of averaged weights."""
        weights = self.averaged_weights()
        try:
            assign_arrays(self.trainer.posterior.targets, weights)
            inputs = nd.array(inputs, ctx=self.ctx, dtype=self.trainer.posterior.dtype)
            return self.trainer.forward(inputs).reshape((-1,)).asnumpy()
        finally:
            self.trainer.set_mean()

    @property
    def kl_weight(self):
        """pi, the complexity weight of each training minibatch now with uniform weighting
        (their mean with Eq. 9's), times ``kl_scale`` (see Notes)."""
        data_size = self.buffer.capacity
        if self.kl_data == "seen":
            data_size = max(data_size, self.buffer.num_added)
        return self.kl_scale * self.batch_size / data_size

    @property
    def kl_weights(self):
        """(num_minibatches,) float64: pi_1..pi_M, the complexity weights of the minibatches
        of an interaction now, in training order (``kl_weighting``; see Notes)."""
        if self.kl_weighting == "uniform":
            return np.full(self.num_minibatches, self.kl_weight)
        return self.kl_weight * self.num_minibatches * \
            weighting.kl_weights("blundell", self.num_minibatches)

    def _minibatch_weight(self, minibatch):
        """pi_i of minibatch ``minibatch`` (from 0): a float for uniform weighting (the trainer
        keeps it on the device), else a (1,) view of the interaction's weights on ctx, made
        again only when pi changes."""
        if self.kl_weighting == "uniform":
            return self.kl_weight
        key = self.kl_weight
        if self._minibatch_weights is None or self._minibatch_weights[0] != key:
            weights = nd.array(self.kl_weights, ctx=self.ctx, dtype=self.trainer.posterior.dtype)
            self._minibatch_weights = (key, [weights[i:i + 1] for i in range(self.num_minibatches)])
        return self._minibatch_weights[1][minibatch]

    def _train_step(self, minibatch, inputs, rewards):
        self.trainer.step(inputs, rewards, self._minibatch_weight(minibatch))

    def reseed(self, seed):
        super().reseed(seed)
        self.trainer.reseed(int(seed))

    def save(self, path, extra=None):
        self.trainer.save(path, extra=extra)

    def load(self, path):
        return self.trainer.load(path).get("extra")


class EpsilonGreedyAgent(_NetworkAgent):
    """The same reward network trained by maximum likelihood, with epsilon-greedy actions.

    Parameters
    ----------
    num_features : int
    epsilon : float in [0, 1]
        Probability of a uniformly random action (the paper: 0, 0.01, 0.05).
    hidden_sizes, noise_sigma, buffer_size, num_minibatches, batch_size, seed, ctx
        As for :class:`ThompsonAgent`.
    optimizer, learning_rate, clip_gradient
        As for :class:`ThompsonAgent`, for the network's weights; the cost is the Gaussian
        negative log-likelihood summed over the minibatch.
    """

    def __init__(self, num_features, epsilon, hidden_sizes=(100, 100), noise_sigma=1.0,
                 buffer_size=4096, num_minibatches=64, batch_size=64, learning_rate=1e-3, seed=0,
                 ctx=None, optimizer="adam", clip_gradient=None):
        super().__init__(num_features, hidden_sizes, buffer_size, num_minibatches, batch_size,
                         noise_sigma, optimizer, learning_rate, clip_gradient, seed, ctx)
        epsilon = float(epsilon)
        if not 0.0 <= epsilon <= 1.0:
            raise ValueError(f"epsilon must lie in [0, 1], got {epsilon!r}")
        self.epsilon = epsilon
        self.cost = _SquaredErrorCost(self.net, self.noise_sigma)
        # the network and its cost in one cached graph; the network alone (acting) has its own
        self.cost.hybridize(static_alloc=True, static_shape=True)
        build = {"adam": fused_adam, "sgd": fused_sgd}[self.optimizer]
        self.trainer = gluon.Trainer(self.net.collect_params(),
                                     build(self.ctx, **self.optimizer_params))

    def act(self, context):
        if self.epsilon > 0 and self.rng.random() < self.epsilon:
            return int(self.rng.integers(0, NUM_ACTIONS))
        return super().act(context)

    def predicted_rewards(self, inputs):
        """The network's predicted rewards for inputs (M, F + 2)."""
        return self.net(nd.array(inputs, ctx=self.ctx)).reshape((-1,)).asnumpy()

    def _train_step(self, minibatch, inputs, rewards):
        with autograd.record():
            nll = self.cost(inputs, rewards)
        nll.backward()
        self.trainer.step(1)

    def save(self, path, extra=None):
        save_plain_network(path, self.net, self.trainer, {"kind": "bandit-greedy", "extra": extra})

    def load(self, path):
        return load_plain_network(path, self.net, self.trainer, require_optimizer=True).get("extra")


class _SquaredErrorCost(gluon.HybridBlock):
    """The Gaussian negative log-likelihood of rewards, up to a constant, summed over a batch:
    sum_n (net(x_n) - r_n)^2 / (2 noise_sigma^2).

    Inputs: inputs (N, F + 2), rewards (N,). Output: (1,).
    """

    def __init__(self, net, noise_sigma):
        super().__init__(prefix="")
        self.net, self.scale = net, 0.5 / noise_sigma ** 2

    def hybrid_forward(self, F, inputs, rewards):
        residual = F.reshape(self.net(inputs), (-1,)) - rewards
        return F.sum(F.square(residual)) * self.scale
