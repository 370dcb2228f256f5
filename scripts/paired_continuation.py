"""Continue gluon_bbb and the PyTorch peer of bayes1's training (scripts/peer_all_images.py) from
the same variational state, with several noise seeds each, and compare them paired by state
(gluon_bbb.experiments.paired).

    # one state: gluon_bbb's 2x400 seed 0 stopped at epoch 300 (its folder's checkpoint.bbb),
    # continued 30 epochs at lr 1e-4 by both implementations with noise seeds 0, 1, 2
    OMP_NUM_THREADS=1 GLUON_BBB_DATA=../shared/data python scripts/paired_continuation.py run \\
        --state runs/all-images/bbb-mixture-400-paper-s0 --hidden 400 --epochs 30 --lr 1e-4 \\
        --seeds 0 1 2 --output-dir runs/paired/after-drop-400/gluon-s0
    # the paired difference over the states' folders
    python scripts/paired_continuation.py compare runs/paired/after-drop-400/*

A state (``--state``) is a run folder of scripts/all_images.py (``checkpoint.bbb``), of
scripts/peer_all_images.py or scripts/peer_all_images_stacked.py (``checkpoint.npz``), a
state file (``.npz``, with ``--state-command``), or ``init:gluon_bbb:SEED`` / ``init:peer:SEED``,
the initialisation of that implementation's run of that seed. Each run goes into
``OUTPUT_DIR/<implementation>-s<seed>``, holds the lock of its folder while it writes, records
every epoch atomically, and is resumed bit for bit by the same command; ``continuation.json``
names the command that trains the state again and the state's SHA-256, so that a state trained
again can be checked to be the same. The states themselves are not kept.

The gluon_bbb half needs only gluon_bbb; the peer's half needs PyTorch (``pip install torch``).
"""
import argparse
import json
import math
import os
import shlex
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)
from all_images import JINKEHE_KL_SCALE  # noqa: E402

from gluon_bbb import data, experiments  # noqa: E402
from gluon_bbb.epochs import epoch_seed  # noqa: E402
from gluon_bbb.io.checkpoint import write_json  # noqa: E402
from gluon_bbb.experiments import paired  # noqa: E402
from gluon_bbb.experiments.all_images import RECORD, TEST_SEED_STREAM, mc_epochs  # noqa: E402
from gluon_bbb.experiments.machine import machine_info  # noqa: E402
from gluon_bbb.experiments.peer_state import (  # noqa: E402
    check_state, read_state, state_fingerprint, state_widths, trainer_state)
from gluon_bbb.experiments.runfolder import (CONFIG, FILES, append_session, now,  # noqa: E402
                                             read_run_config)
from gluon_bbb.experiments.runlock import RunFolderLock  # noqa: E402
from gluon_bbb.io.checkpoint import read_json  # noqa: E402

#: The peer's checkpoint in its run folders.
PEER_CHECKPOINT = "checkpoint.npz"
#: The overrides scripts/all_images.py makes itself, which its command does not repeat.
ALL_IMAGES_SETS = ("kl_scale", "num_validation", "seed")
#: The peer's training options, besides its width, seed and epochs, that shape its state.
PEER_STATE_OPTIONS = ("lr", "lr_step", "pi", "neg_log_sigma1", "neg_log_sigma2")


def peer_module():
    """scripts/peer_all_images.py (it needs PyTorch)."""
    import peer_all_images
    return peer_all_images


# ---------------------------------------------------------------------------- the peer's state
def peer_state(peer):
    """The peer's variational state (copies), named as gluon_bbb.experiments.peer_state names
    it: the peer's own tensor names."""
    return {name: tensor.detach().cpu().numpy().copy() for name, tensor in peer.tensors()}


