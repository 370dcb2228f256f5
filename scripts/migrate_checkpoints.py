#!/usr/bin/env python
"""Rewrite gluon_bbb checkpoints in the current format (2), optionally without optimizer state.

Format 1 (before gluon_bbb stored optimizer state without pickle) kept the optimizer state as
a pickle. This script never unpickles it: a format-1 file's optimizer state is dropped (the
rewritten checkpoint evaluates, prunes and plots exactly as before; resuming it starts the
optimizer afresh). ``--slim`` also drops a format-2 file's optimizer state, for the
best-on-validation checkpoints committed under ``results/`` (about a third of the size)::

    python scripts/migrate_checkpoints.py --slim results/*/best.bbb

Every file is checked as ``BBBTrainer.load`` checks it before it is rewritten (atomically);
a bad file is reported in one line and the script exits with status 2.
"""
import argparse
import os
import sys

from gluon_bbb.checkpoint import read_checkpoint, write_checkpoint


def migrate(path, slim=False):
    """Rewrite ``path`` in format 2; returns a one-line report."""
    before = os.path.getsize(path)
    stored = read_checkpoint(path, with_optimizer=not slim)
    old_format = stored.metadata.get("format")
    metadata = {key: value for key, value in stored.metadata.items() if key != "format"}
    write_checkpoint(path, stored.arrays, metadata, stored.optimizer)
    dropped = "optimizer state dropped" if stored.optimizer is None else "optimizer state kept"
    return (f"{path}: format {old_format} -> 2, {dropped}, {before / 1e6:.2f} MB -> "
            f"{os.path.getsize(path) / 1e6:.2f} MB")


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("paths", nargs="+", metavar="CHECKPOINT")
    parser.add_argument("--slim", action="store_true", help="drop the optimizer state too")
    args = parser.parse_args(argv)
    for path in args.paths:
        try:
            print(migrate(path, slim=args.slim))
        except (FileNotFoundError, ValueError) as error:
            print(f"migrate_checkpoints: error: {error}", file=sys.stderr)
            return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
