"""Recompute, from the committed records of bayes1's protocol (results/all-images/), the
statistical figures the long-protocol page quotes about "seed or implementation": the pooled
standard deviation of gluon_bbb's end points within a width, the test of bayes1's 1.31% as a
new draw of gluon_bbb's 2x1200 runs and its power, the differences from the PyTorch peer after
and before the rate drop with their permutation test, and how far each implementation falls at
the drop.

    python scripts/all_images_audit.py                      # results/all-images
    python scripts/all_images_audit.py --results DIR --json audit.json

Definitions (test errors in %; gluon_bbb: ``bbb-mixture-<W>-paper-s*``; the peers: the CPU
peer ``peer-<W>-s*`` and the GPU peers ``peer-gpu-<W>-s*`` of each width W):

- **bayes1's rule**: a run's Monte Carlo error (100 networks, log-probabilities, raw pixels)
  averaged over its last ten epochs, for gluon_bbb's runs that reached epoch 600;
- **pooled sd**: sqrt(sum over widths of the squares about the width's mean / (n - widths)),
  with its chi-square interval;
- **1.31% as a new draw** of gluon_bbb's 2x1200 runs: t = (mean - 1.31) / (sd sqrt(1 + 1/n))
  on the pooled sd's degrees of freedom, two-sided; the **power** of that test at the 5% level
  against an offset of 0.1 points (the noncentral t);
- **window differences**: per epoch, gluon_bbb's mean over its runs less the peers' mean
  (posterior mean, pixels / 126), averaged over the window's epochs, and the share of the
  window's epochs where gluon_bbb's is above;
- **permutation test**: the labels gluon_bbb / peer permuted among the runs of each width apart,
  all arrangements enumerated; the statistic is the gluon_bbb runs' summed deviations of their
  window means from their width's mean of all runs, over the number of gluon_bbb runs;
  two-sided;
- **fall at the drop**: per group, the mean over epochs 290-299 less the mean over the window
  after the drop, the window one epoch later for gluon_bbb, whose rate drops one epoch later
  (after epoch 300; the peers' after 299): 302-309 for the peers is 303-310 for gluon_bbb.

Needs scipy (the chi-square and noncentral t distributions).
"""
import argparse
import itertools
import json
import math
import os
import sys

import numpy as np

from gluon_bbb.experiments.all_images import read_record
from gluon_bbb.experiments.paired import t_cdf, t_quantile

#: bayes1's reported test error at 2x1200 (%).
BAYES1 = 1.31
#: The offset whose power is given (points).
OFFSET = 0.1
#: The windows after the drop: each width's last epochs that every peer run has.
AFTER = {1200: (302, 309), 400: (302, 321)}
#: The window before the drop.
BEFORE = (101, 300)
#: The epochs before the drop that the fall is measured from.
BEFORE_DROP = (290, 299)
#: How many epochs later than the peers' each implementation lowers its rate.
DROP_SHIFT = {"gluon_bbb": 1, "peer": 0}


def load_groups(results):
    """``{width: {"gluon_bbb": {name: record}, "peer": {name: record}}}`` from a folder of run
    folders."""
    groups = {}
    for name in sorted(os.listdir(results)):
        path = os.path.join(results, name)
        if not os.path.isdir(path):
            continue
        for width in (400, 1200):
            if name.startswith(f"bbb-mixture-{width}-paper-s"):
                kind = "gluon_bbb"
            elif name.startswith((f"peer-{width}-s", f"peer-gpu-{width}-s")):
                kind = "peer"
            else:
                continue
            groups.setdefault(width, {"gluon_bbb": {}, "peer": {}})[kind][name] = \
                read_record(path)
    return groups


def series(record, key="mean_x126"):
    """A record's errors in % (NaN where an epoch lacks ``key``)."""
    return np.array([100 * entry[key] if entry.get(key) is not None else np.nan
                     for entry in record])


def bayes1_rule(record, last=10):
    values = series(record, "mc_logprob_raw")[-last:]
    if len(values) < last or np.isnan(values).any():
        raise ValueError("a run without the Monte Carlo error on its last ten epochs")
    return float(values.mean())


def pooled_sd(groups, level=0.95):
    """(sd, degrees of freedom, (low, high) interval) of ``{width: [values]}``."""
    from scipy import stats
    squares = sum(float(((np.array(v) - np.mean(v)) ** 2).sum()) for v in groups.values())
    df = sum(len(v) - 1 for v in groups.values())
    tail = (1 - level) / 2
    return (math.sqrt(squares / df), df,
            (math.sqrt(squares / stats.chi2.ppf(1 - tail, df)),
             math.sqrt(squares / stats.chi2.ppf(tail, df))))


def new_draw_test(values, sd, df, reference, offset=OFFSET, alpha=0.05):
    """Is ``reference`` a new draw of the runs ``values`` (pooled ``sd`` on ``df``)?

    Returns
    -------
    dict: 'difference' (mean - reference), 't', 'p' (two-sided), 'power' (of the level-alpha
    test against an offset of ``offset``)
    """
    from scipy import stats
    scale = sd * math.sqrt(1 + 1 / len(values))
    difference = float(np.mean(values)) - reference
    t = difference / scale
    critical = t_quantile(1 - alpha / 2, df)
    shift = offset / scale
    power = float(stats.nct.sf(critical, df, shift) + stats.nct.cdf(-critical, df, shift))
    return {"difference": difference, "t": t, "p": 2 * (1 - t_cdf(abs(t), df)),
            "power": power}


def window_difference(gluon, peers, start, end):
    """(mean over epochs start-end of gluon_bbb's mean less the peers' mean, share of those
    epochs with gluon_bbb's above); ``gluon``, ``peers``: lists of per-epoch series in %."""
    ours = np.mean([s[start - 1:end] for s in gluon], axis=0)
    theirs = np.mean([s[start - 1:end] for s in peers], axis=0)
    return float((ours - theirs).mean()), float((ours > theirs).mean())


