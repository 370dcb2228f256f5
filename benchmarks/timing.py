"""What the epoch benchmarks share: the MLP they time, and how a model is warmed up and timed
for one epoch, a ``BBBTrainer`` (:class:`FitEpoch`) or a PyTorch peer (:class:`TorchEpoch`).

``epoch_time.py``, ``draws_per_step.py`` and ``peer_pytorch.py`` import it as a sibling file
(``python benchmarks/<script>.py`` puts ``benchmarks/`` first on ``sys.path``). It imports no
PyTorch itself: :class:`TorchEpoch` is used only where the peer's script has imported it.
"""
import math
import time

import mxnet as mx
from mxnet import gluon, nd

import gluon_bbb

__all__ = ["make_net", "warm_up", "FitEpoch", "TorchEpoch"]


def make_net(network="mlp", hidden=(400, 400)):
    """784-H1-...-10 ReLU MLP, shapes known up front (no deferred initialisation), or
    ``gluon_bbb.models.lenet()`` (``network='lenet'``), shapes known after one forward pass;
    Xavier-initialised on the CPU."""
    if network == "lenet":
        net = gluon_bbb.models.lenet()
        net.initialize(mx.init.Xavier(), ctx=mx.cpu())
        net(nd.zeros((1, 784)))
        return net
    net = gluon.nn.HybridSequential()
    with net.name_scope():
        units = 784
        for width in hidden:
            net.add(gluon.nn.Dense(width, activation="relu", in_units=units))
            units = width
        net.add(gluon.nn.Dense(10, in_units=units))
    net.initialize(mx.init.Xavier(), ctx=mx.cpu())
    return net


def warm_up(loader, num_steps, step):
    """``step(data, label)`` on the first ``num_steps`` batches of ``loader``, untimed, then
    ``mx.nd.waitall()``."""
    for i, (data, label) in enumerate(loader):
        if i >= num_steps:
            break
        step(data, label)
    nd.waitall()


class FitEpoch:
    """A model timed as one epoch of ``BBBTrainer.fit``: a subclass sets ``name``, ``loader``
    and ``trainer``."""

    def warmup(self, num_steps):
        """``num_steps`` untimed steps with pi_i = 1 / M."""
        kl_weight = 1.0 / len(self.loader)
        warm_up(self.loader, num_steps, lambda x, y: self.trainer.step(x, y, kl_weight))

    def time_epoch(self):
        """Seconds of one more epoch of ``fit`` (``time.perf_counter()`` around it, ending with
        ``mx.nd.waitall()``); a FloatingPointError if its loss is not finite."""
        start = time.perf_counter()
        self.trainer.fit(self.loader, num_epochs=self.trainer.epoch + 1, progress=False)
        nd.waitall()
        seconds = time.perf_counter() - start
        if not math.isfinite(self.trainer.history[-1]["loss"]):
            raise FloatingPointError(f"{self.name}: non-finite loss")
        return seconds


class TorchEpoch:
    """A PyTorch peer timed over one epoch of shuffled batches: a subclass sets ``name``,
    ``images`` and ``labels`` (tensors), ``batch_size``, ``generator`` (a NumPy generator, the
    shuffling) and ``step(x, y)``, which returns the step's cost as a tensor."""

    def batches(self, limit=None):
        """(x, y) batches of one shuffled pass (the first ``limit`` of them)."""
        import torch  # noqa: PLC0415 -- only where the peer's script imported it
        order = torch.from_numpy(self.generator.permutation(len(self.images)))
        for i, start in enumerate(range(0, len(order), self.batch_size)):
            if limit is not None and i >= limit:
                return
            index = order[start:start + self.batch_size]
            yield self.images[index], self.labels[index]

    def warmup(self, num_steps):
        for x, y in self.batches(num_steps):
            self.step(x, y)

    def time_epoch(self):
        """Seconds of one epoch; the costs are summed on the tensor (no per-step host sync)
        and checked once at the end (a FloatingPointError if not finite)."""
        import torch  # noqa: PLC0415
        start = time.perf_counter()
        total = torch.zeros(())
        for x, y in self.batches():
            total += self.step(x, y)
        if not math.isfinite(float(total)):
            raise FloatingPointError(f"{self.name}: non-finite loss")
        return time.perf_counter() - start
