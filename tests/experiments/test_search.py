"""The hyperparameter search on Optuna (gluon_bbb.experiments.search, ``gluon-bbb search``):
SQLite with two worker processes, a killed worker's trial retried and resumed, pruning, a real
PostgreSQL server, bad storage URLs, and the report. On the random fake MNIST (nothing is
learnt): these are tests of the machinery, not of accuracy."""
import contextlib
import io
import json
import logging
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import zipfile

import optuna
import pytest
import sqlalchemy.exc

from gluon_bbb.cli import main
from gluon_bbb.experiments import search, search_report
from gluon_bbb.experiments.runlock import meet_workers
from gluon_bbb.experiments.configs import EXTRA_KEYS, PAPER_GRID, SEARCH_KEYS
from gluon_bbb.experiments.wording import parse_setting

SMALL = ["--hidden", "8", "--subset", "64", "--num-samples", "1", "--pi", "0.5",
         "--neg-log-sigma1", "0", "--no-progress"]


def _search_args(out, data, *extra):
    return ["search", "--output-dir", str(out), "--data-dir", str(data)] + SMALL + list(extra)


def _study(out, storage=None):
    return search_report.load_search(str(out), storage)


def _trials(out, storage=None):
    return _study(out, storage).get_trials(deepcopy=False)


# ---------------------------------------------------------------------------- the space
def test_the_default_space_is_the_papers_grid():
    space = search.search_space()
    assert space == {key: list(values) for key, values in PAPER_GRID.items()}
    assert len(search.grid_settings()) == 3 * 4 * 3 * 3 * 3 == 324
    space = search.search_space(optimizer=["adam", "sgd"], lr_decay=[1.0, 0.98])
    assert list(space)[-2:] == ["optimizer", "lr_decay"]
    setting = dict(lr=1e-3, num_samples=2, pi=0.25, neg_log_sigma1=1.0, neg_log_sigma2=7.0,
                   optimizer="sgd", lr_decay=0.98)
    assert search.trial_name(setting) == "lr0.001_samples2_pi0.25_logsigma1-1_logsigma2-7_sgd_decay0.98"
    grid = search.grid_settings({"neg_log_sigma1": [0.0, 6.0], "neg_log_sigma2": [6.0, 7.0]})
    assert all(s["neg_log_sigma2"] > s["neg_log_sigma1"] for s in grid)  # invalid priors left out
    assert len(grid) == 3 * 4 * 3 * 3


@pytest.mark.parametrize("kwargs, message", [
    ({"space": {"pi": [0.5]}, "base": "bbb-gaussian-400"}, "a gaussian configuration"),
    ({"space": {"pi": [0.5]}, "base": "sgd-400"}, "has no search keys neg_log_sigma1, neg_log_sigma2, num_samples, pi"),
    ({"space": {"lr": [0.1]}, "base": "sgd-401"}, "unknown base configuration"),
    ({"space": {"lr": [0.1]}, "sampler": "tpe"}, "needs a number of trials"),
    ({"space": {"lr": [0.1]}, "overrides": {"lr": 0.1}}, "both searched and overridden"),
    ({"space": {"lr": [0.1]}, "pruner": "asha"}, "pruner one of hyperband"),
])
def test_bad_searches_are_refused_before_anything_is_written(kwargs, message):
    kwargs = dict(kwargs)
    space = search.search_space(**kwargs.pop("space"))
    with pytest.raises(ValueError, match=message):
        search.study_settings(space, 1, **kwargs)


@pytest.mark.parametrize("values, message", [({"lr": [-1.0]}, "lr must be a positive"),
                                             ({"lr": [1e-3, 1e-3]}, "distinct"),
                                             ({"momentum": [0.9]}, "unknown search keys"),
                                             ({"optimizer": ["bogus"]}, "unknown optimizer")])
def test_bad_spaces_are_refused(values, message):
    with pytest.raises(ValueError, match=message):
        search.search_space(**values)


def test_every_method_of_table_1_has_its_own_space():
    assert search.search_kind("bbb-mixture-1200") == "scale-mixture"
    assert search.search_kind("bbb-gaussian-800") == "gaussian"
    assert search.search_kind("sgd-800") == "sgd" and search.search_kind("dropout-1200") == "dropout"
    # only the mixture has a default space (the paper's grid); the others search what is given
    assert search.search_space("sgd-800", lr=[0.1, 0.03]) == {"lr": [0.1, 0.03]}
    with pytest.raises(ValueError, match="varies nothing"):
        search.search_space("dropout-800")
    with pytest.raises(ValueError, match="unknown search keys"):
        search.search_space("sgd-800", dropout=[0.5])  # that is the dropout baseline
    with pytest.raises(ValueError, match="momentum must be a number in"):
        search.search_space("sgd-800", momentum=[1.0])
    space = search.search_space("dropout-1200", dropout=[0.5, 0.3], lr_decay=[0.98],
                                momentum=[0.9], lr=[0.1])
    assert list(space) == ["lr", "momentum", "dropout", "lr_decay"]  # SPACE_KEYS order
    grid = search.grid_settings(space, "dropout-1200")
    assert len(grid) == 2
    assert search.trial_name(grid[0]) == "lr0.1_momentum0.9_dropout0.5_decay0.98"
    gaussian = search.grid_settings({"sigma": [1.0, 0.1], "num_samples": [1, 2]},
                                    "bbb-gaussian-400")
    assert search.trial_name(gaussian[-1]) == "samples2_sigma0.1"
    assert len(gaussian) == 4


