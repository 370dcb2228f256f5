"""JINKEHE/BayesByBackprop's `bayes1` training, written independently in PyTorch, on the
protocol of scripts/all_images.py: an implementation of the same objective that shares no code
with gluon_bbb, so that the end points of the two over several seeds tell an implementation
difference from run-to-run spread.

What it follows from bayes1's code path (src/core.py and src/mnist/mnist_experiment.py at the
commit that produced its results):

- a 784-H-H-10 ReLU network with log-softmax outputs; every weight and bias sampled
  w = mu + log(1 + exp(rho)) * eps, one sample per minibatch;
- the scale-mixture prior (pi, sigma1, sigma2) evaluated as bayes1 evaluates it: the log of the
  two densities' weighted sum, and log N(w; 0, sigma1) + log pi where the narrow density
  underflows to 0 in float32;
- log q(w | mu, sigma) with gradients through the sample, mu and sigma;
- the cost (log q - log P(w)) / (60,000 / 128) + the minibatch's summed negative log-likelihood,
  plain SGD on it; all 60,000 training images in shuffled minibatches of 128, the last one of
  96; training pixels / 126;
- mu ~ U(-0.03, 0.03) and rho ~ U(-3.5, -3) for weights and biases;
- the rate multiplied by 0.1 from the 300th epoch on (PyTorch's StepLR(300) stepped at the start
  of every epoch: epochs 1-299 at the initial rate, 300-600 at a tenth).

After every epoch it writes ``all_images.json`` in gluon_bbb.experiments.all_images' format
(the posterior mean's test error on pixels / 126 and on raw pixels; on the epochs
``--mc-every`` and ``--last-mc`` name, the Monte Carlo errors of ``--mc-samples`` sampled
networks under both averages), so scripts/all_images_compare.py reads both alike. The training
noise and the shuffle of epoch e are seeded from (seed, e), the test draws from a stream of
their own: the same command resumes a stopped run from its ``checkpoint.npz`` bit for bit.

    OMP_NUM_THREADS=1 GLUON_BBB_DATA=../shared/data python scripts/peer_all_images.py \\
        --hidden 400 --seed 0 --output-dir runs/all-images/peer-400-s0

Needs PyTorch (``pip install torch``); it is no dependency of gluon_bbb.
"""
import argparse
import io
import math
import os
import sys
import time

import numpy as np

try:
    import torch
except ImportError:  # pragma: no cover -- optional peer
    sys.exit("peer_all_images.py needs PyTorch: pip install torch")

from gluon_bbb.data import load_raw
from gluon_bbb.epochs import epoch_seed
from gluon_bbb.io.checkpoint import atomic_write_bytes, read_json, write_json
from gluon_bbb.experiments.all_images import RECORD, TEST_SEED_STREAM, mc_epochs, read_record

CHECKPOINT = "checkpoint.npz"
TRAIN_IMAGES = 60000
BATCH_SIZE = 128


def log_normal(x, mean, sigma):
    """log N(x; mean, sigma^2), elementwise."""
    return -0.5 * math.log(2 * math.pi) - torch.log(sigma) - (x - mean) ** 2 / (2 * sigma ** 2)


def sample_with_complexity(mu, rho, eps, pi, sigma1, sigma2):
    """w = mu + log(1 + exp(rho)) eps and its term log q(w | mu, sigma) - log P(w), with
    bayes1's mixture: the log of the weighted densities, or log N1 + log pi where the narrow
    density is 0 in float32."""
    sigma = torch.log(1 + torch.exp(rho))
    w = mu + sigma * eps
    log_n1 = -0.5 * math.log(2 * math.pi) - math.log(sigma1) - w ** 2 / (2 * sigma1 ** 2)
    log_n2 = -0.5 * math.log(2 * math.pi) - math.log(sigma2) - w ** 2 / (2 * sigma2 ** 2)
    n1, n2 = torch.exp(log_n1), torch.exp(log_n2)
    log_prior = torch.where(n2 > 0, torch.log(pi * n1 + (1 - pi) * n2), log_n1 + math.log(pi))
    return w, (log_normal(w, mu, sigma) - log_prior).sum()


