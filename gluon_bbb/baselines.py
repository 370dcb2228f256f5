"""Deterministic baselines: ordinary Gluon networks trained by SGD with softmax cross-entropy.

The paper compares Bayes by Backprop with plain SGD and with dropout networks of the same
size (Table 1, Fig. 3). Build the baseline with the same architecture as the Bayesian net,
e.g. ``models.mlp((1200, 1200))`` for plain SGD and ``models.mlp((1200, 1200), dropout=0.5)``
for dropout, and train it here::

    net = gluon_bbb.models.mlp((400, 400), dropout=0.5)
    history = train_deterministic(net, loaders["train"], 10, eval_data=loaders["test"])
    error = evaluate_deterministic(net, loaders["test"])

The history has the keys of :attr:`gluon_bbb.BBBTrainer.history` that make sense for a
deterministic net, so :func:`gluon_bbb.plots.training_curves` draws both.
"""
import time

import mxnet as mx
import numpy as np
from mxnet import autograd, gluon, nd

from ._checks import check_int
from .context import resolve_context
from .epochs import (NonFiniteLossError, checked_learning_rate, epoch_line, epoch_seed,
                     print_in_notebook, progress_bar)

__all__ = ["train_deterministic", "evaluate_deterministic", "run_epochs", "classification_cost",
           "prepare_network"]

#: Optimizer parameters used when ``optimizer_params`` is not given (suits plain SGD).
DEFAULT_OPTIMIZER_PARAMS = {"learning_rate": 0.1}


def train_deterministic(net, train_data, num_epochs, eval_data=None, optimizer="sgd",
                        optimizer_params=None, ctx=None, progress=True, hybridize=True):
    """Train an ordinary network by minimising the softmax cross-entropy.

    Dropout layers are active during the training steps only (``autograd.record`` in
    training mode); the per-epoch evaluation uses the deterministic network.

    Parameters
    ----------
    net : gluon.Block
        Any classifier mapping a (batch_size, ...) input to (batch_size, num_classes) logits.
        An uninitialised network is initialised with ``mx.init.Xavier()`` on ``ctx``.
    train_data : iterable of (data, label) NDArray batches with ``len()``
        label : (batch_size,) class indices.
    num_epochs : int, >= 1
    eval_data : iterable of (data, label) batches, optional
        Test error after every epoch.
    optimizer : str or mx.optimizer.Optimizer
    optimizer_params : dict, optional
        Default ``{'learning_rate': 0.1}``; pass a smaller rate for Adam.
    ctx : mx.Context or str, optional
        Default: CPU.
    progress : bool
        Show progress, as :func:`run_epochs` does.
    hybridize : bool
        Hybridize the network if it is a HybridBlock.

    Returns
    -------
    list of dict, one per epoch
        'epoch'; 'loss', the cross-entropy summed over the epoch's examples (comparable with
        the 'nll' of a BBBTrainer); 'train_error', the error of the training-mode network
        (with dropout) on the batches as they were trained; 'test_error' (if eval_data);
        'seconds'.
    """
    if not isinstance(net, gluon.Block):
        raise TypeError(f"net must be a gluon Block, got {type(net).__name__}")
    check_int("num_epochs", num_epochs)
    ctx = resolve_context(ctx)
    prepare_network(net, _first_batch(train_data)[0].as_in_context(ctx), ctx, hybridize)
    loss_fn = gluon.loss.SoftmaxCrossEntropyLoss()
    if hybridize:
        loss_fn.hybridize()
    params = dict(DEFAULT_OPTIMIZER_PARAMS if optimizer_params is None else optimizer_params)
    trainer = gluon.Trainer(net.collect_params(), optimizer, params)
    return list(run_epochs(net, trainer, train_data, num_epochs, classification_cost(loss_fn),
                           eval_data=eval_data, ctx=ctx, progress=progress))


def classification_cost(loss_fn=None):
    """The cost of :func:`run_epochs` for a classifier: summed softmax cross-entropy, and the
    number of mistakes of the training-mode network.

    Returns
    -------
    callable ``cost(logits, label) -> (loss (1,), mistakes (1,))``
    """
    loss_fn = loss_fn or gluon.loss.SoftmaxCrossEntropyLoss()

    def cost(logits, label):
        return (nd.sum(loss_fn(logits, label)).reshape((1,)),
                nd.sum(nd.argmax(logits, axis=-1) != label).reshape((1,)))
    return cost


