"""Execute the teaching notebooks at their full settings into docs/executed/, for the book.

The notebooks in notebooks/ are committed without outputs, and the tests run them in smoke
mode. The book shows copies executed at full settings instead, committed with their outputs:
this script makes them, one notebook at a time, in the notebooks' folder (so their relative
paths and links hold), and writes each copy atomically when its run finishes. It is
resumable: a copy whose code cells equal its source's is up to date and is not run again, so
after an interruption the same command goes on with the next notebook. A copy whose code is up
to date but whose text is not (the source's prose or quoted numbers were edited since) takes the
source's cells with its own outputs, without running. ``tests/test_book.py`` checks that every
committed copy's cells equal its source's, so a copy that went stale fails.
It prints each notebook's wall time and every line it printed: the numbers docs/results/notebooks.md
quotes ("Notebooks with their full settings").

    GLUON_BBB_DATA=../shared/data MPLBACKEND=Agg nohup python scripts/execute_notebooks.py \\
        > runs/execute_notebooks.log 2>&1 &
    python scripts/execute_notebooks.py 02_bbb_gluon_mnist 05_snr_pruning   # chosen ones
"""
import argparse
import copy
import os
import sys
import tempfile
import time

import nbformat
from nbclient import NotebookClient

ROOT = os.path.abspath(os.path.join(os.path.dirname(__file__), ".."))
SOURCES = os.path.join(ROOT, "notebooks")
EXECUTED = os.path.join(ROOT, "docs", "executed")
#: Environment switches that make a notebook run anything but its full settings.
QUICK_SWITCHES = ("GLUON_BBB_SMOKE",)


#: The tag of the install cell (scripts/sync_install_cell.py): it does nothing where gluon_bbb is
#: installed, as it is where the copies run, so a copy need not have run it.
INSTALL_TAG = "install"


def _runs(cell):
    """Whether ``cell`` is code that a copy must have run (every code cell but the install cell)."""
    return cell.cell_type == "code" and INSTALL_TAG not in cell.metadata.get("tags", [])


def code_cells(notebook):
    """The source of every code cell but the install cell, in order: what must match between a
    copy and its source."""
    return [cell.source for cell in notebook.cells if _runs(cell)]


def up_to_date(name, output_dir=EXECUTED):
    """Whether ``output_dir/name.ipynb`` holds the current code of ``notebooks/name.ipynb``,
    executed at full settings."""
    path = os.path.join(output_dir, f"{name}.ipynb")
    if not os.path.isfile(path):
        return False
    source = nbformat.read(os.path.join(SOURCES, f"{name}.ipynb"), as_version=4)
    executed = nbformat.read(path, as_version=4)
    return (code_cells(executed) == code_cells(source)
            and executed.metadata.get("gluon_bbb", {}).get("settings") == "full")


def refresh_text(name, output_dir=EXECUTED):
    """Give an up-to-date copy its source's current cells (the prose between the code cells may
    have changed) with the outputs it has; returns whether anything changed."""
    path = os.path.join(output_dir, f"{name}.ipynb")
    source = nbformat.read(os.path.join(SOURCES, f"{name}.ipynb"), as_version=4)
    executed = nbformat.read(path, as_version=4)
    if [(c.cell_type, c.source) for c in executed.cells] == \
            [(c.cell_type, c.source) for c in source.cells]:
        return False
    refreshed = copy.deepcopy(source)
    ran = [cell for cell in executed.cells if _runs(cell)]
    for cell, old in zip((c for c in refreshed.cells if _runs(c)), ran):
        cell.outputs, cell.execution_count = old.outputs, old.execution_count
        cell.metadata = old.metadata  # the run's timings
    refreshed.metadata = executed.metadata
    _write_atomically(refreshed, output_dir, name)
    return True


def _write_atomically(notebook, output_dir, name):
    os.makedirs(output_dir, exist_ok=True)
    handle, tmp = tempfile.mkstemp(suffix=".ipynb", dir=output_dir)
    with os.fdopen(handle, "w", encoding="utf-8") as out:
        nbformat.write(notebook, out)
    os.chmod(tmp, 0o644)
    os.replace(tmp, os.path.join(output_dir, f"{name}.ipynb"))


def execute(name, output_dir=EXECUTED, timeout=7200, smoke=False):
    """Run one notebook and write its executed copy; returns the seconds it took."""
    source = nbformat.read(os.path.join(SOURCES, f"{name}.ipynb"), as_version=4)
    notebook = copy.deepcopy(source)
    saved = {switch: os.environ.pop(switch) for switch in QUICK_SWITCHES if switch in os.environ}
    if smoke:
        os.environ["GLUON_BBB_SMOKE"] = "1"
    start = time.perf_counter()
    try:
        NotebookClient(notebook, timeout=timeout, kernel_name="python3",
                       resources={"metadata": {"path": SOURCES}}).execute()
    finally:
        os.environ.pop("GLUON_BBB_SMOKE", None)
        os.environ.update(saved)
    seconds = time.perf_counter() - start
    notebook.metadata.pop("widgets", None)
    notebook.metadata["gluon_bbb"] = {"settings": "smoke" if smoke else "full",
                                      "executed": time.strftime("%Y-%m-%d"),
                                      "seconds": round(seconds)}
    _write_atomically(notebook, output_dir, name)
    return seconds


def print_stdout(notebook):
    """Print what an executed notebook printed: the numbers the docs quote."""
    for cell in notebook.cells:
        for output in cell.get("outputs", []):
            if output.get("name") == "stdout":
                print(output["text"], end="", flush=True)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("names", nargs="*", help="notebooks (file stems); default all")
    parser.add_argument("--output-dir", default=EXECUTED)
    parser.add_argument("--timeout", type=int, default=7200, help="seconds per cell")
    parser.add_argument("--smoke", action="store_true",
                        help="the quick settings (to try this script; not for the book)")
    args = parser.parse_args(argv)
    names = args.names or sorted(f[:-len(".ipynb")] for f in os.listdir(SOURCES)
                                 if f.endswith(".ipynb"))
    for name in names:
        if not os.path.isfile(os.path.join(SOURCES, f"{name}.ipynb")):
            print(f"execute_notebooks: no notebook {name!r} in {SOURCES}", file=sys.stderr)
            return 2
        if not args.smoke and up_to_date(name, args.output_dir):
            changed = refresh_text(name, args.output_dir)
            print(f"{name}: up to date" + (" (its text refreshed from the source)" if changed
                                           else ""), flush=True)
            continue
        print(f"{name}: running", flush=True)
        seconds = execute(name, args.output_dir, args.timeout, args.smoke)
        print(f"== {name}: {seconds:.0f} s", flush=True)
        print_stdout(nbformat.read(os.path.join(args.output_dir, f"{name}.ipynb"), as_version=4))
    return 0


if __name__ == "__main__":
    sys.exit(main())
