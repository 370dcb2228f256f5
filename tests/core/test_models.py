"""Tests of gluon_bbb.models."""
import pytest
from mxnet import gluon, nd

from gluon_bbb import models


def _layers(net):
    return [net[i] for i in range(len(net))]


def test_default_mlp_is_the_papers_400_400_network():
    net = models.mlp()
    assert isinstance(net, gluon.nn.HybridSequential)
    layers = _layers(net)
    assert [type(layer) for layer in layers] == [gluon.nn.Dense] * 3
    net.initialize()
    out = net(nd.zeros((5, 784)))
    assert out.shape == (5, 10)
    shapes = [param.shape for param in net.collect_params().values()]
    assert shapes == [(400, 784), (400,), (400, 400), (400,), (10, 400), (10,)]


@pytest.mark.parametrize("hidden, outputs", [((), 3), ((16,), 10), ((8, 4, 2), 5)])
def test_layer_count_and_output_shape(hidden, outputs):
    net = models.mlp(hidden, num_outputs=outputs, activation="tanh")
    assert len(net) == len(hidden) + 1
    net.initialize()
    assert net(nd.ones((2, 7))).shape == (2, outputs)


def test_dropout_follows_each_hidden_layer():
    net = models.mlp((16, 8), dropout=0.25)
    kinds = [type(layer).__name__ for layer in _layers(net)]
    assert kinds == ["Dense", "Dropout", "Dense", "Dropout", "Dense"]
    net.initialize()
    net.hybridize()
    x = nd.ones((4, 12))
    assert (net(x) == net(x)).asnumpy().all()  # dropout is off outside training


def test_hidden_sizes_accept_numpy_ints():
    import numpy as np
    net = models.mlp(np.array([4, 3]))
    net.initialize()
    assert net(nd.ones((2, 5))).shape == (2, 10)
    shapes = [param.shape for param in net.collect_params().values()]
    assert shapes == [(4, 5), (4,), (3, 4), (3,), (10, 3), (10,)]  # 5-4-3-10, plain ints
    assert all(isinstance(size, int) for shape in shapes for size in shape)


@pytest.mark.parametrize("kwargs, name", [
    ({"hidden_sizes": (400, 0)}, "hidden_sizes"),
    ({"hidden_sizes": (-1,)}, "hidden_sizes"),
    ({"hidden_sizes": (4.5,)}, "hidden_sizes"),
    ({"hidden_sizes": (True,)}, "hidden_sizes"),
    ({"hidden_sizes": 400}, "hidden_sizes"),
    ({"hidden_sizes": "400"}, "hidden_sizes"),
    ({"num_outputs": 0}, "num_outputs"),
    ({"activation": "gelu"}, "activation"),
    ({"dropout": 1.0}, "dropout"),
    ({"dropout": -0.1}, "dropout"),
    ({"dropout": float("nan")}, "dropout"),
    ({"dropout": "0.5"}, "dropout"),
])
def test_bad_arguments_raise_value_error_naming_the_argument(kwargs, name):
    with pytest.raises(ValueError, match=name):
        models.mlp(**kwargs)


def test_lenet_takes_flat_mnist_batches_and_has_lenet5s_weights():
    import mxnet as mx
    import numpy as np
    net = models.lenet()
    net.initialize(mx.init.Xavier())
    out = net(nd.zeros((3, 784)))  # flat, as the data loaders give it
    assert out.shape == (3, 10)
    assert net(nd.zeros((2, 1, 28, 28))).shape == (2, 10)
    sizes = {p.name.split("_", 1)[1]: int(np.prod(p.shape)) for p in net.collect_params().values()}
    conv = [(6 * 1 * 25 + 6), (16 * 6 * 25 + 16)]
    dense = [(16 * 5 * 5 * 120 + 120), (120 * 84 + 84), (84 * 10 + 10)]
    assert sum(sizes.values()) == sum(conv + dense) == 61706
    assert len(models.lenet(dropout=0.5)) == len(net) + 2


