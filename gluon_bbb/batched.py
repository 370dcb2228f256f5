"""Several weight draws of a Dense network in one forward and backward pass.

A training step with K weight samples (``BBBTrainer(num_samples=K)``) averages Eq. (8) over
K networks w_1 .. w_K drawn from q(w | theta). Run one after another, each draw pays the
whole per-pass overhead again. For a network that is a stack of ``gluon.nn.Dense`` layers
the K networks run at once instead:

* the first layer is one ``FullyConnected`` of the inputs x (B, in) against the K weight
  matrices and biases stacked to (K * units, in) and (K * units,), giving (B, K * units), read
  as (K, B, units);
* every later layer is one ``batch_dot`` over the K draws, (K, B, in) x (K, in, units), its
  bias added as a batched product with a column of ones (whose gradient is a GEMM, where
  ``broadcast_add``'s backward reduction costs several times as much);
* activations are elementwise.

:func:`batched_network` says whether a network qualifies (and why not), :func:`batched_pass`
which pass a trainer's step takes, :class:`BatchedDense` runs the K networks, :class:`StepDraws`
runs a step's draws either way (batched or in a loop) and :func:`mean_cost` turns their outputs
into the step's Eq. (8) cost averaged over the draws, by :class:`~gluon_bbb.loss.BBBLoss`.
Values and gradients are those of K separate passes, to rounding.
"""
from __future__ import annotations

import logging
from typing import List, Optional, Sequence, Tuple

from mxnet import gluon, nd

from ._mxcompat import dense_settings
from .posterior import assign_arrays

__all__ = ["BATCH_DRAWS_FROM", "BatchedDense", "StepDraws", "batched_network", "batched_pass",
           "mean_cost",
           "ELEMENTWISE_BLOCKS", "is_plain_sequential", "inherits_forward"]

logger = logging.getLogger(__name__)

#: The fewest draws a step that the trainer batches by default (``batch_draws=None``). Below it
#: the loop was as fast or faster where measured (docs/performance.md, "Several draws a step":
#: K = 2 and 5 on two MLPs); at K = 10 the batched pass was faster on both.
BATCH_DRAWS_FROM = 6

#: Parameter-free blocks that act elementwise, so they apply to (K, B, units) as to (B, units).
ELEMENTWISE_BLOCKS = (gluon.nn.Activation, gluon.nn.LeakyReLU, gluon.nn.ELU, gluon.nn.SELU,
                      gluon.nn.Swish, gluon.nn.GELU)


