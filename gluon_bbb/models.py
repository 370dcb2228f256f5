"""Ordinary Gluon networks to train with Bayes by Backprop.

The networks are plain ``gluon.nn.HybridSequential`` blocks: :class:`~gluon_bbb.BBBTrainer`
puts weight samples into them, so no Bayesian layer types are needed.
"""
import numbers

from mxnet import gluon

from ._checks import check_positive_ints

__all__ = ["ACTIVATIONS", "mlp"]

#: Activations of the hidden layers that :func:`mlp` accepts (MXNet's ``act_type`` values).
ACTIVATIONS = ("relu", "sigmoid", "tanh", "softrelu", "softsign")


def mlp(hidden_sizes=(400, 400), num_outputs=10, activation="relu", dropout=0.0):
    """A multilayer perceptron of Dense layers, like the paper's MNIST networks.

    Parameters
    ----------
    hidden_sizes : sequence of int
        Units of each hidden layer, e.g. ``(400, 400)``; may be empty (logistic regression).
    num_outputs : int
        Units of the last, linear layer (the logits), e.g. 10 classes.
    activation : {'relu', 'sigmoid', 'tanh', 'softrelu', 'softsign'}
        Activation of the hidden layers.
    dropout : float, 0 <= dropout < 1
        If > 0, a Dropout layer with this rate follows each hidden layer.

    Returns
    -------
    gluon.nn.HybridSequential
        Uninitialised, with deferred shapes: the input size is taken from the first batch.

    Raises
    ------
    ValueError
        A hidden size or ``num_outputs`` that is not a positive integer, an unknown
        ``activation``, or ``dropout`` outside [0, 1).
    """
    hidden_sizes = check_positive_ints("hidden_sizes", hidden_sizes)
    check_positive_ints("num_outputs", [num_outputs])
    if activation not in ACTIVATIONS:
        raise ValueError(f"activation must be one of {ACTIVATIONS}, got {activation!r}")
    if isinstance(dropout, bool) or not isinstance(dropout, numbers.Real) or not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout must be a number in [0, 1), got {dropout!r}")
    net = gluon.nn.HybridSequential()
    with net.name_scope():
        for units in hidden_sizes:
            net.add(gluon.nn.Dense(units, activation=activation))
            if dropout > 0:
                net.add(gluon.nn.Dropout(float(dropout)))
        net.add(gluon.nn.Dense(num_outputs))
    return net