def set_peer_state(peer, state):
    """Copy ``state`` into the peer's mu and rho; a ValueError (the peer unchanged) for a
    state of other names or shapes."""
    import torch
    check_state(state)
    tensors = dict(peer.tensors())
    if sorted(tensors) != sorted(state):
        raise ValueError(f"the state names {sorted(state)[:4]}..., the peer "
                         f"{sorted(tensors)[:4]}...: another network")
    for name, tensor in tensors.items():
        if tuple(tensor.shape) != state[name].shape:
            raise ValueError(f"the state's {name} has shape {state[name].shape}, the peer's "
                             f"{tuple(tensor.shape)}")
    with torch.no_grad():
        for name, tensor in tensors.items():
            tensor.copy_(torch.from_numpy(state[name]))


# ---------------------------------------------------------------------------- configurations
def gluon_config(hidden, lr, seed, subset=None):
    """bayes1's protocol for gluon_bbb (scripts/all_images.py's configuration) at width
    ``hidden``, with the constant rate ``lr`` and the noise and shuffle seed ``seed``."""
    name = f"bbb-mixture-{hidden}-paper" if hidden in (400, 1200) else "bbb-mixture-400-paper"
    return experiments.get_config(name, num_validation=0, kl_scale=JINKEHE_KL_SCALE, seed=seed,
                                  lr=lr, lr_steps=[], subset=subset, hidden=[hidden, hidden])


def make_peer(config, seed, compiled):
    """The peer's network with the configuration's prior, initialised for ``seed``."""
    return peer_module().Peer(config["hidden"][0], config["pi"],
                              math.exp(-config["neg_log_sigma1"]),
                              math.exp(-config["neg_log_sigma2"]), seed, compiled=compiled)


def _command(*words, **options):
    parts = ["python"] + list(words)
    for key, value in options.items():
        if value is not None:
            parts += [f"--{key.replace('_', '-')}", str(value)]
    return " ".join(shlex.quote(part) for part in parts)


def resolve_state(spec, hidden, subset=None, command=None):
    """The state ``spec`` names (see the module's docstring) for a 784-H-H-10 network.

    Returns
    -------
    dict
        ``state`` (the arrays), ``source`` (``spec``), ``epoch``, ``command`` (what trains it
        again: ``command`` where given), ``sha256``.
    """
    widths = [784, hidden, hidden, 10]
    if spec.startswith("init:"):
        _, implementation, seed = (spec.split(":") + [""])[:3]
        if implementation not in paired.IMPLEMENTATIONS or not seed.isdigit():
            raise ValueError(f"{spec}: not init:gluon_bbb:SEED or init:peer:SEED")
        config = gluon_config(hidden, 1e-3, int(seed), subset)
        if implementation == "gluon_bbb":
            state = trainer_state(experiments.make_runner(config, None).trainer)
        else:
            state = peer_state(make_peer(config, int(seed), compiled=False))
        epoch = 0
        made = f"the initialisation of {implementation}'s run of seed {seed} at 2x{hidden}"
    elif os.path.isfile(os.path.join(spec, FILES["bbb"]["checkpoint"])):
        config = read_run_config(spec)
        trainer = experiments.make_runner(config, None).trainer
        trainer.load(os.path.join(spec, FILES["bbb"]["checkpoint"]), optimizer=False)
        state, epoch = trainer_state(trainer), trainer.epoch
        # every override but those scripts/all_images.py sets itself: the command trains it again
        sets = [f"{key}={json.dumps(value)}" for key, value
                in sorted(config.get("overrides", {}).items()) if key not in ALL_IMAGES_SETS]
        made = " ".join([_command("scripts/all_images.py", config["reproduce"],
                                  seed=config["seed"], epochs=epoch, output_dir=spec)]
                        + [f"--set {shlex.quote(item)}" for item in sets])
    elif os.path.isfile(os.path.join(spec, PEER_CHECKPOINT)):
        settings = read_json(os.path.join(spec, CONFIG), "a peer configuration")
        state, epoch = read_state(os.path.join(spec, PEER_CHECKPOINT), widths)
        stacked = "stacked_with" in settings
        # every option that shapes the state, defaults included: the command trains it again
        # whatever the script's defaults become
        shaping = {key: settings.get(key) for key in PEER_STATE_OPTIONS}
        made = _command(f"scripts/peer_all_images{'_stacked' if stacked else ''}.py",
                        hidden=settings.get("hidden"), epochs=epoch, **shaping,
                        subset=settings.get("subset"), output_dir=spec,
                        **({"seeds": settings.get("seed"), "device": settings.get("device")}
                           if stacked else {"seed": settings.get("seed")}))
    elif os.path.isfile(spec):
        if not command:
            raise ValueError(f"{spec}: a state file; say with --state-command what trains it")
        state, epoch = read_state(spec, widths)
        made = None
    else:
        raise ValueError(f"{spec}: no run folder with a checkpoint, no state file, no init:...")
    if state_widths(state) != widths:
        raise ValueError(f"{spec}: a network {state_widths(state)}, not {widths}")
    return {"state": state, "source": spec, "epoch": int(epoch), "command": command or made,
            "sha256": state_fingerprint(state)}


