"""Experiments built on the core: the paper's protocol and the studies around it.

=====================  ===================================================================
module                 what it does
=====================  ===================================================================
``configs``            the paper's MNIST configurations, custom ones, their checks, the grid
``wording``            a configuration in words, and ``--set`` text read back into values
``runfolder``          the one run-folder format: file names, distrustful reading, best epoch
``runlock``            one writer per run folder; the start barrier of worker processes
``machine``            what a measurement ran on, its command line (no passwords), memory
``spaces``             what a search may vary per kind of configuration, and trial names
``runners``            one runner per configuration: build, train resumably, save, load
``protocol``           the paper's protocol: run (resumable), report, evaluate the best epoch
``all_images``         every training image, the test set scored each epoch by each convention
``peer_state``         a variational state moved to and from the PyTorch peer of ``bayes1``
``paired``             both implementations continued from one state; their paired difference
``search``             the hyperparameter search on Optuna: storage, samplers, pruning, workers
``search_report``      a search's table, figures and best trial on the test set
``uncertainty_eval``   calibration, out-of-distribution detection and refusal of run folders
``bandit_settings``    the mushroom bandit's settings, checked, and the agents they make
``bandit_run``         the mushroom bandit's agents, resumable, with their summary
``continual``          permuted-MNIST continual learning (VCL), resumable task by task
=====================  ===================================================================

The protocol's main names are re-exported here::

    from gluon_bbb import experiments
    config = experiments.get_config("bbb-mixture-400")
    result = experiments.run(config, epochs=600, output_dir="results/bbb-mixture-400")

    # hyperparameters of your own, in the same run-folder format (what ``gluon-bbb train`` runs)
    mine = experiments.custom_config(hidden=[800, 800], prior="gaussian", sigma=0.1)
    result = experiments.run(mine, epochs=50, output_dir="runs/gaussian-800")
"""
import importlib

from . import (bandit_run, bandit_settings, configs, continual, protocol, runfolder, runners,
               spaces, uncertainty_eval, wording)
from .configs import (CONFIGS, CUSTOM, DESCRIPTIONS, EXTRA_KEYS, PAPER_GRID, PAPER_TEST_ERROR,
                      SEARCH_KEYS, custom_config, get_config, learning_rate_schedule)
from .protocol import evaluate_run, load_network, report, results_table, run
from .runfolder import read_result
from .runners import make_runner
from .wording import describe, parse_setting
from .spaces import grid_settings, sample_settings, search_space

__all__ = ["bandit_run", "bandit_settings", "configs", "continual", "protocol", "runfolder", "runners", "search",
           "search_report", "spaces", "uncertainty_eval", "wording", "CONFIGS", "CUSTOM",
           "DESCRIPTIONS",
           "EXTRA_KEYS", "PAPER_GRID", "PAPER_TEST_ERROR", "SEARCH_KEYS", "custom_config",
           "describe", "get_config", "learning_rate_schedule", "parse_setting", "make_runner",
           "evaluate_run", "load_network", "report", "results_table", "run", "read_result", "grid_settings", "sample_settings",
           "search_space", "report_search"]


#: Imported on first use: they bring Optuna, which is slow to import and, through tqdm, warns
#: in a notebook without ipywidgets.
_LAZY_MODULES = ("search", "search_report")
_LAZY_NAMES = {"report_search": "search_report"}


def __getattr__(name):
    if name in _LAZY_MODULES:
        return importlib.import_module(f"{__name__}.{name}")
    if name in _LAZY_NAMES:
        return getattr(importlib.import_module(f"{__name__}.{_LAZY_NAMES[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
