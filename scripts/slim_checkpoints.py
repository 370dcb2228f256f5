#!/usr/bin/env python
"""Rewrite gluon_bbb checkpoints without their optimizer state, for committing.

A checkpoint evaluates, prunes and plots exactly as before without its optimizer state; only
resuming it would start the optimizer afresh. The networks committed under ``results/`` are
slimmed so (an Adam checkpoint loses about two thirds of its size)::

    python scripts/slim_checkpoints.py results/*/best.bbb

Every file is read and checked as ``BBBTrainer.load`` reads it (nothing is unpickled; files of
the old format 1 are refused) before it is rewritten atomically; a bad file is reported in one
line and the script exits with status 2.
"""
import argparse
import os
import sys

from gluon_bbb.io.checkpoint import read_checkpoint, write_checkpoint


def slim(path):
    """Rewrite ``path`` without optimizer state; returns a one-line report."""
    before = os.path.getsize(path)
    stored = read_checkpoint(path, with_optimizer=False)
    metadata = {key: value for key, value in stored.metadata.items() if key != "format"}
    write_checkpoint(path, stored.arrays, metadata, None)
    return f"{path}: {before / 1e6:.2f} MB -> {os.path.getsize(path) / 1e6:.2f} MB"


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", metavar="FILE")
    args = parser.parse_args(argv)
    for path in args.paths:
        try:
            print(slim(path))
        except (FileNotFoundError, ValueError) as error:
            print(f"slim_checkpoints: error: {error}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
