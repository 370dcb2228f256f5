"""Gradient estimators for training: the noise a layer's forward pass uses.

Bayes by Backprop (section 3.2 of the paper) draws one weight sample w = mu + sigma * eps per
step and every example of the minibatch shares it. The examples' gradients are then
correlated, and the variance of the minibatch gradient does not fall as 1/batch size.
Two estimators give each example its own noise at the cost of one or two extra matrix
products, with the same expected gradient:

``'weights'``
    The paper's: the layer computes with the step's weight sample.
``'local'``
    The local reparameterisation (Kingma, Salimans & Welling 2015, "Variational dropout
    and the local reparameterization trick"), for ``gluon.nn.Dense``. Under q the
    pre-activations of an example x are independent Gaussians,
    ``a_j ~ N(x . mu_j + mu_b_j, (x * x) . sigma_j^2 + sigma_b_j^2)``; the layer draws them
    directly, independently for every example, instead of drawing the weights.
``'flipout'``
    Flipout (Wen, Vicol, Ba, Tran & Grosse 2018, "Flipout: efficient pseudo-independent
    weight perturbations on mini-batches"), for ``gluon.nn.Dense`` and ``gluon.nn.Conv2D``
    (NCHW). The step's weight sample is split into its mean and its perturbation,
    w = mu + dW with dW = sigma * eps, and every example n gets the perturbation
    dW * (s_n r_n^T), random signs r_n on the inputs and s_n on the outputs:
    ``a_n = x_n . mu + ((x_n * r_n) . dW) * s_n + b``, where b is the step's bias sample.
    Each example's perturbation has the distribution of dW, so each example's output has
    its distribution under q; across the examples they are pseudo-independent.

Layers the chosen estimator does not cover (other block types, recurrent layers such as
``gluon.rnn.LSTM`` and ``GRU``, Conv2D with 'local', a Conv2D in NHWC layout, frozen layers)
keep weight sampling; :attr:`LayerEstimators.report`
says which layer got which estimator.

The complexity cost stays the paper's Monte Carlo estimate log q(w) - log P(w) at the step's
weight sample w = mu + sigma * eps. With 'flipout' it is the sample whose perturbation dW
the layers use. With 'local' the pre-activation noise of the covered layers is drawn
independently of that sample, which those layers then use for the complexity cost only:
the two estimates are unbiased separately, so their sum is an unbiased estimate of the cost,
and its gradient of the gradient of the cost.

The extra noise (the local Gaussians, Flipout's signs) comes from MXNet's generator on the
trainer's context, which :meth:`gluon_bbb.BBBTrainer.reseed` seeds: a seeded run repeats.
"""
from mxnet import gluon

from ._math import softplus
from ._mxcompat import conv_settings, dense_settings

__all__ = ["ESTIMATORS", "LayerEstimators", "check_estimator", "dense_moments"]

#: The ``estimator`` choices of :class:`gluon_bbb.BBBTrainer`.
ESTIMATORS = ("weights", "local", "flipout")
#: Added to the local variance before its square root: a zero input row without a bias
#: has variance 0, where the square root's gradient is infinite.
_TINY_VARIANCE = 1e-30


def check_estimator(estimator):
    """ValueError unless ``estimator`` is one of :data:`ESTIMATORS`; returns it."""
    if not isinstance(estimator, str) or estimator not in ESTIMATORS:
        raise ValueError(f"estimator must be one of {ESTIMATORS}, got {estimator!r}")
    return estimator


#: Recurrent blocks: their weights act at every time step, so an example's per-step noise
#: would have to be shared over its time steps; neither estimator here does that.
_RECURRENT = (gluon.rnn.RNN, gluon.rnn.LSTM, gluon.rnn.GRU, gluon.rnn.RecurrentCell)


def _covers(estimator, layer):
    """Why ``estimator`` does not apply to ``layer``, or None if it does."""
    if isinstance(layer, _RECURRENT):
        return "a recurrent layer: it keeps the weight sample, shared by its time steps"
    if isinstance(layer, gluon.nn.Dense):
        return None
    if isinstance(layer, gluon.nn.Conv2D):
        if estimator == "local":
            return "'local' covers Dense layers only"
        if conv_settings(layer).get("layout", "NCHW") != "NCHW":
            return "Flipout covers Conv2D in NCHW layout only"
        return None
    return "not a Dense or Conv2D layer"


class LayerEstimators:
    """The estimator forward passes of a network's layers, installed on the layers.

    Each covered layer's ``hybrid_forward`` is replaced, on the layer object only, by one
    that uses the estimator while :meth:`training` is active and is the layer's own forward
    otherwise (evaluation, prediction, the posterior mean). The network must therefore run
    imperatively: the trainer does not hybridize it when an estimator other than
    'weights' is chosen.

    Parameters
    ----------
    net : gluon.Block
    posterior : VariationalPosterior over ``net``
    estimator : str, one of :data:`ESTIMATORS`

    Attributes
    ----------
    assignment : dict of str -> str
        Layer name -> the estimator it uses ('weights' for layers not covered).
    report : str
        One line: which layers use which estimator, and why others do not.
    """

    def __init__(self, net, posterior, estimator):
        self.estimator = check_estimator(estimator)
        self.active = False
        self.assignment, reasons = {}, {}
        index = {id(param): i for i, param in enumerate(posterior.targets)}
        layers = []
        net.apply(layers.append)  # every block, the network included
        for layer in layers:
            if not list(layer.params.keys()):  # Block.params: a block's own parameters only
                continue
            name = layer.name
            reason = "the paper's estimator" if estimator == "weights" else _covers(estimator, layer)
            weight = getattr(layer, "weight", None)
            if reason is None and id(weight) not in index:
                reason = "its weight is frozen"
            if reason is not None:
                self.assignment[name] = "weights"
                reasons[name] = reason
                continue
            bias = getattr(layer, "bias", None)
            bias_index = index.get(id(bias)) if bias is not None else None
            forward = _EstimatorForward(self, layer, estimator, posterior, index[id(weight)], bias_index)
            layer.hybrid_forward = forward  # on this layer object only
            self.assignment[name] = estimator
        covered = [name for name, kind in self.assignment.items() if kind != "weights"]
        if estimator == "weights":
            self.report = "weights: every layer (the paper's estimator)"
        else:
            rest = "; ".join(f"{name} ({reason})" for name, reason in reasons.items())
            self.report = (f"{estimator}: {', '.join(covered) or 'no layer'}"
                           + (f"; weights: {rest}" if rest else ""))

    def training(self):
        """``with estimators.training():`` the covered layers use the estimator within. The
        object is its own context manager: nothing is created per training step."""
        return self

    def __enter__(self):
        self.active = True
        return self

    def __exit__(self, *exc_info):
        self.active = False
        return False


