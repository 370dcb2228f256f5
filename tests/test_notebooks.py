"""Every teaching notebook runs end to end in smoke mode, and none is committed with outputs.

Notebooks read ``SMOKE = "GLUON_BBB_SMOKE" in os.environ`` in their config cell; in smoke
mode they train for a few batches on a data subset, so the whole set runs in CI.
"""
import importlib.util
import json
import pathlib
import sys

import pytest

# nbformat and nbclient are imported where a test uses them: importing nbformat imports
# jsonschema, whose format checks take seconds to build, in every pytest-xdist worker that
# collects this file
pytestmark = pytest.mark.skipif(
    not all(importlib.util.find_spec(name) for name in ("nbformat", "nbclient")),
    reason="needs nbformat and nbclient (pip install -e .[test])")

NOTEBOOK_DIR = pathlib.Path(__file__).resolve().parent.parent / "notebooks"
NOTEBOOKS = sorted(NOTEBOOK_DIR.glob("*.ipynb"))
SMOKE_TIMEOUT_S = 300


def read_notebook(path):
    """The notebook at ``path``, as nbformat's version 4."""
    import nbformat
    return nbformat.read(str(path), as_version=4)


def notebook_json(path):
    """The notebook at ``path`` as plain dicts and lists, each cell's source one string (as
    nbformat reads it), without importing nbformat: for checks of its text."""
    with open(path, encoding="utf-8") as handle:
        notebook = json.load(handle)
    for cell in notebook["cells"]:
        if isinstance(cell["source"], list):
            cell["source"] = "".join(cell["source"])
    return notebook


def _ids(paths):
    return [path.name for path in paths]


def test_notebook_folder_is_not_empty():
    assert NOTEBOOKS, f"no notebooks found in {NOTEBOOK_DIR}"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_committed_without_outputs(path):
    notebook = read_notebook(path)
    dirty = [index for index, cell in enumerate(notebook.cells)
             if cell.cell_type == "code" and (cell.get("outputs") or cell.get("execution_count"))]
    assert not dirty, f"{path.name}: cells {dirty} hold outputs or execution counts; clear them"


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_every_cell_has_an_id(path):
    """nbformat 4.5 requires cell ids (a missing one is a warning now, an error later)."""
    with open(path, encoding="utf-8") as handle:
        cells = json.load(handle)["cells"]
    missing = [index for index, cell in enumerate(cells) if not cell.get("id")]
    assert not missing, f"{path.name}: cells {missing} have no id"


def _sync_install_cell():
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "sync_install_cell", NOTEBOOK_DIR.parent / "scripts" / "sync_install_cell.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_install_cells_and_colab_links_follow_the_one_setting():
    """Every notebook's first code cell is the install cell made from notebooks/install.json,
    and README.md and notebooks/README.md link every notebook to Colab through it."""
    sync = _sync_install_cell()
    assert sync.stale() == []
    readme = (NOTEBOOK_DIR.parent / "README.md").read_text(encoding="utf-8")
    repository, branch = sync.setting()
    for path in NOTEBOOKS:
        assert sync.colab_url(path.name) in readme
        assert sync.colab_url(path.name).endswith(f"/blob/{branch}/notebooks/{path.name}")
    assert f"git+{repository}@{branch}" in sync.install_cell_source()
    # the check finds a notebook whose cell went stale
    notebook = read_notebook(NOTEBOOKS[0])
    cell = next(c for c in notebook.cells if sync.TAG in c.metadata.get("tags", []))
    assert cell.source == sync.install_cell_source()
    cell.source = cell.source.replace("mxnet==1.9.1", "mxnet==1.9.0")  # a stale cell is rewritten
    fixed = sync.with_install_cell(notebook)
    assert [c.source for c in fixed.cells if sync.TAG in c.metadata.get("tags", [])] == \
        [sync.install_cell_source()]
    assert sync.TAG in next(c for c in fixed.cells if c.cell_type == "code").metadata["tags"]


