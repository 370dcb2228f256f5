"""Monte Carlo prediction: the one place that draws networks from the posterior q(w | theta).

The predictive distribution of the paper (section 2) is p(y | x) = E_q[p(y | x, w)],
estimated by averaging n sampled networks. Everything that samples networks after training
goes through :func:`sample_outputs`: ``BBBTrainer.predict_proba``/``evaluate``,
:func:`gluon_bbb.analysis.uncertainty.mc_predict` (and through it the regression bands and the
Thompson agent of the bandit).

**Random stream.** The samples come from the generator that the trainer's own training steps
draw from: MXNet's generator for the trainer's context on the fused path (the variational
operator, and :func:`gluon_bbb.fused.normal_sample` for ``sampling='local'``), the trainer's
:class:`~gluon_bbb.posterior.GaussianNoise` on the pure-MXNet path. Seeding the trainer, or
``mx.random.seed``, therefore makes predictions reproducible, and there is one stream to
reason about, not two.

**Sampling.** ``'weights'`` (default) draws every weight tensor, one draw shared by all
examples. ``'local'`` applies the local reparameterisation trick (Kingma, Salimans & Welling
2015) to the first layer, which must be a ``gluon.nn.Dense`` (the network itself, or the first
block of a plain ``Sequential``/``HybridSequential``): under q its pre-activations for an
example x are independent Gaussians, ``a_j ~ N(x . mu_j + mu_b_j, x^2 . sigma_j^2 +
sigma_b_j^2)``, computed once by two matrix products and drawn n times; the later blocks get
ordinary weight samples. Every example gets the same predictive distribution as with
``'weights'``; only the examples no longer share the first layer's weights. It needs the
fused operator; without it, weight sampling is used and the reason is logged once.
"""
import logging
import weakref

from mxnet import gluon, nd

from ._checks import check_int
from ._math import softplus
from ._mxcompat import dense_settings
from .batched import inherits_forward, is_plain_sequential
from .estimators import dense_moments
from .fused import normal_sample, variational_sample
from .posterior import assign_arrays

__all__ = ["SAMPLING_METHODS", "EVAL_BATCH_SIZE", "check_sampling", "sample_outputs",
           "predict_proba", "error_rate", "evaluate", "rebatch"]

logger = logging.getLogger(__name__)

#: The ``sampling`` choices.
SAMPLING_METHODS = ("weights", "local")
#: Examples per forward pass when evaluating (the user's batches are joined up to this size).
EVAL_BATCH_SIZE = 2500
#: Trainers whose fall-back from 'local' to 'weights' was logged already.
_LOCAL_FALLBACK_LOGGED = weakref.WeakSet()


def check_sampling(net, sampling):
    """ValueError unless ``sampling`` is one of :data:`SAMPLING_METHODS` and applies to ``net``."""
    if not isinstance(sampling, str) or sampling not in SAMPLING_METHODS:
        raise ValueError(f"sampling must be one of {SAMPLING_METHODS}, got {sampling!r}")
    if sampling == "local":
        _local_layers(net)


def sample_outputs(trainer, batches, num_samples, sampling="weights"):
    """The network's outputs (e.g. logits) for every batch under each of n posterior draws.

    Parameters
    ----------
    trainer : BBBTrainer, set up (its posterior exists)
    batches : list of NDArray, (batch_size_j, ...) each, on the trainer's context
    num_samples : int, n >= 1
    sampling : {'weights', 'local'}

    Yields
    ------
    n lists of NDArrays, one output per batch, (batch_size_j, num_outputs) each. After the
    last (or if the caller stops early), the network holds the posterior means again.
    """
    check_int("num_samples", num_samples)
    check_sampling(trainer.net, sampling)
    try:
        if sampling == "local" and _local_sampling_available(trainer):
            yield from _local_outputs(trainer, batches, num_samples)
            return
        for _ in range(num_samples):  # one weight sample serves every batch
            trainer.draw_network()
            yield [trainer.forward(x) for x in batches]
    finally:
        trainer.set_mean()


def predict_proba(trainer, batches, num_samples, sampling="weights"):
    """Class probabilities for each batch: the posterior-mean network's (``num_samples=0``)
    or the average of the softmax outputs of ``num_samples`` sampled networks.

    Returns
    -------
    list of NDArray, (batch_size_j, num_classes) each
    """
    check_int("num_samples", num_samples, minimum=0)
    check_sampling(trainer.net, sampling)
    trainer.prepare(batches[0])
    if num_samples == 0:
        trainer.set_mean()
        return [nd.softmax(trainer.forward(x), axis=-1) for x in batches]
    sums = [None] * len(batches)
    for outputs in sample_outputs(trainer, batches, num_samples, sampling):
        for j, output in enumerate(outputs):
            probs = nd.softmax(output, axis=-1)
            sums[j] = probs if sums[j] is None else sums[j] + probs
    return [s / num_samples for s in sums]


def evaluate(trainer, data, num_samples=0, sampling="weights"):
    """Classification error rate of the posterior mean (n = 0) or of the average of n
    sampled networks on an iterable of (data, label) batches; see :func:`predict_proba`."""
    inputs, labels = [], []
    for x, y in data:
        inputs.append(x.as_in_context(trainer.ctx))
        labels.append(y.as_in_context(trainer.ctx))
    if not inputs:
        raise ValueError("evaluate got an empty data set")
    # Few large batches: each weight sample then costs a few big matrix products.
    inputs, labels = rebatch(inputs, EVAL_BATCH_SIZE), rebatch(labels, EVAL_BATCH_SIZE)
    return error_rate(predict_proba(trainer, inputs, num_samples, sampling), labels)


