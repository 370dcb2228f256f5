"""What gluon_bbb._mxcompat relies on in mxnet 1.9.1 and Optuna: each private attribute it reads
or writes still holds what it expects. A new MXNet or Optuna that changes one fails here."""
import inspect

import mxnet as mx
import numpy as np
import pytest
from mxnet import autograd, gluon, nd

from gluon_bbb import _mxcompat as compat


def test_a_parameter_takes_an_array_without_copy_and_keeps_its_graph():
    dense = gluon.nn.Dense(2, in_units=3)
    assert compat.parameter_arrays(dense.weight) is None  # before initialisation
    dense.initialize()
    assert len(compat.parameter_arrays(dense.weight)) == 1
    mu = nd.array(np.arange(6.0).reshape(2, 3))
    mu.attach_grad()
    with autograd.record():
        sample = mu * 2
        compat.set_parameter_array(dense.weight, sample)
        out = dense(nd.ones((1, 3))).sum()
    assert dense.weight.data() is sample
    out.backward()
    np.testing.assert_array_equal(mu.grad.asnumpy(), np.full((2, 3), 2.0))


def test_layer_settings():
    dense = gluon.nn.Dense(5, flatten=False, in_units=3)
    assert compat.dense_settings(dense) == {"num_hidden": 5, "flatten": False}
    assert compat.dense_settings(gluon.nn.Dense(7))["flatten"] is True
    conv = gluon.nn.Conv2D(4, kernel_size=3, strides=2, padding=1)
    settings = compat.conv_settings(conv)
    assert (settings["kernel"], settings["stride"], settings["pad"]) == ((3, 3), (2, 2), (1, 1))
    assert settings["num_filter"] == 4 and settings["layout"] == "NCHW"
    settings["num_filter"] = 99  # a copy: the layer is unchanged
    assert compat.conv_settings(conv)["num_filter"] == 4


def test_mnist_datasets_keep_their_arrays_in_data_and_label():
    source = inspect.getsource(gluon.data.vision.MNIST._get_data)
    assert "self._data = " in source and "self._label = " in source
    assert issubclass(gluon.data.vision.FashionMNIST, gluon.data.vision.MNIST)


def test_structural_parameters_are_the_names_save_parameters_writes(tmp_path):
    net = gluon.nn.HybridSequential()
    net.add(gluon.nn.Dense(4, in_units=3), gluon.nn.Dense(2, in_units=4))
    net.initialize()
    path = str(tmp_path / "net.params")
    net.save_parameters(path)
    params = compat.structural_parameters(net)
    assert set(params) == set(nd.load(path)) == {"0.weight", "0.bias", "1.weight", "1.bias"}
    assert params["1.bias"] is net[1].bias


def test_a_trainers_optimizer_state_and_update_counts():
    net = gluon.nn.Dense(2, in_units=3)
    net.initialize()
    trainer = gluon.Trainer(net.collect_params(), "adam", {"learning_rate": 0.1})
    with autograd.record():
        loss = net(nd.ones((4, 3))).sum()
    loss.backward()
    trainer.step(4)
    params = compat.trainer_parameters(trainer)
    assert sorted(p.name for p in params) == sorted([net.weight.name, net.bias.name])
    updaters = compat.trainer_updaters(trainer)
    assert len(updaters) == 1 and set(updaters[0].states) == {0, 1}
    mean, variance = updaters[0].states[[p.name for p in params].index(net.weight.name)]
    assert mean.shape == variance.shape == (2, 3)
    optimizer = trainer.optimizer
    assert compat.update_counts(optimizer) == {0: {0: 1, 1: 1}}
    compat.set_update_counts(optimizer, {0: {0: 7, 1: 7}}, device=0)
    assert optimizer._index_update_count == {0: 7, 1: 7}  # what Adam's bias correction reads
    compat.set_update_counts(optimizer, {}, device=0)
    assert compat.update_counts(optimizer) == {0: {}}


def test_an_optuna_trials_id_names_it_in_the_storage():
    optuna = pytest.importorskip("optuna")
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study()
    study.ask()
    trial = study.ask()
    frozen = study._storage.get_trial(compat.trial_id(trial))
    assert frozen.number == trial.number == 1
