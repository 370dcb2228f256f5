"""Several weight draws of a Dense network in one forward and backward pass.

A training step with K weight samples (``BBBTrainer(num_samples=K)``) averages Eq. (8) over
K networks w_1 .. w_K drawn from q(w | theta). Run one after another, each draw pays the
whole per-pass overhead again. For a network that is a stack of ``gluon.nn.Dense`` layers
the K networks run at once instead:

* the first layer is one GEMM of the K weight matrices stacked to (K * units, in) against
  the inputs x (B, in), giving (K * units, B), read as (K, units, B);
* every later layer is one ``batch_dot`` over the K draws, (K, B, in) x (K, in, units);
* biases broadcast over the minibatch, activations are elementwise.

:func:`batched_network` says whether a network qualifies (and why not), :class:`BatchedDense`
runs it, and :func:`mean_cost` turns its (K, B, outputs) output into the step's Eq. (8) cost
averaged over the draws, by :class:`~gluon_bbb.loss.BBBLoss`. Values and gradients are those
of K separate passes, to rounding.
"""
from __future__ import annotations

from typing import List, Optional, Sequence, Tuple

from mxnet import gluon, nd

from ._mxcompat import dense_settings
from .predictive import _inherits_forward, _is_plain_sequential

__all__ = ["BatchedDense", "batched_network", "mean_cost", "ELEMENTWISE_BLOCKS"]

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
        h, columns, first = x, False, True  # columns: h is (K, units, B), else (K, B, units)
        for step in self.plan:
            if step[0] == "flatten":
                h = F.flatten(h)
                continue
            if step[0] == "elementwise":
                h = step[1](h)
                continue
            _, weight, bias, units, activation = step
            if first:
                # one GEMM: (K * units, in) x (B, in)^T -> (K * units, B) -> (K, units, B)
                stacked = F.concat(*[weights[k * n + weight] for k in range(K)], dim=0)
                h = F.dot(stacked, F.flatten(h), transpose_b=True).reshape((K, units, -1))
                if bias is not None:
                    h = F.broadcast_add(h, self._stacked(F, weights, bias).reshape((K, units, 1)))
                columns, first = True, False
            else:
                # (K, B, in) x (K, units, in)^T -> (K, B, units)
                h = F.batch_dot(h, self._stacked(F, weights, weight), transpose_a=columns,
                                transpose_b=True)
                if bias is not None:
                    h = F.broadcast_add(h, self._stacked(F, weights, bias).reshape((K, 1, units)))
                columns = False
            if activation is not None:
                h = activation(h)
        return F.transpose(h, axes=(0, 2, 1)) if columns else h


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
        elif isinstance(block, gluon.nn.Dense) and _inherits_forward(block, gluon.nn.Dense):
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


def _blocks(net):
    """The blocks ``net`` runs in turn (plain Sequentials unnested), or a reason it is not
    such a chain."""
    if not _is_plain_sequential(net):
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


def mean_cost(loss, outputs: nd.NDArray, label: nd.NDArray, kl_weight: nd.NDArray,
              complexity_inputs: Sequence) -> Tuple[nd.NDArray, nd.NDArray, nd.NDArray, List]:
    """Eq. (8) averaged over the K draws of a batched pass.

    Parameters
    ----------
    loss : BBBLoss
    outputs : (K, B, outputs), :class:`BatchedDense`'s output
    label : (B,) or (B, ...), the minibatch's labels
    kl_weight : (1,), pi_i
    complexity_inputs : either one (1,) array, the complexity summed over the K draws (the
        fused operator's, ``variational_sample(..., num_draws=K)``), or K tuples
        ``(weights, sigmas, epsilons)``, one per draw (the pure-MXNet path's)

    Returns
    -------
    cost, nll, complexity : (1,) each, the means over the draws of Eq. (8)'s cost, of
        -log P(D_i | w_k) and of the complexity
    per_draw : list of K (B, outputs) arrays, the draws' outputs, recorded by autograd
        (only with the per-draw inputs; else empty)
    """
    K = outputs.shape[0]
    if len(complexity_inputs) == 1 and isinstance(complexity_inputs[0], nd.NDArray):
        # sum_k [pi c_k + nll_k] in one call: the K draws' outputs as K * B examples
        tiled = nd.tile(label, reps=(K,) + (1,) * (label.ndim - 1))
        cost, nll, complexity = loss(outputs.reshape((-3, -2)), tiled, kl_weight,
                                     complexity_inputs[0])
        return cost / K, nll / K, complexity / K, []
    if len(complexity_inputs) != K:
        raise ValueError(f"{K} draws but {len(complexity_inputs)} sets of complexity inputs")
    per_draw = nd.split(outputs, num_outputs=K, axis=0, squeeze_axis=True) if K > 1 \
        else [outputs.reshape(outputs.shape[1:])]
    sums = [loss(pred, label, kl_weight, *inputs) for pred, inputs in zip(per_draw, complexity_inputs)]
    return tuple(nd.add_n(*parts) / K for parts in zip(*sums)) + (list(per_draw),)
