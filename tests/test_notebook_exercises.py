"""Every exercise of every teaching notebook runs: its suggested change, applied to the notebook's
code, executes in smoke mode without an error.

:data:`EXERCISES` declares each exercise's change as edits of the notebook's code cells, in the
order of the notebooks and of their "Exercises" cells: the cell is found by a snippet that occurs
in exactly one code cell, and its ``old`` text, which must occur there exactly once, becomes
``new`` (``old=None`` appends ``new`` to the cell: the few lines an exercise asks the reader to
write, where its hint names the package's functions). An edit of a notebook that no longer
matches a declaration fails loudly, and so does an exercise in a notebook's "Exercises" cell
that is neither declared here nor in :data:`WITHOUT_CODE_CHANGE` (an exercise that asks a
question, or asks for code of the reader's own that uses nothing of the package).

Settings that only size a run (the number of steps, epochs or samples) keep their smoke values,
so that each exercise runs in seconds (notebook 08's exercises name 2,000 steps and run the smoke
mode's 200), unless the size is the exercise's point (notebook 01's first trains the two epochs it
asks for); an exercise's other changes are made as written. The exercises of one notebook share
a kernel, whose names are emptied before each (``kernel_for``): every exercise runs every cell of
its notebook, only the imported modules are shared.
"""
import collections
import re

import pytest

from test_notebooks import NOTEBOOK_DIR, notebook_json, pytestmark, run_in_smoke_mode  # noqa: F401

#: The configuration cell of every notebook is the one code cell that reads GLUON_BBB_SMOKE.
CONFIG = "GLUON_BBB_SMOKE"

Edit = collections.namedtuple("Edit", "cell old new")
Exercise = collections.namedtuple("Exercise", "notebook number title edits marks variant")


def edit(cell, old, new):
    """Replace ``old`` (once in the code cell that holds ``cell``) by ``new``."""
    return Edit(cell, old, new)


def append(cell, code):
    """Append ``code`` to the code cell that holds ``cell``."""
    return Edit(cell, None, code)


def config(old, new):
    """Replace ``old`` by ``new`` in the configuration cell."""
    return Edit(CONFIG, old, new)


def exercise(notebook, number, title, *edits, marks=(), variant=""):
    """An exercise's change; ``variant`` names one of several values an exercise suggests."""
    return Exercise(notebook, number, title, edits, marks, variant)