def permutation_p(widths):
    """The two-sided p of the stratified permutation test; ``widths``: ``{width: (gluon_bbb's
    window means, the peers')}``, each arrangement of the labels within each width enumerated.

    Returns
    -------
    (statistic, p)
    """
    pools, counts = [], []
    for ours, theirs in widths.values():
        values = np.concatenate([ours, theirs])
        pools.append(values - values.mean())
        counts.append(len(ours))
    total = sum(counts)
    observed = sum(pool[:n].sum() for pool, n in zip(pools, counts)) / total
    sums = [np.array([pool[list(chosen)].sum() for chosen in
                      itertools.combinations(range(len(pool)), n)])
            for pool, n in zip(pools, counts)]
    statistics = sums[0]
    for more in sums[1:]:
        statistics = (statistics[:, None] + more[None, :]).ravel()
    statistics = statistics / total
    return float(observed), float(np.mean(np.abs(statistics) >= abs(observed) - 1e-12))


def fall(runs, before, after):
    """Mean over ``runs`` (per-epoch series in %) of the error over the epochs ``before`` less
    the error over the epochs ``after`` (each a (first, last) pair)."""
    return float(np.mean([s[before[0] - 1:before[1]].mean() - s[after[0] - 1:after[1]].mean()
                          for s in runs]))


def audit(groups):
    """Every figure of the module's docstring from ``load_groups``' groups."""
    figures = {}
    rule = {width: [bayes1_rule(record) for record in group["gluon_bbb"].values()
                    if len(record) >= 600] for width, group in groups.items()}
    sd, df, interval = pooled_sd(rule)
    figures["pooled_sd"] = {"sd": sd, "df": df, "interval": interval,
                            "runs": {w: len(v) for w, v in rule.items()}}
    figures["bayes1_as_new_draw"] = new_draw_test(rule[1200], sd, df, BAYES1)
    figures["gluon_mean_1200"] = float(np.mean(rule[1200]))
    per_epoch = {width: {kind: [series(r) for r in group[kind].values()]
                         for kind in group} for width, group in groups.items()}
    for label, windows in (("after", {w: [AFTER[w], AFTER[1200]] for w in AFTER}),
                           ("before", {w: [BEFORE] for w in AFTER})):
        for width, spans in windows.items():
            for start, end in dict.fromkeys(spans):
                difference, above = window_difference(per_epoch[width]["gluon_bbb"],
                                                       per_epoch[width]["peer"], start, end)
                figures[f"{label}_{width}_{start}_{end}"] = {"difference": difference,
                                                             "share_above": above}
    for label, spans in (("after", AFTER), ("after_common", {w: AFTER[1200] for w in AFTER}),
                         ("before", {w: BEFORE for w in AFTER})):
        widths = {w: tuple(np.array([s[start - 1:end].mean() for s in per_epoch[w][kind]])
                           for kind in ("gluon_bbb", "peer"))
                  for w, (start, end) in spans.items()}
        statistic, p = permutation_p(widths)
        figures[f"permutation_{label}"] = {"windows": spans, "statistic": statistic, "p": p}
    for width in AFTER:
        for start, end in dict.fromkeys([AFTER[width], AFTER[1200]]):
            figures[f"fall_{width}_{start}_{end}"] = {
                kind: fall(per_epoch[width][kind], BEFORE_DROP,
                           (start + DROP_SHIFT[kind], end + DROP_SHIFT[kind]))
                for kind in ("gluon_bbb", "peer")}
    return figures


def text(figures):
    pooled, draw = figures["pooled_sd"], figures["bayes1_as_new_draw"]
    lines = [f"- pooled sd within a width on bayes1's rule: {pooled['sd']:.3f} ({pooled['df']} "
             f"df; 95% interval {pooled['interval'][0]:.3f}-{pooled['interval'][1]:.3f}; runs "
             f"{pooled['runs']})",
             f"- 1.31% against gluon_bbb's 2x1200 mean {figures['gluon_mean_1200']:.3f}: "
             f"{draw['difference']:.3f} below, t = {draw['t']:.2f}, p = {draw['p']:.3f}; power "
             f"against an offset of {OFFSET} points {draw['power']:.3f}"]
    for key, value in figures.items():
        if key.startswith(("after_", "before_")) and "difference" in value:
            _, width, start, end = key.split("_")
            lines.append(f"- {key.split('_')[0]} the drop, 2x{width}, epochs {start}-{end}: "
                         f"gluon_bbb - peers {value['difference']:+.3f}, above on "
                         f"{100 * value['share_above']:.0f}% of the epochs")
        elif key.startswith("permutation_"):
            lines.append(f"- permutation test, {key[12:]} ({value['windows']}): p = "
                         f"{value['p']:.3f}")
        elif key.startswith("fall_"):
            _, width, start, end = key.split("_")
            lines.append(f"- fall at the drop, 2x{width}, from epochs 290-299 to {start}-{end} "
                         f"(gluon_bbb: one epoch later): gluon_bbb "
                         f"{value['gluon_bbb']:.3f}, peers {value['peer']:.3f}")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--results", default=os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "results", "all-images"))
    parser.add_argument("--json", help="also write the figures here")
    args = parser.parse_args(argv)
    try:
        figures = audit(load_groups(args.results))
    except (ValueError, OSError, KeyError) as error:
        print(f"all_images_audit: {error}", file=sys.stderr)
        return 2
    print(text(figures))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(figures, handle, indent=2, sort_keys=True, default=list)
    return 0


if __name__ == "__main__":
    sys.exit(main())