# ---------------------------------------------------------------------------- the peer's run
def load_images(data_dir=None, subset=None):
    """MNIST as both implementations read it (gluon_bbb.data): the training images / 126 and
    their labels, the test images / 126 and raw, their labels; the first ``subset`` of each
    split where given, as gluon_bbb's ``subset`` takes them."""
    import torch
    images, labels = data.load_dataset("mnist", "train", data_dir, "paper")
    scaled, test_labels = data.load_dataset("mnist", "test", data_dir, "paper")
    raw, _ = data.load_raw("mnist", "test", data_dir)
    raw = raw.reshape(len(raw), -1).astype(np.float32)
    if subset:
        images, labels, scaled, raw, test_labels = (
            array[:subset] for array in (images, labels, scaled, raw, test_labels))
    return (torch.from_numpy(images), torch.from_numpy(labels.astype(np.int64)),
            {"x126": torch.from_numpy(scaled), "raw": torch.from_numpy(raw)},
            torch.from_numpy(test_labels.astype(np.int64)))


def continue_peer(config, state, claim, epochs, output_dir, mc_samples=100, last_mc=10,
                  data_dir=None, compiled=True, command=None):
    """The peer's half of :func:`gluon_bbb.experiments.paired.continue_gluon`: ``state``
    continued by scripts/peer_all_images.py's training (its ``train_epoch``, ``test_errors``
    and checkpoint) at the configuration's ``lr`` with the noise and shuffle seed
    ``config["seed"]``, or the folder's continuation resumed."""
    import torch
    peer_code = peer_module()
    with RunFolderLock(output_dir):
        paired.claim_continuation(output_dir, dict(claim, implementation="peer"))
        seed = config["seed"]
        peer = make_peer(config, seed, compiled)
        checkpoint = os.path.join(output_dir, PEER_CHECKPOINT)
        if os.path.exists(checkpoint):
            done = peer_code.load_checkpoint(checkpoint, peer)
        else:
            set_peer_state(peer, state)
            done = 0
        record = peer_code.resumed_record(output_dir, done)
        images, labels, test, test_labels = load_images(data_dir, config["subset"])
        measured = mc_epochs(int(epochs), 0, last_mc)
        session = {"command": command, "started": now(), "epochs_before": done,
                   "epochs_requested": int(epochs), "machine": machine_info(),
                   "torch": torch.__version__, "compiled": bool(compiled)}
        start_all = time.time()
        try:
            for epoch in range(done + 1, int(epochs) + 1):
                start = time.time()
                train_error = peer_code.train_epoch(peer, images, labels, config["lr"], seed,
                                                    epoch)
                seconds = time.time() - start
                generator = torch.Generator().manual_seed(
                    epoch_seed(seed, epoch, stream=TEST_SEED_STREAM))
                samples = mc_samples if epoch in measured else 0
                errors = peer_code.test_errors(peer, test, test_labels, samples, generator)
                record.append(dict(epoch=epoch, train_error=train_error, seconds=seconds,
                                   mc_samples=samples, **errors))
                write_json(os.path.join(output_dir, RECORD),
                           {"config": f"peer-pytorch-{config['hidden'][0]}", "epochs": record})
                # after the record: a run stopped between the two trains this epoch again
                peer_code.save_checkpoint(checkpoint, peer, epoch)
                done = epoch
            session["outcome"] = "finished"
        except BaseException as error:
            session["outcome"] = f"stopped by {type(error).__name__}"
            raise
        finally:
            session.update(epochs_after=done, seconds=time.time() - start_all)
            append_session(output_dir, session)
        return record