def test_a_notebooks_own_needs_are_installed_where_missing(monkeypatch):
    """Notebook 10 needs statsmodels besides gluon_bbb (the others nothing more): where gluon_bbb
    is installed but statsmodels is not (a fresh environment, Binder), its install cell installs
    statsmodels alone."""
    import importlib.util
    import subprocess
    sync = _sync_install_cell()
    assert {path.stem: sync.needs(path.stem) for path in NOTEBOOKS if sync.needs(path.stem)} == \
        {"10_bayesian_rnn": ["statsmodels"]}
    calls, find_spec = [], importlib.util.find_spec
    monkeypatch.setattr(subprocess, "check_call", calls.append)
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *args: (
        None if name == "statsmodels" else find_spec(name, *args)))
    exec(compile(sync.install_cell_source("10_bayesian_rnn"), "install", "exec"), {})
    assert calls == [[sys.executable, "-m", "pip", "install", "-q", "statsmodels"]]
    calls.clear()
    exec(compile(sync.install_cell_source("02_bbb_gluon_mnist"), "install", "exec"), {})
    assert calls == []


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_has_one_config_cell_with_smoke_switch(path):
    notebook = read_notebook(path)
    config_cells = [cell for cell in notebook.cells
                    if cell.cell_type == "code" and "GLUON_BBB_SMOKE" in cell.source]
    assert len(config_cells) == 1, f"{path.name}: expected one config cell reading GLUON_BBB_SMOKE"


def run_in_smoke_mode(notebook, folder, monkeypatch, kernel_manager=None):
    """Execute ``notebook`` in smoke mode in ``folder``; raises CellExecutionError, naming the
    failing cell, on any error. A ``kernel_manager`` given is started on first use (in
    ``folder``, in smoke mode) and left running; tests/test_notebook_exercises.py runs the
    exercises with it."""
    monkeypatch.setenv("GLUON_BBB_SMOKE", "1")
    monkeypatch.setenv("MPLBACKEND", "Agg")
    monkeypatch.setenv("GLUON_BBB_DOCS", str(DOCS_DIR))  # records a notebook reads, not plays
    import nbclient
    client = nbclient.NotebookClient(
        notebook, km=kernel_manager, timeout=SMOKE_TIMEOUT_S, kernel_name="python3",
        resources={"metadata": {"path": str(folder)}})
    try:
        client.execute()
    finally:
        if kernel_manager is not None and client.kc is not None:
            client.kc.stop_channels()


@pytest.mark.parametrize("path", NOTEBOOKS, ids=_ids(NOTEBOOKS))
def test_runs_in_smoke_mode(path, tmp_path, monkeypatch):
    run_in_smoke_mode(read_notebook(path), tmp_path, monkeypatch)


#: Notebooks with a switch to the networks committed under results/ (USE_COMMITTED).
COMMITTED_NOTEBOOKS = [NOTEBOOK_DIR / "04_weight_densities.ipynb",
                       NOTEBOOK_DIR / "05_snr_pruning.ipynb"]
RESULTS_DIR = NOTEBOOK_DIR.parent / "results"
DOCS_DIR = NOTEBOOK_DIR.parent / "docs"


def run_on_committed_networks(notebook, monkeypatch, folder):
    """Execute ``notebook`` in smoke mode with USE_COMMITTED on, in ``folder``; what it printed."""
    from synthetic import require_mnist
    require_mnist()
    for name, value in (("GLUON_BBB_SMOKE", "1"), ("GLUON_BBB_USE_COMMITTED", "1"),
                        ("GLUON_BBB_RESULTS", str(RESULTS_DIR)), ("MPLBACKEND", "Agg")):
        monkeypatch.setenv(name, value)
    import nbclient
    nbclient.NotebookClient(notebook, timeout=SMOKE_TIMEOUT_S, kernel_name="python3",
                            resources={"metadata": {"path": str(folder)}}).execute()
    return "".join(output.get("text", "") for cell in notebook.cells
                   for output in cell.get("outputs", []))