class BatchedDense(gluon.HybridBlock):
    """K draws of a stack of Dense layers (with their activations) in one pass.

    Build it with :func:`batched_network`.

    Parameters
    ----------
    plan : list of tuples
        ``('flatten',)``, ``('dense', weight_index, bias_index or None, units, activation)``
        or ``('elementwise', block)``, in the order the network runs them; the indices point
        into one draw's list of weight tensors (the posterior's order).
    num_tensors : int
        n, the number of weight tensors of one draw.
    num_draws : int
        K.

    Inputs
    ------
    x : (B, in), or (B, ...) flattened by a leading Flatten or the first Dense
    *weights : K * n arrays, draw-major: draw k's tensor i is ``weights[k * n + i]``, of the
        shape of the network's parameter i

    Outputs
    -------
    (K, B, outputs): the network's output under each draw's weights.
    """

    def __init__(self, plan: Sequence[tuple], num_tensors: int, num_draws: int, **kwargs) -> None:
        super().__init__(**kwargs)
        self.plan = [tuple(step) for step in plan]
        self.num_tensors, self.num_draws = int(num_tensors), int(num_draws)
        for i, step in enumerate(self.plan):  # registered, so hybridize reaches them
            block = step[4] if step[0] == "dense" else step[1] if step[0] == "elementwise" else None
            if block is not None:
                self.register_child(block, f"elementwise{i}")

    def _stacked(self, F, weights, index):
        """Tensor ``index`` of the K draws, stacked to (K, ...)."""
        n = self.num_tensors
        return F.stack(*[weights[k * n + index] for k in range(self.num_draws)], axis=0)

    def hybrid_forward(self, F, x, *weights):
        K, n = self.num_draws, self.num_tensors
        h, first = x, True
        for step in self.plan:
            if step[0] == "flatten":
                h = F.flatten(h)
                continue
            if step[0] == "elementwise":
                h = step[1](h)
                continue
            _, weight, bias, units, activation = step
            if first:
                # one GEMM with its bias: (B, in) x (K * units, in)^T -> (B, K * units)
                stacked = F.concat(*[weights[k * n + weight] for k in range(K)], dim=0)
                biases = (F.concat(*[weights[k * n + bias] for k in range(K)], dim=0)
                          if bias is not None else None)
                h = F.FullyConnected(F.flatten(h), stacked, biases, num_hidden=K * units,
                                     no_bias=bias is None)
                h = F.transpose(h.reshape((0, K, units)), axes=(1, 0, 2))  # (K, B, units)
                first = False
            else:
                # (K, B, in) x (K, units, in)^T -> (K, B, units)
                h = F.batch_dot(h, self._stacked(F, weights, weight), transpose_b=True)
                if bias is not None:
                    # the bias as a product with a column of ones: its gradient is then one
                    # batched GEMM, where broadcast_add's backward is a slow reduction
                    ones = F.ones_like(F.slice_axis(h, axis=2, begin=0, end=1))  # (K, B, 1)
                    h = h + F.batch_dot(ones, self._stacked(F, weights, bias).reshape((K, 1, units)))
            if activation is not None:
                h = activation(h)
        return h


def batched_network(net: gluon.Block, targets: Sequence[gluon.Parameter],
                    num_draws: int) -> Tuple[Optional[BatchedDense], str]:
    """Whether ``net``'s K draws can run as one batched pass, and the block that runs them.

    It qualifies when it is a ``gluon.nn.Dense``, or a plain Sequential/HybridSequential
    (nested ones included) of Dense layers, parameter-free elementwise activations
    (:data:`ELEMENTWISE_BLOCKS`) and at most a leading ``gluon.nn.Flatten``; every Dense
    runs its class's own forward, the first flattens its input (``flatten=True``, the
    default) and all of their parameters are in the posterior.

    Parameters
    ----------
    net : gluon.Block
    targets : list of gluon.Parameter, the posterior's weight tensors in its order
    num_draws : int, K

    Returns
    -------
    (BatchedDense, '') or (None, the reason the network does not qualify)
    """
    blocks, reason = _blocks(net)
    if reason:
        return None, reason
    index = {id(param): i for i, param in enumerate(targets)}
    plan, covered = [], set()
    for position, block in enumerate(blocks):
        if isinstance(block, gluon.nn.Flatten) and type(block) is gluon.nn.Flatten:
            if position:
                return None, "a Flatten after the first block"
            plan.append(("flatten",))
        elif type(block) in ELEMENTWISE_BLOCKS:
            plan.append(("elementwise", block))
        elif isinstance(block, gluon.nn.Dense) and inherits_forward(block, gluon.nn.Dense):
            if not any(step[0] in ("dense", "flatten") for step in plan) and \
                    not dense_settings(block)["flatten"]:
                return None, (f"the first Dense layer ({block.name}) has flatten=False, so an "
                              "input of more than two axes would keep its leading axes")
            params = [block.weight] + ([block.bias] if block.bias is not None else [])
            if any(id(param) not in index for param in params):
                return None, f"a parameter of {block.name} is not in the posterior (frozen)"
            covered.update(id(param) for param in params)
            plan.append(("dense", index[id(block.weight)],
                         index[id(block.bias)] if block.bias is not None else None,
                         int(block.weight.shape[0]), block.act))
        else:
            return None, (f"{block.name} ({type(block).__name__}) is not a Dense layer, a "
                          "leading Flatten or a parameter-free elementwise activation")
    if not any(step[0] == "dense" for step in plan):
        return None, "the network has no Dense layer"
    if len(covered) != len(targets):
        return None, "the posterior covers parameters outside the network's Dense layers"
    return BatchedDense(plan, len(targets), num_draws, prefix="batched_"), ""