class _EstimatorForward:
    """A layer's replacement ``hybrid_forward`` (see :class:`LayerEstimators`)."""

    def __init__(self, owner, layer, estimator, posterior, weight_index, bias_index):
        self.owner, self.layer, self.estimator = owner, layer, estimator
        self.posterior = posterior
        self.weight_index, self.bias_index = weight_index, bias_index
        self.original = type(layer).hybrid_forward

    def __call__(self, F, x, weight, bias=None):
        if not self.owner.active:
            return self.original(self.layer, F, x, weight, bias)
        mu = self.posterior.mus[self.weight_index].data()
        if self.estimator == "local":
            out = self._local(F, x, mu, bias)
        elif isinstance(self.layer, gluon.nn.Dense):
            out = self._flipout_dense(F, x, weight, bias, mu)
        else:
            out = self._flipout_conv(F, x, weight, bias, mu)
        return out if self.layer.act is None else self.layer.act(out)

    def _dense_options(self):
        return dense_settings(self.layer)

    def _local(self, F, x, mu, bias):
        """a = x . mu^T + mu_b + sqrt((x * x) . (sigma^2)^T + sigma_b^2) * zeta; a bias
        outside the posterior (none, or frozen) adds its value and no variance."""
        sigma = softplus(F, self.posterior.rhos[self.weight_index].data())
        if self.bias_index is None:
            mean_bias, var_bias = bias, None
        else:
            mean_bias = self.posterior.mus[self.bias_index].data()
            var_bias = F.square(softplus(F, self.posterior.rhos[self.bias_index].data()))
        mean, variance = dense_moments(F, x, mu, F.square(sigma), mean_bias, var_bias,
                                       **self._dense_options())
        noise = F.random.normal(shape=mean.shape, dtype=mean.dtype, ctx=mean.context)
        return mean + F.sqrt(variance + _TINY_VARIANCE) * noise

    def _flipout_dense(self, F, x, weight, bias, mu):
        """a = x . mu^T + ((x * r) . dW^T) * s + b, dW = w - mu."""
        options = self._dense_options()
        if options["flatten"] and x.ndim > 2:
            x = F.flatten(x)
        mean = F.FullyConnected(x, mu, bias, no_bias=bias is None, **options)
        flipped = F.FullyConnected(x * _signs(F, x), weight - mu, no_bias=True, **options)
        return mean + flipped * _signs(F, mean)

    def _flipout_conv(self, F, x, weight, bias, mu):
        """The same for a convolution, with one sign per example and channel."""
        kwargs = conv_settings(self.layer)
        mean = F.Convolution(x, mu, bias, **dict(kwargs, no_bias=bias is None))
        signs_in = _signs(F, x, per_channel=True)
        flipped = F.Convolution(x * signs_in, weight - mu, **dict(kwargs, no_bias=True))
        return mean + flipped * _signs(F, mean, per_channel=True)


def _signs(F, like, per_channel=False):
    """Independent random signs, +1 or -1 with probability 1/2 each: of the shape of
    ``like``, or (N, C, 1, 1) for an (N, C, H, W) ``like`` with ``per_channel``."""
    shape = like.shape[:2] + (1,) * (like.ndim - 2) if per_channel else like.shape
    uniform = F.random.uniform(shape=shape, dtype=like.dtype, ctx=like.context)
    return 2 * (uniform > 0.5) - 1


def dense_moments(F, x, mean_weight, var_weight, mean_bias=None, var_bias=None, **options):
    """Mean and variance of a Dense layer's pre-activations a = x . w^T + b under independent
    Gaussian weights (the local reparameterisation, Kingma, Salimans & Welling 2015):
    x . mu^T + mu_b and (x * x) . (sigma^2)^T + sigma_b^2.

    Parameters
    ----------
    F : module
    x : NDArray or Symbol, (batch_size, in_units) (or as ``FullyConnected`` takes it)
    mean_weight, var_weight : (units, in_units), mu and sigma^2 of the weight
    mean_bias, var_bias : (units,) or None
        mu_b and sigma_b^2; None adds nothing (no bias, or a bias outside the posterior,
        whose value is then ``mean_bias`` with ``var_bias`` None).
    **options
        ``FullyConnected``'s ``num_hidden`` and ``flatten``.

    Returns
    -------
    mean, variance : (batch_size, units)
    """
    mean = F.FullyConnected(x, mean_weight, mean_bias, no_bias=mean_bias is None, **options)
    variance = F.FullyConnected(F.square(x), var_weight, var_bias, no_bias=var_bias is None,
                                **options)
    return mean, variance