class Peer:
    """The variational parameters of a 784-H-H-10 network and bayes1's cost on them.

    ``compiled`` fuses each tensor's elementwise work with ``torch.compile`` (the same
    arithmetic, about three times faster on the CPU); without it every operation runs eagerly.
    """

    def __init__(self, hidden, pi, sigma1, sigma2, seed, compiled=True):
        torch.manual_seed(seed)
        widths = [784, hidden, hidden, 10]
        self.params = []
        for fan_in, fan_out in zip(widths[:-1], widths[1:]):
            layer = {}
            for name, shape in (("weight", (fan_out, fan_in)), ("bias", (fan_out,))):
                layer["mu_" + name] = torch.empty(shape).uniform_(-0.03, 0.03).requires_grad_()
                layer["rho_" + name] = torch.empty(shape).uniform_(-3.5, -3.0).requires_grad_()
            self.params.append(layer)
        self.prior = (pi, sigma1, sigma2)
        self.cost_of = (torch.compile(sample_with_complexity, dynamic=False) if compiled
                        else sample_with_complexity)

    def tensors(self):
        """Every parameter tensor, in a fixed order, with its name."""
        return [(f"{k}_{name}", layer[name]) for k, layer in enumerate(self.params)
                for name in sorted(layer)]

    def sample(self, generator=None):
        """One network, [(W, b)] with w = mu + log(1 + exp(rho)) eps, and the sum of
        log q(w) - log P(w) over its weights (0 under ``torch.no_grad``)."""
        layers, complexity = [], 0.0
        for layer in self.params:
            drawn = []
            for name in ("weight", "bias"):
                mu, rho = layer["mu_" + name], layer["rho_" + name]
                eps = torch.randn(mu.shape, generator=generator)
                if torch.is_grad_enabled():
                    w, term = self.cost_of(mu, rho, eps, *self.prior)
                    complexity = complexity + term
                else:
                    w = mu + torch.log(1 + torch.exp(rho)) * eps
                drawn.append(w)
            layers.append(tuple(drawn))
        return layers, complexity

    def mean(self):
        return [(layer["mu_weight"], layer["mu_bias"]) for layer in self.params]

    @staticmethod
    def log_softmax_outputs(layers, x):
        for k, (weight, bias) in enumerate(layers):
            x = torch.nn.functional.linear(x, weight, bias)
            if k < len(layers) - 1:
                x = torch.relu(x)
        return torch.log_softmax(x, dim=1)


def train_epoch(peer, images, labels, lr, seed, epoch):
    """One epoch of SGD on bayes1's cost; returns the sampled networks' training error."""
    torch.manual_seed(epoch_seed(seed, epoch))
    order = torch.randperm(len(images))
    ratio = BATCH_SIZE / TRAIN_IMAGES  # 1 / 468.75
    wrong = torch.zeros((), dtype=torch.long)
    params = [tensor for _, tensor in peer.tensors()]
    for start in range(0, len(images), BATCH_SIZE):
        index = order[start:start + BATCH_SIZE]
        x, y = images[index], labels[index]
        layers, complexity = peer.sample()
        outputs = peer.log_softmax_outputs(layers, x)
        nll = -outputs[torch.arange(len(y)), y].sum()
        cost = complexity * ratio + nll
        for tensor in params:
            tensor.grad = None
        cost.backward()
        with torch.no_grad():
            for tensor in params:
                tensor -= lr * tensor.grad
            wrong += (outputs.argmax(dim=1) != y).sum()
    return int(wrong) / len(images)


