"""Compare gluon_bbb on all 60,000 training images (scripts/all_images.py) with JINKEHE's
bayes1 run (its per-epoch test accuracy, decoded by scripts/decode_pickled_curve.py) and with
gluon_bbb's own long protocol on the 50,000/10,000 split (its validation curve): a table at
chosen epochs, ten-epoch means, the numbers each run reports (the mean of the last ten epochs,
the last epoch, the lowest) and a figure of the three curves.

    python scripts/all_images_report.py runs/all-images/bbb-mixture-1200-paper-s0 \\
        --figure docs/figures/all-images-curves.png
"""
import argparse
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
JINKEHE_TEST = os.path.join(ROOT, "results", "all-images", "jinkehe-bayes1-test-accuracy.json")
SPLIT_RUN = os.path.join(ROOT, "results", "paper-600", "bbb-mixture-1200-paper-s0", "result.json")
EPOCHS = (1, 2, 5) + tuple(range(10, 201, 10)) + tuple(range(250, 601, 50))
#: The last epochs of the ten-epoch windows the second table averages.
WINDOW_ENDS = tuple(range(10, 101, 10)) + tuple(range(150, 601, 50))
#: JINKEHE's three other 2x1200 scale-mixture runs (scripts/bayes2-4.sh), each with one setting
#: changed from bayes1's, all four scored on the test set after every epoch: the change and
#: the sampled networks averaged at test.
OTHER_RUNS = {"bayes2": ("bayes1 with the rate halved every 100 epochs", 200),
              "bayes3": ("bayes1 with sigma1 = e^-2", 100),
              "bayes4": ("bayes1 with sigma1 = e^-1", 100)}


def curves(run_dir):
    with open(JINKEHE_TEST, encoding="utf-8") as handle:
        jinkehe = [100 - value for value in json.load(handle)["values"]]
    with open(SPLIT_RUN, encoding="utf-8") as handle:
        split = [100 * entry["validation_error"] for entry in json.load(handle)["history"]]
    with open(os.path.join(run_dir, "all_images.json"), encoding="utf-8") as handle:
        ours = json.load(handle)["epochs"]
    return jinkehe, split, ours


def percent(value):
    return "" if value is None else f"{100 * value:.2f}"


def table(jinkehe, split, ours):
    lines = ["| epoch | JINKEHE test, MC 100 log-prob, raw pixels | gluon_bbb all images: "
             "mean x/126 | mean raw | MC prob x/126 | MC log-prob raw | gluon_bbb 50k/10k "
             "split: validation (mean) |",
             "|---|---|---|---|---|---|---|"]
    for epoch in EPOCHS:
        if epoch > len(ours):
            continue
        entry = ours[epoch - 1]
        lines.append(f"| {epoch} | {jinkehe[epoch - 1]:.2f} | {percent(entry['mean_x126'])} | "
                     f"{percent(entry['mean_raw'])} | {percent(entry.get('mc_prob_x126'))} | "
                     f"{percent(entry.get('mc_logprob_raw'))} | {split[epoch - 1]:.2f} |")
    last = ours[-1]["epoch"]
    lines.append(f"\n{last} epochs of {len(jinkehe)} trained.\n")
    lines.append("| epochs | JINKEHE test, MC 100 log-prob, raw | gluon_bbb all images: mean x/126 | "
                 "mean raw | gluon_bbb 50k/10k split: validation (mean) |")
    lines.append("|---|---|---|---|---|")
    for end in [end for end in WINDOW_ENDS if end <= last]:
        window = range(end - 9, end + 1)
        lines.append(f"| {end - 9}-{end} | {mean(jinkehe[e - 1] for e in window):.2f} | "
                     f"{mean(100 * ours[e - 1]['mean_x126'] for e in window):.2f} | "
                     f"{mean(100 * ours[e - 1]['mean_raw'] for e in window):.2f} | "
                     f"{mean(split[e - 1] for e in window):.2f} |")
    return "\n".join(lines)


def mean(values):
    values = list(values)
    return sum(values) / len(values)


#: The record's test errors, in the order of the summary table.
CONVENTIONS = (("mean_x126", "posterior mean, pixels / 126"),
               ("mean_raw", "posterior mean, raw pixels"),
               ("mc_prob_x126", "MC 100, probabilities, pixels / 126"),
               ("mc_prob_raw", "MC 100, probabilities, raw pixels"),
               ("mc_logprob_x126", "MC 100, log-probabilities, pixels / 126"),
               ("mc_logprob_raw", "MC 100, log-probabilities, raw pixels (bayes1's convention)"))


def other_runs():
    """JINKEHE's other runs' test errors (%) by name, for those decoded into results/."""
    found = {}
    for name in OTHER_RUNS:
        path = JINKEHE_TEST.replace("bayes1", name)
        if os.path.isfile(path):
            with open(path, encoding="utf-8") as handle:
                found[name] = [100 - value for value in json.load(handle)["values"]]
    return found