#: Each exercise's change, as a reader would make it; ``number`` and ``title`` are the exercise's
#: number and bold title in the notebook's "Exercises" cell.
EXERCISES = [
    # 01_bbb_from_scratch
    exercise("01_bbb_from_scratch", 1, "Eq. 9 with plain gradient descent",
             config('KL_WEIGHTING = "uniform"', 'KL_WEIGHTING = "blundell"'),
             config("NUM_EPOCHS = 1 if SMOKE else 3", "NUM_EPOCHS = 2")),
    exercise("01_bbb_from_scratch", 2, "Inside the bound with Eq. 9",
             config('KL_WEIGHTING = "uniform"', 'KL_WEIGHTING = "blundell"'),
             # alpha < 2 sigma2^2 / pi_1 with pi_1 = 1/2 and sigma2 = e^-6: 2.46e-5
             config("LEARNING_RATE = 1e-3 ", "LEARNING_RATE = 2.4e-5 "),
             config("NUM_EPOCHS = 1 if SMOKE else 3", "NUM_EPOCHS = 1")),
    exercise("01_bbb_from_scratch", 3, "Let $\\sigma$ learn",
             edit("def bbb_update(",
                  "    for param in mus + rhos:                                            "
                  "# 6. gradient step\n"
                  "        param[:] = param - LEARNING_RATE * param.grad\n",
                  "    for param in mus:                                                   "
                  "# 6. gradient step\n"
                  "        param[:] = param - LEARNING_RATE * param.grad\n"
                  "    for param in rhos:                       # rho: 100 times the step\n"
                  "        param[:] = param - 100 * LEARNING_RATE * param.grad\n")),
    # 02_bbb_gluon_mnist
    exercise("02_bbb_gluon_mnist", 1, "Eq. (9) with Adam",
             config('KL_WEIGHTING = "uniform"', 'KL_WEIGHTING = "blundell"')),
    exercise("02_bbb_gluon_mnist", 2, "More samples per step",
             config("TRAIN_SAMPLES = 1 ", "TRAIN_SAMPLES = 2 ")),
    exercise("02_bbb_gluon_mnist", 3, "The local trick's noise",
             append('sampling="local")',
                    "\nspread = {sampling: [trainer.evaluate(loaders['test'], num_samples=1,"
                    " sampling=sampling)\n"
                    "                     for _ in range(20)] for sampling in ('weights', 'local')}\n"
                    "for sampling, errors in spread.items():\n"
                    "    print(f'{sampling}: {np.mean(errors):.2%} +- {np.std(errors):.2%}')\n")),
    # 03_fashion_mnist
    exercise("03_fashion_mnist", 1, "Temper the posterior",
             edit("history_bbb = trainer.fit(",
                  "kl_weighting=KL_WEIGHTING, rho_init=RHO_INIT,",
                  "kl_weighting=KL_WEIGHTING, kl_scale=0.1, rho_init=RHO_INIT,")),
    exercise("03_fashion_mnist", 2, "Dropout rate",
             config("DROPOUT = 0.5 ", "DROPOUT = 0.2 ")),
    exercise("03_fashion_mnist", 3, "Which classes fail?",
             append('"plain MLP": baselines.evaluate_deterministic(plain, loaders["test"])',
                    "\nimport numpy as np\n"
                    "wrong, seen = np.zeros(10), np.zeros(10)\n"
                    "for x, y in loaders['test']:\n"
                    "    predicted = trainer.predict_proba(x, num_samples=MC_SAMPLES)"
                    ".argmax(axis=1).asnumpy()\n"
                    "    y = y.asnumpy().astype(int)\n"
                    "    np.add.at(seen, y, 1)\n"
                    "    np.add.at(wrong, y, predicted != y)\n"
                    "for name, w, n in zip(CLASS_NAMES[DATASET], wrong, seen):\n"
                    "    print(f'{name:<12} {w / max(n, 1):.1%} of {n:.0f}')\n")),
    # 04_weight_densities
    exercise("04_weight_densities", 1, "Another prior",
             edit("if USE_COMMITTED:",
                  "prior = gluon_bbb.ScaleMixturePrior(pi=PRIOR_PI, sigma1=PRIOR_SIGMA1, "
                  "sigma2=PRIOR_SIGMA2)",
                  "prior = gluon_bbb.GaussianPrior(1.0)")),
    exercise("04_weight_densities", 2, "Means against samples",
             append("pruning.posterior_parameters(trainer)",
                    "\nprint(f'|mu| > 0.1: {np.mean(np.abs(mu) > 0.1):.1%} of the posterior means')\n")),
    exercise("04_weight_densities", 3, "Bins",
             edit("# a logarithmic density axis (the default)",
                  "plots.weight_densities(weights)",
                  "plots.weight_densities(weights, bins=50)\n"
                  "plots.weight_densities(weights, bins=1000)")),
    # 05_snr_pruning
    exercise("05_snr_pruning", 1, "SNR against the prior",
             edit("if USE_COMMITTED:",
                  "prior = gluon_bbb.ScaleMixturePrior(pi=PRIOR_PI, sigma1=PRIOR_SIGMA1, "
                  "sigma2=PRIOR_SIGMA2)",
                  "prior = gluon_bbb.GaussianPrior(1.0)")),
    exercise("05_snr_pruning", 2, "Naive pruning, by hand",
             append("kept_by_hand = snr_by_hand > threshold",
                    "\nnaive_threshold = np.sort(np.abs(mu))[removed - 1]\n"
                    "naive = pruning.prune(trainer, f, method='naive')\n"
                    "print(f'naive: {np.sum(np.abs(mu) > naive_threshold):,} above the threshold, '\n"
                    "      f'{naive.num_nonzero:,} kept by the package')\n"
                    "trainer.set_mean()\n")),
    exercise("05_snr_pruning", 3, "Where the error goes",
             append("pruned.save(sparse_path, sparse=True)",
                    "\nx, _ = next(iter(loaders['test']))\n"
                    "after = pruning.prune(trainer, 0.95, method='snr').predict_proba(x).argmax(axis=1)\n"
                    "trainer.set_mean()\n"
                    "before = trainer.predict_proba(x).argmax(axis=1)\n"
                    "print('changed:', np.flatnonzero((after != before).asnumpy()))\n")),
    # 06_uncertainty
    exercise("06_uncertainty", 1, "How many samples?",
             config("MC_SAMPLES = 4 if SMOKE else 50", "MC_SAMPLES = 2")),
    exercise("06_uncertainty", 2, "Bins",
             config("NUM_BINS = 15 ", "NUM_BINS = 50 ")),
    exercise("06_uncertainty", 3, "Refusing by mutual information",
             append("uncertainty.refuse_to_classify(",
                    "\norder = np.argsort(bbb_test.mutual_information)        # refused last to first\n"
                    "wrong = bbb_test.predictions[order] != bbb_test.labels[order]\n"
                    "for coverage in (1.0, 0.9, 0.5):\n"
                    "    kept = int(round(coverage * len(order)))\n"
                    "    print(f'coverage {coverage:.0%}: error {wrong[:kept].mean():.2%}')\n")),
    # 07_regression
    exercise("07_regression", 1, "Learn the noise",
             config("LEARN_NOISE = False", "LEARN_NOISE = True")),
    exercise("07_regression", 2, "More data, less uncertainty",
             config("TRAIN_RANGE = (0.0, 0.5)", "TRAIN_RANGE = (0.0, 1.0)")),
    exercise("07_regression", 3, "The prior's scale",
             config("PRIOR_SIGMA = 1.0 ", "PRIOR_SIGMA = 0.1 "), variant="0.1"),
    exercise("07_regression", 3, "The prior's scale",
             config("PRIOR_SIGMA = 1.0 ", "PRIOR_SIGMA = 10.0 "), variant="10"),
    # 08_bandit
    exercise("08_bandit", 1, "One draw or two",
             config("NUM_ACTION_SAMPLES = 2 ", "NUM_ACTION_SAMPLES = 1 "),
             config('RECORDED_RUN = os.path.join(DOCS, "bandit-tuned") if USE_RECORDED else None',
                    "RECORDED_RUN = None")),
    exercise("08_bandit", 2, "A posterior that moves",
             config('THOMPSON_OPTIMIZER = "sgd"', 'THOMPSON_OPTIMIZER = "adam"'),
             config("THOMPSON_LEARNING_RATE = 1e-6", "THOMPSON_LEARNING_RATE = 1e-3"),
             config("RHO_INIT = (-7.0, -6.0)", "RHO_INIT = -5.0"),
             config("PRIOR_SIGMA1 = math.exp(-3.0)", "PRIOR_SIGMA1 = math.exp(-2.0)"),
             config("PRIOR_SIGMA2 = math.exp(-8.0)", "PRIOR_SIGMA2 = math.exp(-6.0)"),
             config('RECORDED_RUN = os.path.join(DOCS, "bandit-tuned") if USE_RECORDED else None',
                    "RECORDED_RUN = None")),
    # 09_bayesian_cnn
    exercise("09_bayesian_cnn", 1, "Which estimator?",
             config('ESTIMATOR = "flipout"', 'ESTIMATOR = "weights"')),
    exercise("09_bayesian_cnn", 3, "Calibrated or accurate?",
             edit("baselines.train_deterministic(",
                  "nets[dataset, name], train, NUM_EPOCHS,",
                  "nets[dataset, name], train, 2 * NUM_EPOCHS if name == \"plain\" else NUM_EPOCHS,")),
    # 10_bayesian_rnn
    exercise("10_bayesian_rnn", 1, "A GRU", config('CELL = "lstm" ', 'CELL = "gru" ')),
    exercise("10_bayesian_rnn", 2, "A known noise",
             config("NOISE_SIGMA = None ", "NOISE_SIGMA = 0.3 ")),
    exercise("10_bayesian_rnn", 3, "The prior's scale",
             config("PRIOR_SIGMA = 1.0 ", "PRIOR_SIGMA = 0.3 "), variant="0.3"),
    exercise("10_bayesian_rnn", 3, "The prior's scale",
             config("PRIOR_SIGMA = 1.0 ", "PRIOR_SIGMA = 3.0 "), variant="3"),
    exercise("10_bayesian_rnn", 4, "Further ahead", config("HORIZON = 1 ", "HORIZON = 5 ")),
    exercise("10_bayesian_rnn", 5, "A smaller autoregression",
             config("AR_ORDER = 9 ", "AR_ORDER = 2 ")),
    # 11_continual_learning
    exercise("11_continual_learning", 1, "A wider fixed prior",
             config("PRIOR_SIGMA = 0.1 ", "PRIOR_SIGMA = 1.0 ")),
    exercise("11_continual_learning", 2, "A tempered update",
             edit("seed=SEED + task)", "seed=SEED + task)", "seed=SEED + task, kl_scale=0.1)")),
    exercise("11_continual_learning", 3, "The Monte Carlo complexity",
             config('KL = "closed_form"', 'KL = "monte_carlo"')),
    exercise("11_continual_learning", 4, "The setting of Nguyen et al",
             config('SETTING = "notebook"', 'SETTING = "vcl"')),
    exercise("11_continual_learning", 4, "The setting of Nguyen et al",
             config('SETTING = "notebook"', 'SETTING = "vcl"'),
             config("VCL_TASKS = 5 ", "VCL_TASKS = 10 "), variant="ten-tasks"),
]

