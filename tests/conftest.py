"""Fixtures shared by several test modules."""
import pathlib
import sys
import types

import pytest

# The tests sit in folders named after the package's parts; a few import helpers and fixtures
# from a test module of another folder (test_sparse_weights from test_pruning and
# test_fuzz_readers), so every folder is importable whatever the order of collection.
_TESTS = pathlib.Path(__file__).resolve().parent
sys.path[:0] = [str(folder) for folder in sorted(_TESTS.iterdir())
                if folder.is_dir() and folder.name != "__pycache__" and str(folder) not in sys.path]

from synthetic import write_dataset


@pytest.fixture(scope="session")
def fake_mnist(tmp_path_factory):
    """A folder of MNIST-shaped IDX files of random pixels: 10,100 training images (so the
    paper's split keeps 10,000 for validation and ``--subset`` takes the first few of each
    split) and 100 test images. Nothing can be learnt from them: they are for tests of files,
    folders and processes, not of accuracy."""
    folder = tmp_path_factory.mktemp("fake-mnist")
    write_dataset(folder, n_train=10100, n_test=100, gz=False, seed=0)
    return folder


@pytest.fixture
def kernel(monkeypatch):
    """A Jupyter kernel as :func:`gluon_bbb.epochs.in_notebook` sees one: IPython's shell is an
    instance of ipykernel's ZMQInteractiveShell (a stand-in class: no kernel is started)."""
    from gluon_bbb.epochs import in_notebook
    ipython = pytest.importorskip("IPython")
    zmqshell = types.ModuleType("ipykernel.zmqshell")

    class ZMQInteractiveShell:
        pass

    zmqshell.ZMQInteractiveShell = ZMQInteractiveShell
    monkeypatch.setitem(sys.modules, "ipykernel.zmqshell", zmqshell)
    monkeypatch.setattr(ipython, "get_ipython", ZMQInteractiveShell)
    assert in_notebook()


@pytest.fixture
def no_ipywidgets(monkeypatch):
    """The kernel lacks ipywidgets: tqdm.notebook imports, without a widget to draw."""
    import tqdm.notebook
    monkeypatch.setattr(tqdm.notebook, "IProgress", None)


#: Test tiers (markers declared in pytest.ini). ``pytest`` runs the quick tier: every test but
#: those of :data:`FULL_ONLY_TIERS`; ``pytest --full`` runs every tier, as CI does (README, "Tests").
MODULE_TIERS = {
    "test_notebooks.py": ("notebooks",),
    "test_book.py": ("book", "real_data"),
    "test_jupyterlab.py": ("browser",),
    "test_results.py": ("real_data",),
    "test_crash.py": ("slow",),
    "test_long_run.py": ("slow",),
    "test_fuzz_readers.py": ("slow",),
}
#: Single tests of tens of seconds: statistical checks with many samples, real worker processes.
SLOW_TESTS = ("test_fused_path_agrees_with_the_pure_path_in_expectation",
              "test_expected_gradient_equals_weight_sampling", "test_the_statistic_finds_a_wrong_estimator",
              "test_a_killed_workers_trial_is_retried_and_resumes_its_folder",
              "test_two_workers_share_one_sqlite_study_and_run_each_grid_point_once")


#: The tiers ``pytest`` leaves out unless given ``--full`` (or a ``-m`` of its own, or the tests to
#: run): tests of tens of seconds, the book, and those that start a database server or a browser.
FULL_ONLY_TIERS = ("slow", "book", "postgres", "browser")


def pytest_addoption(parser):
    parser.addoption("--full", action="store_true",
                     help="run every tier, as CI does; without it, and without -m or named tests, "
                          f"pytest leaves out the tiers {', '.join(FULL_ONLY_TIERS)}")


def _runs_the_quick_tier(config):
    """Whether this session is a plain ``pytest``: no --full, no -m, no tests named."""
    return (not config.getoption("--full") and not config.option.markexpr
            and config.args_source != pytest.Config.ArgsSource.ARGS)


def pytest_collection_modifyitems(config, items):
    for item in items:
        for tier in MODULE_TIERS.get(item.path.name, ()):
            item.add_marker(tier)
        if item.originalname in SLOW_TESTS:
            item.add_marker("slow")
        if "postgres" in getattr(item, "fixturenames", ()):
            item.add_marker("postgres")
        if any(mark.name == "skipif" and "mnist/" in str(mark.kwargs.get("reason", ""))
               for mark in item.iter_markers()):
            item.add_marker("real_data")
    if _runs_the_quick_tier(config):
        full_only = [any(item.get_closest_marker(tier) for tier in FULL_ONLY_TIERS) for item in items]
        quick = [item for item, left in zip(items, full_only) if not left]
        left_out = [item for item, left in zip(items, full_only) if left]
        if left_out:
            config.hook.pytest_deselected(items=left_out)
            items[:] = quick


def pytest_report_header(config):
    if _runs_the_quick_tier(config):
        return (f"the quick tier: the tiers {', '.join(FULL_ONLY_TIERS)} are left out "
                "(pytest --full runs every test)")
    return None