# ---------------------------------------------------------------------------- commands
def run(args, command):
    source = resolve_state(args.state, args.hidden, args.subset, args.state_command)
    print(f"state {source['source']}: epoch {source['epoch']}, sha256 {source['sha256'][:16]}…;"
          f" trained again by: {source['command']}", flush=True)
    for seed in args.seeds:
        config = gluon_config(args.hidden, args.lr, seed, args.subset)
        claim = {"state_source": source["source"], "state_epoch": source["epoch"],
                 "state_command": source["command"], "state_sha256": source["sha256"],
                 "noise_seed": seed, "lr": args.lr, "hidden": args.hidden,
                 "subset": args.subset, "epochs": args.epochs, "command": command}
        for implementation in args.implementations:
            folder = os.path.join(args.output_dir, f"{implementation}-s{seed}")
            options = dict(mc_samples=args.mc_samples, last_mc=args.last_mc,
                           data_dir=args.data_dir, command=command)
            if implementation == "gluon_bbb":
                record = paired.continue_gluon(config, source["state"], claim, args.epochs,
                                               folder, **options)
            else:
                record = continue_peer(config, source["state"], claim, args.epochs, folder,
                                       compiled=not args.eager, **options)
            last = record[-1]
            print(f"{folder}: epoch {last['epoch']}, test error (mean, x/126) "
                  f"{100 * last['mean_x126']:.2f}%", flush=True)
    return 0


def state_cells(state_dirs, last=10):
    """``{state folder: {"mean_x126" | "bayes1_rule" | "mc_last": {implementation: [value per
    run]}}}`` and the runs' descriptions, checked: every run of a folder continues the same
    state at the same rate for as many epochs."""
    cells, described = {}, {}
    for state_dir in state_dirs:
        runs = sorted(name for name in os.listdir(state_dir)
                      if os.path.isfile(os.path.join(state_dir, name, paired.CONTINUATION)))
        if not runs:
            raise ValueError(f"{state_dir}: no continuation's run folder in it")
        claims = {name: read_json(os.path.join(state_dir, name, paired.CONTINUATION),
                                  "a continuation's description") for name in runs}
        for key in ("state_sha256", "lr", "hidden"):
            values = {name: claim.get(key) for name, claim in claims.items()}
            if len(set(map(str, values.values()))) > 1:
                raise ValueError(f"{state_dir}: its runs differ in {key}: {values}")
        if any(claim["state_sha256"] == other["state_sha256"]
               for other in described.values() for claim in claims.values()):
            raise ValueError(f"{state_dir}: continues a state another folder continues")
        summaries = {name: paired.run_summary(os.path.join(state_dir, name), last)
                     for name in runs}
        if len({summary["epochs"] for summary in summaries.values()}) > 1:
            raise ValueError(f"{state_dir}: its runs are at different epochs: "
                             f"{ {name: s['epochs'] for name, s in summaries.items()} }")
        cells[state_dir] = {}
        for key in ("mean_x126", "bayes1_rule", "mc_last"):
            groups = {implementation: [] for implementation in paired.IMPLEMENTATIONS}
            for name, summary in summaries.items():
                groups[claims[name]["implementation"]].append(summary[key])
            cells[state_dir][key] = groups
        described[state_dir] = dict(next(iter(claims.values())),
                                    epochs=next(iter(summaries.values()))["epochs"])
    return cells, described


