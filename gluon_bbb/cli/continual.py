"""``gluon-bbb continual``: permuted-MNIST continual learning, resumable task by task
(:mod:`gluon_bbb.experiments.continual`)."""
import logging

from ..context import resolve_context
from ..experiments import continual
from .common import HelpFormatter, log_to, number

__all__ = ["add_parsers", "continual_command"]

logger = logging.getLogger("gluon_bbb.cli")

#: Option -> setting it overrides.
OVERRIDES = {"tasks": "NUM_TASKS", "epochs": "EPOCHS_PER_TASK",
             "ml_start_epochs": "ML_START_EPOCHS", "train_samples": "TRAIN_SAMPLES",
             "eval_samples": "EVAL_SAMPLES", "train_per_task": "TRAIN_PER_TASK",
             "test_per_task": "TEST_PER_TASK", "seed": "SEED"}


def add_parsers(commands):
    """The ``continual`` command."""
    run = commands.add_parser(
        "continual", help="permuted-MNIST continual learning (VCL), resumable task by task",
        formatter_class=HelpFormatter,
        description="Learn permuted MNIST tasks one after another (plain training and Bayes by "
                    "Backprop whose prior is the previous task's posterior; notebook 11). After "
                    "every task the run folder gets continual.ckpt (the state to resume from) "
                    "and continual.json (the test error of each method on every task seen, the "
                    "settings, the seconds). The same command continues an interrupted run from "
                    "its last finished task; a larger --tasks extends a finished one.")
    run.add_argument("--setting", choices=list(continual.SETTINGS), default="vcl",
                     help="vcl: the setting of Nguyen et al.'s code (60,000 images a task, 100 "
                          "epochs, 10 draws a step, 100 to predict, pixels in [0, 1]); notebook: "
                          "notebook 11's short one")
    run.add_argument("--run-dir", required=True, help="new, or a run of the same settings")
    natural, count = number(int, 1, True), number(int, 0, True)
    run.add_argument("--tasks", type=natural, default=None,
                     help="tasks to learn (default: the setting's, 5; the paper's text: 10)")
    run.add_argument("--epochs", type=natural, default=None,
                     help="epochs a task (default: the setting's)")
    run.add_argument("--ml-start-epochs", type=natural, default=None,
                     help="plain epochs on task 1 that start the ML-start method's means "
                          "(default: the setting's)")
    run.add_argument("--train-samples", type=natural, default=None,
                     help="weight draws a training step (default: the setting's)")
    run.add_argument("--eval-samples", type=count, default=None,
                     help="sampled networks averaged to score a task, 0 for the posterior mean "
                          "(default: the setting's)")
    run.add_argument("--train-per-task", type=natural, default=None,
                     help="MNIST's first training images, each task (default: the setting's)")
    run.add_argument("--test-per-task", type=natural, default=None,
                     help="MNIST's first test images, each task (default: the setting's)")
    run.add_argument("--seed", type=count, default=None, help="the run's SEED (default 0)")
    run.add_argument("--data-dir", default=None, help="holds mnist/ (default: $GLUON_BBB_DATA)")
    run.add_argument("--ctx", default="cpu", help="cpu or gpu(N)")
    run.add_argument("--no-progress", action="store_true", help="no progress bars")
    run.set_defaults(func=continual_command, command_line=None)


def continual_command(args):
    """``gluon-bbb continual``: learns the tasks left, writes continual.ckpt and continual.json."""
    overrides = {key: getattr(args, option) for option, key in OVERRIDES.items()
                 if getattr(args, option) is not None}
    settings = continual.continual_settings(args.setting, **overrides)
    resolve_context(args.ctx)
    with log_to(None):
        record = continual.run_continual(args.run_dir, settings, data_dir=args.data_dir,
                                         ctx=args.ctx, command=args.command_line,
                                         progress=not args.no_progress)
        for method in record["methods"]:
            logger.info("%s: average accuracy after each task %s", method, " ".join(
                f"{a:.1%}" for a in record["average_accuracy_after_task"][method]))
        logger.info("record: %s", f"{args.run_dir}/{continual.RECORD}")
    return 0
