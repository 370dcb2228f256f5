"""A variational state (mu and rho of every layer) moved between a
:class:`~gluon_bbb.BBBTrainer` of an MLP and the PyTorch peer of ``bayes1``'s training
(``scripts/peer_all_images.py``), so that both implementations can continue from the same
network.

The state is a dict of float32 NumPy arrays named as the peer names its tensors and stores them
in its ``checkpoint.npz``: for layer ``k`` (from 0), ``"{k}_mu_weight"`` and ``"{k}_rho_weight"``
of shape (out, in) and ``"{k}_mu_bias"`` and ``"{k}_rho_bias"`` of shape (out,). The two
implementations agree on everything the state means, so moving it copies arrays and transforms
nothing:

- **layout**: a Gluon ``Dense`` layer keeps its weight as (out, in) and computes
  ``x W^T + b``, as ``torch.nn.functional.linear`` does with the peer's (out, in) tensors;
- **rho**: both have sigma = log(1 + exp(rho)) (Eq. (7)'s softplus; gluon_bbb evaluates it in
  an overflow-safe form, equal to float32 rounding);
- **inputs**: both train on pixels / 126 (``preprocessing="paper"``) and score the test set on
  pixels / 126 and on raw pixels.

What the state leaves out: the optimizer's state (the paper's protocol trains with plain SGD,
which keeps none; a trainer with Adam continues with fresh moments), the noise generators'
state (a continuation draws its own noise) and the epoch count (a continuation numbers its
epochs from 1).
"""
import hashlib
import io
from typing import Dict, List, Optional, Tuple

import numpy as np
from mxnet import nd

from ..io.checkpoint import atomic_write_bytes

__all__ = ["state_names", "check_state", "state_widths", "trainer_state", "set_trainer_state",
           "state_fingerprint", "write_state", "read_state", "flat_state"]

_KINDS = ("mu", "rho")
_PARTS = ("weight", "bias")


def state_names(num_layers: int) -> List[str]:
    """The names of a state of ``num_layers`` layers, in the peer's order (its
    ``Peer.tensors()``: layer by layer, the names sorted)."""
    return [f"{k}_{name}" for k in range(num_layers)
            for name in sorted(f"{kind}_{part}" for kind in _KINDS for part in _PARTS)]


def state_widths(state: Dict[str, np.ndarray]) -> List[int]:
    """The layer widths of a checked state, input first: [784, H, H, 10] for the peer's MLP."""
    count = len(state) // 4
    return [int(state["0_mu_weight"].shape[1])] + [int(state[f"{k}_mu_weight"].shape[0])
                                                    for k in range(count)]