def run_epochs(net, trainer, train_data, num_epochs, cost, first_epoch=0, eval_data=None,
               ctx=None, progress=True, seed=None, mean_gradient=True, learning_rate_schedule=None):
    """The one training loop of ordinary (deterministic) networks: epochs ``first_epoch`` to
    ``num_epochs - 1``, yielding each epoch's record as it ends.

    Used by :func:`train_deterministic`, the paper protocol's baselines
    (:mod:`gluon_bbb.experiments.runners`, which resumes them) and the regression baseline
    (:func:`gluon_bbb.apps.regression.train_deterministic_regression`). Dropout layers are active
    during the training steps only; the per-epoch evaluation uses the deterministic network.

    Parameters
    ----------
    net : gluon.Block, initialised
    trainer : gluon.Trainer over ``net``'s parameters
    train_data : iterable of (data, label) batches with ``len()``
    num_epochs : int, the total number of epochs
    cost : callable
        ``cost(output, label) -> (loss, mistakes)``: the minibatch's summed loss, shape (1,),
        which is differentiated, and its number of training mistakes (1,) or None (e.g.
        :func:`classification_cost`).
    first_epoch : int
        Epochs already run (a resumed run).
    eval_data : iterable of (data, label) batches, optional
        Classification error of the prediction-mode network after every epoch ('test_error').
    ctx : mx.Context, optional
    progress : bool
        A progress bar over each epoch's batches (ipywidgets' in a Jupyter kernel, text on
        stderr elsewhere; :func:`gluon_bbb.epochs.progress_bar`) and, in a Jupyter kernel only,
        each epoch's :func:`~gluon_bbb.epochs.epoch_line` printed to stdout.
    seed : int, optional
        Reseed MXNet's generator for ``ctx`` from (seed, epoch) (stream 1 of
        :func:`gluon_bbb.epochs.epoch_seed`) before every epoch, so dropout masks are the
        same in a resumed run as in an uninterrupted one.
    mean_gradient : bool
        True: each step follows the gradient of the minibatch's mean loss (``step(batch
        size)``); False: of its summed loss (``step(1)``).
    learning_rate_schedule : callable, optional
        ``learning_rate_schedule(epoch) -> float``, the learning rate of the epoch numbered
        ``epoch`` (from 0), set before it starts, as :meth:`gluon_bbb.BBBTrainer.fit` does.

    Yields
    ------
    dict per epoch: 'epoch', 'loss' (summed over the epoch), 'train_error' (if the cost counts
    mistakes), 'test_error' (if eval_data), 'seconds'.

    Raises
    ------
    NonFiniteLossError
        The epoch's loss is not finite; nothing of that epoch is yielded.
    """
    ctx = resolve_context(ctx)
    num_batches = len(train_data)
    if num_batches < 1:
        raise ValueError("train_data yields no batches")
    for epoch in range(int(first_epoch), int(num_epochs)):
        start = time.time()
        if learning_rate_schedule is not None:
            trainer.set_learning_rate(checked_learning_rate(learning_rate_schedule(epoch), epoch))
        if seed is not None:
            mx.random.seed(epoch_seed(seed, epoch, stream=1), ctx=ctx)  # dropout masks
        sums = nd.zeros((2,), ctx=ctx)  # loss, mistakes
        num_examples, counts_mistakes = 0, True
        batches = progress_bar(train_data, progress, total=num_batches, leave=False,
                               desc=f"epoch {epoch + 1}/{num_epochs}")
        for data, label in batches:
            data = data.as_in_context(ctx)
            label = label.as_in_context(ctx).astype("float32", copy=False)
            with autograd.record(train_mode=True):
                output = net(data)
                loss, mistakes = cost(output, label)
            loss.backward()
            trainer.step(data.shape[0] if mean_gradient else 1)
            counts_mistakes = mistakes is not None
            sums += nd.concat(loss, mistakes if counts_mistakes else nd.zeros_like(loss), dim=0)
            num_examples += data.shape[0]
        totals = sums.asnumpy()  # the epoch's one host sync
        if not np.isfinite(totals[0]):
            raise NonFiniteLossError(f"the loss of epoch {epoch + 1} is not finite; lower the "
                                     "learning rate (the last checkpoint, if any, is intact)")
        record = {"epoch": epoch + 1, "loss": float(totals[0])}
        if counts_mistakes:
            record["train_error"] = float(totals[1]) / num_examples
        if eval_data is not None:
            record["test_error"] = evaluate_deterministic(net, eval_data, ctx=ctx)
        record["seconds"] = time.time() - start
        print_in_notebook(epoch_line(record, num_epochs), progress)
        yield record


def evaluate_deterministic(net, data, ctx=None):
    """Classification error of a network in prediction mode (dropout off).

    Parameters
    ----------
    net : gluon.Block, initialised
    data : iterable of (data, label) batches
        data : (batch_size, ...); label : (batch_size,) class indices.
    ctx : mx.Context or str, optional
        Default: the context of the network's first parameter.

    Returns
    -------
    float in [0, 1], the fraction of misclassified examples.
    """
    if not isinstance(net, gluon.Block):
        raise TypeError(f"net must be a gluon Block, got {type(net).__name__}")
    ctx = _network_context(net) if ctx is None else resolve_context(ctx)
    mistakes, count = None, 0
    with autograd.predict_mode():
        for inputs, labels in data:
            predictions = nd.argmax(net(inputs.as_in_context(ctx)), axis=-1)
            wrong = nd.sum(predictions != labels.as_in_context(ctx).astype(predictions.dtype))
            mistakes = wrong if mistakes is None else mistakes + wrong
            count += labels.shape[0]
    if count == 0:
        raise ValueError("data yields no examples to evaluate")
    return float(mistakes.asscalar()) / count


def _first_batch(train_data):
    for batch in train_data:
        return batch
    raise ValueError("train_data yields no batches")


def prepare_network(net, first_data, ctx, hybridize=True):
    """Initialise (``mx.init.Xavier()``, or move) the network on ``ctx``, hybridize it, and
    run ``first_data`` through it to finish deferred shapes (a ValueError naming the input's
    shape if it does not fit)."""
    params = net.collect_params()
    try:
        initialised = all(p.list_ctx() for p in params.values())
    except RuntimeError:
        initialised = False
    if not initialised:
        net.initialize(mx.init.Xavier(), ctx=ctx)
    elif any(ctx not in p.list_ctx() for p in params.values()):
        params.reset_ctx(ctx)
    if hybridize and isinstance(net, gluon.HybridBlock):
        net.hybridize()
    try:
        net(first_data)
    except mx.base.MXNetError as error:
        first_line = str(error).strip().splitlines()[0]
        raise ValueError(
            f"input of shape {tuple(first_data.shape)} does not fit the network: {first_line}"
        ) from None


def _network_context(net):
    for param in net.collect_params().values():
        try:
            return param.list_ctx()[0]
        except RuntimeError:
            break
    raise ValueError("net is not initialised: train it or load its parameters first")