#: Exercises without an entry above, and why: they ask a question of the printed numbers, or
#: for code of the reader's own that calls nothing of gluon_bbb.
WITHOUT_CODE_CHANGE = {
    ("08_bandit", 3): "arithmetic: the regret of the random actions of a 5%-greedy agent",
    ("09_bayesian_cnn", 2): "the reader's own check of Flipout for nd.FullyConnected, "
                            "written after section 1's (MXNet only)",
}


def _id(entry):
    return f"{entry.notebook[:2]}-ex{entry.number}" + (f"-{entry.variant}" if entry.variant else "")


def _notebook(name):
    return notebook_json(NOTEBOOK_DIR / f"{name}.ipynb")


def exercises_cell(notebook):
    """The numbered exercises of a notebook's "## Exercises" cell: {number: bold title}."""
    cells = [cell["source"] for cell in notebook["cells"]
             if cell["cell_type"] == "markdown" and "## Exercises" in cell["source"]]
    assert len(cells) == 1, "expected one markdown cell with an '## Exercises' heading"
    text = cells[0].split("## Exercises", 1)[1].split("\n## ", 1)[0]
    return {int(number): title.rstrip(".")
            for number, title in re.findall(r"^(\d+)\. \*\*(.+?)\*\*", text, flags=re.M)}


