"""Train a named configuration on all 60,000 MNIST training images, scoring the test set after
every epoch under each test convention (gluon_bbb.experiments.all_images): the protocol of
JINKEHE/BayesByBackprop's `bayes1` run, whose reported number is the mean test error of its
last ten epochs.

    # that run's protocol: bbb-mixture-1200-paper (its optimizer, schedule, prior and
    # initialisation) on every training image, the complexity weighted 1/468.75 per minibatch
    # (469 minibatches, the last one partial: kl_scale = 469/468.75 on the uniform 1/469)
    OMP_NUM_THREADS=1 GLUON_BBB_DATA=../shared/data nohup python scripts/all_images.py \\
        bbb-mixture-1200-paper --output-dir runs/all-images/bbb-mixture-1200-paper-s0 \\
        > runs/all-images-1200.out 2>&1 &

`kill PID` (SIGTERM) stops it, its session recorded; the same command resumes the run after its
last completed epoch. ``--set key=value`` overrides
any hyperparameter (``--set hidden=[8] --set subset=512 --epochs 2`` makes a smoke run).
"""
import argparse
import json
import logging
import os
import sys

from gluon_bbb import experiments
from gluon_bbb.experiments.all_images import run_all_images

#: The complexity weight of a run that divides it by 60,000 / 128 = 468.75 minibatches, as a
#: factor on gluon_bbb's uniform 1/469 (the 469th minibatch holds the last 96 images).
JINKEHE_KL_SCALE = 469 / 468.75


def parse_set(items):
    overrides = {}
    for item in items:
        key, _, value = item.partition("=")
        try:
            overrides[key] = json.loads(value)
        except json.JSONDecodeError:
            overrides[key] = value
    return overrides


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("config", help="a named configuration (gluon-bbb reproduce --list)")
    parser.add_argument("--output-dir", required=True)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--epochs", type=int, default=600)
    parser.add_argument("--mc-samples", type=int, default=100)
    parser.add_argument("--mc-every", type=int, default=10)
    parser.add_argument("--last-mc", type=int, default=10)
    parser.add_argument("--set", action="append", default=[], metavar="KEY=VALUE")
    args = parser.parse_args(argv)
    overrides = dict(num_validation=0, kl_scale=JINKEHE_KL_SCALE, seed=args.seed)
    overrides.update(parse_set(args.set))
    config = experiments.get_config(args.config, **overrides)
    os.makedirs(args.output_dir, exist_ok=True)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s",
                        handlers=[logging.StreamHandler(sys.stderr),
                                  logging.FileHandler(os.path.join(args.output_dir, "train.log"))])
    record = run_all_images(config, args.epochs, args.output_dir, mc_samples=args.mc_samples,
                            mc_every=args.mc_every, last_mc=args.last_mc,
                            command=" ".join(sys.argv))
    last = record[-10:]
    keys = sorted(key for key in last[-1] if key.startswith(("mean_", "mc_")) and key != "mc_samples")
    for key in keys:
        values = [entry[key] for entry in last if key in entry]
        print(f"{key}: epoch {last[-1]['epoch']} {100 * last[-1][key]:.2f}%, mean of the last "
              f"{len(values)} epochs {100 * sum(values) / len(values):.2f}%")

if __name__ == "__main__":
    main()