def summary(jinkehe, ours, last=10, others=None):
    """The numbers a run reports: the mean of the last ``last`` epochs (bayes1's rule), the
    last epoch, and the lowest error of any epoch measured (a number read off the test set);
    ``others`` ({name: curve}) adds rows for JINKEHE's other runs."""
    final = ours[-1]["epoch"]
    lines = [f"| test error after epoch {final} | mean of epochs {final - last + 1}-{final} | "
             f"epoch {final} | lowest (epoch) |", "|---|---:|---:|---:|"]
    for name, curve in [("bayes1", jinkehe)] + sorted((others or {}).items()):
        window = curve[final - last:final]
        lowest = min(range(final), key=lambda i: curve[i])
        setting, samples = OTHER_RUNS.get(name, (None, 100))
        setting = f" ({setting})" if setting else ""
        lines.append(f"| JINKEHE {name}{setting}: MC {samples}, log-probabilities, raw pixels | "
                     f"{mean(window):.2f} | {curve[final - 1]:.2f} | {curve[lowest]:.2f} "
                     f"({lowest + 1}) |")
    for key, label in CONVENTIONS:
        measured = [entry for entry in ours if entry.get(key) is not None]
        tail = [100 * entry[key] for entry in ours[-last:] if entry.get(key) is not None]
        if not measured or len(tail) < last:
            continue
        best = min(measured, key=lambda entry: entry[key])
        lines.append(f"| gluon_bbb: {label} | {mean(tail):.2f} | {100 * ours[-1][key]:.2f} | "
                     f"{100 * best[key]:.2f} ({best['epoch']}) |")
    return "\n".join(lines)


def gaps(jinkehe, ours, phase=100):
    """Where the curves part: over each ``phase`` epochs, the mean difference from bayes1's
    test error (points) of this run's Monte Carlo error under bayes1's convention (on the
    epochs it was measured) and of its posterior mean on scaled pixels (every epoch)."""
    lines = ["| epochs | gluon_bbb minus bayes1: MC 100 log-prob, raw (epochs measured) | "
             "posterior mean, x/126 (every epoch) |", "|---|---|---|"]
    for start in range(1, ours[-1]["epoch"] + 1, phase):
        entries = ours[start - 1:start - 1 + phase]
        measured = [100 * e["mc_logprob_raw"] - jinkehe[e["epoch"] - 1] for e in entries
                    if e.get("mc_logprob_raw") is not None]
        every = [100 * e["mean_x126"] - jinkehe[e["epoch"] - 1] for e in entries]
        mc = f"{mean(measured):+.2f} ({len(measured)})" if measured else ""
        lines.append(f"| {start}-{entries[-1]['epoch']} | {mc} | {mean(every):+.2f} |")
    return "\n".join(lines)


def moving_mean(values, width=10):
    """The centred moving mean of ``width`` values (shorter at the ends)."""
    half = width // 2
    return [mean(values[max(0, i - half):i + width - half]) for i in range(len(values))]


def figure(jinkehe, split, ours, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    epochs = [entry["epoch"] for entry in ours]
    for values, x, color, label in (
            (jinkehe, range(1, len(jinkehe) + 1), "tab:gray",
             "JINKEHE bayes1: test, MC 100 log-prob, raw pixels (60k train)"),
            (split, range(1, len(split) + 1), "tab:blue",
             "gluon_bbb, 50k/10k split: validation, posterior mean"),
            ([100 * entry["mean_x126"] for entry in ours], epochs, "tab:red",
             "gluon_bbb, 60k train: test, posterior mean, x/126")):
        ax.plot(x, values, color=color, alpha=0.25, linewidth=0.7)  # every epoch, faint
        ax.plot(x, moving_mean(values), color=color, linewidth=1.4, label=label)
    measured = [entry for entry in ours if entry["mc_samples"]]
    if measured:
        ax.plot([e["epoch"] for e in measured], [100 * e["mc_logprob_raw"] for e in measured],
                "o", color="black", markersize=4,
                label="gluon_bbb, 60k train: test, MC log-prob, raw pixels")
    ax.set_xlabel("epoch")
    ax.set_ylabel("error (%)")
    ax.set_ylim(1.0, 3.0)
    ax.set_xlim(1, max(len(jinkehe), 1))
    ax.axhline(1.31, color="black", linewidth=0.6, linestyle=":")
    ax.text(2, 1.33, "1.31%: JINKEHE's mean of the last ten epochs", fontsize=8)
    ax.set_title("2x1200 scale mixture, 600 epochs of SGD: the same code on two protocols\n"
                 "(lines: ten-epoch moving means; faint: every epoch)", fontsize=9)
    ax.legend(fontsize=7, loc="upper right")
    fig.tight_layout()
    fig.savefig(path, dpi=120)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("run_dir")
    parser.add_argument("--figure")
    args = parser.parse_args(argv)
    jinkehe, split, ours = curves(args.run_dir)
    print(table(jinkehe, split, ours))
    print()
    print(summary(jinkehe, ours, others=other_runs()))
    print()
    print(gaps(jinkehe, ours))
    if args.figure:
        figure(jinkehe, split, ours, args.figure)


if __name__ == "__main__":
    main()