def with_edits(notebook, edits):
    """``notebook`` with ``edits`` applied; each must match exactly one place."""
    for change in edits:
        cells = [cell for cell in notebook["cells"]
                 if cell["cell_type"] == "code" and change.cell in cell["source"]]
        assert len(cells) == 1, \
            f"the snippet {change.cell!r} is in {len(cells)} code cells, not exactly one"
        cell = cells[0]
        if change.old is None:
            cell["source"] = cell["source"].rstrip("\n") + "\n" + change.new
            continue
        count = cell["source"].count(change.old)
        assert count == 1, f"{change.old!r} occurs {count} times in the cell of {change.cell!r}"
        cell["source"] = cell["source"].replace(change.old, change.new)
    return notebook


NOTEBOOK_NAMES = sorted(path.stem for path in NOTEBOOK_DIR.glob("*.ipynb"))


@pytest.mark.parametrize("name", NOTEBOOK_NAMES)
def test_every_exercise_is_declared(name):
    """Each exercise of the notebook has an entry in EXERCISES (with the notebook's title) or in
    WITHOUT_CODE_CHANGE, and every entry names an exercise the notebook has."""
    listed = exercises_cell(_notebook(name))
    assert listed, f"{name}: no numbered exercises found"
    declared = {(e.number, e.title) for e in EXERCISES if e.notebook == name}
    without = {number for notebook, number in WITHOUT_CODE_CHANGE if notebook == name}
    assert {number for number, _ in declared} | without == set(listed), \
        f"{name}: exercises {sorted(listed)}, declared {sorted(declared)}, without code {without}"
    assert not {number for number, _ in declared} & without
    for number, title in declared:
        assert listed[number] == title, f"{name}, exercise {number} is now {listed[number]!r}"