@torch.no_grad()
def test_errors(peer, test, labels, num_samples, generator):
    """The conventions of gluon_bbb.experiments.all_images.convention_errors."""
    errors = {f"mean_{scale}": float((peer.log_softmax_outputs(peer.mean(), x).argmax(1) != labels)
                                     .float().mean()) for scale, x in test.items()}
    if num_samples:
        sums = {(average, scale): 0 for average in ("prob", "logprob") for scale in test}
        for _ in range(num_samples):
            layers, _ = peer.sample(generator)
            for scale, x in test.items():
                log_probs = peer.log_softmax_outputs(layers, x)
                sums["prob", scale] = sums["prob", scale] + torch.exp(log_probs)
                sums["logprob", scale] = sums["logprob", scale] + log_probs
        for (average, scale), total in sums.items():
            errors[f"mc_{average}_{scale}"] = float((total.argmax(1) != labels).float().mean())
    return errors


def save_checkpoint(path, peer, epoch):
    buffer = io.BytesIO()
    np.savez(buffer, epoch=np.array(epoch),
             **{name: tensor.detach().numpy() for name, tensor in peer.tensors()})
    atomic_write_bytes(path, buffer.getvalue())


def load_checkpoint(path, peer):
    """The epoch of a checkpoint, its arrays copied into ``peer``; ValueError names a bad file."""
    try:
        with np.load(path, allow_pickle=False) as stored:
            arrays = {name: stored[name] for name in stored.files}
    except (OSError, ValueError) as error:
        raise ValueError(f"{path}: not a readable checkpoint ({error})") from None
    expected = dict(peer.tensors())
    if set(arrays) != set(expected) | {"epoch"}:
        raise ValueError(f"{path}: holds {sorted(arrays)}, not this network's parameters")
    for name, tensor in expected.items():
        array = arrays[name]
        if array.shape != tuple(tensor.shape) or array.dtype != np.float32 \
                or not np.isfinite(array).all():
            raise ValueError(f"{path}: {name} is not a finite float32 array of shape "
                             f"{tuple(tensor.shape)}")
        with torch.no_grad():
            tensor.copy_(torch.from_numpy(array))
    return int(arrays["epoch"])


def load_mnist(subset=None, device="cpu"):
    """MNIST as bayes1 feeds it: the training images / 126 (the first ``subset`` of them, where
    given) with their labels, and the test images both / 126 and raw, with theirs.

    Returns
    -------
    images : torch.Tensor, (N, 784) float32
    labels : torch.Tensor, (N,) int64
    test : dict
        ``{"x126": (10000, 784), "raw": (10000, 784)}`` float32 tensors
    test_labels : torch.Tensor, (10000,) int64
    """
    images, labels = load_raw("mnist", "train")
    images = torch.from_numpy(images.reshape(len(images), -1).astype(np.float32) / 126)
    labels = torch.from_numpy(labels.astype(np.int64))
    if subset:
        images, labels = images[:subset], labels[:subset]
    raw_test, test_labels = load_raw("mnist", "test")
    raw_test = torch.from_numpy(raw_test.reshape(len(raw_test), -1).astype(np.float32))
    test = {"x126": (raw_test / 126).to(device), "raw": raw_test.to(device)}
    return (images.to(device), labels.to(device), test,
            torch.from_numpy(test_labels.astype(np.int64)).to(device))


def claim_folder(output_dir, settings, epochs):
    """Write ``settings`` (and ``epochs``) to the folder's config.json, or refuse a folder that
    holds a run of other settings; a damaged config.json is one ValueError naming it."""
    os.makedirs(output_dir, exist_ok=True)
    config_path = os.path.join(output_dir, "config.json")
    if os.path.exists(config_path):
        stored = read_json(config_path, "a peer configuration")
        stored = {key: value for key, value in stored.items() if key != "epochs"}
        if stored != settings:
            raise ValueError(f"{config_path}: another configuration ({stored}) is in this folder")
    write_json(config_path, dict(settings, epochs=epochs))