def test_momentum_is_for_the_optimizers_that_take_it():
    from gluon_bbb.experiments import get_config
    assert get_config("sgd-400", momentum=0.9)["momentum"] == 0.9
    with pytest.raises(ValueError, match="momentum applies to the optimizers sgd, nag"):
        get_config("sgd-400", momentum=0.9, optimizer="adam")


# ---------------------------------------------------------------------------- SQLite
def test_two_workers_share_one_sqlite_study_and_run_each_grid_point_once(tmp_path, fake_mnist,
                                                                          capsys):
    out = tmp_path / "search"
    args = _search_args(out, fake_mnist, "--epochs", "2", "--lr", "1e-3", "1e-2",
                        "--neg-log-sigma2", "6", "7", "8", "--pruner", "none", "--workers", "2")
    assert main(args) == 0
    assert "6 trials (6 complete)" in capsys.readouterr().out
    trials = _trials(out)
    settings = [tuple(sorted(t.params.items())) for t in trials]
    assert len(trials) == 6 and len(set(settings)) == 6  # every grid point once
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in trials)
    workers = {t.user_attrs["worker"] for t in trials}
    assert len(workers) == 2, workers  # both workers ran trials
    for trial in trials:  # every trial is an ordinary run folder, the test set untouched
        folder = out / trial.user_attrs["folder"]
        assert json.loads((folder / "config.json").read_text())["lr"] == trial.params["lr"]
        assert (folder / "best.bbb").is_file() and not (folder / "result.json").exists()
        assert trial.value == min(trial.intermediate_values.values())
        assert sorted(trial.intermediate_values) == [1, 2]
    # running the command again finds nothing to do
    assert main(args[:-2]) == 0
    assert len(_trials(out)) == 6


def test_a_killed_workers_trial_is_retried_and_resumes_its_folder(tmp_path, fake_mnist):
    out = tmp_path / "search"
    args = _search_args(out, fake_mnist, "--epochs", "200", "--lr", "1e-3", "--neg-log-sigma2", "6",
                        "--pruner", "none", "--heartbeat", "1")
    command = [sys.executable, "-m", "gluon_bbb"] + args
    worker = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              env=dict(os.environ, OMP_NUM_THREADS="1"))
    trial_dir = out / "trials" / "lr0.001_samples1_pi0.5_logsigma1-0_logsigma2-6"
    deadline = time.time() + 120
    while not (trial_dir / "best.bbb").exists():  # an epoch done
        assert worker.poll() is None and time.time() < deadline
        time.sleep(0.05)
    worker.send_signal(signal.SIGKILL)
    worker.wait()
    (first,) = _trials(out)
    assert first.state == optuna.trial.TrialState.RUNNING  # as the dead worker left it
    done = len(first.intermediate_values)  # the kill may come between checkpoint and report
    assert done < 200

    assert main(args) == 0  # a new worker: waits out the grace period, then retries
    failed, retried = _trials(out)
    assert failed.state == optuna.trial.TrialState.FAIL
    assert retried.state == optuna.trial.TrialState.COMPLETE
    assert search_report.trial_rows(_study(out))[1]["retry_of"] == failed.number
    assert retried.params == failed.params
    assert sorted(retried.intermediate_values) == list(range(1, 201))
    sessions = json.loads((trial_dir / "sessions.json").read_text())
    assert sessions[-1]["epochs_before"] >= max(done, 1)  # resumed, not restarted
    assert sessions[-1]["epochs_after"] == 200


class _PruneAfterTwo(optuna.pruners.BasePruner):
    def prune(self, study, trial):
        return len(trial.intermediate_values) >= 2


def test_a_pruned_trial_stops_with_its_folder_complete(tmp_path, fake_mnist):
    out = tmp_path / "search"
    out.mkdir()
    space = search.search_space(lr=[1e-3], num_samples=[1], pi=[0.5], neg_log_sigma1=[0.0],
                                neg_log_sigma2=[6.0])
    settings = search.study_settings(space, 5, overrides={"hidden": [8], "subset": 64},
                                     pruner="none")
    storage = search.open_storage(search.storage_url(str(out)), heartbeat_interval=5)
    study = optuna.create_study(storage=storage, study_name=search.STUDY_NAME,
                                pruner=_PruneAfterTwo())
    study.enqueue_trial(search.grid_settings(space)[0])
    study.set_user_attr("settings", settings)
    assert search.work(study, storage, str(out), data_dir=str(fake_mnist)) == 1
    (trial,) = study.get_trials()
    assert trial.state == optuna.trial.TrialState.PRUNED
    folder = out / trial.user_attrs["folder"]
    sessions = json.loads((folder / "sessions.json").read_text())
    assert sessions[-1]["outcome"] == "stopped by TrialPruned"
    assert sessions[-1]["epochs_after"] == 2 and (folder / "best.bbb").is_file()


