"""Several seeds of scripts/peer_all_images.py's training side by side on one device: the
networks are stacked along a leading axis, so that each operation of a step serves all of them.
Networks this small leave a GPU idle one at a time; stacked, eight of them at 2x1200 keep it
busy.

Each seed's run is its own, whatever else shares the stack:

- its initialisation is peer_all_images.py's for that seed (the same mu and rho);
- its noise, its shuffle and its test draws come from generators of its own, seeded from
  (seed, epoch) as peer_all_images.py seeds them, so adding or removing a seed changes no other
  seed's run, and a stopped run resumes from its checkpoints bit for bit (tests pin both on
  the CPU; on a GPU, where other kernels run, only the same device and versions can repeat
  a run);
- its cost is peer_all_images.py's (``sample_with_complexity`` on its weights, the same
  1/468.75, the same summed negative log-likelihood): the stack's cost is the sum of the
  seeds' costs, whose gradient with respect to one seed's parameters is that seed's gradient.

The draws come in another order than peer_all_images.py's (one vector per seed and step, not
one per tensor), so a seed here is another run of the same training, not a copy of that
script's run. Each seed writes peer_all_images.py's record into its own folder (the output
directory with ``{seed}`` replaced), so scripts/all_images_compare.py reads them alike.

    GLUON_BBB_DATA=../shared/data python scripts/peer_all_images_stacked.py --hidden 1200 \\
        --seeds 0 1 2 3 4 5 6 7 --device cuda --output-dir 'runs/all-images/peer-1200-gpu-s{seed}'

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
    sys.exit("peer_all_images_stacked.py needs PyTorch: pip install torch")

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)
from peer_all_images import (BATCH_SIZE, TRAIN_IMAGES, Peer,  # noqa: E402
                             add_training_arguments, claim_folder, learning_rate, load_mnist,
                             resumed_record, sample_with_complexity)

from gluon_bbb.epochs import epoch_seed  # noqa: E402
from gluon_bbb.io.checkpoint import atomic_write_bytes, write_json  # noqa: E402
from gluon_bbb.experiments.all_images import RECORD, TEST_SEED_STREAM, mc_epochs  # noqa: E402

CHECKPOINT = "checkpoint.npz"


class StackedPeers:
    """The variational parameters of K networks 784-H-H-10, one row each.

    ``compiled`` fuses a minibatch's whole cost, forward and backward, with ``torch.compile``
    (``mode`` is its mode: "reduce-overhead" replays CUDA graphs on a GPU); ``ratio`` is the
    complexity's weight, 1/468.75 as bayes1 has it.

    Attributes
    ----------
    mu, rho : torch.Tensor, (K, P) float32
        Row k holds seed k's parameters, layer by layer, each layer's weight (out, in) then
        its bias (out,), flattened.
    """

    def __init__(self, hidden, pi, sigma1, sigma2, seeds, device="cpu", compiled=True,
                 mode=None, ratio=BATCH_SIZE / TRAIN_IMAGES):
        self.seeds = [int(seed) for seed in seeds]
        self.device = torch.device(device)
        self.prior = (pi, sigma1, sigma2)
        self.layout, offset = [], 0
        for fan_in, fan_out in zip([784, hidden, hidden], [hidden, hidden, 10]):
            self.layout.append(((offset, (fan_out, fan_in)), (offset + fan_out * fan_in,
                                                              (fan_out,))))
            offset += fan_out * fan_in + fan_out
        self.size = offset
        rows = {"mu": [], "rho": []}
        for seed in self.seeds:
            single = Peer(hidden, pi, sigma1, sigma2, seed, compiled=False)
            for kind in rows:
                rows[kind].append(torch.cat([layer[f"{kind}_{name}"].detach().reshape(-1)
                                             for layer in single.params
                                             for name in ("weight", "bias")]))
        self.mu = torch.stack(rows["mu"]).to(self.device).requires_grad_()
        self.rho = torch.stack(rows["rho"]).to(self.device).requires_grad_()
        self.ratio = ratio
        self.cost = (torch.compile(self.minibatch_cost, dynamic=False, mode=mode) if compiled
                     else self.minibatch_cost)

    def views(self, flat):
        """[(W (K, out, in), b (K, out))] per layer: views of the rows of ``flat`` (K, P)."""
        count = len(flat)
        return [tuple(flat[:, start:start + math.prod(shape)].view(count, *shape)
                      for start, shape in layer) for layer in self.layout]

    def generators(self, epoch, stream=0):
        """One generator per seed, seeded from (seed, epoch, stream)."""
        return [torch.Generator(self.device).manual_seed(epoch_seed(seed, epoch, stream=stream))
                for seed in self.seeds]

    def noise(self, generators):
        """(K, P) standard normal draws, row k from ``generators[k]``."""
        eps = torch.empty((len(self.seeds), self.size), device=self.device)
        for row, generator in zip(eps, generators):
            row.normal_(generator=generator)
        return eps

    @staticmethod
    def log_softmax_outputs(layers, x):
        """Log-probabilities (K, N, 10) of the K networks on ``x``: (K, N, 784) or (N, 784)."""
        for k, (weight, bias) in enumerate(layers):
            x = torch.matmul(x, weight.transpose(1, 2)) + bias.unsqueeze(1)
            if k < len(layers) - 1:
                x = torch.relu(x)
        return torch.log_softmax(x, dim=-1)

    def minibatch_cost(self, mu, rho, eps, x, y):
        """The stack's cost on one minibatch each, and each network's misclassified images.

        Parameters
        ----------
        mu, rho, eps : torch.Tensor, (K, P)
        x : torch.Tensor, (K, B, 784)
        y : torch.Tensor, (K, B) int64

        Returns
        -------
        cost : torch.Tensor, ()
            The sum over the networks of (log q(w) - log P(w)) * ratio plus the summed negative
            log-likelihood of its minibatch, w = mu + log(1 + exp(rho)) eps.
        wrong : torch.Tensor, (K,) int64
        """
        w, complexity = sample_with_complexity(mu, rho, eps, *self.prior)
        outputs = self.log_softmax_outputs(self.views(w), x)
        nll = -outputs.gather(2, y.unsqueeze(2)).sum()
        return complexity * self.ratio + nll, (outputs.detach().argmax(dim=2) != y).sum(dim=1)

    def step(self, x, y, eps, lr):
        """One SGD step of every network on its own minibatch and noise.

        Parameters
        ----------
        x : torch.Tensor, (K, B, 784)
        y : torch.Tensor, (K, B) int64
        eps : torch.Tensor, (K, P)
        lr : float

        Returns
        -------
        torch.Tensor, (K,) int64
            Each network's misclassified images of the minibatch (the sampled network).
        """
        self.mu.grad = self.rho.grad = None
        cost, wrong = self.cost(self.mu, self.rho, eps, x, y)
        cost.backward()
        with torch.no_grad():
            self.mu.add_(self.mu.grad, alpha=-lr)
            self.rho.add_(self.rho.grad, alpha=-lr)
        return wrong.clone()


def train_epoch(stack, images, labels, lr, epoch):
    """One epoch of every network; returns their training errors (the sampled networks')."""
    generators = stack.generators(epoch)
    orders = torch.stack([torch.randperm(len(images), generator=generator, device=stack.device)
                          for generator in generators])
    wrong = torch.zeros(len(stack.seeds), dtype=torch.long, device=stack.device)
    for start in range(0, len(images), BATCH_SIZE):
        index = orders[:, start:start + BATCH_SIZE]
        wrong += stack.step(images[index], labels[index], stack.noise(generators), lr)
    return (wrong.double() / len(images)).tolist()


@torch.no_grad()
def test_errors(stack, test, labels, num_samples, generators):
    """Per network, the conventions of gluon_bbb.experiments.all_images.convention_errors."""
    count = len(stack.seeds)
    errors = [{} for _ in range(count)]

    def record(name, log_probs):
        wrong = (log_probs.argmax(dim=-1) != labels).double().mean(dim=1).tolist()
        for k in range(count):
            errors[k][name] = wrong[k]

    for scale, x in test.items():
        record(f"mean_{scale}", stack.log_softmax_outputs(stack.views(stack.mu), x))
    if num_samples:
        sums = {(average, scale): 0 for average in ("prob", "logprob") for scale in test}
        for _ in range(num_samples):
            w = stack.mu + torch.log(1 + torch.exp(stack.rho)) * stack.noise(generators)
            for scale, x in test.items():
                log_probs = stack.log_softmax_outputs(stack.views(w), x)
                sums["prob", scale] = sums["prob", scale] + torch.exp(log_probs)
                sums["logprob", scale] = sums["logprob", scale] + log_probs
        for (average, scale), total in sums.items():
            record(f"mc_{average}_{scale}", total)
    return errors


def save_checkpoints(folders, stack, epoch):
    for k, folder in enumerate(folders):
        buffer = io.BytesIO()
        np.savez(buffer, epoch=np.array(epoch), mu=stack.mu[k].detach().cpu().numpy(),
                 rho=stack.rho[k].detach().cpu().numpy())
        atomic_write_bytes(os.path.join(folder, CHECKPOINT), buffer.getvalue())


def load_checkpoints(folders, stack):
    """The epoch the seeds' checkpoints hold (0 where none has one), their rows copied into
    ``stack``; ValueError names a bad or disagreeing file."""
    paths = [os.path.join(folder, CHECKPOINT) for folder in folders]
    present = [os.path.exists(path) for path in paths]
    if not any(present):
        return 0
    if not all(present):
        missing = [path for path, there in zip(paths, present) if not there]
        raise ValueError(f"{missing[0]}: missing, where the stack's other seeds have one")
    epochs = []
    for k, path in enumerate(paths):
        try:
            with np.load(path, allow_pickle=False) as stored:
                arrays = {name: stored[name] for name in stored.files}
        except (OSError, ValueError) as error:
            raise ValueError(f"{path}: not a readable checkpoint ({error})") from None
        if set(arrays) != {"epoch", "mu", "rho"} or arrays["epoch"].shape != ():
            raise ValueError(f"{path}: holds {sorted(arrays)}, not a stacked peer's checkpoint")
        for name in ("mu", "rho"):
            array = arrays[name]
            if array.shape != (stack.size,) or array.dtype != np.float32 \
                    or not np.isfinite(array).all():
                raise ValueError(f"{path}: {name} is not a finite float32 array of "
                                 f"{stack.size} values")
            with torch.no_grad():
                getattr(stack, name)[k].copy_(torch.from_numpy(array))
        epochs.append(int(arrays["epoch"]))
    if len(set(epochs)) > 1:
        raise ValueError(f"{paths[epochs.index(max(epochs))]}: at epoch {max(epochs)} where "
                         f"another seed's is at {min(epochs)}")
    return epochs[0]


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--output-dir", required=True,
                        help="each seed's folder, with {seed} where its seed goes")
    parser.add_argument("--seeds", type=int, nargs="+", required=True)
    add_training_arguments(parser)
    parser.add_argument("--device", default="cpu", help="cpu, cuda, cuda:1, ...")
    parser.add_argument("--checkpoint-every", type=int, default=1,
                        help="write the checkpoints after every Nth epoch (and the last)")
    parser.add_argument("--deadline", type=float,
                        help="stop after the first epoch that ends this many seconds after "
                             "the start (the checkpoints written then)")
    parser.add_argument("--eager", action="store_true", help="no torch.compile")
    parser.add_argument("--compile-mode", help='torch.compile\'s mode ("reduce-overhead": '
                                               'CUDA graphs on a GPU)')
    args = parser.parse_args(argv)
    started = time.time()
    if "{seed}" not in args.output_dir:
        parser.error("--output-dir needs {seed}, where each seed's folder differs")
    if len(set(args.seeds)) != len(args.seeds):
        parser.error("--seeds repeats a seed")
    if args.threads:
        torch.set_num_threads(args.threads)
    # the matrix products in float32 as on the CPU, not TensorFloat-32
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False

    folders = [args.output_dir.format(seed=seed) for seed in args.seeds]
    device_name = (torch.cuda.get_device_name(torch.device(args.device))
                   if args.device.startswith("cuda") else "cpu")
    for seed, folder in zip(args.seeds, folders):
        settings = {key: value for key, value in vars(args).items()
                    if key not in ("output_dir", "epochs", "threads", "eager", "seeds",
                                   "checkpoint_every", "deadline", "compile_mode")}
        settings.update(seed=seed, stacked_with=args.seeds, device_name=device_name,
                        peer="PyTorch, bayes1's code path, seeds stacked",
                        torch=torch.__version__, batch_size=BATCH_SIZE,
                        kl_divisor=TRAIN_IMAGES / BATCH_SIZE)
        claim_folder(folder, settings, args.epochs)

    images, labels, test, test_labels = load_mnist(args.subset, args.device)
    stack = StackedPeers(args.hidden, args.pi, math.exp(-args.neg_log_sigma1),
                         math.exp(-args.neg_log_sigma2), args.seeds, args.device,
                         compiled=not args.eager, mode=args.compile_mode)
    done = load_checkpoints(folders, stack)
    records = [resumed_record(folder, done) for folder in folders]
    measured = mc_epochs(args.epochs, args.mc_every, args.last_mc)
    for epoch in range(done + 1, args.epochs + 1):
        start = time.time()
        train_errors = train_epoch(stack, images, labels, learning_rate(args, epoch), epoch)
        seconds = time.time() - start
        samples = args.mc_samples if epoch in measured else 0
        errors = test_errors(stack, test, test_labels, samples,
                             stack.generators(epoch, stream=TEST_SEED_STREAM))
        test_seconds = time.time() - start - seconds
        for folder, record, train_error, measured_errors in zip(folders, records, train_errors,
                                                                errors):
            record.append(dict(epoch=epoch, train_error=train_error, seconds=seconds,
                               mc_samples=samples, **measured_errors))
            write_json(os.path.join(folder, RECORD),
                       {"config": f"peer-pytorch-{args.hidden}", "epochs": record})
        stopping = args.deadline is not None and time.time() - started > args.deadline
        if epoch % args.checkpoint_every == 0 or epoch == args.epochs or stopping:
            # after the records: a run stopped between the two trains these epochs again
            save_checkpoints(folders, stack, epoch)
        print(f"epoch {epoch}: {seconds:.2f} s (test {test_seconds:.2f} s); test (mean, x/126) "
              + " ".join(f"{100 * e['mean_x126']:.2f}" for e in errors)
              + (" ; MC %d (logprob, raw) " % samples
                 + " ".join(f"{100 * e['mc_logprob_raw']:.2f}" for e in errors)
                 if samples else ""), flush=True)
        if stopping and epoch < args.epochs:
            print(f"stopped after epoch {epoch}: past the deadline of {args.deadline:.0f} s",
                  flush=True)
            return


if __name__ == "__main__":
    main()
