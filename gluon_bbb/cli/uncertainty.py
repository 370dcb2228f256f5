"""``gluon-bbb uncertainty``: calibration, out-of-distribution detection and refusal of
run folders (:mod:`gluon_bbb.experiments.uncertainty_eval`)."""
import argparse
import logging
import os
import time

from .. import plots
from ..io.checkpoint import atomic_write_bytes, write_json
from ..context import resolve_context
from ..experiments import uncertainty_eval
from ..experiments.machine import machine_info
from .common import MC_SAMPLES, HelpFormatter, add_common, number

__all__ = ["add_parsers", "UNCERTAINTY_JSON", "UNCERTAINTY_MD", "uncertainty_command"]

logger = logging.getLogger("gluon_bbb.cli")


def add_parsers(commands):
    """The ``uncertainty`` command."""
    uncertain = commands.add_parser(
        "uncertainty", help="calibration, OOD detection and refusal of MNIST reproduce runs",
        formatter_class=HelpFormatter,
        description="For the best epoch of each run folder (trained on MNIST): test error and "
                    "expected calibration error, AUROC of entropy (and mutual information) "
                    "against Fashion-MNIST and uniform noise, error after refusing the least "
                    "confident test images. Prints a table and writes uncertainty.json and "
                    "uncertainty.md to --output-dir.")
    uncertain.add_argument("run_dirs", nargs="+", metavar="RUN_DIR",
                           help="folders written by 'reproduce' for MNIST configurations")
    uncertain.add_argument("--mc-samples", type=number(int, 1, True), default=MC_SAMPLES,
                           help="weight samples of the Monte Carlo average (BBB runs)")
    uncertain.add_argument("--num-noise", type=number(int, 1, True), default=10000,
                           help="uniform-noise images")
    uncertain.add_argument("--seed", type=number(int, 0, True), default=0,
                           help="seed of the noise images")
    uncertain.add_argument("--ood-data-dir", default=None,
                           help="folder holding Fashion-MNIST (default: as --data-dir)")
    uncertain.add_argument("--output-dir", default=".",
                           help="where uncertainty.json, uncertainty.md (and figures) go")
    uncertain.add_argument("--figures", action="store_true",
                           help="also write reliability.png and entropy_<run>.png")
    add_common(uncertain)
    uncertain.set_defaults(func=uncertainty_command, command_line=None)


UNCERTAINTY_JSON = "uncertainty.json"


UNCERTAINTY_MD = "uncertainty.md"


def uncertainty_command(args):
    """``gluon-bbb uncertainty``: prints the table, writes uncertainty.json/.md (and figures)."""
    start = time.time()
    ctx = resolve_context(args.ctx)
    runs, results = [], []
    for run_dir in args.run_dirs:
        run = uncertainty_eval.predict_run(run_dir, mc_samples=args.mc_samples,
                                           data_dir=args.data_dir, ood_data_dir=args.ood_data_dir,
                                           num_noise=args.num_noise, seed=args.seed, ctx=ctx)
        results.append(uncertainty_eval.summarize(run))
        if args.figures:
            runs.append(run)
    table = uncertainty_eval.uncertainty_table(results)
    figures = {}
    if args.figures:
        figures["reliability.png"] = uncertainty_eval.reliability_figure(runs)
        for run in runs:
            figures[f"entropy_{uncertainty_eval.figure_name(run)}.png"] = \
                uncertainty_eval.entropy_figure(run)
    seconds = time.time() - start
    write_json(os.path.join(args.output_dir, UNCERTAINTY_JSON), {
        "runs": results, "command": args.command_line, "wall_seconds": seconds,
        "num_noise": args.num_noise, "seed": args.seed, "coverages": list(uncertainty_eval.COVERAGES),
        "machine": machine_info(ctx), "figures": sorted(figures),
        "written": time.strftime("%Y-%m-%dT%H:%M:%S%z")})
    text = (f"# Predictive uncertainty of trained runs\n\n"
            f"Best epoch on validation of each run, MNIST test set (in distribution) against "
            f"Fashion-MNIST test and {args.num_noise} uniform-noise images (seed {args.seed}). "
            f"ECE: {uncertainty_eval.NUM_BINS} bins. AUROC of the predictive entropy (H) and of "
            f"the mutual information (MI) for telling the out-of-distribution images apart. "
            f"'error kept x%': error among the x% most confident test images.\n\n{table}\n"
            f"Command: `{args.command_line}`; {seconds:.0f} s.\n")
    atomic_write_bytes(os.path.join(args.output_dir, UNCERTAINTY_MD), text.encode("utf-8"))
    for name, figure in figures.items():
        plots.save_png(figure, os.path.join(args.output_dir, name))
    print(table, end="")
    return 0