def test_lenet_trains_with_bayes_by_backprop():
    """Bayes by Backprop is a training method: the ordinary LeNet trains unchanged."""
    import mxnet as mx
    import numpy as np
    from gluon_bbb import BBBLoss, BBBTrainer, GaussianPrior
    from gluon_bbb.data import ArrayLoader
    rng = np.random.default_rng(0)
    x = rng.normal(size=(64, 784)).astype("float32")
    y = rng.integers(0, 10, size=64).astype("float32")
    net = models.lenet()
    net.initialize(mx.init.Xavier())
    net(nd.zeros((1, 784)))
    trainer = BBBTrainer(net, BBBLoss(GaussianPrior(1.0)), seed=0)
    history = trainer.fit(ArrayLoader(x, y, batch_size=32), 2, progress=False)
    assert all(np.isfinite(r["loss"]) for r in history)
    assert trainer.posterior.num_weights == 61706


@pytest.mark.parametrize("kwargs", [{"image_shape": (28, 28)}, {"dropout": 1.0},
                                    {"num_outputs": 0}])
def test_lenet_refuses_bad_arguments(kwargs):
    with pytest.raises(ValueError):
        models.lenet(**kwargs)


@pytest.mark.parametrize("cell", ["lstm", "gru"])
def test_recurrent_predicts_from_the_last_step_of_its_recurrent_layer(cell):
    """The output is the Dense layer applied to the recurrent layer's output at the last step
    of the sequence read from the flat input, computed here through the layers one by one."""
    import mxnet as mx
    import numpy as np
    mx.random.seed(0)
    net = models.recurrent(hidden_size=5, num_outputs=2, cell=cell)
    net.initialize(mx.init.Xavier())
    x = nd.array(np.random.default_rng(0).normal(size=(4, 6)))
    output = net(x)
    assert output.shape == (4, 2)
    layers = _layers(net)
    assert isinstance(layers[1], models.RECURRENT_CELLS[cell])
    sequences = layers[1](x.reshape((4, 6, 1)))  # (batch, T, hidden)
    expected = layers[-1](sequences[:, -1, :])
    np.testing.assert_allclose(output.asnumpy(), expected.asnumpy(), rtol=1e-6, atol=1e-6)
    # a longer sequence of 2 features per step: T = 3
    two = models.recurrent(hidden_size=5, num_features=2, cell=cell)
    two.initialize()
    assert two(nd.zeros((4, 6))).shape == (4, 1)


def test_recurrent_dropout_is_a_layer_before_the_output_and_between_recurrent_layers():
    assert not any(isinstance(layer, gluon.nn.Dropout) for layer in _layers(models.recurrent()))
    net = models.recurrent(num_layers=2, dropout=0.25)
    layers = _layers(net)
    assert isinstance(layers[-2], gluon.nn.Dropout) and layers[-2]._rate == 0.25
    assert layers[1]._dropout == 0.25 and layers[1]._num_layers == 2


def test_recurrent_trains_with_bayes_by_backprop_and_its_posterior_covers_the_cell():
    import mxnet as mx
    import numpy as np
    from gluon_bbb import BBBLoss, BBBTrainer, GaussianPrior
    from gluon_bbb.data import ArrayLoader
    rng = np.random.default_rng(0)
    x = rng.normal(size=(32, 8)).astype("float32")
    y = x[:, -1] + 0.1 * rng.normal(size=32).astype("float32")
    mx.random.seed(0)
    trainer = BBBTrainer(models.recurrent(4, num_outputs=2),
                         BBBLoss(GaussianPrior(1.0), likelihood="gaussian", noise_sigma=None), seed=0)
    history = trainer.fit(ArrayLoader(x, y, batch_size=16), 2, progress=False)
    assert all(np.isfinite(r["loss"]) for r in history)
    assert any(name.endswith("l0_h2h_weight") for name in trainer.posterior.names)
    # LSTM: 4 gates x hidden x (input + hidden) weights and 2 x 4 x hidden biases; Dense: 2 x 4 + 2
    assert trainer.posterior.num_weights == 4 * 4 * (1 + 4) + 2 * 4 * 4 + 2 * 4 + 2


@pytest.mark.parametrize("kwargs", [{"cell": "rnn"}, {"hidden_size": 0}, {"num_features": 0},
                                    {"num_layers": 1.5}, {"dropout": -0.1}])
def test_recurrent_refuses_bad_arguments_naming_them(kwargs):
    with pytest.raises(ValueError, match=next(iter(kwargs))):
        models.recurrent(**kwargs)