@pytest.mark.parametrize("entry", EXERCISES, ids=[_id(e) for e in EXERCISES])
def test_every_declared_edit_matches_once(entry):
    """A notebook edit that breaks a declaration fails here, without running anything."""
    notebook = _notebook(entry.notebook)
    before = [cell["source"] for cell in notebook["cells"]]
    after = [cell["source"] for cell in with_edits(notebook, entry.edits)["cells"]]
    assert after != before


def test_the_edit_check_refuses_a_snippet_that_is_not_unique():
    notebook = _notebook("07_regression")
    with pytest.raises(AssertionError, match="occurs 0 times"):
        with_edits(notebook, [config("LEARN_NOISE = Maybe", "LEARN_NOISE = True")])
    with pytest.raises(AssertionError, match="code cells, not exactly one"):
        with_edits(notebook, [edit("import", "x", "y")])


def _params():
    """The exercises to run: the tiers ``slow`` (``pytest --full``) and ``notebooks``; the checks
    of the declarations above run in the quick tier."""
    tiers = (pytest.mark.slow, pytest.mark.notebooks)
    return [pytest.param(e, id=_id(e), marks=tiers + e.marks) for e in EXERCISES]


@pytest.fixture(scope="module")
def kernel_for():
    """The kernel of a notebook's exercises: one per notebook, started by the notebook's first
    exercise and shut down when the next notebook's begin. Imports (MXNet's take seconds) are
    then made once per notebook; every exercise still runs every cell of its notebook, in a
    namespace emptied first, as a reader reruns a notebook after editing it."""
    from jupyter_client.manager import KernelManager
    held = {}

    def kernel(name):
        manager = held.get(name)
        if manager is None or (manager.has_kernel and not manager.is_alive()):
            for other in held.values():
                if other.has_kernel:
                    other.shutdown_kernel(now=True)
            held.clear()
            manager = held[name] = KernelManager(kernel_name="python3")
        return manager

    yield kernel
    for manager in held.values():
        if manager.has_kernel:
            manager.shutdown_kernel(now=True)


@pytest.mark.parametrize("entry", _params())
def test_the_exercise_runs_in_smoke_mode(entry, kernel_for, tmp_path, monkeypatch):
    """The exercise's change applied, the whole notebook executes in smoke mode."""
    import nbformat
    notebook = nbformat.from_dict(with_edits(_notebook(entry.notebook), entry.edits))
    notebook.cells.insert(0, nbformat.v4.new_code_cell("%reset -f"))  # the previous exercise's names
    run_in_smoke_mode(notebook, tmp_path, monkeypatch, kernel_manager=kernel_for(entry.notebook))