def error_rate(scores, labels):
    """The share of examples whose highest score is not their label, over all batches.

    Parameters
    ----------
    scores : list of NDArray, (batch_size_j, num_classes) each
        Probabilities, log-probabilities or logits: only their argmax counts.
    labels : list of NDArray, (batch_size_j,) each, class indices

    Returns
    -------
    float, in [0, 1] (one host sync)
    """
    mistakes = nd.add_n(*[nd.sum(nd.argmax(s, axis=-1) != y) for s, y in zip(scores, labels)])
    return float(mistakes.asscalar()) / sum(y.shape[0] for y in labels)


def rebatch(arrays, batch_size):
    """Join consecutive arrays along axis 0 into arrays of about ``batch_size`` rows."""
    groups, current, rows = [], [], 0
    for array in arrays:
        current.append(array)
        rows += array.shape[0]
        if rows >= batch_size:
            groups.append(current)
            current, rows = [], 0
    if current:
        groups.append(current)
    return [group[0] if len(group) == 1 else nd.concat(*group, dim=0) for group in groups]


# ---------------------------------------------------------------------------- local sampling
def _local_sampling_available(trainer):
    """True if sampling='local' can run; else logs why (once per trainer) and returns False."""
    if trainer.fused:
        return True
    if trainer not in _LOCAL_FALLBACK_LOGGED:
        logger.warning("gluon_bbb: sampling='local' needs the fused operator, which this trainer "
                       "does not use (%s); sampling the weights instead", trainer.fused_reason)
        _LOCAL_FALLBACK_LOGGED.add(trainer)
    return False


def _local_outputs(trainer, batches, num_samples):
    """:func:`sample_outputs` with the first layer's pre-activations drawn locally."""
    layer, later_blocks = _local_layers(trainer.net)
    posterior = trainer.posterior
    moments = [trainer.forward(x, lambda x: _first_layer_moments(posterior, layer, x))
               for x in batches]
    first = (layer.weight, layer.bias)
    later = [i for i, target in enumerate(posterior.targets)
             if all(target is not param for param in first)]
    for _ in range(num_samples):
        if later:  # one sample of the later layers' weights serves every batch
            weights = variational_sample([posterior.mus[i].data() for i in later],
                                         [posterior.rhos[i].data() for i in later],
                                         trainer.loss.prior, return_eps=False)[0]
            assign_arrays([posterior.targets[i] for i in later], weights)
        outputs = []
        for mean, variance in moments:
            hidden = normal_sample(mean, variance=variance)  # a ~ N(mean, variance)
            if layer.act is not None:
                hidden = layer.act(hidden)
            for block in later_blocks:
                hidden = block(hidden)
            outputs.append(hidden)
        yield outputs


def _first_layer_moments(posterior, layer, x):
    """Mean and variance under q of a Dense layer's pre-activations for the inputs x.

    Parameters
    ----------
    posterior : VariationalPosterior
    layer : gluon.nn.Dense with ``units`` outputs
    x : NDArray, the layer's input, (batch_size, ...)

    Returns
    -------
    mean, variance : NDArrays, (batch_size, units) (or x.shape[:-1] + (units,) for a
        Dense with flatten=False): x . mu^T + mu_b and (x * x) . (sigma^2)^T + sigma_b^2.
    """
    mu_w, var_w = _posterior_moments(posterior, layer.weight)
    if var_w is None:  # a frozen weight contributes no variance
        var_w = nd.zeros_like(mu_w)
    mu_b, var_b = _posterior_moments(posterior, layer.bias) if layer.bias is not None else (None, None)
    options = dict(dense_settings(layer), num_hidden=layer.weight.shape[0])
    return dense_moments(nd, x, mu_w, var_w, mu_b, var_b, **options)


def _posterior_moments(posterior, param):
    """(mu, sigma^2) of a network parameter under q, or (its value, None) if q lacks it."""
    for i, target in enumerate(posterior.targets):
        if target is param:
            sigma = softplus(nd, posterior.rhos[i].data())
            return posterior.mus[i].data(), nd.square(sigma)
    return param.data(), None


def _local_layers(net):
    """(the first Dense layer, the list of blocks after it) for sampling='local'.

    The network must compute exactly what these blocks compute in turn: a ``gluon.nn.Dense``
    itself, or a ``Sequential``/``HybridSequential`` (forward not overridden) whose first
    block is one. Raises a ValueError naming what is found otherwise.
    """
    if isinstance(net, gluon.nn.Dense):
        first, later = net, []
    elif is_plain_sequential(net) and len(net):
        first, later = net[0], [net[i] for i in range(1, len(net))]
    else:
        raise ValueError("sampling='local' needs a gluon.nn.Dense, or a Sequential/HybridSequential "
                         f"that starts with one; got a {type(net).__name__}")
    if not isinstance(first, gluon.nn.Dense) or not inherits_forward(first, gluon.nn.Dense):
        raise ValueError("sampling='local' needs a network whose first block is a gluon.nn.Dense; "
                         f"the first block is a {type(first).__name__}")
    return first, later