def test_the_report_evaluates_the_best_trial_once_and_draws_the_figures(tmp_path, fake_mnist,
                                                                          capsys):
    out = tmp_path / "search"
    assert main(_search_args(out, fake_mnist, "--epochs", "2", "--lr", "1e-3", "1e-2", "3e-3",
                             "--neg-log-sigma2", "6", "--sampler", "random", "--max-trials", "3",
                             "--pruner", "median")) == 0
    assert len({t.params["lr"] for t in _trials(out)}) == 3
    capsys.readouterr()
    assert main(["search-report", str(out), "--mc-samples", "2", "--data-dir",
                 str(fake_mnist)]) == 0
    printed = capsys.readouterr().out
    text = (out / "search.md").read_text()
    assert text in printed and "re-evaluated once on the test set" in text
    rows = search_report.trial_rows(_study(out))
    best = min((r for r in rows if r["value"] is not None), key=lambda r: (r["value"], r["number"]))
    result = json.loads((out / best["folder"] / "result.json").read_text())
    assert f"{100 * result['test_error_mean']:.2f}% (posterior mean)" in text
    evaluated = [r["folder"] for r in rows if (out / r["folder"] / "result.json").exists()]
    assert evaluated == [best["folder"]] * evaluated.count(best["folder"])  # the best only
    for name in search_report.FIGURES.values():
        assert (out / name).read_bytes().startswith(b"\x89PNG"), name
    sessions = [s for folder in (out / "trials").iterdir()
                for s in json.loads((folder / "sessions.json").read_text())]
    epochs = sum(s["epochs_after"] - s["epochs_before"] for s in sessions)
    # the study agrees: a repeated setting reports its folder's epochs again without training
    assert epochs == sum(row["epochs_reported"] for row in rows if row["repeat_of"] is None)
    seconds = sum(s["seconds"] for s in sessions)
    assert (f"Training time, summed over the trials: {seconds:,.0f} s for {epochs} epochs."
            in text)


def test_a_bad_session_record_of_a_trial_is_one_line(tmp_path, fake_mnist, capsys):
    out = tmp_path / "search"
    assert main(_search_args(out, fake_mnist, "--epochs", "1", "--lr", "1e-3",
                             "--neg-log-sigma2", "6", "--pruner", "none")) == 0
    [folder] = (out / "trials").iterdir()
    sessions = json.loads((folder / "sessions.json").read_text())
    sessions[0]["seconds"] = "12 s"
    (folder / "sessions.json").write_text(json.dumps(sessions))
    capsys.readouterr()
    assert main(["search-report", str(out), "--data-dir", str(fake_mnist)]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "sessions.json" in err and "'seconds'" in err


@pytest.mark.parametrize("base, keys, folder_files", [
    ("dropout-400", ["--lr", "0.1", "0.05", "--momentum", "0", "0.9", "--dropout", "0.5"],
     ("best.params", "checkpoint.ckpt")),
    # sigma e^-1 with all its digits: --print-best must give back exactly the trial's value
    ("bbb-gaussian-400", ["--sigma", "1", "0.36787944117144233"], ("best.bbb", "checkpoint.bbb")),
])
def test_the_baselines_and_the_gaussian_prior_are_searched_alike(base, keys, folder_files,
                                                                   tmp_path, fake_mnist, capsys):
    out = tmp_path / "search"
    args = ["search", "--base", base, "--output-dir", str(out), "--data-dir", str(fake_mnist),
            "--hidden", "8", "--subset", "64", "--no-progress", "--epochs", "2",
            "--pruner", "none"] + keys
    assert main(args) == 0
    trials = _trials(out)
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in trials)
    assert len(trials) == (4 if base.startswith("dropout") else 2)
    for trial in trials:  # every trial trained its own setting in an ordinary run folder
        folder = out / trial.user_attrs["folder"]
        config = json.loads((folder / "config.json").read_text())
        assert config["reproduce"] == base and config["hidden"] == [8]
        for key, value in trial.params.items():
            assert config[key] == value, key
        assert all((folder / name).is_file() for name in folder_files)
        assert sorted(trial.intermediate_values) == [1, 2]
        history = json.loads((folder / "sessions.json").read_text())[-1]
        assert history["epochs_after"] == 2
    capsys.readouterr()
    assert main(["search-report", str(out), "--print-best"]) == 0  # for 'reproduce --set'
    printed = capsys.readouterr().out.strip()
    best = min((t for t in trials), key=lambda t: (t.value, t.number))
    assert parse_setting(printed, SEARCH_KEYS + EXTRA_KEYS) == best.params
    assert not list(out.glob("trials/*/result.json"))  # the test set untouched
    assert main(["search-report", str(out), "--mc-samples", "2", "--data-dir",
                 str(fake_mnist), "--no-figures"]) == 0
    text = (out / "search.md").read_text()
    assert f"# Search of {base}, hidden=[8], subset=64" in text
    assert ("(posterior mean)" in text) == base.startswith("bbb")
    assert "re-evaluated once on the test set" in text