def resumed_record(output_dir, done):
    """The folder's record up to epoch ``done`` (the checkpoint's); a record that ends before
    it is one ValueError naming the file."""
    record = read_record(output_dir)[:done]
    if len(record) != done:
        raise ValueError(f"{os.path.join(output_dir, RECORD)} holds {len(record)} epochs "
                         f"where its checkpoint holds {done}")
    return record


def learning_rate(args, epoch):
    """bayes1's schedule: the rate a tenth from epoch ``args.lr_step`` on."""
    return args.lr * (0.1 if epoch >= args.lr_step else 1.0)


def add_training_arguments(parser):
    """The options of bayes1's training and of its record, which the stacked script shares."""
    parser.add_argument("--hidden", type=int, default=1200)
    parser.add_argument("--epochs", type=int, default=600)
    parser.add_argument("--lr", type=float, default=1e-3)
    parser.add_argument("--lr-step", type=int, default=300,
                        help="the epoch from which the rate is a tenth")
    parser.add_argument("--pi", type=float, default=0.75)
    parser.add_argument("--neg-log-sigma1", type=float, default=0.0)
    parser.add_argument("--neg-log-sigma2", type=float, default=8.0)
    parser.add_argument("--subset", type=int, help="the first N training images (a smoke run)")
    parser.add_argument("--mc-samples", type=int, default=100)
    parser.add_argument("--mc-every", type=int, default=50)
    parser.add_argument("--last-mc", type=int, default=10)
    parser.add_argument("--threads", type=int, help="torch.set_num_threads")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output-dir", required=True)
    parser.add_argument("--seed", type=int, default=0)
    add_training_arguments(parser)
    parser.add_argument("--eager", action="store_true",
                        help="no torch.compile (slower; for a machine without a C++ compiler)")
    args = parser.parse_args(argv)
    if args.threads:
        torch.set_num_threads(args.threads)

    settings = {key: value for key, value in vars(args).items()
                if key not in ("output_dir", "epochs", "threads", "eager")}
    settings.update(peer="PyTorch, bayes1's code path", torch=torch.__version__,
                    batch_size=BATCH_SIZE, kl_divisor=TRAIN_IMAGES / BATCH_SIZE)
    claim_folder(args.output_dir, settings, args.epochs)

    images, labels, test, test_labels = load_mnist(args.subset)

    peer = Peer(args.hidden, args.pi, math.exp(-args.neg_log_sigma1),
                math.exp(-args.neg_log_sigma2), args.seed, compiled=not args.eager)
    checkpoint = os.path.join(args.output_dir, CHECKPOINT)
    done = load_checkpoint(checkpoint, peer) if os.path.exists(checkpoint) else 0
    record = resumed_record(args.output_dir, done)
    measured = mc_epochs(args.epochs, args.mc_every, args.last_mc)
    for epoch in range(done + 1, args.epochs + 1):
        start = time.time()
        train_error = train_epoch(peer, images, labels, learning_rate(args, epoch), args.seed,
                                  epoch)
        seconds = time.time() - start
        generator = torch.Generator().manual_seed(
            epoch_seed(args.seed, epoch, stream=TEST_SEED_STREAM))
        samples = args.mc_samples if epoch in measured else 0
        errors = test_errors(peer, test, test_labels, samples, generator)
        record.append(dict(epoch=epoch, train_error=train_error, seconds=seconds,
                           mc_samples=samples, **errors))
        write_json(os.path.join(args.output_dir, RECORD),
                   {"config": f"peer-pytorch-{args.hidden}", "epochs": record})
        # after the record: a run stopped between the two trains this epoch again, bit for bit
        save_checkpoint(checkpoint, peer, epoch)
        print(f"epoch {epoch}: train {100 * train_error:.2f}%, test (mean, x/126) "
              f"{100 * errors['mean_x126']:.2f}%, (mean, raw) {100 * errors['mean_raw']:.2f}%"
              + (f", MC {samples} (logprob, raw) {100 * errors['mc_logprob_raw']:.2f}%"
                 if samples else "") + f"; {seconds:.1f} s", flush=True)


if __name__ == "__main__":
    main()