def batched_pass(net: gluon.Block, targets: Sequence[gluon.Parameter], num_samples: int,
                 estimator: str, requested: Optional[bool],
                 hybridize: bool = True) -> Tuple[Optional[BatchedDense], str]:
    """How a :class:`~gluon_bbb.BBBTrainer` step runs its K = ``num_samples`` draws.

    Parameters
    ----------
    net, targets : as :func:`batched_network`
    num_samples : int, K
    estimator : str, the trainer's (only 'weights' draws whole weight tensors)
    requested : bool or None
        The trainer's ``batch_draws``: None batches K >= :data:`BATCH_DRAWS_FROM` draws where
        the network qualifies, False never batches, True requires it (for any K).
    hybridize : bool
        Hybridize the batched block.

    Returns
    -------
    (BatchedDense, '') or (None, why the draws loop); a fallback with K > 1 is logged.

    Raises
    ------
    RuntimeError
        ``requested`` is True and the draws cannot be batched.
    """
    if requested is False:
        return None, "batch_draws=False was requested"
    if num_samples == 1 and requested is None:
        return None, "one draw a step (num_samples=1)"
    if num_samples < BATCH_DRAWS_FROM and requested is None:
        return None, (f"{num_samples} draws a step loop, as fast or faster below "
                      f"{BATCH_DRAWS_FROM} (batch_draws=True batches them)")
    if estimator != "weights":
        reason = f"estimator {estimator!r} draws its noise inside each layer's forward pass"
    else:
        batched, reason = batched_network(net, targets, num_samples)
        if batched is not None:
            if hybridize:
                batched.hybridize()
            return batched, ""
        reason = f"the network is not a stack of Dense layers: {reason}"
    if requested:
        raise RuntimeError(f"batch_draws=True, but {reason}")
    logger.info("gluon_bbb: %d draws a step run in a loop: %s", num_samples, reason)
    return None, reason


def is_plain_sequential(net: gluon.Block) -> bool:
    """A Sequential or HybridSequential that runs its children in turn (forward not overridden)."""
    if isinstance(net, gluon.nn.HybridSequential):
        return inherits_forward(net, gluon.nn.HybridSequential)
    return isinstance(net, gluon.nn.Sequential) and type(net).forward is gluon.nn.Sequential.forward


def inherits_forward(block: gluon.Block, base: type) -> bool:
    """True if ``block`` runs ``base``'s hybrid_forward unchanged (a HybridBlock subclass)."""
    return type(block).hybrid_forward is base.hybrid_forward and \
        type(block).forward is gluon.HybridBlock.forward


def _blocks(net):
    """The blocks ``net`` runs in turn (plain Sequentials unnested), or a reason it is not
    such a chain."""
    if not is_plain_sequential(net):
        return [net], ""
    blocks = []
    for i in range(len(net)):
        inner, reason = _blocks(net[i])
        if reason:
            return [], reason
        blocks.extend(inner)
    if not blocks:
        return [], "the network is an empty Sequential"
    return blocks, ""