def test_a_diverging_setting_fails_its_trial_and_the_search_goes_on(tmp_path, fake_mnist):
    out = tmp_path / "search"
    assert main(["search", "--base", "sgd-400", "--output-dir", str(out), "--data-dir",
                 str(fake_mnist), "--hidden", "8", "--subset", "64", "--no-progress",
                 "--epochs", "4", "--pruner", "none", "--lr", "1e38", "0.1"]) == 0
    states = {t.params["lr"]: (t.state, t.user_attrs.get("error", "")) for t in _trials(out)}
    assert states[0.1][0] == optuna.trial.TrialState.COMPLETE
    assert states[1e38][0] == optuna.trial.TrialState.FAIL
    assert "not finite" in states[1e38][1]


def test_a_sampled_search_counts_distinct_settings_and_stops_when_the_space_is_spent(
        tmp_path, fake_mnist):
    """Random and TPE draw with replacement: a setting drawn again replays its run folder and
    does not count, and a budget larger than the space stops once every setting is tried."""
    out = tmp_path / "search"
    assert main(_search_args(out, fake_mnist, "--epochs", "1", "--lr", "1e-3", "1e-2", "3e-3",
                             "--neg-log-sigma2", "6", "--sampler", "random", "--max-trials", "5",
                             "--pruner", "none", "--search-seed", "0")) == 0
    trials = _trials(out)
    settings = [t.params["lr"] for t in trials]
    assert sorted(set(settings)) == [1e-3, 3e-3, 1e-2]  # the whole space, then it stopped
    assert len(trials) > 3  # this seed draws a setting again: the repeat did not count
    assert settings[-1] not in settings[:-1]  # the last trial was the one that completed it
    assert len(list((out / "trials").iterdir())) == 3
    assert all(t.state == optuna.trial.TrialState.COMPLETE for t in trials)
    rows = search_report.trial_rows(_study(out))  # the report names what each repeat repeats
    first = {}
    for row in rows:
        assert row["repeat_of"] == first.get(row["lr"])
        first.setdefault(row["lr"], row["number"])
    table = search_report.search_table(rows, _study(out).user_attrs["settings"]["space"])
    assert "| retry of | repeat of |" in table


