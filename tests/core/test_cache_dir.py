"""The per-user cache folder: the XDG rule, and no literal '~' folder without a home."""
import os

import pytest

from gluon_bbb import _cache


def test_an_absolute_xdg_cache_home_is_used(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert _cache.user_cache_dir("data") == os.path.join(str(tmp_path), "gluon_bbb", "data")


def test_a_relative_xdg_cache_home_is_ignored(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_CACHE_HOME", "relative/cache")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert _cache.user_cache_dir() == os.path.join(str(tmp_path), ".cache", "gluon_bbb")


def test_no_home_folder_gives_a_temporary_folder_not_a_literal_tilde(monkeypatch, caplog):
    monkeypatch.delenv("XDG_CACHE_HOME", raising=False)
    monkeypatch.setattr(_cache.os.path, "expanduser", lambda path: path)  # no HOME, no passwd
    with caplog.at_level("WARNING"):
        folder = _cache.user_cache_dir("data")
    assert os.path.isabs(folder) and "~" not in folder
    assert folder.endswith(os.path.join("gluon_bbb", "data"))
    assert "no home folder" in caplog.text
