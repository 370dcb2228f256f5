"""MOPED on Fashion-MNIST: Bayes by Backprop started from a pretrained network against BBB
from scratch (issue 16, item 4).

Three arms, on the paper's protocol (50,000 training images, the last 10,000 of the training
set for validation, the test set read only at the epoch of best validation error):

* ``pretrained``: a deterministic 784-400-400-10 MLP, SGD (lr 0.1), ``--pretrain-epochs``,
  keeping its best validation epoch;
* ``moped``: BBB from that network, mu = w and sigma = delta |w| (``sigma_init='moped'``),
  for ``--epochs``;
* ``scratch``: BBB from a fresh Xavier network, rho = -5, for ``--pretrain-epochs +
  --epochs``, the same number of passes over the data as the other two together.

Both BBB arms use the scale-mixture prior of ``bbb-mixture-400`` (pi 1/2, sigma1 1,
sigma2 e^-6), Adam lr 1e-3, one sample, the paper's untempered cost (kl_scale 1). Every
arm records its per-epoch validation and test error and seconds; the report gives the
epochs (counting pretraining for ``moped``) to reach each of ``--thresholds`` validation
error, and the test error at the best validation epoch, for each of ``--seeds`` (the
seed of the data order, the networks' initialisation and the weight noise). An arm whose
JSON exists in ``--work-dir`` is not run again, so an interrupted run continues with the
arm it was in.

    GLUON_BBB_DATA=../shared/data OMP_NUM_THREADS=1 python scripts/moped_fashion.py \\
        --output docs/moped_fashion.json
"""
import argparse
import json
import math
import os
import time

import mxnet as mx
import numpy as np

import gluon_bbb
from gluon_bbb import BBBLoss, BBBTrainer, ScaleMixturePrior, baselines, models
from gluon_bbb.io.checkpoint import write_json


def _prior():
    return ScaleMixturePrior(pi=0.5, sigma1=1.0, sigma2=math.exp(-6))


def _network(seed):
    mx.random.seed(seed)
    net = models.mlp([400, 400])
    net.initialize(mx.init.Xavier())
    net(mx.nd.zeros((1, 784)))
    return net


def _errors(trainer_or_net, loaders):
    if isinstance(trainer_or_net, BBBTrainer):
        return {split: trainer_or_net.evaluate(loaders[split]) for split in ("validation", "test")}
    return {split: baselines.evaluate_deterministic(trainer_or_net, loaders[split])
            for split in ("validation", "test")}


def pretrain(loaders, epochs, seed, path):
    """The deterministic arm; writes the parameters of its best validation epoch to ``path``
    (what a user would fine-tune) and returns its record."""
    net = _network(seed)
    history = []
    for epoch in range(epochs):
        start = time.time()
        baselines.train_deterministic(net, loaders["train"], 1, progress=False,
                                      optimizer_params={"learning_rate": 0.1})
        history.append(dict(epoch=epoch + 1, seconds=time.time() - start, **_errors(net, loaders)))
        print(f"seed {seed} pretrained epoch {epoch + 1}: {history[-1]}", flush=True)
        if history[-1]["validation"] <= min(entry["validation"] for entry in history):
            net.save_parameters(path)
    return {"arm": "pretrained", "history": history}


def train_bbb(arm, net, loaders, epochs, seed, **posterior):
    """A BBB arm from ``net``: 'moped' (posterior = sigma_init='moped') or 'scratch'."""
    trainer = BBBTrainer(net, BBBLoss(_prior()), optimizer_params={"learning_rate": 1e-3},
                         seed=seed, **posterior)
    history = []

    def record(trainer, entry):
        history.append(dict(epoch=entry["epoch"], seconds=entry["seconds"],
                            **_errors(trainer, loaders)))
        print(f"seed {seed} {arm} epoch {entry['epoch']}: {history[-1]}", flush=True)

    trainer.fit(loaders["train"], epochs, progress=False, epoch_callback=record)
    return {"arm": arm, "history": history}


def summary(result, thresholds, offset=0):
    """Epochs to reach each validation threshold (None: never), the best validation epoch
    and its test error, and the seconds of all epochs."""
    history = result["history"]
    validation = [entry["validation"] for entry in history]
    best = int(np.argmin(validation))
    reach = {}
    for threshold in thresholds:
        hits = [entry["epoch"] for entry in history if entry["validation"] <= threshold]
        reach[f"{100 * threshold:g}%"] = hits[0] + offset if hits else None
    return {"epochs_to_validation": reach, "best_epoch": history[best]["epoch"] + offset,
            "best_validation": validation[best], "test_at_best": history[best]["test"],
            "final_validation": validation[-1], "seconds": sum(e["seconds"] for e in history)}


def run_seed(args, loaders, seed):
    """The three arms for one seed, each skipped if its JSON is in ``--work-dir``."""
    parts = os.path.join(args.work_dir, f"seed{seed}")
    results = {}
    for arm in ("pretrained", "moped", "scratch"):
        path = f"{parts}.{arm}.json"
        if os.path.exists(path):
            with open(path) as handle:
                results[arm] = json.load(handle)
            continue
        if arm == "pretrained":
            results[arm] = pretrain(loaders, args.pretrain_epochs, seed, f"{parts}.pretrained.params")
        elif arm == "moped":
            net = _network(seed)
            net.load_parameters(f"{parts}.pretrained.params")
            results[arm] = train_bbb(arm, net, loaders, args.epochs, seed,
                                     sigma_init="moped", moped_delta=args.moped_delta)
        else:
            results[arm] = train_bbb(arm, _network(seed + 1000), loaders,
                                     args.pretrain_epochs + args.epochs, seed)
        write_json(path, results[arm])
    return {"pretrained": summary(results["pretrained"], args.thresholds),
            "moped": summary(results["moped"], args.thresholds, offset=args.pretrain_epochs),
            "scratch": summary(results["scratch"], args.thresholds),
            "arms": results}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--output", default="docs/moped_fashion.json")
    parser.add_argument("--work-dir", default="runs/moped-fashion",
                        help="each finished arm's JSON, and the pretrained network")
    parser.add_argument("--pretrain-epochs", type=int, default=20)
    parser.add_argument("--epochs", type=int, default=30, help="BBB epochs after pretraining")
    parser.add_argument("--moped-delta", type=float, default=0.1)
    parser.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    parser.add_argument("--thresholds", type=float, nargs="+", default=[0.12, 0.11, 0.105, 0.10])
    args = parser.parse_args()
    os.makedirs(args.work_dir, exist_ok=True)
    report = {"settings": vars(args), "seeds": {}}
    for seed in args.seeds:
        loaders = gluon_bbb.data.get_loaders("fashion-mnist", batch_size=128, num_validation=10000,
                                             seed=seed)  # from $GLUON_BBB_DATA/fashion-mnist
        report["seeds"][str(seed)] = run_seed(args, loaders, seed)
        write_json(args.output, report)
    for seed, result in report["seeds"].items():
        for arm in ("pretrained", "moped", "scratch"):
            print(seed, arm, json.dumps(result[arm]))


if __name__ == "__main__":
    main()
