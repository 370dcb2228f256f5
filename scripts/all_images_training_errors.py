"""The training-set errors of the network an all-images run folder holds (written by
scripts/all_images.py), under every test convention: how JINKEHE's bayes1 measured its training
accuracy after each epoch (100 sampled networks, log-probabilities averaged, raw pixels), for
comparison with its decoded training curve at the same epoch.

    OMP_NUM_THREADS=2 GLUON_BBB_DATA=../shared/data python scripts/all_images_training_errors.py \\
        runs/all-images/bbb-mixture-1200-paper-s0

Writes ``training-errors-<epoch>-<images>-mc<samples>.json`` into the folder and prints the
errors.
"""
import argparse
import os

from gluon_bbb.experiments.all_images import training_errors
from gluon_bbb.io.checkpoint import write_json


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir")
    parser.add_argument("--mc-samples", type=int, default=100)
    parser.add_argument("--num-examples", type=int,
                        help="the first N training images only (default: all)")
    args = parser.parse_args(argv)
    errors = training_errors(args.run_dir, num_samples=args.mc_samples,
                             num_examples=args.num_examples)
    name = f"training-errors-{errors['epoch']}-{errors['num_examples']}-mc{args.mc_samples}.json"
    write_json(os.path.join(args.run_dir, name), dict(errors, mc_samples=args.mc_samples))
    for key, value in errors.items():
        print(f"{key}: {value if key in ('epoch', 'num_examples') else f'{100 * value:.3f}%'}")


if __name__ == "__main__":
    main()