#: What compare reports, with its label ({last}: the epochs averaged).
MEASURES = (("mean_x126", "posterior mean, x/126, mean of the last {last} epochs"),
            ("bayes1_rule", "MC log-prob, raw, mean of the last {last} epochs (bayes1's rule)"),
            ("mc_last", "MC log-prob, raw, last epoch"))


def compare_table(state_dirs, last=10):
    """The paired differences (gluon_bbb - peer, percentage points) as Markdown."""
    cells, described = state_cells(state_dirs, last)
    lines = ["| measure | state (its epoch) | gluon_bbb: mean (runs) | peer: mean (runs) | "
             "difference |", "|---|---|---:|---:|---:|"]
    for key, label in MEASURES:
        label = label.format(last=last)
        by_state = {state: groups[key] for state, groups in cells.items()}
        if any(None in values for groups in by_state.values() for values in groups.values()):
            lines.append(f"| {label} | not measured on every run | | | |")
            continue
        result = paired.paired_difference(by_state)
        for state, groups in by_state.items():
            means = [f"{sum(v) / len(v):.3f} ({len(v)})" for v in
                     (groups[name] for name in paired.IMPLEMENTATIONS)]
            lines.append(f"| {label} | {os.path.basename(state.rstrip('/'))} "
                         f"({described[state]['state_epoch']}) | {means[0]} | {means[1]} | "
                         f"{result['per_state'][state]:+.3f} |")

        def interval(pair):
            return "—" if pair is None else f"[{pair[0]:+.3f}, {pair[1]:+.3f}]"

        states = f"{result['states']} state" + ("s" if result["states"] != 1 else "")
        lines.append(f"| {label} | **paired, {states}** | | | "
                     f"**{result['mean']:+.3f}**, 95% t interval over states "
                     f"{interval(result['interval'])}; noise only "
                     f"({result['noise_df']} df) {interval(result['noise_interval'])} |")
    first = next(iter(described.values()))
    return "\n".join(lines) + (f"\n\nEpochs {first['epochs']} at lr {first['lr']:g}, "
                               f"2x{first['hidden']}; test error in %.")


def compare(args):
    try:
        print(compare_table(args.state_dirs, args.last))
    except (ValueError, OSError) as error:
        print(f"paired_continuation: {error}", file=sys.stderr)
        return 2
    return 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="action", required=True)
    go = commands.add_parser("run", help="continue a state with both implementations")
    go.add_argument("--state", required=True)
    go.add_argument("--state-command", help="what trains the state again (for a state file)")
    go.add_argument("--hidden", type=int, required=True)
    go.add_argument("--epochs", type=int, default=30)
    go.add_argument("--lr", type=float, required=True)
    go.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    go.add_argument("--implementations", nargs="+", choices=paired.IMPLEMENTATIONS,
                    default=list(paired.IMPLEMENTATIONS))
    go.add_argument("--output-dir", required=True)
    go.add_argument("--subset", type=int, help="the first N images of each split (a smoke run)")
    go.add_argument("--data-dir")
    go.add_argument("--mc-samples", type=int, default=100)
    go.add_argument("--last-mc", type=int, default=10)
    go.add_argument("--eager", action="store_true", help="the peer without torch.compile")
    go.add_argument("--threads", type=int, help="torch.set_num_threads for the peer")
    report = commands.add_parser("compare", help="the paired difference over states")
    report.add_argument("state_dirs", nargs="+", help="one folder per state (run's --output-dir)")
    report.add_argument("--last", type=int, default=10)
    args = parser.parse_args(argv)
    if args.action == "compare":
        return compare(args)
    if args.threads:
        import torch
        torch.set_num_threads(args.threads)
    try:
        return run(args, " ".join(shlex.quote(word) for word in
                                  ["python", "scripts/paired_continuation.py"]
                                  + list(argv if argv is not None else sys.argv[1:])))
    except ValueError as error:  # a bad state or folder, named
        print(f"paired_continuation: {error}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
