"""Ordinary Gluon networks to train with Bayes by Backprop.

The networks are plain ``gluon.nn.HybridSequential`` blocks: :class:`~gluon_bbb.BBBTrainer`
puts weight samples into them, so no Bayesian layer types are needed.
"""
import numbers

from mxnet import gluon

from ._checks import check_int, check_positive_ints

__all__ = ["ACTIVATIONS", "RECURRENT_CELLS", "mlp", "lenet", "recurrent"]

#: Activations of the hidden layers that :func:`mlp` accepts (MXNet's ``act_type`` values).
ACTIVATIONS = ("relu", "sigmoid", "tanh", "softrelu", "softsign")
#: The recurrent layers that :func:`recurrent` builds, by name.
RECURRENT_CELLS = {"lstm": gluon.rnn.LSTM, "gru": gluon.rnn.GRU}


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
    _check_dropout(dropout)
    net = gluon.nn.HybridSequential()
    with net.name_scope():
        for units in hidden_sizes:
            net.add(gluon.nn.Dense(units, activation=activation))
            if dropout > 0:
                net.add(gluon.nn.Dropout(float(dropout)))
        net.add(gluon.nn.Dense(num_outputs))
    return net


def lenet(num_outputs=10, dropout=0.0, image_shape=(1, 28, 28)):
    """A LeNet-5 style convolutional network (LeCun et al. 1998) for 28x28 images.

    Conv2D(6, 5x5, padding 2)-max pool-Conv2D(16, 5x5)-max pool-Dense(120)-Dense(84)-
    Dense(num_outputs), ReLU activations: 61,706 weights and biases for 10 outputs. Flat
    inputs (batch_size, 784), as :func:`gluon_bbb.data.get_loaders` gives them, are reshaped
    to ``(batch_size,) + image_shape`` first, so the paper's data pipeline feeds it unchanged.

    Parameters
    ----------
    num_outputs : int
    dropout : float, 0 <= dropout < 1
        If > 0, Dropout after each hidden Dense layer (the dropout baseline).
    image_shape : (channels, height, width)

    Returns
    -------
    gluon.nn.HybridSequential
        Uninitialised.
    """
    check_positive_ints("num_outputs", [num_outputs])
    shape = tuple(check_positive_ints("image_shape", image_shape))
    if len(shape) != 3:
        raise ValueError(f"image_shape must be (channels, height, width), got {image_shape!r}")
    _check_dropout(dropout)
    net = gluon.nn.HybridSequential()
    with net.name_scope():
        net.add(gluon.nn.HybridLambda(lambda F, x: F.reshape(x, shape=(-1,) + shape)))
        net.add(gluon.nn.Conv2D(6, kernel_size=5, padding=2, activation="relu"),
                gluon.nn.MaxPool2D(pool_size=2, strides=2),
                gluon.nn.Conv2D(16, kernel_size=5, activation="relu"),
                gluon.nn.MaxPool2D(pool_size=2, strides=2))
        for units in (120, 84):
            net.add(gluon.nn.Dense(units, activation="relu"))
            if dropout > 0:
                net.add(gluon.nn.Dropout(float(dropout)))
        net.add(gluon.nn.Dense(num_outputs))
    return net


def recurrent(hidden_size=32, num_outputs=1, cell="lstm", num_layers=1, num_features=1,
              dropout=0.0):
    """A recurrent network that reads a sequence and predicts from its last time step.

    Flat inputs (batch_size, T * num_features), as :class:`gluon_bbb.data.ArrayLoader` and
    :func:`gluon_bbb.data.sliding_windows` give them, are read as (batch_size, T, num_features)
    sequences (layout 'NTC'); a ``gluon.rnn.LSTM`` or ``GRU`` runs over them, and a Dense layer
    maps the last layer's output at the last time step to ``num_outputs`` values (e.g. 2 for a
    mean and a learned noise scale, ``BBBLoss(likelihood='gaussian', noise_sigma=None)``).

    Parameters
    ----------
    hidden_size : int
        Units of the recurrent layer(s).
    num_outputs : int
    cell : {'lstm', 'gru'}
    num_layers : int
        Layers of the one recurrent block.
    num_features : int
        Values per time step.
    dropout : float, 0 <= dropout < 1
        If > 0, Dropout on the last time step's output before the Dense layer, and between
        recurrent layers (the dropout baseline; Monte Carlo dropout keeps it on at prediction).
        It drops the features the Dense layer reads, never the recurrent weights: this is not
        the variational recurrent dropout of Gal & Ghahramani (2016), whose masks of the inputs
        and the hidden state are tied across the time steps (the fused Gluon layers have none).

    Returns
    -------
    gluon.nn.HybridSequential
        Uninitialised; the sequence length T is taken from the first batch.
    """
    hidden_size, num_outputs = check_int("hidden_size", hidden_size), check_int("num_outputs", num_outputs)
    num_layers, num_features = check_int("num_layers", num_layers), check_int("num_features", num_features)
    if cell not in RECURRENT_CELLS:
        raise ValueError(f"cell must be one of {tuple(RECURRENT_CELLS)}, got {cell!r}")
    _check_dropout(dropout)
    net = gluon.nn.HybridSequential()
    with net.name_scope():
        net.add(gluon.nn.HybridLambda(lambda F, x: F.reshape(x, shape=(0, -1, num_features))))
        net.add(RECURRENT_CELLS[cell](hidden_size, num_layers=num_layers, layout="NTC",
                                      dropout=float(dropout) if num_layers > 1 else 0.0))
        net.add(gluon.nn.HybridLambda(  # (batch, T, hidden) -> the last step, (batch, hidden)
            lambda F, x: F.reshape(F.slice_axis(x, axis=1, begin=-1, end=None), shape=(0, -1))))
        if dropout > 0:
            net.add(gluon.nn.Dropout(float(dropout)))
        net.add(gluon.nn.Dense(num_outputs))
    return net


def _check_dropout(dropout):
    if isinstance(dropout, bool) or not isinstance(dropout, numbers.Real) or not 0.0 <= dropout < 1.0:
        raise ValueError(f"dropout must be a number in [0, 1), got {dropout!r}")
