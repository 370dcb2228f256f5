"""Compare groups of runs on the all-images protocol (scripts/all_images.py, and the PyTorch
peer scripts/peer_all_images.py, which writes the same record): what each run reports under
bayes1's rule, the spread of each group over its seeds, and where the groups' curves part.

    python scripts/all_images_compare.py \\
        --group gluon_bbb runs/all-images/bbb-mixture-400-paper-s{0,1,2} \\
        --group PyTorch runs/all-images/peer-400-s{0,1,2} --figure docs/figures/peer-400.png

A run that has not reached the others' last epoch is compared up to its own: every number
says over which epochs it was taken.
"""
import argparse
import math
import os
import sys

from gluon_bbb.experiments.all_images import read_record

HERE = os.path.dirname(os.path.abspath(__file__))
try:
    from all_images_report import JINKEHE_TEST, mean, moving_mean
except ImportError:  # loaded by path (the tests)
    import importlib.util
    _spec = importlib.util.spec_from_file_location(
        "all_images_report", os.path.join(HERE, "all_images_report.py"))
    _report = importlib.util.module_from_spec(_spec)
    _spec.loader.exec_module(_report)
    mean, moving_mean = _report.mean, _report.moving_mean
    JINKEHE_TEST = _report.JINKEHE_TEST

#: How bayes1's decoded test curve is labelled: its number's convention.
BAYES1 = "bayes1 (MC 100 log-prob, raw)"

#: bayes1's reported number: the Monte Carlo test error under its convention, averaged over
#: the last ten epochs; beside it the posterior mean on the training pixel scale.
REPORTED = (("mc_logprob_raw", "MC 100 log-prob, raw (bayes1's rule)"),
            ("mean_x126", "posterior mean, x/126"))


def runs_text(count):
    return f"{count} run" + ("" if count == 1 else "s")


def spread(values):
    """(mean, sample standard deviation) of ``values``; the deviation is None for one value."""
    values = list(values)
    centre = mean(values)
    if len(values) < 2:
        return centre, None
    return centre, math.sqrt(sum((v - centre) ** 2 for v in values) / (len(values) - 1))


def last_mean(record, key, last=10):
    """The mean error (%) of ``key`` over the record's last ``last`` epochs, or None where one
    of them did not measure it."""
    tail = [entry.get(key) for entry in record[-last:]]
    if len(tail) < last or any(value is None for value in tail):
        return None
    return 100 * mean(tail)


def run_table(groups, last=10):
    """One row per run: its last epoch and the mean of its last ``last`` epochs under each
    convention of :data:`REPORTED`; one row per group: their mean and standard deviation over
    the group's runs that reached the last epoch of all runs (a run still under way is left
    out)."""
    final = max(record[-1]["epoch"] for runs in groups.values() for record in runs.values())
    lines = ["| group | run | last epoch | " + " | ".join(
        f"{label}, mean of the last {last}" for _, label in REPORTED) + " |",
        "|---|---|---:|" + "---:|" * len(REPORTED)]
    for name, runs in groups.items():
        for run_dir, record in runs.items():
            cells = [last_mean(record, key, last) for key, _ in REPORTED]
            lines.append(f"| {name} | {os.path.basename(run_dir.rstrip('/'))} | "
                         f"{record[-1]['epoch']} | " + " | ".join(
                             "" if c is None else f"{c:.2f}" for c in cells) + " |")
        summary = []
        for key, _ in REPORTED:
            values = [last_mean(record, key, last) for record in runs.values()
                      if record[-1]["epoch"] == final]
            values = [v for v in values if v is not None]
            if not values:
                summary.append("")
                continue
            centre, deviation = spread(values)
            summary.append(f"{centre:.2f}" + ("" if deviation is None else f" ± {deviation:.2f}")
                           + f" ({len(values)})")
        lines.append(f"| {name} | mean ± sd (runs at epoch {final}) | | " + " | ".join(summary)
                     + " |")
    return "\n".join(lines)


