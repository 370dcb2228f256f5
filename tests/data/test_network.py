"""The public sources, requested for real: ``pytest --network tests/data/test_network.py``.

Skipped unless ``--network`` is given (also under ``--full`` and in CI), these tests download
every file from every public URL in :data:`gluon_bbb.data.sources.PUBLIC_SOURCES`, one source at
a time, and check each by its digest, so that a maintainer learns of a dead or changed mirror
before a class does (docs/install.md: a step before each release). A source that fails is named
with its reason. The local test at the end runs the same download on the local HTTP server, so
that the network tests' own code is tested in every run.
"""
import gzip
import hashlib

import pytest

from gluon_bbb.data import datafolders, fetch, sources
from gluon_bbb.data.sources import DataFile
from http_server import LocalServer

#: (data set, URL pattern, file) for every public source of every file.
CASES = [(name, pattern, data_file) for name in sources.FETCHABLE
         for pattern in sources.PUBLIC_SOURCES[name] for data_file in sources.files_of(name)]


def download_from(monkeypatch, pattern, data_file, folder):
    """``data_file`` fetched into ``folder`` from the one source ``pattern`` (no mirror)."""
    monkeypatch.delenv(sources.MIRROR_ENV_VAR, raising=False)
    monkeypatch.setitem(sources.PUBLIC_SOURCES, data_file.dataset, (pattern,))
    monkeypatch.setattr(fetch, "_failed_hosts", {})
    found = fetch.fetch_file(folder, data_file, progress=False, timeout=60, deadline=600)
    assert fetch.find_verified(folder, data_file) == found
    return found


@pytest.mark.network
@pytest.mark.parametrize("name, pattern, data_file", CASES,
                         ids=[f"{name}-{data_file.name}-{index}" for index, (name, pattern,
                              data_file) in enumerate(CASES)])
def test_every_public_source_serves_every_file_with_its_digest(monkeypatch, tmp_path, name,
                                                               pattern, data_file):
    download_from(monkeypatch, pattern, data_file, tmp_path / name)


def test_the_network_tests_download_and_check_as_the_fetcher_does(monkeypatch, tmp_path):
    content = bytes(range(256)) * 8
    data_file = DataFile("mnist", "tiny-ubyte", hashlib.sha256(content).hexdigest(),
                         len(content))
    (tmp_path / "served").mkdir()
    (tmp_path / "served" / "tiny-ubyte.gz").write_bytes(gzip.compress(content))
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.delenv(datafolders.DATA_ENV_VAR, raising=False)
    with LocalServer(tmp_path / "served") as server:
        found = download_from(monkeypatch, server.url("files", "{file}"), data_file,
                              tmp_path / "mnist")
        assert gzip.decompress(found.read_bytes()) == content
        with pytest.raises(fetch.FetchError, match="HTTP 404"):
            download_from(monkeypatch, server.url("missing", "{file}"), data_file,
                          tmp_path / "other")


def test_every_public_source_is_a_case():
    assert len(CASES) == sum(len(sources.PUBLIC_SOURCES[name]) * len(sources.files_of(name))
                             for name in sources.FETCHABLE) > 0
