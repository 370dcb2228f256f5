"""Fixtures shared by several test modules, and the tiers."""
import os
import pathlib
import sys
import types

# Under pytest-xdist each worker takes its share of the cores for MXNet's and OpenMP's threads
# (unless OMP_NUM_THREADS is set): two workers of two threads each on two cores would contend.
if os.environ.get("PYTEST_XDIST_WORKER_COUNT"):
    os.environ.setdefault("OMP_NUM_THREADS", str(max(
        1, (os.cpu_count() or 1) // int(os.environ["PYTEST_XDIST_WORKER_COUNT"]))))

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
    "test_peer_state.py": ("peer",),
    "test_crash.py": ("slow",),
    "test_long_run.py": ("slow",),
    "test_fuzz_readers.py": ("slow",),
}
#: Single tests of many seconds: statistical checks with many samples, long runs that watch the
#: heap (as test_long_run.py's do), real worker processes and fresh interpreters, the benchmark.
SLOW_TESTS = ("test_fused_path_agrees_with_the_pure_path_in_expectation",
              "test_expected_gradient_equals_weight_sampling", "test_the_statistic_finds_a_wrong_estimator",
              "test_a_killed_workers_trial_is_retried_and_resumes_its_folder",
              "test_two_workers_share_one_sqlite_study_and_run_each_grid_point_once",
              "test_two_processes_fetching_at_once_download_once",
              "test_ten_draws_a_step_hold_no_more_memory_as_they_go",
              "test_least_squares_interval_covers_new_targets_only_with_the_parameter_uncertainty",
              "test_noise_does_not_depend_on_the_number_of_threads",
              "test_gluon_bbb_imports_where_fcntl_does_not_exist",
              "test_quick_mode_writes_a_valid_record",
              # CI runs its file by name on every Python (.ci/run)
              "test_after_the_stand_ins_mxnet_reads_no_missing_numpy_name",
              # the notebooks executed (each a kernel; CI's 3.12 runs notebook 07 by name, its
              # 3.13 notebooks 02, 08 and 10 as Colab meets them); their structure stays quick
              "test_runs_in_smoke_mode", "test_runs_on_the_committed_networks",
              "test_notebook_05_prunes_the_paper_protocols_network_at_the_end_of_training",
              "test_notebook_08_reads_the_recorded_bandit_runs")


#: The tests that run the PyTorch peer (besides test_peer_state.py): PyTorch is installed only
#: with the peer extra, which CI installs for Python 3.11's ``pytest --full`` alone.
PEER_TESTS = ("test_the_pytorch_peer_resumes_bit_for_bit_and_names_a_bad_checkpoint",
              "test_the_pytorch_peers_complexity_gradient_matches_a_float64_reference",
              "test_the_stacked_peers_step_is_each_seeds_own_step",
              "test_a_stacked_seed_runs_alike_alone_or_stacked_and_resumes_bit_for_bit",
              "test_paired_continuations_run_resume_and_compare")


_FINITE_DIFFERENCES = "test_recurrent.py::test_gradient_matches_central_differences_with_the_noise_held"


#: Tests that leave the quick tier for ``pytest --full`` although they are quick enough: each
#: takes a path that a test of the quick tier takes too, named as its value (``file::test``, a
#: parametrized case with its id in brackets; a key without brackets moves every case). The
#: quick tier keeps one representative of each group that starts interpreters, kernels or
#: re-scores the committed networks. Every session that collects every test (``pytest``,
#: ``pytest --full``) checks that each key and each representative names a collected test and
#: that the representatives stay in the quick tier.
REPRESENTED = {
    # the committed networks re-scored on the real test sets: one of each kind stays quick (the
    # 2x1200 networks are scored as the 2x400 ones are, and a Gaussian prior's as a mixture's: by
    # the same code, the prior playing no part in a score)
    **{f"test_results.py::test_committed_checkpoint_reproduces_its_recorded_test_error[{name}]":
       "test_results.py::test_committed_checkpoint_reproduces_its_recorded_test_error"
       f"[{kind}]"
       for name, kind in (("bbb-mixture-400-ls8-kl0.3-s2", "bbb-mixture-400"),
                          ("bbb-mixture-400-ls8", "bbb-mixture-400"),
                          ("bbb-mixture-400-s2", "bbb-mixture-400"),
                          ("bbb-mixture-400-lrdecay", "bbb-mixture-400"),
                          ("bbb-gaussian-400-lrdecay", "bbb-mixture-400"),
                          ("bbb-gaussian-400", "bbb-mixture-400"),
                          ("bbb-mixture-lenet", "fashion-bbb-mixture-400-kl0.1"),
                          ("fashion-bbb-mixture-lenet", "fashion-bbb-mixture-400-kl0.1"),
                          ("bbb-mixture-lenet-kl0.1", "fashion-bbb-mixture-400-kl0.1"),
                          ("searched-mixture-400-seed1", "bbb-mixture-400"),
                          ("searched-mixture-1200-seed0", "bbb-mixture-400"),
                          ("searched-mixture-1200-seed1", "bbb-mixture-400"),
                          ("searched-gaussian-1200-seed1", "bbb-mixture-400"),
                          ("paper-600/bbb-mixture-1200-paper-s0", "paper-600/bbb-mixture-400-paper-s1"),
                          ("paper-600/bbb-mixture-400-paper-rho4-s0",
                           "paper-600/bbb-mixture-400-paper-s1"))},
    **{f"test_results.py::test_committed_baseline_reproduces_its_recorded_test_error[{name}]":
       f"test_results.py::test_committed_baseline_reproduces_its_recorded_test_error[{kind}]"
       for name, kind in (("dropout-400", "sgd-400"), ("dropout-lenet", "sgd-lenet"),
                          ("fashion-sgd-lenet", "sgd-lenet"), ("fashion-dropout-lenet", "sgd-lenet"),
                          ("searched-sgd-1200-seed1", "sgd-400"),
                          ("searched-dropout-1200-seed1", "sgd-400"))},
    **{f"test_results.py::test_committed_pruning_table_reproduces[{name}]":
       "test_results.py::test_committed_pruning_table_reproduces[bbb-mixture-400-s2]"
       for name in ("searched-mixture-1200-seed0", "searched-mixture-1200-seed1",
                    "paper-600/bbb-mixture-1200-paper-s0")},
    # statistical checks of many samples: the exact references take the same code
    "test_loss.py::test_the_monte_carlo_complexity_averages_to_the_closed_form":
        "test_loss.py::test_loss_matches_numpy_eq8",
    "test_diagonal_prior.py::test_the_monte_carlo_complexity_averages_to_the_closed_form":
        "test_diagonal_prior.py::test_closed_form_kl_matches_the_float64_reference_and_vanishes_at_the_prior",
    # recurrent gradients by finite differences: every network stays quick on the fused path,
    # hybridized; the pure-MXNet path on each cell's one-layer network, hybridized and imperative
    # (the sampling path acts on each parameter alike, whatever the network's layout; imperative
    # with two directions or two layers takes seconds a case: MXNet runs the network op by op)
    **{f"{_FINITE_DIFFERENCES}[{moved}]": f"{_FINITE_DIFFERENCES}[{kept}]"
       for moved, kept in (("lstm-2-bi-stacked-imperative-mxnet", "lstm-2-bi-stacked-hybridized-fused"),
                           ("lstm-2-bi-stacked-hybridized-mxnet", "lstm-2-bi-stacked-hybridized-fused"),
                           ("lstm-1-bi-imperative-mxnet", "lstm-1-imperative-mxnet"),
                           ("gru-1-bi-imperative-mxnet", "gru-1-imperative-mxnet"),
                           ("gru-2-stacked-imperative-mxnet", "gru-1-imperative-mxnet"),
                           ("lstm-1-bi-hybridized-mxnet", "lstm-1-bi-hybridized-fused"),
                           ("gru-1-bi-hybridized-mxnet", "gru-1-bi-hybridized-fused"),
                           ("gru-2-stacked-hybridized-mxnet", "gru-2-stacked-hybridized-fused"))},
    # K draws a step resumed bit for bit: the pure path's batched pass is compared with its loop
    # in the quick tier (test_the_batched_pass_equals_the_loop), its resume under --full
    "test_batched_draws.py::test_resume_with_several_draws_is_exact[mxnet]":
        "test_batched_draws.py::test_resume_with_several_draws_is_exact[fused]",
    # the startup hook in fresh interpreters: one stays quick
    **{f"test_mxcompat_hook.py::{name}":
       "test_mxcompat_hook.py::test_the_hook_applies_the_stand_ins_when_mxnet_executes"
       for name in ("test_a_gluon_bbb_folder_in_the_working_directory_does_not_break_import_mxnet",
                    "test_the_namespace_folder_is_not_read_where_the_package_is_installed",
                    "test_looking_mxnet_up_imports_and_changes_nothing",
                    "test_a_startup_file_left_behind_is_silent_and_changes_nothing",
                    "test_any_error_leaves_mxnet_as_without_gluon_bbb_with_one_warning",
                    "test_the_switch_keeps_the_hook_unimported",
                    "test_a_checkout_on_the_path_keeps_its_own_compatibility_module")},
    # the fused operator's kept noise, the scenarios in one process per engine: every scenario
    # stays quick on MXNet's default engine
    **{f"test_fused.py::test_kept_noise_is_read_only_by_the_backward_pass_of_its_own_draw"
       f"[{scenario}-NaiveEngine]":
       "test_fused.py::test_kept_noise_is_read_only_by_the_backward_pass_of_its_own_draw"
       f"[{scenario}-ThreadedEnginePerDevice]"
       for scenario in ("same-key", "reseeded", "kept-then-not-kept", "float32-then-float64")},
    # the locks across processes (the run lock and the fetch lock are one implementation,
    # gluon_bbb.io.locks); the command line in a fresh interpreter
    "test_runlock.py::test_search_trials_take_the_lock":
        "test_runlock.py::test_writing_commands_exit_2_on_a_folder_another_process_writes",
    "test_fetch.py::test_the_fetch_lock_of_a_killed_holder_is_free_at_once":
        "test_runlock.py::test_the_lock_is_released_when_the_holder_is_killed",
    "test_cli.py::test_python_dash_m_help":
        "test_cli.py::test_python_dash_m_exit_code_without_traceback",
}


#: The tiers ``pytest`` leaves out unless given ``--full`` (or a ``-m`` of its own, or the tests to
#: run): tests of tens of seconds, the book, those that start a database server or a browser,
#: those whose path a quick test takes too (:data:`REPRESENTED`) and the PyTorch peer's.
FULL_ONLY_TIERS = ("slow", "book", "postgres", "browser", "represented", "peer")


def pytest_addoption(parser):
    parser.addoption("--full", action="store_true",
                     help="run every tier, as CI does; without it, and without -m or named tests, "
                          f"pytest leaves out the tiers {', '.join(FULL_ONLY_TIERS)}")
    parser.addoption("--network", action="store_true",
                     help="also run the tests marked network, which request every public data "
                          "source over the internet (not even --full runs them)")


def _runs_the_quick_tier(config):
    """Whether this session is a plain ``pytest``: no --full, no -m, no tests named."""
    return (not config.getoption("--full") and not config.option.markexpr
            and config.args_source != pytest.Config.ArgsSource.ARGS)


def _names(item):
    """The keys of :data:`REPRESENTED` that name ``item``: its case and its test."""
    return (f"{item.path.name}::{item.name}", f"{item.path.name}::{item.originalname}")


def _full_only(item):
    return any(item.get_closest_marker(tier) for tier in FULL_ONLY_TIERS)


def _check_representatives(items):
    """Every key of :data:`REPRESENTED` names a collected test, and every representative one
    that the quick tier runs; a stale name (a test renamed, a case gone) stops the session."""
    collected = {name: item for item in items for name in _names(item)}
    problems = [f"REPRESENTED names {key}, which is not collected"
                for key in REPRESENTED if key not in collected]
    for key, representative in REPRESENTED.items():
        runs = [item for item in items if representative in _names(item)]
        if not runs:
            problems.append(f"the representative {representative} of {key} is not collected")
        elif all(_full_only(item) for item in runs):
            problems.append(f"the representative {representative} of {key} is not in the quick tier")
    if problems:
        raise pytest.UsageError("tests/conftest.py: " + "; ".join(problems))


#: The order in which pytest-xdist hands whole files to its workers (pytest.ini: ``--dist
#: loadfile --no-loadscope-reorder``): files holding the heaviest tiers first, so that none is
#: left to one worker at the end while the other idles; files of one rank keep their order.
HEAVY_FIRST = ("book", "notebooks", "browser", "slow", "postgres", "real_data")


def _heaviness(item):
    return next((rank for rank, tier in enumerate(HEAVY_FIRST) if item.get_closest_marker(tier)),
                len(HEAVY_FIRST))


def pytest_collection_modifyitems(config, items):
    offline = pytest.mark.skip(reason="requests the internet: pytest --network runs it")
    for item in items:
        if item.get_closest_marker("network") and not config.getoption("--network"):
            item.add_marker(offline)
        for tier in MODULE_TIERS.get(item.path.name, ()):
            item.add_marker(tier)
        if item.originalname in SLOW_TESTS:
            item.add_marker("slow")
        if item.originalname in PEER_TESTS:
            item.add_marker("peer")
        if "postgres" in getattr(item, "fixturenames", ()):
            item.add_marker("postgres")
        if any(mark.name == "skipif" and "mnist/" in str(mark.kwargs.get("reason", ""))
               for mark in item.iter_markers()):
            item.add_marker("real_data")
        if any(name in REPRESENTED for name in _names(item)):
            item.add_marker("represented")
    if (not config.option.markexpr and not config.option.keyword
            and config.args_source != pytest.Config.ArgsSource.ARGS):
        _check_representatives(items)
    if _runs_the_quick_tier(config):
        full_only = [_full_only(item) for item in items]
        quick = [item for item, left in zip(items, full_only) if not left]
        left_out = [item for item, left in zip(items, full_only) if left]
        if left_out:
            config.hook.pytest_deselected(items=left_out)
            items[:] = quick
    rank = {}
    for item in items:
        rank[item.path] = min(rank.get(item.path, len(HEAVY_FIRST)), _heaviness(item))
    items.sort(key=lambda item: rank[item.path])  # stable: each file's tests keep their order


def pytest_report_header(config):
    if _runs_the_quick_tier(config):
        return (f"the quick tier: the tiers {', '.join(FULL_ONLY_TIERS)} are left out "
                "(pytest --full runs every test)")
    return None
