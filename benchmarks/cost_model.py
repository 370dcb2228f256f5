#!/usr/bin/env python
"""The cost model of a Bayes-by-Backprop step on the CPU: bytes and transcendental functions per
weight for every pass of the fused operator, each pass's measured time against the machine's
bandwidth and its rate of exp and log, and from them the floor of the BBB/deterministic ratio.

``cost_model.cc`` includes the operator's source and times its passes alone over the tensors of
a 784-H-H-10 MLP (float32, the operator's chunks and threads): the whole forward and backward
passes through the operators' entry points, and their parts (the noise, sigma, w, log q, log P
and its gradient) with the same inline kernels. In the same program a triad (a = b + 3 c)
measures the bandwidth, and exp and log over values in the cache the rate of the arithmetic.
``step_profile.py``'s profile then times the whole BBB step and the deterministic step of the
same network in MXNet, in this process.

For each pass: the **memory floor** is its bytes per weight x weights / the triad's bandwidth,
the **arithmetic floor** its transcendental functions per weight x weights x the time of one
(the mean of exp's and log's in cache), plus the generator's rounds where the pass draws the
noise. The floor of the ratio is (deterministic step + the sum over the passes a step needs of
the larger of the two floors, with every transcendental computed once a step) / deterministic
step: what the ratio would be if Bayes by Backprop cost nothing beyond moving its bytes and
doing its arithmetic once.

Usage::

    OMP_NUM_THREADS=2 python benchmarks/cost_model.py [--widths 400 1200] [--repeats 30]
        [--optimizers sgd adam] [--priors mixture gaussian] [--json out.json]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

from gluon_bbb.experiments.machine import machine_info
from gluon_bbb.fused.build import SOURCE, compile_command

HERE = os.path.dirname(os.path.abspath(__file__))
HARNESS = os.path.join(HERE, "cost_model.cc")

#: For each pass timed by the harness: float32 bytes it moves per weight, and its transcendental
#: functions per weight (exp, log, log1p, sin or cos, each counted as one; Box-Muller makes two
#: values from one log and one sin-cos pair), besides whether it runs the generator's rounds.
PASSES = {
    # name: (bytes, transcendentals, draws noise, what it does)
    "noise": (0, 1.5, True, "Philox4x32-10 and Box-Muller into the cache"),
    "philox only": (0, 0.0, True, "the generator's rounds alone"),
    "sigma": (8, 2.0, False, "sigma = softplus(rho) (exp, log1p)"),
    "sigma, w": (16, 2.0, False, "w = mu + sigma eps, eps stored"),
    "sigma, w, log q": (16, 3.0, False, "and -log sigma - eps^2/2"),
    "log P (Gaussian)": (4, 0.0, False, "log N(w; 0, s^2)"),
    "log P (mixture)": (4, 2.0, False, "Eq. (7): one exp, one log1p"),
    "d log P (Gaussian)": (8, 0.0, False, "its gradient"),
    "d log P (mixture)": (8, 1.0, False, "its gradient (the responsibility: one exp)"),
    "forward, eps stored (Gaussian)": (16, 3.0, False, "forward_chunk"),
    "forward, eps stored (mixture)": (16, 5.0, False, "forward_chunk"),
    "backward, eps stored (Gaussian)": (24, 2.0, False, "backward_chunk: sigma and sigmoid again"),
    "backward, eps stored (mixture)": (24, 3.0, False, "backward_chunk, and the responsibility"),
    "forward pass (Gaussian)": (12, 4.5, True, "the operator's forward, noise drawn"),
    "forward pass (mixture)": (12, 6.5, True, "the operator's forward, noise drawn"),
    "backward pass (Gaussian)": (20, 3.5, True, "the operator's backward, noise drawn again"),
    "backward pass (mixture)": (20, 4.5, True, "the operator's backward, noise drawn again"),
    "forward pass, eps kept (Gaussian)": (16, 4.5, True, "keep_eps=1: eps written for the backward"),
    "forward pass, eps kept (mixture)": (20, 6.5, True, "keep_eps=1: eps and d log P / dw written"),
    "backward pass, eps kept (Gaussian)": (24, 2.0, False, "eps read back, not drawn"),
    "backward pass, eps kept (mixture)": (24, 2.0, False, "eps and d log P / dw read back"),
    "forward pass (closed-form KL)": (12, 4.5, True, "kl=closed_form: sigma, w, log sigma"),
    "backward pass (closed-form KL)": (24, 3.5, True, "reads mu too; sigma and sigmoid again"),
    "finite guard": (8, 0.0, False, "reads the gradients of mu and rho"),
    "update (SGD)": (24, 0.0, False, "mu and rho: read value and gradient, write value"),
    "update (Adam)": (56, 0.0, False, "... and read and write both moments"),
}
#: What a step needs at the least, per prior: the forward once (its transcendentals and the
#: noise once), the backward's bytes without arithmetic of its own, the guard and the update.
MINIMUM = {"gaussian": {"forward": (12, 3.0, True), "backward": (20, 0.0, False)},
           "mixture": {"forward": (12, 5.0, True), "backward": (20, 0.0, False)}}


def build(directory):
    """Compile the harness with the fused library's flags; the executable's path."""
    output = os.path.join(directory, "cost_model")
    subprocess.run(compile_command([HARNESS], output, shared=False), check=True,
                   capture_output=True, text=True)
    return output


def run_harness(executable, width, repeats):
    """name -> (milliseconds, weights) from one run of the harness."""
    result = subprocess.run([executable, str(width), str(repeats)], check=True,
                            capture_output=True, text=True)
    times = {}
    for line in result.stdout.splitlines():
        name, ms, weights = line.split("\t")
        times[name] = (float(ms), int(weights))
    return times


def model(times):
    """The rates and, for each pass, its time against its two floors."""
    triad_ms, n = times["triad"]
    bandwidth = 12 * n / (triad_ms / 1000)  # bytes per second
    transcendental_ns = 1e6 * (times["exp in cache"][0] + times["log in cache"][0]) / 2 / n
    philox_ns = 1e6 * times["philox only"][0] / n
    rows = []
    for name, (size, count, draws, what) in PASSES.items():
        if name not in times:
            continue
        ms, weights = times[name]
        memory = 1000 * size * weights / bandwidth
        arithmetic = (count * transcendental_ns + (philox_ns if draws else 0.0)) * weights / 1e6
        rows.append({"pass": name, "what": what, "bytes": size, "transcendentals": count,
                     "ms": ms, "memory_floor_ms": memory, "arithmetic_floor_ms": arithmetic})
    return {"bandwidth_bytes_per_s": bandwidth, "transcendental_ns": transcendental_ns,
            "philox_ns_per_value": philox_ns, "weights": n, "passes": rows}


def step_floor(rates, prior, optimizer):
    """Milliseconds a BBB step needs beyond the deterministic one, at the least."""
    n = rates["weights"]
    parts = dict(MINIMUM[prior])
    parts["guard"] = PASSES["finite guard"][:3]
    parts["update"] = PASSES[f"update ({'SGD' if optimizer == 'sgd' else 'Adam'})"][:3]
    total = 0.0
    for size, count, draws in parts.values():
        memory = 1000 * size * n / rates["bandwidth_bytes_per_s"]
        arithmetic = (count * rates["transcendental_ns"]
                      + (rates["philox_ns_per_value"] if draws else 0.0)) * n / 1e6
        total += max(memory, arithmetic)
    return total


def markdown(report):
    lines = []
    for entry in report["widths"]:
        rates = entry["model"]
        lines += [f"### 784-{entry['width']}-{entry['width']}-10 ({rates['weights']:,} weights)", "",
                  f"Triad {rates['bandwidth_bytes_per_s'] / 1e9:.1f} GB/s; one exp or log in the "
                  f"cache {rates['transcendental_ns']:.3f} ns a value; the generator's rounds "
                  f"{rates['philox_ns_per_value']:.3f} ns a value.", "",
                  "| pass | bytes / weight | transcendentals / weight | measured (ms) "
                  "| memory floor (ms) | arithmetic floor (ms) | measured / larger floor |",
                  "|---|---:|---:|---:|---:|---:|---:|"]
        for row in rates["passes"]:
            floor = max(row["memory_floor_ms"], row["arithmetic_floor_ms"])
            lines.append(f"| {row['pass']} | {row['bytes']} | {row['transcendentals']:g} "
                         f"| {row['ms']:.2f} | {row['memory_floor_ms']:.2f} "
                         f"| {row['arithmetic_floor_ms']:.2f} | {row['ms'] / floor:.1f} |"
                         if floor > 0 else
                         f"| {row['pass']} | {row['bytes']} | {row['transcendentals']:g} "
                         f"| {row['ms']:.2f} | - | - | - |")
        lines += ["", "| prior | optimizer | BBB step (ms) | deterministic step (ms) | ratio "
                  "| floor of the BBB step's extra work (ms) | floor of the ratio |",
                  "|---|---|---:|---:|---:|---:|---:|"]
        for cell in entry["steps"]:
            det = cell["deterministic_ms"]
            lines.append(f"| {cell['prior']} | {cell['optimizer']} | {cell['step_ms']:.2f} "
                         f"| {det:.2f} | {cell['step_ms'] / det:.2f} | {cell['floor_ms']:.2f} "
                         f"| {(det + cell['floor_ms']) / det:.2f} |")
        lines.append("")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--widths", nargs="+", type=int, default=[400, 1200])
    parser.add_argument("--optimizers", nargs="+", choices=("sgd", "adam"), default=["sgd", "adam"])
    parser.add_argument("--priors", nargs="+", choices=("mixture", "gaussian"),
                        default=["mixture", "gaussian"])
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--json", help="write every number here")
    args = parser.parse_args(argv)
    sys.path.insert(0, HERE)
    import step_profile  # the BBB and deterministic steps, timed in MXNet

    report = {"machine": machine_info(), "args": vars(args), "source": SOURCE, "widths": []}
    with tempfile.TemporaryDirectory() as directory:
        executable = build(directory)
        for width in args.widths:
            rates = model(run_harness(executable, width, args.repeats))
            steps = []
            for prior in args.priors:
                for optimizer in args.optimizers:
                    profile = step_profile.profile(width, optimizer, args.repeats, prior=prior)
                    steps.append({"prior": prior, "optimizer": optimizer,
                                  "step_ms": profile["ms"]["step"],
                                  "deterministic_ms": profile["ms"]["deterministic step"],
                                  "floor_ms": step_floor(rates, prior, optimizer),
                                  "profile": profile})
            report["widths"].append({"width": width, "model": rates, "steps": steps})
    print(markdown(report))
    if args.json:
        with open(args.json, "w", encoding="utf-8") as handle:
            json.dump(report, handle, indent=1)


if __name__ == "__main__":
    main()