def phase_table(groups, phase=100, key="mean_x126", reference=None):
    """Each group's mean error (%) of ``key`` over each ``phase`` epochs, averaged over its runs
    that completed the phase, and the runs' range; ``reference``, a (label, per-epoch errors in
    %) pair such as bayes1's curve, gets a column of its own means."""
    names = list(groups)
    final = max(record[-1]["epoch"] for runs in groups.values() for record in runs.values())
    lines = ["| epochs | " + (f"{reference[0]} | " if reference else "")
             + " | ".join(f"{name}: mean (lowest-highest run)" for name in names)
             + " |", "|---|" + "---|" * (len(names) + bool(reference))]
    for start in range(1, final + 1, phase):
        end = min(start + phase - 1, final)
        cells = []
        if reference:
            cells.append(f"{mean(reference[1][start - 1:end]):.2f}"
                         if len(reference[1]) >= end else "")
        for name in names:
            per_run = [100 * mean(entry[key] for entry in record[start - 1:end])
                       for record in groups[name].values() if record[-1]["epoch"] >= end]
            cells.append(f"{mean(per_run):.2f} ({min(per_run):.2f}-{max(per_run):.2f}, "
                         f"{runs_text(len(per_run))})" if per_run else "")
        lines.append(f"| {start}-{end} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def window_table(groups, start, end, key="mean_x126", reference=None, last=10):
    """Where each run stands over epochs ``start``-``end`` (its mean error of ``key``, %), and
    how far it fell from there to the mean of its last ``last`` epochs where it reached the last
    epoch of all runs; a row per run, a row per group (mean ± sd and range over its runs that
    cover the window), and a row for ``reference``, a (label, per-epoch errors in %) pair such
    as bayes1's curve."""
    final = max(record[-1]["epoch"] for runs in groups.values() for record in runs.values())

    def row(label, window, tail):
        change = "" if window is None or tail is None else f"{tail - window:+.2f}"
        return (f"| {label} | " + ("" if window is None else f"{window:.2f}") + " | "
                + ("" if tail is None else f"{tail:.2f}") + f" | {change} |")

    lines = [f"| run | epochs {start}-{end} | epochs {final - last + 1}-{final} | change |",
             "|---|---:|---:|---:|"]
    for name, runs in groups.items():
        windows, changes = [], []
        for run_dir, record in runs.items():
            by_epoch = {entry["epoch"]: entry.get(key) for entry in record}
            values = [by_epoch.get(epoch) for epoch in range(start, end + 1)]
            window = None if None in values else 100 * mean(values)
            tail = last_mean(record, key, last) if record[-1]["epoch"] == final else None
            lines.append(row(f"{name}: {os.path.basename(run_dir.rstrip('/'))}", window, tail))
            if window is not None:
                windows.append(window)
                if tail is not None:
                    changes.append(tail - window)
        if windows:
            centre, deviation = spread(windows)
            summary = (f"{centre:.2f}" + ("" if deviation is None else f" ± {deviation:.2f}")
                       + f" ({min(windows):.2f}-{max(windows):.2f}, {runs_text(len(windows))})")
            moved = (f"{mean(changes):+.2f} ({runs_text(len(changes))})" if changes else "")
            lines.append(f"| {name}: mean ± sd (range) | {summary} |  | {moved} |")
    if reference:
        label, values = reference
        window = mean(values[start - 1:end]) if len(values) >= end else None
        tail = mean(values[final - last:final]) if len(values) >= final else None
        lines.append(row(label, window, tail))
    return "\n".join(lines)


def read_bayes1(path=JINKEHE_TEST):
    """bayes1's decoded per-epoch test error (%), from its accuracies; one line names a bad
    file (ValueError)."""
    from gluon_bbb.io.checkpoint import read_json
    values = read_json(path, "a decoded test curve").get("values")
    if not isinstance(values, list) or not values or not all(
            isinstance(v, (int, float)) and 0 <= v <= 100 for v in values):
        raise ValueError(f"{path}: no list of accuracies in %")
    return [100 - value for value in values]


def figure(groups, path, key="mean_x126", title=None, reference=None, ylim=(1.0, 3.0)):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    colors = ("tab:red", "tab:blue", "tab:green", "tab:purple")
    for color, (name, runs) in zip(colors, groups.items()):
        for k, record in enumerate(runs.values()):
            values = [100 * entry[key] for entry in record]
            ax.plot([entry["epoch"] for entry in record], moving_mean(values), color=color,
                    linewidth=1.1, alpha=0.8, label=f"{name} ({runs_text(len(runs))})" if k == 0 else None)
    if reference:
        label, values = reference
        ax.plot(range(1, len(values) + 1), moving_mean(values), color="tab:gray", linewidth=1.6,
                label=label)
    ax.set_ylabel("test error (%), ten-epoch moving mean")
    ax.set_xlabel("epoch  (the posterior mean's test error, pixels / 126; one line per run)")
    ax.set_ylim(*ylim)
    ax.set_title(title or "posterior mean's test error, pixels / 126, one line per run",
                 fontsize=9)
    ax.legend(fontsize=8, loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--group", nargs="+", action="append", required=True,
                        metavar=("NAME", "RUN_DIR"), help="a name and its run folders")
    parser.add_argument("--figure")
    parser.add_argument("--title")
    parser.add_argument("--ylim", type=float, nargs=2, default=(1.0, 3.0),
                        metavar=("LOW", "HIGH"), help="the figure's range of test errors (%%)")
    parser.add_argument("--phase", type=int, default=100, help="epochs per row of the phases")
    parser.add_argument("--window", type=int, nargs=2, metavar=("START", "END"),
                        help="also where each run stands over these epochs, and how far it "
                             "fell from there to its last ten")
    parser.add_argument("--bayes1", action="store_true",
                        help="bayes1's decoded test curve beside the groups' (its own "
                             "convention: 100 networks' log-probabilities on raw pixels)")
    args = parser.parse_args(argv)
    groups = {}
    for name, *run_dirs in args.group:
        if not run_dirs:
            parser.error(f"group {name} names no run folder")
        try:
            groups[name] = {run_dir: read_record(run_dir) for run_dir in run_dirs}
        except ValueError as error:  # a damaged record, named
            print(f"all_images_compare: {error}", file=sys.stderr)
            return 2
        empty = [run_dir for run_dir, record in groups[name].items() if not record]
        if empty:
            parser.error(f"no record in {', '.join(empty)}")
    reference = None
    if args.bayes1:
        try:
            reference = (BAYES1, read_bayes1())
        except ValueError as error:
            print(f"all_images_compare: {error}", file=sys.stderr)
            return 2
    print(run_table(groups))
    print()
    print(phase_table(groups, args.phase, reference=reference))
    if args.window:
        start, end = args.window
        if not 1 <= start <= end:
            parser.error("--window wants 1 <= START <= END")
        print()
        print(window_table(groups, start, end, reference=reference))
    if args.figure:
        figure(groups, args.figure, title=args.title, reference=reference, ylim=args.ylim)
    return 0


if __name__ == "__main__":
    sys.exit(main())
