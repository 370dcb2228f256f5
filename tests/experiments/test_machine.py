"""What a measurement records about what ran it (gluon_bbb.experiments.machine): the command
line with the password of every URL hidden, and no environment but OMP_NUM_THREADS."""
import shlex
import sys
import urllib.parse

import pytest

from gluon_bbb.experiments.machine import (hide_password, hide_password_in, machine_info,
                                           recorded_command)


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
    ("postgresql://bbb:s3cr@t/pa:ss w rd@host:5432/db", "postgresql://***@host:5432/db"),
    ("postgresql://bbb%40corp:secret@host/db", "postgresql://bbb%40corp:***@host/db"),
    # the user@server form of Azure Database for PostgreSQL: SQLAlchemy's user is user@server
    ("postgresql://user@server:secret@host/db", "postgresql://user%40server:***@host/db"),
    ("--storage=postgresql://user@server:secret@host/db",
     "--storage=postgresql://user%40server:***@host/db"),
    # malformed: SQLAlchemy cannot parse them, or reads the password into the database name
    ("postgresql:///u:secret@h/db", "postgresql://***@h/db"),
    ("postgresql+psycopg:://u:secret@h/db", "postgresql+psycopg:***@h/db"),
    ("postgresql:/u:secret@h/db", "postgresql:***@h/db"),
    ("postgresql://u:secret@h:no-port/db", "postgresql://***@h:no-port/db"),
    ("postgresql://u:secret@h/db?options=a@b", "postgresql://***@b"),
    ("user:secret@host", "user:***@host"),  # a scheme-less storage SQLAlchemy cannot parse
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
    ("postgresql://user@server@host/db", "postgresql://user@server@host/db"),  # ~/.pgpass
    ("sqlite:///u:x@y/study.db", "sqlite:///u:x@y/study.db"),  # a SQLite file's name
    ("runs/a@b:c", "runs/a@b:c"),  # not a URL
    ("lr=1e-3,pi=0.25", "lr=1e-3,pi=0.25"),
    ("", ""),
])
def test_the_password_of_a_url_is_hidden(argument, shown):
    assert hide_password(argument) == shown
    assert hide_password(shown) == shown


@pytest.mark.parametrize("url", [
    "postgresql://user@server:secret@host/db",
    "postgresql:///u:secret@h/db",
    "postgresql+psycopg:://u:secret@h/db",
    "postgresql://bbb:s3cr@t/pa:ss w rd@host:5432/db",
])
def test_without_sqlalchemy_everything_before_the_last_at_is_hidden(url, monkeypatch):
    monkeypatch.setitem(sys.modules, "sqlalchemy", None)  # its import raises ImportError
    monkeypatch.setitem(sys.modules, "sqlalchemy.engine", None)
    shown = hide_password(url)
    assert shown.endswith(url.rpartition("@")[2]) and "***@" in shown
    assert "secret" not in shown and "pa:ss" not in shown and "user" not in shown


#: A password with the characters a URL must percent-encode, as a URL spells it, and URLs that
#: give it in every form a storage URL can take.
PASSWORD = "s3cr@t/pa:ss%w rd"
ENCODED = urllib.parse.quote(PASSWORD, safe="")


@pytest.mark.parametrize("url", [
    f"postgresql://bbb:{ENCODED}@127.0.0.1:5432/study",
    f"postgresql+psycopg://bbb@server:{ENCODED}@db.example.org/study?sslmode=require",
    f"postgresql://bbb:{PASSWORD}@127.0.0.1/study",  # unencoded: SQLAlchemy misreads it
    f"postgresql:///bbb:{ENCODED}@127.0.0.1/study",
    f"postgresql+psycopg:://bbb:{ENCODED}@127.0.0.1/study",
    f"bbb:{ENCODED}@127.0.0.1/study",
    f"postgresql://bbb@127.0.0.1/study?password={ENCODED}",
])
def test_a_message_that_repeats_the_url_or_its_password_hides_them(url):
    """A driver's or SQLAlchemy's message quotes the URL as given, decoded or as SQLAlchemy
    writes it, or the password alone, decoded or encoded."""
    from sqlalchemy.engine import make_url
    spellings = [url, urllib.parse.unquote(url), PASSWORD, ENCODED,
                 urllib.parse.quote(PASSWORD, safe=" +"), urllib.parse.quote_plus(PASSWORD)]
    try:
        spellings.append(make_url(url).render_as_string(hide_password=False))
    except Exception:
        pass
    message = "; ".join(f"error {i}: {spelling!r} failed" for i, spelling in enumerate(spellings))
    shown = hide_password_in(message, url)
    for secret in (PASSWORD, ENCODED, PASSWORD[:4], "pa:ss", "w rd", "w%20rd"):
        assert secret not in shown
    assert hide_password(url) in shown and shown.startswith("error 0: ")
    assert shown.count("error") == len(spellings)


def test_a_message_about_a_url_without_a_password_is_left_alone():
    message = "connection to server at 127.0.0.1 failed: postgresql://bbb@host/db, user bbb"
    assert hide_password_in(message, "postgresql://bbb@host/db") == message
    assert hide_password_in(message, "sqlite:////home/me/runs@2/study.db") == message


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
