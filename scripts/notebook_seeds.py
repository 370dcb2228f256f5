"""Run a teaching notebook at its full settings once per seed and print what each run printed.

A notebook's numbers come from one seed; this shows how far they move with it. The notebook's
configuration cell (the one reading GLUON_BBB_SMOKE) must set ``SEED = 0`` on a line of its own;
each run replaces that value, executes the notebook in memory (nothing is written) in the
notebooks' folder, as scripts/execute_notebooks.py does, and prints the run's stdout.

    MPLBACKEND=Agg OMP_NUM_THREADS=1 python scripts/notebook_seeds.py 10_bayesian_rnn 0 1 2 3 4
"""
import argparse
import os
import re
import sys
import time

import nbformat
from nbclient import NotebookClient

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from execute_notebooks import print_stdout  # noqa: E402 -- the sibling script's

SOURCES = os.path.join(os.path.abspath(os.path.join(os.path.dirname(__file__), "..")), "notebooks")
SEED_LINE = re.compile(r"^SEED = 0\b", re.M)


def with_seed(notebook, seed):
    """The notebook with its configuration cell's ``SEED = 0`` set to ``seed`` (in place)."""
    cells = [cell for cell in notebook.cells
             if cell.cell_type == "code" and "GLUON_BBB_SMOKE" in cell.source]
    if len(cells) != 1 or len(SEED_LINE.findall(cells[0].source)) != 1:
        raise ValueError("the notebook needs one configuration cell with one line 'SEED = 0'")
    cells[0].source = SEED_LINE.sub(f"SEED = {int(seed)}", cells[0].source)
    return notebook


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("name", help="the notebook's file stem, e.g. 10_bayesian_rnn")
    parser.add_argument("seeds", nargs="+", type=int)
    parser.add_argument("--timeout", type=int, default=7200, help="seconds per cell")
    args = parser.parse_args(argv)
    if "GLUON_BBB_SMOKE" in os.environ:
        print("notebook_seeds: unset GLUON_BBB_SMOKE (this runs the full settings)", file=sys.stderr)
        return 2
    for seed in args.seeds:
        notebook = with_seed(nbformat.read(os.path.join(SOURCES, f"{args.name}.ipynb"),
                                           as_version=4), seed)
        start = time.perf_counter()
        NotebookClient(notebook, timeout=args.timeout, kernel_name="python3",
                       resources={"metadata": {"path": SOURCES}}).execute()
        print(f"== {args.name}, SEED = {seed}: {time.perf_counter() - start:.0f} s", flush=True)
        print_stdout(notebook)
    return 0


if __name__ == "__main__":
    sys.exit(main())