def test_another_search_in_the_same_folder_is_refused(tmp_path, fake_mnist, capsys):
    out = tmp_path / "search"
    assert main(_search_args(out, fake_mnist, "--epochs", "1", "--lr", "1e-3",
                             "--neg-log-sigma2", "6")) == 0
    capsys.readouterr()
    assert main(_search_args(out, fake_mnist, "--epochs", "2", "--lr", "1e-3",
                             "--neg-log-sigma2", "6")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "searches something else (epochs: 1 there, 2 now)" in err[0]


# ---------------------------------------------------------------------------- bad storage
@pytest.mark.parametrize("url, message", [
    ("bogus://nowhere", "cannot open the study storage bogus://nowhere"),
    ("postgresql://someone:secret@127.0.0.1:1/none", "cannot open the study storage "
                                                     "postgresql://someone:***@127.0.0.1:1/none"),
    ("sqlite:////nonexistent/folder/study.db", "cannot open the study storage"),
])
def test_bad_or_unreachable_storage_is_one_line(url, message, tmp_path, fake_mnist, capsys):
    code = main(_search_args(tmp_path / "s", fake_mnist, "--epochs", "1", "--storage", url))
    err = capsys.readouterr().err
    assert code == 2 and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1 and message in err
    assert "secret" not in err


#: Storage URLs with :data:`PASSWORD` in every form that one may take: the user@server form of
#: Azure Database for PostgreSQL, malformed URLs, and the password percent-encoded or not.
URLS_WITH_PASSWORD = [
    "postgresql://bbb@server:{encoded}@db.example.org/study",
    "postgresql:///bbb:{encoded}@db.example.org/study",
    "postgresql+psycopg:://bbb:{encoded}@db.example.org/study",
    "postgresql://bbb:{plain}@db.example.org/study",
    "bbb:{encoded}@db.example.org/study",
]


def _url_with_password(form):
    return form.format(encoded=urllib.parse.quote(PASSWORD, safe=""), plain=PASSWORD)


def _password_in(text):
    """The spellings of :data:`PASSWORD` (and of a part of it) that ``text`` holds."""
    spellings = (PASSWORD, urllib.parse.quote(PASSWORD, safe=""),
                 urllib.parse.quote(PASSWORD, safe=" +"), PASSWORD[:4], "pa:ss", "pa%3Ass")
    return [spelling for spelling in spellings if spelling in text]


@pytest.mark.parametrize("form", URLS_WITH_PASSWORD)
def test_a_driver_message_that_repeats_the_url_shows_no_password(form, tmp_path, fake_mnist,
                                                                  capsys, monkeypatch):
    """SQLAlchemy up to 2.0.40 repeats the URL it cannot parse, and a driver may repeat it or
    the password: the one-line error hides them."""
    url = _url_with_password(form)

    def refused(given, **kwargs):
        raise sqlalchemy.exc.ArgumentError(f"Could not parse SQLAlchemy URL from string '{given}' "
                                           f"(password {urllib.parse.unquote(given)!r})")

    monkeypatch.setattr(optuna.storages, "RDBStorage", refused)
    out = tmp_path / "s"
    assert main(_search_args(out, fake_mnist, "--epochs", "1", "--storage", url)) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Could not parse SQLAlchemy URL" in err
    assert "cannot open the study storage " in err and "***@db.example.org/study" in err
    assert not _password_in(err) and not out.exists()


def test_errors_and_logs_of_the_storage_during_a_search_show_no_password(tmp_path, fake_mnist,
                                                                         capfd, monkeypatch):
    """A storage that fails while the search runs: its heartbeat (in its own thread) and an
    Optuna warning repeat the URL and the password, then the study refuses the result. The
    console, the logs and the files show neither."""
    url = _url_with_password(URLS_WITH_PASSWORD[0])
    message = f"server closed the connection of {url} (password {PASSWORD})"
    real_storage = optuna.storages.RDBStorage

    class InSQLite(real_storage):  # the study lives in SQLite
        def __init__(self, given, **kwargs):
            super().__init__(f"sqlite:///{tmp_path / 'study.db'}", **kwargs)

    monkeypatch.setattr(optuna.storages, "RDBStorage", InSQLite)

    def failed_heartbeat(self, trial_id):
        optuna.logging.get_logger("optuna.storages._rdb.storage").warning(message)
        raise sqlalchemy.exc.OperationalError("UPDATE trial_heartbeats", {}, Exception(message))

    def failed_tell(self, *args, **kwargs):
        raise optuna.exceptions.StorageInternalError("An exception is raised during the commit.") \
            from sqlalchemy.exc.OperationalError("COMMIT", {}, Exception(message))

    monkeypatch.setattr(real_storage, "record_heartbeat", failed_heartbeat)
    monkeypatch.setattr(optuna.Study, "tell", failed_tell)
    out = tmp_path / "s"
    optuna_log = io.StringIO()  # Optuna's own handler writes to the stderr of its import
    handler = logging.StreamHandler(optuna_log)
    logging.getLogger("optuna").addHandler(handler)
    try:
        assert main(_search_args(out, fake_mnist, "--epochs", "1", "--lr", "1e-3",
                                 "--neg-log-sigma2", "6", "--pruner", "none", "--storage",
                                 url)) == 2
    finally:
        logging.getLogger("optuna").removeHandler(handler)
    # the last line Optuna logged (whatever it logged before, which depends on the tests before)
    assert optuna_log.getvalue().splitlines()[-1] == (
        "server closed the connection of postgresql://bbb%40server:***@db.example.org/study "
        "(password ***)")
    captured = capfd.readouterr()
    log = (out / "search.log").read_text()
    assert "its heartbeat failed: (sqlite3" not in log and "its heartbeat failed" in log
    assert "server closed the connection of postgresql://bbb%40server:***@db.example.org" in log
    error = captured.err.strip().splitlines()[-1]
    assert error.startswith("gluon-bbb: error: the study storage postgresql://bbb%40server:***@")
    assert error.endswith("(password ***)")
    files = "".join(path.read_text(errors="replace") for path in out.rglob("*") if path.is_file()
                    and path.suffix in (".json", ".log", ".md", ""))
    assert "Traceback" not in captured.err
    assert not _password_in(captured.out + captured.err + files + optuna_log.getvalue())


def test_report_of_a_folder_without_a_study_is_one_line(tmp_path, capsys):
    assert main(["search-report", str(tmp_path)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "study.db not found" in err[0]


# ---------------------------------------------------------------------------- PostgreSQL
def _postgres_bin():
    for root in sorted(__import__("glob").glob("/usr/lib/postgresql/*/bin"), reverse=True):
        if os.path.isfile(os.path.join(root, "initdb")):
            return root
    return None


def _free_port():
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


@contextlib.contextmanager
def _postgres_server(first_rules=""):
    """A PostgreSQL server from Debian's binaries, as the ``postgres`` user, on a temporary
    folder and a free localhost port, with a database ``study``; ``first_rules`` come first in
    its ``pg_hba.conf``, before the rules that trust every user. Yields its port and a function
    that runs a command as ``postgres``, and stops the server afterwards."""
    bin_dir = _postgres_bin()
    if bin_dir is None:
        pytest.skip("PostgreSQL's server binaries are missing (apt-get install postgresql)")
    if os.geteuid() != 0 or shutil.which("runuser") is None:
        pytest.skip("starting PostgreSQL as the postgres user needs root and runuser")
    try:
        __import__("psycopg")
    except ImportError:
        pytest.skip("the psycopg driver is missing (pip install \"psycopg[binary]\")")
    root = tempfile.mkdtemp(prefix="gluon-bbb-pg-")  # pytest's tmp_path is root's only
    os.chmod(root, 0o755)
    data = os.path.join(root, "pgdata")
    os.mkdir(data)
    shutil.chown(data, "postgres")
    port = _free_port()

    def as_postgres(*command):
        if not os.path.isabs(command[0]):
            command = (f"{bin_dir}/{command[0]}",) + command[1:]
        done = subprocess.run(["runuser", "-u", "postgres", "--"] + list(command),
                              capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr
        return done

    as_postgres("initdb", "-D", str(data), "-A", "trust", "-U", "postgres")
    hba = os.path.join(data, "pg_hba.conf")
    with open(hba, encoding="utf-8") as handle:
        rules = handle.read()
    with open(hba, "w", encoding="utf-8") as handle:  # the first rule that matches decides
        handle.write(first_rules + rules)
    as_postgres("pg_ctl", "-D", str(data), "-l", os.path.join(data, "log"), "-w",
                "-o", f"-p {port} -k {data} -c listen_addresses=127.0.0.1", "start")
    try:
        as_postgres("createdb", "-h", "127.0.0.1", "-p", str(port), "study")
        yield port, as_postgres
    finally:
        subprocess.run(["runuser", "-u", "postgres", "--", f"{bin_dir}/pg_ctl", "-D", str(data),
                        "-m", "fast", "-w", "stop"], capture_output=True, timeout=120)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def postgres():
    """A PostgreSQL server that trusts its ``postgres`` user: yields the URL of its database."""
    with _postgres_server() as (port, _):
        yield f"postgresql://postgres@127.0.0.1:{port}/study"


#: The password of :func:`protected_postgres`'s role: characters a URL must percent-encode,
#: and one a ``.pgpass`` line must escape.
PASSWORD = "s3cr@t/pa:ss%w rd"


@pytest.fixture
def protected_postgres():
    """A PostgreSQL server whose roles ``bbb`` and ``bbb@srv`` (the user@server form of Azure
    Database for PostgreSQL) must give the password (SCRAM) on 127.0.0.1: yields the URL of its
    database ``study`` for ``bbb``, without the password."""
    rules = "".join(f"host all {user} 127.0.0.1/32 scram-sha-256\n"
                    for user in ("bbb", '"bbb@srv"'))
    with _postgres_server(rules) as (port, as_postgres):
        quoted = PASSWORD.replace("'", "''")
        as_postgres("psql", "-h", "127.0.0.1", "-p", str(port), "-d", "study", "-c",
                    f"CREATE ROLE bbb LOGIN PASSWORD '{quoted}'; "
                    "ALTER DATABASE study OWNER TO bbb; "
                    f"CREATE ROLE \"bbb@srv\" LOGIN PASSWORD '{quoted}'; "
                    "GRANT CREATE, USAGE ON SCHEMA public TO \"bbb@srv\"")
        yield f"postgresql://bbb@127.0.0.1:{port}/study"


def test_two_workers_share_a_study_on_a_real_postgresql_server(postgres, tmp_path, fake_mnist,
                                                               capsys):
    out = tmp_path / "search"
    # the two workers meet before their first trial (meet_workers), so both run trials; with
    # four grid points and no such meeting, the first once took them all before the second
    # had connected
    assert main(_search_args(out, fake_mnist, "--epochs", "2", "--lr", "1e-3", "1e-2",
                             "--neg-log-sigma2", "6", "7", "8", "--pruner", "hyperband", "--workers",
                             "2", "--storage", postgres)) == 0
    assert not (out / "study.db").exists()  # the study lives in PostgreSQL
    trials = _trials(out, postgres)
    assert len(trials) == 6 and len({tuple(sorted(t.params.items())) for t in trials}) == 6
    assert {t.state for t in trials} <= {optuna.trial.TrialState.COMPLETE,
                                         optuna.trial.TrialState.PRUNED}
    assert len({t.user_attrs["worker"] for t in trials}) == 2
    capsys.readouterr()
    assert main(["search-report", str(out), "--storage", postgres, "--no-figures",
                 "--data-dir", str(fake_mnist), "--mc-samples", "2"]) == 0
    assert "Best trial" in (out / "search.md").read_text()


def _with_password(url):
    """``url`` of :func:`protected_postgres` with the password in it, percent-encoded."""
    return url.replace("bbb@", f"bbb:{urllib.parse.quote(PASSWORD, safe='')}@")


def _leaks(out, storage, *texts):
    """Where the password shows, in any of its spellings: the files under ``out`` (the members
    of zip files too), the attributes of the study and of its trials in ``storage``, ``texts``."""
    spellings = [PASSWORD, urllib.parse.quote(PASSWORD, safe=""), PASSWORD.replace(":", "\\:"),
                 PASSWORD[:4]]
    contents = {str(path): path.read_bytes() for path in out.rglob("*") if path.is_file()}
    for path in list(contents):
        if zipfile.is_zipfile(path):
            with zipfile.ZipFile(path) as archive:
                contents.update({f"{path}:{name}": archive.read(name) for name in archive.namelist()})
    rdb = search.open_storage(storage)
    study = rdb.get_study_id_from_name(search.STUDY_NAME)
    attributes = [rdb.get_study_user_attrs(study), rdb.get_study_system_attrs(study)] + [
        [trial.user_attrs, trial.system_attrs] for trial in rdb.get_all_trials(study)]
    contents["the study's attributes"] = json.dumps(attributes, default=str).encode()
    contents.update({f"text {i}": text.encode() for i, text in enumerate(texts)})
    return [where for where, content in contents.items()
            if any(spelling.encode() in content for spelling in spellings)]


@pytest.mark.postgres
def test_a_search_on_a_password_protected_server_writes_its_password_nowhere(
        protected_postgres, tmp_path, fake_mnist, capsys, monkeypatch):
    """The password is given in the URL (--storage=URL), then by PGPASSWORD to another worker
    that resumes the search, then in a ~/.pgpass file to the report: the records hide it."""
    out = tmp_path / "search"
    args = _search_args(out, fake_mnist, "--epochs", "2", "--lr", "1e-3", "--neg-log-sigma2", "6",
                        "--pruner", "none")
    monkeypatch.delenv("PGPASSWORD", raising=False)
    monkeypatch.setenv("PGPASSFILE", str(tmp_path / "none"))  # not this machine's ~/.pgpass
    assert main(args + ["--storage", protected_postgres]) == 2  # the server wants the password
    assert "no password supplied" in capsys.readouterr().err
    assert not out.exists()

    real_run = _interrupt_after_the_first_epoch(monkeypatch)
    assert main(args + [f"--storage={_with_password(protected_postgres)}"]) == 130
    monkeypatch.setattr(search, "run", real_run)
    monkeypatch.setenv("PGPASSWORD", PASSWORD)
    assert main(args + ["--storage", protected_postgres]) == 0  # resumes the trial's folder
    monkeypatch.delenv("PGPASSWORD")
    pgpass = tmp_path / "pgpass"
    port = urllib.parse.urlsplit(protected_postgres).port
    escaped = PASSWORD.replace(":", "\\:")  # a .pgpass line escapes its colons
    pgpass.write_text(f"127.0.0.1:{port}:study:bbb:{escaped}\n")
    pgpass.chmod(0o600)  # libpq ignores a password file that others may read
    monkeypatch.setenv("PGPASSFILE", str(pgpass))
    assert main(["search-report", str(out), "--storage", protected_postgres,
                 "--data-dir", str(fake_mnist), "--mc-samples", "2"]) == 0

    first, retried = _trials(out, protected_postgres)
    assert retried.state == optuna.trial.TrialState.COMPLETE and retried.params == first.params
    sessions = json.loads((out / retried.user_attrs["folder"] / "sessions.json").read_text())
    assert [s["epochs_before"] for s in sessions] == [0, 1]
    assert not _leaks(out, protected_postgres, *capsys.readouterr())
    assert sessions[0]["command"].endswith(f" '--storage=postgresql://bbb:***@127.0.0.1:{port}/study'")
    assert sessions[1]["command"].endswith(f" --storage postgresql://bbb@127.0.0.1:{port}/study")
    assert "Command: `gluon-bbb search-report" in (out / "search.md").read_text()


@pytest.mark.postgres
def test_a_user_at_server_url_and_its_password_are_written_nowhere(
        protected_postgres, tmp_path, fake_mnist, capfd, monkeypatch):
    """The password in a URL of the user@server form (SQLAlchemy's user ``bbb@srv``), first
    wrong (the driver's message is the one-line error), then right for a search, its report
    and ``--print-best``: no file, log, message or attribute of the study holds it."""
    monkeypatch.delenv("PGPASSWORD", raising=False)
    monkeypatch.setenv("PGPASSFILE", str(tmp_path / "none"))
    wrong_password = "wr0ng@pa:ss"
    port = urllib.parse.urlsplit(protected_postgres).port
    url, wrong = (protected_postgres.replace("bbb@", f"bbb@srv:{encoded}@") for encoded in
                  (urllib.parse.quote(secret, safe="") for secret in (PASSWORD, wrong_password)))
    out = tmp_path / "search"
    args = _search_args(out, fake_mnist, "--epochs", "1", "--lr", "1e-3", "--neg-log-sigma2", "6",
                        "--pruner", "none")
    assert main(args + ["--storage", wrong]) == 2
    err = capfd.readouterr().err
    assert len(err.strip().splitlines()) == 1
    assert 'password authentication failed for user "bbb@srv"' in err
    assert f"postgresql://bbb%40srv:***@127.0.0.1:{port}/study" in err
    assert not any(spelling in err for spelling in (wrong_password, "wr0ng", "pa%3Ass"))
    assert main(args + ["--storage", url]) == 0
    assert main(["search-report", str(out), "--storage", url, "--data-dir", str(fake_mnist),
                 "--mc-samples", "2"]) == 0
    assert main(["search-report", str(out), "--storage", url, "--print-best"]) == 0
    (trial,) = _trials(out, url)
    assert trial.state == optuna.trial.TrialState.COMPLETE
    sessions = json.loads((out / trial.user_attrs["folder"] / "sessions.json").read_text())
    shown = f"postgresql://bbb%40srv:***@127.0.0.1:{port}/study"
    assert sessions[0]["command"].endswith(f" --storage '{shown}'")
    assert (out / "search.log").is_file() and (out / "search.md").is_file()
    assert not _leaks(out, url, *capfd.readouterr())


@pytest.mark.postgres
@pytest.mark.slow
def test_worker_processes_take_the_password_of_the_command_and_record_none(
        protected_postgres, tmp_path, fake_mnist, capfd, monkeypatch):
    """``--workers`` runs copies of the command line, which must keep the password that its
    records hide."""
    monkeypatch.delenv("PGPASSWORD", raising=False)
    monkeypatch.setenv("PGPASSFILE", str(tmp_path / "none"))
    out = tmp_path / "search"
    storage = _with_password(protected_postgres)
    assert main(_search_args(out, fake_mnist, "--epochs", "1", "--lr", "1e-3", "1e-2",
                             "--neg-log-sigma2", "6", "--pruner", "none", "--workers", "2",
                             "--storage", storage)) == 0
    trials = _trials(out, storage)
    assert [t.state for t in trials] == [optuna.trial.TrialState.COMPLETE] * 2
    assert not _leaks(out, storage, *capfd.readouterr())


def _interrupt_after_the_first_epoch(monkeypatch):
    """Make every trial's run stop with Ctrl-C (KeyboardInterrupt) after its first epoch;
    returns the real ``search.run``."""
    real_run = search.run

    def interrupted(*a, epoch_callback=None, **k):
        def stop(record):
            epoch_callback(record)
            raise KeyboardInterrupt
        return real_run(*a, epoch_callback=stop, **k)

    monkeypatch.setattr(search, "run", interrupted)
    return real_run


def test_an_interrupted_trial_is_queued_again_and_resumes(tmp_path, fake_mnist, monkeypatch):
    out = tmp_path / "search"
    args = _search_args(out, fake_mnist, "--epochs", "3", "--lr", "1e-3", "--neg-log-sigma2", "6",
                        "--pruner", "none")
    real_run = _interrupt_after_the_first_epoch(monkeypatch)
    assert main(args) == 130  # Ctrl-C
    first, queued = _trials(out)
    assert first.state == optuna.trial.TrialState.FAIL
    assert queued.state == optuna.trial.TrialState.WAITING
    monkeypatch.setattr(search, "run", real_run)
    assert main(args) == 0
    first, retried = _trials(out)
    assert retried.state == optuna.trial.TrialState.COMPLETE and retried.params == first.params
    assert search_report.trial_rows(_study(out))[1]["retry_of"] == first.number
    sessions = json.loads((out / retried.user_attrs["folder"] / "sessions.json").read_text())
    assert [s["epochs_before"] for s in sessions] == [0, 1]  # resumed after epoch 1


@pytest.mark.parametrize("bad", [{"space": {"lr": "fast"}}, {"epochs": "many"}, {"base": "sgd-400"},
                                 {"space": {"lr": [1e-3], "momentum": [0.9]}}])
def test_a_study_with_bad_settings_is_one_line(bad, tmp_path, fake_mnist, capsys):
    """The database may come from someone else: search-report checks its settings."""
    out = tmp_path / "search"
    assert main(_search_args(out, fake_mnist, "--epochs", "1", "--lr", "1e-3",
                             "--neg-log-sigma2", "6")) == 0
    study = _study(out)
    study.set_user_attr("settings", dict(study.user_attrs["settings"], **bad))
    capsys.readouterr()
    assert main(["search-report", str(out), "--data-dir", str(fake_mnist)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "holds bad search settings" in err[0], err


def test_workers_started_together_meet_before_their_first_trial(tmp_path):
    import threading
    folder = str(tmp_path / ".start-x")
    results = {}
    threads = [threading.Thread(target=lambda i=i: results.update({i: meet_workers(folder, i, 3)}))
               for i in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert results == {0: True, 1: True, 2: True}
    assert sorted(os.listdir(folder)) == ["worker-0", "worker-1", "worker-2"]
    # a sibling that never comes: the worker goes on alone after the timeout
    start = time.monotonic()
    assert meet_workers(str(tmp_path / ".start-y"), 0, 2, timeout=0.3) is False
    assert 0.3 <= time.monotonic() - start < 5
    with pytest.raises(ValueError, match="worker must lie in"):
        meet_workers(folder, 3, 3)


@pytest.mark.parametrize("form", URLS_WITH_PASSWORD)
def test_a_warning_shown_while_the_storage_is_open_shows_no_password(form):
    """A library's warning that repeats the URL (shown by ``warnings.showwarning``, not
    logged) reaches the printer with the password hidden; afterwards the printer is back."""
    import warnings
    url = _url_with_password(form)
    shown = []

    def printer(message, category, filename, lineno, file=None, line=None):
        shown.append(f"{category.__name__}: {message}")

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.showwarning = printer
        with search.storage_errors(url):
            warnings.warn(f"pool could not reach {url} (password {urllib.parse.unquote(url)})",
                          RuntimeWarning)
            warnings.warn("a warning without the URL", UserWarning)
        assert warnings.showwarning is printer
    assert shown[0].startswith("RuntimeWarning: pool could not reach")
    assert shown[1] == "UserWarning: a warning without the URL"
    assert not _password_in("\n".join(shown)), shown
