#!/usr/bin/env python
"""Rewrite gluon_bbb checkpoints without their optimizer state (about a third of the size).

A slim checkpoint still evaluates, prunes and plots (``gluon-bbb evaluate/prune/plot``); it
cannot continue training with the same Adam moments. Used for the best-on-validation
checkpoints committed under ``results/``::

    python scripts/slim_checkpoint.py results/bbb-mixture-400/best.bbb results/bbb-gaussian-400/best.bbb
"""
import os
import sys

from gluon_bbb.checkpoint import read_checkpoint, write_checkpoint


def slim(path):
    arrays, metadata, _ = read_checkpoint(path)
    before = os.path.getsize(path)
    write_checkpoint(path, arrays, metadata, None)  # atomic
    print(f"{path}: {before / 1e6:.1f} MB -> {os.path.getsize(path) / 1e6:.1f} MB")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    for name in sys.argv[1:]:
        slim(name)
