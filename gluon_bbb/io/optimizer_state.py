"""A ``gluon.Trainer``'s optimizer state as named arrays and JSON scalars, without pickle.

MXNet saves optimizer state with ``pickle`` (``Trainer.save_states``), and loading such a file
runs whatever code it holds. This module stores it as data instead, for the optimizers
gluon_bbb trains with: ``mx.optimizer.Adam`` and
:class:`gluon_bbb.fused.optimizers.FusedAdam` (the first and second moments of every tensor;
their states are interchangeable) and ``mx.optimizer.SGD`` and
:class:`gluon_bbb.fused.optimizers.FusedSGD` with or without momentum (the momentum of every
tensor, or none):

* arrays ``"<index>/<k>"``: the k-th array of the state of parameter ``index``;
* JSON: the optimizer family, the structure of each state (arrays, ``None``, tuples), the
  update counts (Adam's bias correction uses them) and the learning rate.

Other optimizers are not captured: a resumed run starts their state afresh, with a warning.
MXNet keeps this state in private attributes of ``gluon.Trainer`` and ``Optimizer``, read and
written through :mod:`gluon_bbb._mxcompat`.
"""
import logging
import numbers

import mxnet as mx
from mxnet import nd

from .._mxcompat import set_update_counts, trainer_parameters, trainer_updaters, update_counts
from .checkpoint import CheckpointError, checked_field
from ..fused.optimizers import FusedAdam, FusedSGD

__all__ = ["FAMILIES", "family", "capture", "restore"]

logger = logging.getLogger(__name__)

#: Optimizer classes whose state is stored, by family (states are shared within a family).
FAMILIES = {"adam": (mx.optimizer.Adam, FusedAdam), "sgd": (mx.optimizer.SGD, FusedSGD)}


def family(optimizer):
    """'adam', 'sgd' or None (an optimizer whose state is not stored)."""
    for name, classes in FAMILIES.items():
        if type(optimizer) in classes:
            return name
    return None


def capture(trainer):
    """The optimizer state of ``trainer``, or None for an optimizer outside :data:`FAMILIES`.

    Parameters
    ----------
    trainer : gluon.Trainer

    Returns
    -------
    (dict, dict of str -> NDArray) or None
        JSON state and arrays, for :func:`gluon_bbb.io.checkpoint.write_checkpoint`.
    """
    optimizer = trainer.optimizer
    name = family(optimizer)
    if name is None:
        return None
    updater = trainer_updaters(trainer)[0]
    arrays, structures = {}, {}
    for index, state in updater.states.items():
        structures[str(index)] = _encode(state, f"{index}", arrays)
    counts = update_counts(optimizer)
    state = {
        "family": name,
        "num_params": len(trainer_parameters(trainer)),
        "num_update": int(optimizer.num_update),
        "index_update_counts": {str(device): {str(i): int(c) for i, c in per_device.items()}
                                for device, per_device in counts.items()},
        "learning_rate": float(optimizer.learning_rate),
        "states": structures,
    }
    return state, arrays


def _encode(state, prefix, arrays):
    """JSON structure of one parameter's state; its arrays go into ``arrays``."""
    if state is None:
        return None
    if isinstance(state, nd.NDArray):
        name = f"{prefix}/{len([k for k in arrays if k.startswith(prefix + '/')])}"
        arrays[name] = state
        return {"array": name}
    if isinstance(state, (tuple, list)):
        return {"tuple": [_encode(item, prefix, arrays) for item in state]}
    raise TypeError(f"cannot store optimizer state of type {type(state).__name__}")


def restore(trainer, state, arrays, source):
    """Put a state from :func:`capture` (read back from a checkpoint) into ``trainer``.

    Everything is checked first: on any problem a CheckpointError naming ``source`` is raised
    and the trainer is unchanged.

    Parameters
    ----------
    trainer : gluon.Trainer
        Built for the same parameters as the one captured.
    state : dict
    arrays : dict of str -> numpy.ndarray
    source : str
        The file, for messages.

    Returns
    -------
    bool
        False (after a warning) if the trainer's optimizer is of another family, so that its
        state starts afresh.
    """
    source = f"{source}: optimizer state"
    stored = checked_field(state, "family", str, source)
    mine = family(trainer.optimizer)
    if stored != mine:
        logger.warning("%s is for a %s optimizer, this trainer uses %s: the optimizer state "
                       "starts afresh", source, stored, type(trainer.optimizer).__name__)
        return False
    params = trainer_parameters(trainer)  # the index -> parameter map of the updater
    if checked_field(state, "num_params", int, source) != len(params):
        raise CheckpointError(f"{source} is for {state['num_params']} parameters, the trainer "
                              f"has {len(params)}")
    used = set()
    states = {}
    for key, structure in checked_field(state, "states", dict, source).items():
        index = _index(key, len(params), source)
        states[index] = _decode(structure, arrays, params[index], used, source)
    if used != set(arrays):
        raise CheckpointError(f"{source} holds arrays no state uses: {sorted(set(arrays) - used)[:5]}")
    counts = {}
    for device, per_device in checked_field(state, "index_update_counts", dict, source).items():
        if not isinstance(per_device, dict):
            raise CheckpointError(f"{source}: update counts of device {device!r} are not an object")
        counts[_index(device, 1 << 16, source)] = {
            _index(i, len(params), source): _count(c, source) for i, c in per_device.items()}
    num_update = _count(checked_field(state, "num_update", int, source), source)
    learning_rate = checked_field(state, "learning_rate", float, source)
    if not learning_rate > 0:
        raise CheckpointError(f"{source}: learning rate {learning_rate!r} is not positive")
    # Checked: now change the trainer.
    optimizer = trainer.optimizer
    for updater in trainer_updaters(trainer):
        updater.states = dict(states)
        updater.states_synced = dict.fromkeys(states, False)  # moved to the weights' context
    device = params[0].list_ctx()[0].device_id if params else 0
    counts.setdefault(device, {})
    set_update_counts(optimizer, counts, device)
    optimizer.num_update = num_update
    if optimizer.lr_scheduler is None:
        trainer.set_learning_rate(learning_rate)
    return True


def _decode(structure, arrays, param, used, source):
    if structure is None:
        return None
    if isinstance(structure, dict) and set(structure) == {"array"}:
        name = structure["array"]
        if not isinstance(name, str) or name not in arrays or name in used:
            raise CheckpointError(f"{source} refers to a missing or reused array {name!r:.80}")
        value = arrays[name]
        if tuple(value.shape) != tuple(param.shape) or value.dtype.kind != "f":
            raise CheckpointError(f"{source}: array {name} has shape {tuple(value.shape)} and "
                                  f"dtype {value.dtype}, its parameter {tuple(param.shape)}")
        used.add(name)
        return nd.array(value, ctx=param.list_ctx()[0], dtype=value.dtype)
    if isinstance(structure, dict) and set(structure) == {"tuple"} and \
            isinstance(structure["tuple"], list) and len(structure["tuple"]) <= 8:
        return tuple(_decode(item, arrays, param, used, source) for item in structure["tuple"])
    raise CheckpointError(f"{source}: {structure!r:.80} is not a stored state")


def _index(text, limit, source):
    try:
        value = int(text)
    except (TypeError, ValueError):
        value = -1
    if not 0 <= value < limit or str(value) != str(text):
        raise CheckpointError(f"{source}: {text!r:.40} is not an index below {limit}")
    return value


def _count(value, source):
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 0:
        raise CheckpointError(f"{source}: update count {value!r:.40} is not a whole number >= 0")
    return int(value)