def check_state(state, source: str = "the state") -> Dict[str, np.ndarray]:
    """``state`` checked: the names of :func:`state_names`, finite float32 arrays, each layer's
    weight (out, in) and bias (out,) with its input the previous layer's output.

    Returns
    -------
    dict of str to numpy.ndarray (the same arrays)

    Raises
    ------
    ValueError
        Naming ``source`` and what is wrong.
    """
    if not isinstance(state, dict) or not state or len(state) % 4:
        raise ValueError(f"{source}: not a variational state of whole layers")
    names = state_names(len(state) // 4)
    if sorted(state) != sorted(names):
        raise ValueError(f"{source}: holds {sorted(state)[:8]}, not the names "
                         f"{names[:4]}... of a state")
    fan_in = None
    for k in range(len(state) // 4):
        for kind in _KINDS:
            weight, bias = state[f"{k}_{kind}_weight"], state[f"{k}_{kind}_bias"]
            for name, array in ((f"{k}_{kind}_weight", weight), (f"{k}_{kind}_bias", bias)):
                if not isinstance(array, np.ndarray) or array.dtype != np.float32 \
                        or not np.isfinite(array).all():
                    raise ValueError(f"{source}: {name} is not a finite float32 array")
            if weight.ndim != 2 or bias.shape != (weight.shape[0],) \
                    or (fan_in is not None and weight.shape[1] != fan_in):
                raise ValueError(f"{source}: layer {k}'s {kind} has shapes {weight.shape} and "
                                 f"{bias.shape}, not (out, {fan_in or 'in'}) and (out,)")
            if state[f"{k}_mu_weight"].shape != state[f"{k}_rho_weight"].shape:
                raise ValueError(f"{source}: layer {k}'s mu and rho differ in shape")
        fan_in = state[f"{k}_mu_weight"].shape[0]
    return state


def _layers(trainer) -> List[Tuple[int, int]]:
    """The (weight, bias) indices of the posterior's tensors, one pair per Dense layer; a
    ValueError for a network that is not a chain of Dense layers with biases."""
    posterior = trainer.posterior
    if posterior is None:
        raise ValueError("the trainer has not seen data: its network's shapes are unknown")
    names, shapes = posterior.names, posterior.shapes
    if len(names) % 2 or posterior.dtype != "float32":
        raise ValueError("only a float32 MLP of Dense layers with biases has a peer state")
    pairs = []
    for i in range(0, len(names), 2):
        (weight, bias), (wshape, bshape) = names[i:i + 2], shapes[i:i + 2]
        if not (weight.endswith("_weight") and bias.endswith("_bias") and len(wshape) == 2
                and bshape == (wshape[0],)
                and (not pairs or wshape[1] == shapes[pairs[-1][0]][0])):
            raise ValueError(f"{weight}, {bias}: not a Dense layer following the one before; "
                             "only an MLP of Dense layers with biases has a peer state")
        pairs.append((i, i + 1))
    return pairs


def trainer_state(trainer) -> Dict[str, np.ndarray]:
    """The variational state of a :class:`~gluon_bbb.BBBTrainer` of an MLP (copies).

    Returns
    -------
    dict of str to numpy.ndarray
        float32 arrays named as in :func:`state_names`.

    Raises
    ------
    ValueError
        The trainer has not seen data, or its network is not an MLP of Dense layers.
    """
    state = {}
    for k, pair in enumerate(_layers(trainer)):
        for part, index in zip(_PARTS, pair):
            state[f"{k}_mu_{part}"] = trainer.posterior.mus[index].data().asnumpy().copy()
            state[f"{k}_rho_{part}"] = trainer.posterior.rhos[index].data().asnumpy().copy()
    return state


def set_trainer_state(trainer, state: Dict[str, np.ndarray]) -> None:
    """Put ``state`` into the trainer's mu and rho, and the means into its network.

    Its optimizer state and epoch are left as they are (see the module's docstring).

    Raises
    ------
    ValueError
        A state that is not one (:func:`check_state`) or of other shapes than the trainer's
        network; the trainer is then unchanged.
    """
    check_state(state)
    pairs = _layers(trainer)
    posterior = trainer.posterior
    if len(pairs) * 4 != len(state):
        raise ValueError(f"the state has {len(state) // 4} layers, the trainer's network "
                         f"{len(pairs)}")
    for k, pair in enumerate(pairs):
        for part, index in zip(_PARTS, pair):
            if state[f"{k}_mu_{part}"].shape != posterior.shapes[index]:
                raise ValueError(f"the state's {k}_mu_{part} has shape "
                                 f"{state[f'{k}_mu_{part}'].shape}, the network's "
                                 f"{posterior.names[index]} {posterior.shapes[index]}")
    for k, pair in enumerate(pairs):
        for part, index in zip(_PARTS, pair):
            for kind, params in (("mu", posterior.mus), ("rho", posterior.rhos)):
                param = params[index]
                param.set_data(nd.array(state[f"{k}_{kind}_{part}"], ctx=param.list_ctx()[0],
                                        dtype="float32"))
    trainer.set_mean()


def state_fingerprint(state: Dict[str, np.ndarray]) -> str:
    """The SHA-256 of a state's names, shapes and bytes: equal for bit-equal states."""
    digest = hashlib.sha256()
    for name in sorted(state):
        array = np.ascontiguousarray(state[name])
        digest.update(f"{name}{array.shape}{array.dtype.str};".encode())
        digest.update(array.tobytes())
    return digest.hexdigest()


def write_state(path: str, state: Dict[str, np.ndarray], epoch: int = 0) -> None:
    """Write ``state`` atomically as the peer's ``checkpoint.npz`` (its arrays and ``epoch``):
    ``scripts/peer_all_images.py`` resumes from it, :func:`read_state` reads it back."""
    check_state(state)
    buffer = io.BytesIO()
    np.savez(buffer, epoch=np.array(int(epoch)), **state)
    atomic_write_bytes(path, buffer.getvalue())


def flat_state(mu: np.ndarray, rho: np.ndarray, widths: List[int]) -> Dict[str, np.ndarray]:
    """The state of the stacked peer's flat rows (``scripts/peer_all_images_stacked.py``: layer
    by layer, each weight (out, in) then its bias, flattened) for the MLP of ``widths``."""
    state, offset = {}, 0
    for k, (fan_in, fan_out) in enumerate(zip(widths[:-1], widths[1:])):
        for part, shape in (("weight", (fan_out, fan_in)), ("bias", (fan_out,))):
            size = int(np.prod(shape))
            for kind, row in (("mu", mu), ("rho", rho)):
                state[f"{k}_{kind}_{part}"] = row[offset:offset + size].reshape(shape)
            offset += size
    if offset != len(mu) or offset != len(rho):
        raise ValueError(f"rows of {len(mu)} and {len(rho)} values are not an MLP {widths}")
    return state


def read_state(path: str, widths: Optional[List[int]] = None) -> Tuple[Dict[str, np.ndarray], int]:
    """A state and its epoch from a peer's ``checkpoint.npz`` or a :func:`write_state` file
    (never unpickled); with ``widths`` also a stacked peer's checkpoint (flat ``mu``, ``rho``).

    Raises
    ------
    ValueError
        One line naming the file: unreadable, not a state, or not of ``widths``.
    """
    try:
        with np.load(path, allow_pickle=False) as stored:
            arrays = {name: stored[name] for name in stored.files}
    except (OSError, ValueError, EOFError) as error:
        raise ValueError(f"{path}: not a readable state ({error})") from None
    epoch = arrays.pop("epoch", None)
    if epoch is None or epoch.shape != () or epoch.dtype.kind not in "iu" or int(epoch) < 0:
        raise ValueError(f"{path}: holds no epoch count")
    if set(arrays) == {"mu", "rho"}:
        if widths is None:
            raise ValueError(f"{path}: a stacked peer's flat rows; give the network's widths")
        if arrays["mu"].ndim != 1 or arrays["rho"].ndim != 1:
            raise ValueError(f"{path}: mu and rho are not flat rows")
        try:
            arrays = flat_state(arrays["mu"], arrays["rho"], widths)
        except ValueError as error:
            raise ValueError(f"{path}: {error}") from None
    state = check_state(arrays, path)
    if widths is not None and state_widths(state) != list(widths):
        raise ValueError(f"{path}: a network {state_widths(state)}, not {list(widths)}")
    return state, int(epoch)