class StepDraws:
    """The K weight draws of a training step: one batched pass, or a loop of K passes.

    Parameters
    ----------
    sample : callable
        ``sample()`` -> (weights, complexity inputs) of one draw; ``sample(K)`` -> (K lists of
        weights, the complexity inputs of the K draws), as :meth:`BBBTrainer._sample`.
    forward : callable, ``forward(data)`` -> (B, outputs) under the weights in the network
    training : context manager, the training mode of the layers' estimators
    net, targets, num_draws, estimator, requested, hybridize
        As :func:`batched_pass` takes them (``targets``: the parameters the weights go into).

    Attributes
    ----------
    batched : BatchedDense or None (the loop)
    path : str, 'batched' or 'loop'
    reason : str, why the draws loop ('' when batched)
    """

    def __init__(self, sample, forward, training, net, targets, num_draws, estimator="weights",
                 requested=None, hybridize=True):
        self.sample, self.forward, self.training = sample, forward, training
        self.targets, self.num_draws = targets, num_draws
        self.batched, self.reason = batched_pass(net, targets, num_draws, estimator, requested,
                                                 hybridize)
        self.path = "loop" if self.batched is None else "batched"

    def __call__(self, data):
        """Steps 1-4 for the K draws: sample, put w into the network, forward.

        Returns
        -------
        outputs : (K, B, outputs) NDArray (batched) or list of K (B, outputs) (the loop); the
            network holds the last draw's weights afterwards either way
        complexity_inputs : for :func:`mean_cost`
        """
        if self.batched is not None:
            draws, inputs = self.sample(self.num_draws)
            assign_arrays(self.targets, draws[-1])
            return self.batched(data, *[w for draw in draws for w in draw]), inputs
        outputs, inputs = [], []
        for _ in range(self.num_draws):
            weights, draw_inputs = self.sample()     # w = mu + sigma * eps
            assign_arrays(self.targets, weights)     # the network now computes with w
            with self.training:
                outputs.append(self.forward(data))
            inputs.append(draw_inputs)
        return outputs, inputs


def mean_cost(loss, outputs, label: nd.NDArray, kl_weight: nd.NDArray,
              complexity_inputs: Sequence) -> Tuple[nd.NDArray, nd.NDArray, nd.NDArray, nd.NDArray]:
    """Eq. (8) averaged over the K draws of a step.

    Parameters
    ----------
    loss : BBBLoss
    outputs : (K, B, outputs) NDArray (:class:`BatchedDense`'s) or list of K (B, outputs)
    label : (B,) or (B, ...), the minibatch's labels
    kl_weight : (1,), pi_i
    complexity_inputs : K tuples of the loss's complexity inputs, one per draw ((weights,
        sigmas, epsilons), or (complexity,)); or, with batched outputs, one (1,) array, the
        complexity summed over the K draws (``variational_sample(..., num_draws=K)``)

    Returns
    -------
    cost, nll, complexity : (1,) each, the means over the draws of Eq. (8)'s cost, of
        -log P(D_i | w_k) and of the complexity
    pred : (B, outputs), the last draw's output
    """
    batched = isinstance(outputs, nd.NDArray)
    K = outputs.shape[0] if batched else len(outputs)
    if batched and len(complexity_inputs) == 1 and isinstance(complexity_inputs[0], nd.NDArray):
        # sum_k [pi c_k + nll_k] in one call: the K draws' outputs as K * B examples
        tiled = nd.tile(label, reps=(K,) + (1,) * (label.ndim - 1))
        cost, nll, complexity = loss(outputs.reshape((-3, -2)), tiled, kl_weight,
                                     complexity_inputs[0])
        return cost / K, nll / K, complexity / K, outputs[K - 1]
    if len(complexity_inputs) != K:
        raise ValueError(f"{K} draws but {len(complexity_inputs)} sets of complexity inputs")
    if batched:
        outputs = nd.split(outputs, num_outputs=K, axis=0, squeeze_axis=True) if K > 1 \
            else [outputs.reshape(outputs.shape[1:])]
    sums = [loss(pred, label, kl_weight, *inputs) for pred, inputs in zip(outputs, complexity_inputs)]
    if K == 1:
        return tuple(sums[0]) + (outputs[0],)
    return tuple(nd.add_n(*parts) / K for parts in zip(*sums)) + (outputs[-1],)