@pytest.mark.parametrize("path", COMMITTED_NOTEBOOKS, ids=_ids(COMMITTED_NOTEBOOKS))
def test_runs_on_the_committed_networks(path, tmp_path, monkeypatch):
    """The switch loads the committed 2x1200 networks (smoke mode: a subset of the test set)."""
    printed = run_on_committed_networks(read_notebook(path), monkeypatch,
                                        tmp_path)
    assert "[1200, 1200] units" in printed  # the committed networks, not small ones trained here


def test_notebook_05_prunes_the_paper_protocols_network_at_the_end_of_training(monkeypatch):
    """The configuration cell's alternative: the 600-epoch network of the paper's protocol, as it
    ended training (the network the paper's Table 2 used)."""
    notebook = read_notebook(NOTEBOOK_DIR / "05_snr_pruning.ipynb")
    config = next(cell for cell in notebook.cells
                  if cell.cell_type == "code" and "GLUON_BBB_SMOKE" in cell.source)
    for old, new in (('COMMITTED = "searched-mixture-1200-seed1"',
                      'COMMITTED = "paper-600/bbb-mixture-1200-paper-s0"'),
                     ('COMMITTED_NETWORK = "best"', 'COMMITTED_NETWORK = "last"')):
        assert old in config.source
        config.source = config.source.replace(old, new)
    printed = run_on_committed_networks(notebook, monkeypatch, NOTEBOOK_DIR)
    assert "loaded paper-600/bbb-mixture-1200-paper-s0 ([1200, 1200] units, epoch 600)" in printed


def test_notebook_08_reads_the_recorded_bandit_runs(tmp_path, monkeypatch):
    """At full settings notebook 08 replays the committed 50,000-step runs (seed 0 and seed 2
    with the settings chosen on seed 1) and restores their Thompson agents; the switch does the
    same in smoke mode, in seconds."""
    for name, value in (("GLUON_BBB_SMOKE", "1"), ("GLUON_BBB_USE_RECORDED", "1"),
                        ("GLUON_BBB_DOCS", str(DOCS_DIR)), ("MPLBACKEND", "Agg")):
        monkeypatch.setenv(name, value)
    notebook = read_notebook(NOTEBOOK_DIR / "08_bandit.ipynb")
    import nbclient
    nbclient.NotebookClient(notebook, timeout=SMOKE_TIMEOUT_S, kernel_name="python3",
                            resources={"metadata": {"path": str(tmp_path)}}).execute()
    printed = "".join(output.get("text", "") for cell in notebook.cells
                      for output in cell.get("outputs", []))
    assert "bandit-tuned: 50,000 steps per agent, seed 0" in printed
    assert "sgd at 1e-06, rho initialised to [-7.0, -6.0]" in printed
    assert "bandit-tuned-s2: Thompson sampling (BBB) last ahead of the 0%-greedy agent at step " \
        "12,085 of 50,000" in printed


def test_notebook_seeds_sets_the_seed_of_the_config_cell_only():
    """scripts/notebook_seeds.py reruns a notebook per seed: it rewrites the one ``SEED = 0``
    line of the configuration cell, and refuses a notebook that has none."""
    import importlib.util
    spec = importlib.util.spec_from_file_location(
        "notebook_seeds", NOTEBOOK_DIR.parent / "scripts" / "notebook_seeds.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    notebook = read_notebook(NOTEBOOK_DIR / "10_bayesian_rnn.ipynb")
    before = [cell.source for cell in notebook.cells]
    module.with_seed(notebook, 3)
    changed = [i for i, cell in enumerate(notebook.cells) if cell.source != before[i]]
    assert len(changed) == 1 and "GLUON_BBB_SMOKE" in notebook.cells[changed[0]].source
    assert "\nSEED = 3" in notebook.cells[changed[0]].source
    assert "SEED = 0" not in notebook.cells[changed[0]].source
    with pytest.raises(ValueError, match="SEED = 0"):
        module.with_seed(notebook, 4)  # its line now reads SEED = 3
