"""The one module that reaches into private attributes of MXNet's and Optuna's objects.

mxnet 1.9.1 keeps a few things gluon_bbb needs only in private attributes: the arrays behind
a Gluon ``Parameter``, a ``Dense`` or ``Conv2D`` layer's settings, the arrays of its MNIST
dataset, the structural parameter names that ``save_parameters`` writes, and the optimizer
state of a ``gluon.Trainer``. Optuna 5 has no public accessor for a trial's id. Every access
is a function here with the reason it is needed; ``tests/core/test_mxcompat.py`` pins the behaviour
each one relies on, so an MXNet or Optuna that changes it fails there first. No other module
touches another object's private attributes (``tests/test_architecture.py`` checks).
"""

__all__ = ["parameter_arrays", "set_parameter_array", "dense_settings", "conv_settings",
           "dataset_arrays", "structural_parameters", "trainer_updaters", "trainer_parameters",
           "update_counts", "set_update_counts", "trial_id"]


# ---------------------------------------------------------------------------- Gluon
def parameter_arrays(param):
    """The list of NDArrays behind ``param`` (one per context), or None before it is
    initialised: ``Parameter._data``. ``param.data()`` would raise before initialisation and
    copies nothing, but gives no way to replace the array."""
    return param._data  # noqa: SLF001


def set_parameter_array(param, array):
    """Make ``param.data()`` return ``array`` itself, no copy, on its one context.

    ``Parameter.set_data`` copies the values and cuts the autograd graph from (mu, rho) to a
    sample; handing the sampled array itself to the network keeps that graph, so gradients of
    the loss reach mu and rho (the reparameterisation of section 3.2)."""
    param._data[0] = array  # noqa: SLF001


def dense_settings(layer):
    """A ``gluon.nn.Dense`` layer's ``{'num_hidden': units, 'flatten': bool}``: the layer keeps
    its arguments only in ``_units`` and ``_flatten``."""
    return {"num_hidden": layer._units, "flatten": layer._flatten}  # noqa: SLF001


def conv_settings(layer):
    """A copy of a ``gluon.nn.Conv2D`` layer's convolution arguments (kernel, stride, dilate,
    pad, num_filter, num_group, no_bias, layout): the layer keeps them only in ``_kwargs``."""
    return dict(layer._kwargs)  # noqa: SLF001


def dataset_arrays(dataset):
    """(images, labels) of a ``gluon.data.vision.MNIST`` or ``FashionMNIST`` dataset: kept
    in ``_data`` and ``_label``; indexing the dataset item by item would take minutes."""
    return dataset._data, dataset._label  # noqa: SLF001


def structural_parameters(net):
    """name -> Parameter under the structural names ``Block.save_parameters`` writes (e.g.
    ``0.weight``), which only ``_collect_params_with_prefix`` gives."""
    return net._collect_params_with_prefix()  # noqa: SLF001


# ---------------------------------------------------------------------------- optimizer state
def trainer_updaters(trainer):
    """The updaters of a ``gluon.Trainer`` (one per device), which hold the optimizer state
    (``updater.states``): ``Trainer._updaters``."""
    return trainer._updaters  # noqa: SLF001


def trainer_parameters(trainer):
    """The parameters of a ``gluon.Trainer`` in the order of the updater's indices:
    ``Trainer._params``."""
    return trainer._params  # noqa: SLF001


def update_counts(optimizer):
    """{device index: {parameter index: update count}} of an ``mx.optimizer.Optimizer``
    (Adam's bias correction reads the count): ``Optimizer._all_index_update_counts``."""
    return optimizer._all_index_update_counts  # noqa: SLF001


def set_update_counts(optimizer, counts, device=0):
    """Restore :func:`update_counts` and point the optimizer's current counts at ``device``
    (``Optimizer._set_current_context``), as MXNet does before an update on that device."""
    optimizer._all_index_update_counts = counts or {0: {}}  # noqa: SLF001
    optimizer._set_current_context(device)  # noqa: SLF001


# ---------------------------------------------------------------------------- Optuna
def trial_id(trial):
    """The storage id of an Optuna trial (the trial number is not unique across studies):
    ``Trial._trial_id``; Optuna's own heartbeat reads it the same way."""
    return trial._trial_id  # noqa: SLF001
