"""What a measurement records about what ran it (gluon_bbb.experiments.machine): the command
line with the password of every URL hidden, and no environment but OMP_NUM_THREADS."""
import shlex

import pytest

from gluon_bbb.experiments.machine import hide_password, machine_info, recorded_command


@pytest.mark.parametrize("argument, shown", [
    ("postgresql://bbb:secret@127.0.0.1:5499/bbbsearch",
     "postgresql://bbb:***@127.0.0.1:5499/bbbsearch"),
    ("--storage=postgresql://bbb:secret@db.example.org/search",
     "--storage=postgresql://bbb:***@db.example.org/search"),
    ("postgresql+psycopg://bbb:secret@[::1]:5432/db?sslmode=require",
     "postgresql+psycopg://bbb:***@[::1]:5432/db?sslmode=require"),
    ("postgresql://:secret@host/db", "postgresql://:***@host/db"),  # no user name
    ("mysql://bbb:@host/db", "mysql://bbb:***@host/db"),  # an empty password
    # percent-encoded, and the characters a careless URL leaves unencoded, '@' included
    ("postgresql://bbb:s3cr%40t%2Fpa%3Ass%25w%20rd@host/db", "postgresql://bbb:***@host/db"),
    ("postgresql://bbb:s3cr@t/pa:ss w rd@host:5432/db", "postgresql://bbb:***@host:5432/db"),
    ("postgresql://bbb%40corp:secret@host/db", "postgresql://bbb%40corp:***@host/db"),
    # a password in the query, libpq's way, or a token
    ("postgresql://bbb@host/db?sslmode=require&password=secret",
     "postgresql://bbb@host/db?sslmode=require&password=***"),
    ("postgresql://host/db?PASSWORD=secret&user=bbb", "postgresql://host/db?PASSWORD=***&user=bbb"),
    ("https://example.org/x?access_token=secret#top", "https://example.org/x?access_token=***#top"),
    # nothing to hide
    ("postgresql://bbb@127.0.0.1:5499/bbbsearch", "postgresql://bbb@127.0.0.1:5499/bbbsearch"),
    ("postgresql://127.0.0.1:5499/bbbsearch", "postgresql://127.0.0.1:5499/bbbsearch"),
    ("sqlite:////home/me/runs@2/study.db", "sqlite:////home/me/runs@2/study.db"),
    ("sqlite:///study.db", "sqlite:///study.db"),
    ("runs/a@b:c", "runs/a@b:c"),  # not a URL
    ("user:secret@host", "user:secret@host"),
    ("lr=1e-3,pi=0.25", "lr=1e-3,pi=0.25"),
    ("", ""),
])
def test_the_password_of_a_url_is_hidden(argument, shown):
    assert hide_password(argument) == shown
    assert hide_password(shown) == shown


def test_a_recorded_command_hides_every_url_password_and_nothing_else():
    argv = ["gluon-bbb", "search", "--epochs", "1", "--output-dir", "my runs/srch",
            "--storage", "postgresql://bbb:pa ss@127.0.0.1:5499/bbbsearch",
            "--storage=postgresql://bbb:other@host/db", "--set", "lr=1e-3", "--subset", "500"]
    line = recorded_command(argv)
    assert "pa ss" not in line and "other" not in line
    assert shlex.split(line) == [
        "gluon-bbb", "search", "--epochs", "1", "--output-dir", "my runs/srch",
        "--storage", "postgresql://bbb:***@127.0.0.1:5499/bbbsearch",
        "--storage=postgresql://bbb:***@host/db", "--set", "lr=1e-3", "--subset", "500"]
    plain = ["gluon-bbb", "train", "--epochs", "2", "--output-dir", "runs/a b"]
    assert recorded_command(plain) == "gluon-bbb train --epochs 2 --output-dir 'runs/a b'"


def test_the_machine_record_holds_no_environment_but_the_thread_count(monkeypatch):
    monkeypatch.setenv("PGPASSWORD", "secret")
    monkeypatch.setenv("OMP_NUM_THREADS", "2")
    info = machine_info()
    assert info["omp_num_threads"] == "2"
    assert "secret" not in repr(info)
