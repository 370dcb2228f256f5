#!/usr/bin/env python
"""What checking the data files costs a load of MNIST: ``load_splits("mnist")`` the first time
(the four files' SHA-256 read and remembered, :mod:`gluon_bbb.data.checks`), then warm, the
checks remembered, against the same load with no check at all (the loaders before they checked
files), in pairs (which goes first alternating) so that a loaded machine slows both alike. Prints the medians and the
median of the pairs' ratios. Run it with an empty cache folder::

    GLUON_BBB_DATA=../shared/data HOME=$(mktemp -d) \
        python benchmarks/data_warm_load.py [--pairs 9]
"""
import argparse
import statistics
import time

from gluon_bbb.data import load_splits, state


def _seconds():
    start = time.perf_counter()
    load_splits("mnist")
    return time.perf_counter() - start


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pairs", type=int, default=9)
    args = parser.parse_args()
    first, second = _seconds(), _seconds()
    print(f"first load (checks the files) {first:.2f} s, the next {second:.2f} s, "
          f"ratio {first / second:.2f}")
    remembered = state.checks.problem_of
    pairs = []
    for index in range(args.pairs):  # which goes first alternates too
        times = {}
        for checked in ((True, False) if index % 2 == 0 else (False, True)):
            state.checks.problem_of = remembered if checked else (lambda path, data_file: None)
            times[checked] = _seconds()
        pairs.append((times[True], times[False]))
    state.checks.problem_of = remembered
    start = time.perf_counter()
    for file in state.dataset_state("mnist").used.files:
        remembered(file.path, file.data_file)
    alone = time.perf_counter() - start
    print(f"warm: with the remembered checks {statistics.median(p[0] for p in pairs):.3f} s, "
          f"without a check {statistics.median(p[1] for p in pairs):.3f} s, median ratio "
          f"{statistics.median(p[0] / p[1] for p in pairs):.3f}; the four remembered checks "
          f"alone {alone * 1e3:.2f} ms")


if __name__ == "__main__":
    main()
