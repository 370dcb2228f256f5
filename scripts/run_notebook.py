#!/usr/bin/env python
"""Execute notebooks at their full settings (``GLUON_BBB_SMOKE`` unset) the way
``tests/test_notebooks.py`` runs them in smoke mode, and print the wall time and every
printed line of each: the source of the "Results at full settings" lines and of the table in
``docs/results.md``.

Usage::

    GLUON_BBB_DATA=/work/shared/data MPLBACKEND=Agg python scripts/run_notebook.py \\
        notebooks/02_bbb_gluon_mnist.ipynb [--output-dir /tmp/executed]
"""
import argparse
import os
import sys
import time

import nbclient
import nbformat


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("notebooks", nargs="+")
    parser.add_argument("--output-dir", default=None, help="also write the executed notebooks here")
    args = parser.parse_args(argv)
    if "GLUON_BBB_SMOKE" in os.environ:
        sys.exit("GLUON_BBB_SMOKE is set: unset it to run the full settings")
    for path in args.notebooks:
        notebook = nbformat.read(path, as_version=4)
        start = time.perf_counter()
        nbclient.NotebookClient(notebook, timeout=None, kernel_name="python3",
                                resources={"metadata": {"path": os.path.dirname(os.path.abspath(path))}}).execute()
        print(f"== {path}: {time.perf_counter() - start:.0f} s")
        for cell in notebook.cells:
            for output in cell.get("outputs", []):
                if output.get("name") == "stdout":
                    print(output["text"], end="")
        if args.output_dir:
            os.makedirs(args.output_dir, exist_ok=True)
            nbformat.write(notebook, os.path.join(args.output_dir, os.path.basename(path)))


if __name__ == "__main__":
    main()
