"""The data fetcher against a real HTTP server on 127.0.0.1 (tests/data/http_server.py): the
first good source wins after bad ones, a wrong or interrupted download leaves nothing behind,
two processes fetching at once download once, and the message when every source fails. The
public sources are replaced by the local server's 404 route, so nothing leaves the machine."""
import gzip
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time
import zipfile
from pathlib import Path

import numpy as np
import pytest

from gluon_bbb.cli import main
from gluon_bbb.data import (datafolders, digests, fetch, load_raw, load_splits, mushroom, read_idx,
                            sources, state)
from gluon_bbb.data.sources import DataFile
from gluon_bbb.io import locks
from http_server import LocalServer
from synthetic import needs_mnist, write_dataset

REPO = Path(__file__).resolve().parents[2]
#: The development data (read before the fixtures hide $GLUON_BBB_DATA); tests that need it are
#: marked needs_mnist.
SHARED = Path(os.environ.get(datafolders.DATA_ENV_VAR, "/nonexistent"))
#: The public sources as published (the fixture ``offline`` empties them for every test).
PUBLISHED = dict(sources.PUBLIC_SOURCES)
TINY_CONTENT = bytes(range(256)) * 40  # 10,240 bytes


def tiny_file(dataset="mnist", name="tiny-ubyte", content=TINY_CONTENT):
    """A DataFile for ``content`` (no real data set's file: small and fast)."""
    return DataFile(dataset, name, hashlib.sha256(content).hexdigest(), len(content))


@pytest.fixture
def served(tmp_path):
    """The folder the server serves (``served/mnist/tiny-ubyte.gz``, gzipped)."""
    folder = tmp_path / "served"
    (folder / "mnist").mkdir(parents=True)
    (folder / "mnist" / "tiny-ubyte.gz").write_bytes(gzip.compress(TINY_CONTENT))
    return folder


@pytest.fixture
def server(served):
    with LocalServer(served) as running:
        yield running


@pytest.fixture(autouse=True)
def offline(monkeypatch, tmp_path):
    """No public source, no mirror, no data folder, no caches: only what a test sets."""
    for name in sources.PUBLIC_SOURCES:
        monkeypatch.setitem(sources.PUBLIC_SOURCES, name, ())
    monkeypatch.delenv(sources.MIRROR_ENV_VAR, raising=False)
    monkeypatch.delenv(datafolders.DATA_ENV_VAR, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))
    monkeypatch.setenv("MXNET_HOME", str(tmp_path / "mxnet-home"))
    monkeypatch.setattr(datafolders, "DEBIAN_DATA_ROOT", tmp_path / "debian")
    monkeypatch.setattr(fetch, "_failed_hosts", {})
    monkeypatch.chdir(tmp_path)


def use_sources(monkeypatch, server, *routes, dataset="mnist"):
    """The public sources of ``dataset``: the server's ``routes``, in order."""
    monkeypatch.setitem(sources.PUBLIC_SOURCES, dataset,
                        tuple(server.url(route, f"{dataset}/{{file}}") for route in routes))


def leftovers(folder):
    """Everything in ``folder`` but the lock file."""
    return sorted(path.name for path in Path(folder).iterdir() if path.name != fetch.LOCK_NAME)


# ---------------------------------------------------------------------------- the sources
def test_the_first_good_source_wins_after_bad_ones(monkeypatch, server, tmp_path):
    use_sources(monkeypatch, server, "missing", "truncated", "wrong", "stall", "files", "files")
    target = tmp_path / "target" / "mnist"
    found = fetch.fetch_file(target, tiny_file(), progress=False, timeout=0.5)
    assert found == target / "tiny-ubyte.gz"
    assert gzip.decompress(found.read_bytes()) == TINY_CONTENT
    assert leftovers(target) == ["tiny-ubyte.gz"]
    tried = {path.split("/")[1]: count for path, count in server.counts.items()}
    assert tried == {"missing": 1, "truncated": 1, "wrong": 1, "stall": 1, "files": 1}
    # present and verified: no request at all
    assert fetch.fetch_file(target, tiny_file(), progress=False, timeout=0.5) == found
    assert sum(server.counts.values()) == 5


def test_the_mirror_comes_before_the_public_sources(monkeypatch, server, tmp_path):
    use_sources(monkeypatch, server, "files")
    monkeypatch.setenv(sources.MIRROR_ENV_VAR, server.url("files").rstrip("/") + "/")
    fetch.fetch_file(tmp_path / "mnist", tiny_file(), progress=False)
    assert list(server.counts) == ["/files/mnist/tiny-ubyte.gz"]
    assert sources.source_urls(tiny_file())[:2] == [
        server.url("files", "mnist/tiny-ubyte.gz"), server.url("files", "mnist/tiny-ubyte")]


def test_a_raw_file_from_a_mirror_is_kept_raw(monkeypatch, server, served, tmp_path):
    (served / "mnist" / "tiny-ubyte.gz").unlink()
    (served / "mnist" / "tiny-ubyte").write_bytes(TINY_CONTENT)
    monkeypatch.setenv(sources.MIRROR_ENV_VAR, server.url("files"))
    found = fetch.fetch_file(tmp_path / "mnist", tiny_file(), progress=False)
    assert found.name == "tiny-ubyte" and found.read_bytes() == TINY_CONTENT
    assert server.counts["/files/mnist/tiny-ubyte.gz"] == 1  # tried first, 404


# ---------------------------------------------------------------------------- nothing half-written
def test_a_checksum_mismatch_is_never_kept(monkeypatch, server, tmp_path):
    use_sources(monkeypatch, server, "wrong")
    with pytest.raises(fetch.FetchError, match="SHA-256 of its content"):
        fetch.fetch_file(tmp_path / "mnist", tiny_file(), progress=False)
    assert leftovers(tmp_path / "mnist") == []


def test_an_interrupted_download_leaves_nothing_behind(monkeypatch, server, tmp_path):
    use_sources(monkeypatch, server, "truncated")
    with pytest.raises(fetch.FetchError, match="closed after"):
        fetch.fetch_file(tmp_path / "mnist", tiny_file(), progress=False)
    assert leftovers(tmp_path / "mnist") == []

    class Interrupted:  # Ctrl-C halfway through a download
        def __init__(self, **options):
            pass

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return False

        def update(self, count):
            raise KeyboardInterrupt

    use_sources(monkeypatch, server, "files")
    monkeypatch.setattr(fetch, "progress_bar_class", lambda: Interrupted)
    with pytest.raises(KeyboardInterrupt):
        fetch.fetch_file(tmp_path / "mnist", tiny_file(), progress=False)
    assert leftovers(tmp_path / "mnist") == []


def test_a_wrong_file_in_the_folder_is_replaced_and_set_aside(monkeypatch, server, tmp_path):
    folder = tmp_path / "mnist"
    folder.mkdir()
    (folder / "tiny-ubyte").write_bytes(TINY_CONTENT[:-1])  # raw: the IDX reader prefers it
    use_sources(monkeypatch, server, "files")
    found = fetch.fetch_file(folder, tiny_file(), progress=False)
    assert found.name == "tiny-ubyte.gz"
    assert leftovers(folder) == ["tiny-ubyte.gz", "tiny-ubyte.rejected"]
    assert datafolders.idx_file(folder, "tiny-ubyte") == found


def test_when_every_source_fails_one_line_names_each_and_why(monkeypatch, server, tmp_path):
    use_sources(monkeypatch, server, "missing", "truncated", "wrong", "stall")
    start = time.perf_counter()
    with pytest.raises(fetch.FetchError) as info:
        fetch.fetch_file(tmp_path / "mnist", tiny_file(), progress=False, timeout=0.5)
    assert time.perf_counter() - start < 10  # the stalled server did not hang it
    message = str(info.value)
    assert "\n" not in message
    for route, reason in (("missing", "HTTP 404"), ("truncated", "the connection closed after "),
                          ("wrong", "not mnist/tiny-ubyte (the SHA-256 of its content is"),
                          ("stall", "timed out")):
        url = server.url(route, "mnist/tiny-ubyte.gz")
        assert f"{url}: {reason}" in message, (route, message)
    assert f"put it in {tmp_path / 'mnist'}/" in message and "GLUON_BBB_MIRROR" in message
    assert leftovers(tmp_path / "mnist") == []


def test_an_unreachable_host_is_named(monkeypatch, tmp_path):
    monkeypatch.setitem(sources.PUBLIC_SOURCES, "mnist", ("http://127.0.0.1:9/{file}",))
    with pytest.raises(fetch.FetchError, match=r"http://127.0.0.1:9/tiny-ubyte.gz: .*refused"):
        fetch.fetch_file(tmp_path / "mnist", tiny_file(), progress=False, timeout=2)


# ---------------------------------------------------------------------------- two processes
CHILD = """
import sys
from gluon_bbb.data import fetch, sources
print("ready", flush=True)
print(fetch.fetch_file(sys.argv[1], sources.files_of("mnist")[3], progress=False, timeout=30))
"""


@needs_mnist
def test_two_processes_fetching_at_once_download_once(tmp_path):
    shared = SHARED
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    target = tmp_path / "target" / "mnist"
    with LocalServer(shared) as server:
        env[sources.MIRROR_ENV_VAR] = server.url("held")
        command = [sys.executable, "-c", CHILD, str(target)]
        first = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True)
        assert server.requested.wait(120), "the first process sent no request"
        second = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, text=True)
        assert second.stdout.readline().strip() == "ready"
        time.sleep(0.5)  # the second is in fetch_file, waiting for the first's lock
        server.release.set()
        outputs = [process.communicate(timeout=120)[0] for process in (first, second)]
        assert [process.returncode for process in (first, second)] == [0, 0]
    paths = {output.strip().splitlines()[-1] for output in outputs}
    assert paths == {str(target / "t10k-labels-idx1-ubyte.gz")}
    assert dict(server.counts) == {"/held/mnist/t10k-labels-idx1-ubyte.gz": 1}
    assert leftovers(target) == ["t10k-labels-idx1-ubyte.gz"]


# ---------------------------------------------------------------------------- end to end
@needs_mnist
def test_a_fresh_machine_gets_mnist_and_the_mushrooms_from_a_mirror(monkeypatch, tmp_path):
    """No data anywhere: load_raw and load_mushroom download into the XDG cache from the
    mirror (the real files), and the arrays are those of the shared copies."""
    shared = SHARED
    with LocalServer(shared) as server:
        monkeypatch.setenv(sources.MIRROR_ENV_VAR, server.url("files"))
        images, labels = load_raw("mnist", "test")
        cache = tmp_path / "xdg-cache" / "gluon_bbb" / "data"
        assert sorted(leftovers(cache / "mnist")) == sorted(
            f"{data_file.name}.gz" for data_file in sources.files_of("mnist"))
        np.testing.assert_array_equal(images, read_idx(
            shared / "mnist" / "t10k-images-idx3-ubyte.gz"))
        np.testing.assert_array_equal(labels, read_idx(
            shared / "mnist" / "t10k-labels-idx1-ubyte.gz"))
        data = mushroom.load_mushroom()
        assert (cache / "mushroom" / mushroom.FILE_NAME).is_file()
        assert len(data.edible) == 8124 and int(data.edible.sum()) == 4208
        requests = sum(server.counts.values())
        load_raw("mnist", "train")  # found in the cache now: no request
        assert sum(server.counts.values()) == requests


def test_every_source_failing_is_reported_by_load_raw_with_the_folders(monkeypatch, server):
    use_sources(monkeypatch, server, "missing", dataset="fashion-mnist")
    with pytest.raises(datafolders.DataNotFoundError) as info:
        load_raw("fashion-mnist", "test")
    message = str(info.value)
    assert "debian" in message and "Downloading failed" in message and "HTTP 404" in message


# ---------------------------------------------------------------------------- the mushroom file
def uci_zip(path, lines, line_ending="\n"):
    """A zip laid out like UCI's mushroom.zip: the data file among others."""
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("agaricus-lepiota.names", "1. Title: Mushroom Database\n")
        archive.writestr("agaricus-lepiota.data", line_ending.join(lines) + line_ending)
        archive.writestr("Index", "Index of mushroom\n")


MUSHROOM_LINES = ["p,x,s,n,t,p,f,c,n,k,e,e,s,s,w,w,p,w,o,p,k,s,u",
                  "e,x,s,y,t,a,f,c,b,k,e,c,s,s,w,w,p,w,o,p,n,n,g"]


def test_the_uci_zip_is_read_whatever_its_line_endings(monkeypatch, server, served, tmp_path):
    expected = DataFile("mushroom", mushroom.FILE_NAME, hashlib.sha256(
        ("\n".join(MUSHROOM_LINES) + "\n").encode()).hexdigest(), 94, text=True, keep_gzip=False)
    (served / "mushroom").mkdir()
    uci_zip(served / "mushroom" / "mushroom.zip", MUSHROOM_LINES, "\r\n")
    monkeypatch.setitem(sources.PUBLIC_SOURCES, "mushroom",
                        (server.url("files", "mushroom/mushroom.zip"),))
    found = fetch.fetch_file(tmp_path / "mushroom", expected, progress=False)
    assert found == tmp_path / "mushroom" / mushroom.FILE_NAME
    assert found.read_bytes() == ("\r\n".join(MUSHROOM_LINES) + "\r\n").encode()  # as published
    assert mushroom.load_mushroom(found).edible.tolist() == [False, True]
    # a line short: refused
    uci_zip(served / "mushroom" / "mushroom.zip", MUSHROOM_LINES[:1])
    with pytest.raises(fetch.FetchError, match="SHA-256"):
        fetch.fetch_file(tmp_path / "other", expected, progress=False)


def test_the_mushroom_digest_is_of_canonical_text(tmp_path):
    data_file = DataFile("mushroom", "m.data", hashlib.sha256(b"a,b\nc,d\n").hexdigest(), 8,
                         text=True)
    for variant in (b"a,b\nc,d\n", b"a,b\r\nc,d\r\n", b"a,b\nc,d", b"a,b\n\nc,d\n\n\n"):
        (tmp_path / "m.data").write_bytes(variant)
        digests.check_content(tmp_path / "m.data", data_file)
    for wrong in (b"a,b\n", b"a,b\nc,e\n", b"a,b\nc,d\ne\n"):
        (tmp_path / "m.data").write_bytes(wrong)
        with pytest.raises(digests.ChecksumError, match="m.data"):
            digests.check_content(tmp_path / "m.data", data_file)


# ---------------------------------------------------------------------------- digests
def test_digests_read_the_content_whatever_the_compression(tmp_path):
    data_file = tiny_file()
    (tmp_path / "raw").write_bytes(TINY_CONTENT)
    (tmp_path / "fast.gz").write_bytes(gzip.compress(TINY_CONTENT, compresslevel=1))
    (tmp_path / "best.gz").write_bytes(gzip.compress(TINY_CONTENT, compresslevel=9))
    with zipfile.ZipFile(tmp_path / "archive.zip", "w") as archive:
        archive.writestr("folder/tiny-ubyte", TINY_CONTENT)
    for name in ("raw", "fast.gz", "best.gz", "archive.zip"):
        digests.check_content(tmp_path / name, data_file)
    assert hashlib.sha256(TINY_CONTENT).hexdigest() == digests.content_sha256(
        tmp_path / "best.gz", data_file)


def test_digests_refuse_truncated_oversized_and_ambiguous_files(tmp_path):
    data_file = tiny_file()
    compressed = gzip.compress(TINY_CONTENT)
    (tmp_path / "cut.gz").write_bytes(compressed[:len(compressed) // 2])
    with pytest.raises(digests.ChecksumError, match="cut.gz: corrupt or truncated"):
        digests.check_content(tmp_path / "cut.gz", data_file)
    (tmp_path / "huge.gz").write_bytes(gzip.compress(bytes(10 * len(TINY_CONTENT))))
    with pytest.raises(digests.ChecksumError, match="more than"):
        digests.check_content(tmp_path / "huge.gz", data_file)
    with zipfile.ZipFile(tmp_path / "bomb.zip", "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("tiny-ubyte", bytes(10 * len(TINY_CONTENT)))
    with pytest.raises(digests.ChecksumError, match="more than the 10240 expected"):
        digests.check_content(tmp_path / "bomb.zip", data_file)
    with zipfile.ZipFile(tmp_path / "two.zip", "w") as archive:
        archive.writestr("a/tiny-ubyte", TINY_CONTENT)
        archive.writestr("b/tiny-ubyte", TINY_CONTENT)
    with pytest.raises(digests.ChecksumError, match="2 members named tiny-ubyte"):
        digests.check_content(tmp_path / "two.zip", data_file)


@needs_mnist
def test_the_catalogue_matches_the_shared_copies(monkeypatch):
    """The digests and sizes are those of the development copies (recompressed MNIST included),
    and each data set has several public sources, MXNet's retired host last where listed."""
    monkeypatch.setattr(sources, "PUBLIC_SOURCES", PUBLISHED)
    shared = SHARED
    for name in sources.FETCHABLE:
        for data_file in sources.files_of(name):
            found = fetch.find_verified(shared / name, data_file)
            assert found is not None, data_file
            with digests.open_content(found, data_file) as stream:
                assert len(stream.read()) == data_file.size
        assert len(sources.PUBLIC_SOURCES[name]) >= 2
    assert "apache-mxnet" in sources.PUBLIC_SOURCES["mnist"][-1]
    assert sources.public_urls(sources.files_of("mushroom")[0]) == [
        "https://archive.ics.uci.edu/static/public/73/mushroom.zip",
        "https://archive.ics.uci.edu/ml/machine-learning-databases/mushroom/agaricus-lepiota.data"]
    assert sources.public_urls(sources.files_of("fashion-mnist")[0])[0] == \
        "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/train-images-idx3-ubyte.gz"


# ---------------------------------------------------------------------------- the command
@needs_mnist
def test_data_fetch_to_a_folder_then_list_and_verify(capsys, tmp_path, monkeypatch):
    with LocalServer(SHARED) as server:
        monkeypatch.setenv(sources.MIRROR_ENV_VAR, server.url("files"))
        assert main(["data", "fetch", "mnist", "mushroom", "--to", str(tmp_path / "class"),
                     "--no-progress"]) == 0
    out = capsys.readouterr().out
    assert f"mnist: {tmp_path / 'class' / 'mnist'} (every file verified)" in out
    monkeypatch.setenv(datafolders.DATA_ENV_VAR, str(tmp_path / "class"))
    assert main(["data", "verify", "mnist", "mushroom"]) == 0
    assert main(["data", "list"]) == 0
    out = capsys.readouterr().out
    assert "mnist: " + str(tmp_path / "class" / "mnist") + " (used)" in out
    assert "fashion-mnist: not found" in out
    # a corrupt file: exit status 2, one line naming it
    labels = tmp_path / "class" / "mnist" / "t10k-labels-idx1-ubyte.gz"
    labels.write_bytes(gzip.compress(gzip.decompress(labels.read_bytes())[:-1]))
    assert main(["data", "verify"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith(f"gluon-bbb: error: {labels}: not mnist/")
    assert main(["data", "list", "mnist"]) == 0
    assert "t10k-labels-idx1-ubyte.gz: WRONG: not mnist/" in capsys.readouterr().out


def test_data_fetch_fails_in_one_line_with_exit_status_2(capsys, monkeypatch, server, tmp_path):
    use_sources(monkeypatch, server, "missing", dataset="mushroom")
    assert main(["data", "fetch", "mushroom", "--to", str(tmp_path), "--timeout", "1"]) == 2
    err = capsys.readouterr().err
    assert err.count("gluon-bbb: error:") == 1 and err.splitlines()[-1].startswith(
        "gluon-bbb: error: could not download mushroom/agaricus-lepiota.data")
    assert err.splitlines()[0].startswith("connecting to 127.0.0.1:")
    assert server.url("missing", "mushroom/agaricus-lepiota.data") + ": HTTP 404" in err


def test_data_fetch_into_a_folder_it_cannot_make_says_so_in_one_line(capsys, tmp_path):
    (tmp_path / "a-file").write_text("not a folder")
    assert main(["data", "fetch", "mnist", "--to", str(tmp_path / "a-file")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "cannot download there" in err
    assert str(tmp_path / "a-file" / "mnist") in err


# ---------------------------------------------------------------------------- a user's files
def test_a_wrong_file_under_the_final_name_is_kept_aside_and_named(monkeypatch, server, tmp_path,
                                                                   capsys):
    """Never destroyed: the copy that fails is renamed aside (numbered when the name is taken)
    before the download takes its place, and the message says where it went."""
    folder = tmp_path / "mnist"
    folder.mkdir()
    mine = gzip.compress(TINY_CONTENT[:-1])
    (folder / "tiny-ubyte.gz").write_bytes(mine)
    (folder / "tiny-ubyte.gz.rejected").write_bytes(b"an older one")
    use_sources(monkeypatch, server, "files")
    found = fetch.fetch_file(folder, tiny_file(), progress=False)
    assert gzip.decompress(found.read_bytes()) == TINY_CONTENT
    assert (folder / "tiny-ubyte.gz.rejected").read_bytes() == b"an older one"
    assert (folder / "tiny-ubyte.gz.rejected.1").read_bytes() == mine
    said = capsys.readouterr().err
    assert str(folder / "tiny-ubyte.gz.rejected.1") in said and "SHA-256" in said  # the reason


def test_data_fetch_keeps_a_users_own_mushroom_table(monkeypatch, server, served, tmp_path,
                                                     capsys):
    """The issue's reproduction: a table with one more row in $GLUON_BBB_DATA/mushroom."""
    expected = DataFile("mushroom", mushroom.FILE_NAME, hashlib.sha256(
        ("\n".join(MUSHROOM_LINES) + "\n").encode()).hexdigest(), 94, text=True, keep_gzip=False)
    monkeypatch.setitem(sources.DATA_FILES, "mushroom", (expected,))
    (served / "mushroom").mkdir()
    (served / "mushroom" / mushroom.FILE_NAME).write_text("\n".join(MUSHROOM_LINES) + "\n")
    use_sources(monkeypatch, server, "files", dataset="mushroom")
    root = tmp_path / "root"
    (root / "mushroom").mkdir(parents=True)
    own = "\n".join(MUSHROOM_LINES + [MUSHROOM_LINES[0]]) + "\n"
    (root / "mushroom" / mushroom.FILE_NAME).write_text(own)
    monkeypatch.setenv(datafolders.DATA_ENV_VAR, str(root))
    assert len(mushroom.load_mushroom().edible) == 3
    assert main(["data", "fetch", "mushroom", "--no-progress"]) == 0
    kept = root / "mushroom" / (mushroom.FILE_NAME + ".rejected")
    assert kept.read_text() == own
    assert str(kept) in capsys.readouterr().err
    assert len(mushroom.load_mushroom().edible) == 2


# ---------------------------------------------------------------------------- one search rule
@pytest.fixture
def synthetic_mnist(monkeypatch, served):
    """A small MNIST served by the local server, whose digests stand in for the real ones."""
    folder = served / "mnist"
    write_dataset(folder)
    files = []
    for data_file in sources.DATA_FILES["mnist"]:
        content = gzip.decompress((folder / (data_file.name + ".gz")).read_bytes())
        files.append(DataFile("mnist", data_file.name, hashlib.sha256(content).hexdigest(),
                              len(content)))
    monkeypatch.setitem(sources.DATA_FILES, "mnist", tuple(files))
    (folder / "tiny-ubyte.gz").unlink()
    return folder


def truncate(path):
    path.write_bytes(gzip.compress(gzip.decompress(path.read_bytes())[:-1]))


def test_a_verified_copy_wins_over_a_wrong_one_searched_first(synthetic_mnist, tmp_path, caplog,
                                                              capsys):
    """The issue's reproduction: MXNet's folder (searched first) with a truncated file, the
    download cache verified: the loaders read the cache, naming the skipped file once."""
    cache = tmp_path / "xdg-cache" / "gluon_bbb" / "data" / "mnist"
    mxnet = tmp_path / "mxnet-home" / "datasets" / "mnist"
    shutil.copytree(synthetic_mnist, cache)
    shutil.copytree(synthetic_mnist, mxnet)
    truncate(mxnet / "t10k-labels-idx1-ubyte.gz")
    with caplog.at_level("WARNING"):
        splits = load_splits("mnist", download=False)
    np.testing.assert_array_equal(splits["test"][1],
                                  read_idx(cache / "t10k-labels-idx1-ubyte.gz"))
    skipped = [record.getMessage() for record in caplog.records]
    assert len(skipped) == 1 and str(mxnet / "t10k-labels-idx1-ubyte.gz") in skipped[0]
    assert main(["data", "verify", "mnist"]) == 0
    assert str(cache) in capsys.readouterr().out


def test_a_bad_file_in_the_download_cache_is_downloaded_again(monkeypatch, server, served,
                                                              tmp_path):
    expected = DataFile("mushroom", mushroom.FILE_NAME, hashlib.sha256(
        ("\n".join(MUSHROOM_LINES) + "\n").encode()).hexdigest(), 94, text=True, keep_gzip=False)
    monkeypatch.setitem(sources.DATA_FILES, "mushroom", (expected,))
    (served / "mushroom").mkdir()
    (served / "mushroom" / mushroom.FILE_NAME).write_text("\n".join(MUSHROOM_LINES) + "\n")
    use_sources(monkeypatch, server, "files", dataset="mushroom")
    cache = tmp_path / "xdg-cache" / "gluon_bbb" / "data" / "mushroom"
    cache.mkdir(parents=True)
    (cache / mushroom.FILE_NAME).write_text(MUSHROOM_LINES[0] + "\n")  # cut short
    assert len(mushroom.load_mushroom().edible) == 2
    assert (cache / (mushroom.FILE_NAME + ".rejected")).read_text() == MUSHROOM_LINES[0] + "\n"


def test_a_verified_file_is_remembered_by_size_and_modification_time(monkeypatch,
                                                                     synthetic_mnist):
    hashed = []
    content_sha256 = digests.content_sha256
    monkeypatch.setattr(digests, "content_sha256",
                        lambda path, data_file: hashed.append(path) or content_sha256(path,
                                                                                     data_file))
    past = time.time() - 3600
    for path in synthetic_mnist.iterdir():
        os.utime(path, (past, past))
    assert state.dataset_state("mnist", synthetic_mnist).used.verified
    assert len(hashed) == 4
    assert state.dataset_state("mnist", synthetic_mnist).used.verified
    assert len(hashed) == 4  # remembered
    labels = synthetic_mnist / "t10k-labels-idx1-ubyte.gz"
    truncate(labels)
    os.utime(labels, (past, past))
    report = state.dataset_state("mnist", synthetic_mnist)
    assert len(hashed) == 5 and not report.used.verified
    assert "t10k-labels-idx1-ubyte.gz" in report.used.problems()[0]


# ---------------------------------------------------------------------------- data verify
def test_data_verify_exits_2_naming_every_missing_data_set(synthetic_mnist, tmp_path, capsys):
    assert main(["data", "verify"]) == 2  # no data at all
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 1
    for name in sources.FETCHABLE:
        assert f"{name}: not found in " in err[0]
    shutil.copytree(synthetic_mnist, tmp_path / "xdg-cache" / "gluon_bbb" / "data" / "mnist")
    assert main(["data", "verify", "mnist"]) == 0
    assert main(["data", "verify"]) == 2
    err = capsys.readouterr().err
    assert "mnist: not found" not in err.replace("fashion-mnist: not found", "")
    assert "fashion-mnist: not found" in err and "mushroom: not found" in err


# ---------------------------------------------------------------------------- file modes
@pytest.mark.parametrize("umask, file_mode, folder_mode", [(0o022, 0o644, 0o755),
                                                           (0o077, 0o600, 0o700)])
def test_downloads_are_readable_by_others_as_the_umask_allows(monkeypatch, server, served,
                                                              tmp_path, umask, file_mode,
                                                              folder_mode):
    """A teacher's folder shared with a class: files 0644 and folders 0755 under umask 022."""
    (served / "mushroom").mkdir()
    uci_zip(served / "mushroom" / "mushroom.zip", MUSHROOM_LINES)  # stored decompressed
    expected = DataFile("mushroom", mushroom.FILE_NAME, hashlib.sha256(
        ("\n".join(MUSHROOM_LINES) + "\n").encode()).hexdigest(), 94, text=True, keep_gzip=False)
    use_sources(monkeypatch, server, "files")
    monkeypatch.setitem(sources.PUBLIC_SOURCES, "mushroom",
                        (server.url("files", "mushroom/mushroom.zip"),))
    previous = os.umask(umask)
    try:
        kept = fetch.fetch_file(tmp_path / "class" / "mnist", tiny_file(), progress=False)
        unpacked = fetch.fetch_file(tmp_path / "class" / "mushroom", expected, progress=False)
    finally:
        os.umask(previous)
    for path in (kept, unpacked):
        assert path.stat().st_mode & 0o777 == file_mode, path
    for folder in (tmp_path / "class", kept.parent, unpacked.parent):
        assert folder.stat().st_mode & 0o777 == folder_mode, folder


# ---------------------------------------------------------------------------- stale parts
def test_a_part_left_by_a_killed_process_is_removed_when_its_file_is_fetched(monkeypatch, server,
                                                                             tmp_path):
    folder = tmp_path / "mnist"
    folder.mkdir()
    stale = folder / ".tiny-ubyte.k1ll3d.part"  # as mkstemp names it, then SIGKILL
    stale.write_bytes(TINY_CONTENT[:100])
    other = folder / ".other-ubyte.k1ll3d.part"  # another file's: left for its own fetch
    other.write_bytes(b"x")
    use_sources(monkeypatch, server, "files")
    fetch.fetch_file(folder, tiny_file(), progress=False)
    assert leftovers(folder) == [other.name, "tiny-ubyte.gz"]
    stale.write_bytes(b"killed again")  # the file is there already: the part goes all the same
    fetch.fetch_file(folder, tiny_file(), progress=False)
    assert leftovers(folder) == [other.name, "tiny-ubyte.gz"]


# ---------------------------------------------------------------------------- time limits
def test_a_trickling_server_is_given_up_at_the_files_deadline(monkeypatch, server, tmp_path):
    use_sources(monkeypatch, server, "trickle", "files")
    start = time.perf_counter()
    found = fetch.fetch_file(tmp_path / "mnist", tiny_file(), progress=False, timeout=5,
                             deadline=0.5)
    assert time.perf_counter() - start < 4  # each read came within the timeout
    assert gzip.decompress(found.read_bytes()) == TINY_CONTENT
    use_sources(monkeypatch, server, "trickle")
    with pytest.raises(fetch.FetchError, match=r"trickle/mnist/tiny-ubyte.gz: not done after "
                                               r"0.5 s"):
        fetch.fetch_file(tmp_path / "other", tiny_file(), progress=False, timeout=5,
                         deadline=0.5)


def test_a_host_that_does_not_answer_is_tried_once_and_named_before_the_bar(
        monkeypatch, server, served, tmp_path, capsys):
    second = tiny_file(name="tiny2-ubyte")
    (served / "mnist" / "tiny2-ubyte.gz").write_bytes(gzip.compress(TINY_CONTENT))
    with LocalServer(served) as silent:
        monkeypatch.setitem(sources.PUBLIC_SOURCES, "mnist", (
            silent.url("held", "mnist/{file}"), server.url("files", "mnist/{file}")))
        start = time.perf_counter()
        for data_file in (tiny_file(), second):
            fetch.fetch_file(tmp_path / "mnist", data_file, progress=True, timeout=0.5)
        assert time.perf_counter() - start < 5
        assert sum(silent.counts.values()) == 1  # skipped for the second file
    err = capsys.readouterr().err
    host = silent.base.split("//")[1]
    assert err.index(f"connecting to {host}") < err.index(f"connecting to "
                                                          f"{server.base.split('//')[1]}")
    for name in ("tiny-ubyte", "tiny2-ubyte"):  # a line that stays: file, source, folder
        assert (f"downloaded mnist/{name} from {server.url('files', f'mnist/{name}.gz')} "
                f"into {tmp_path / 'mnist'}") in err


def test_ctrl_c_during_data_fetch_says_what_is_kept(monkeypatch, capsys):
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(fetch, "fetch", interrupted)
    assert main(["data", "fetch", "mnist", "--no-progress"]) == 130
    err = capsys.readouterr().err
    assert "checkpoint" not in err
    assert "interrupted: the files already verified are kept" in err


# ---------------------------------------------------------------------------- locks
WITHOUT_FCNTL = """
import sys
sys.modules["fcntl"] = None  # as on Windows: importing it fails
import gluon_bbb, gluon_bbb.cli, gluon_bbb.data.fetch, gluon_bbb.experiments.runlock
print("imported", "filelock" in sys.modules)
"""


def test_gluon_bbb_imports_where_fcntl_does_not_exist():
    """Importing needs neither fcntl nor filelock (imported on a lock's first use: where fcntl is
    missing its import warns)."""
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    done = subprocess.run([sys.executable, "-c", WITHOUT_FCNTL], env=env, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "imported False", done.stderr[-2000:]
    assert "soft file lock" not in done.stderr


def test_the_fetcher_and_the_run_lock_share_one_lock():
    from gluon_bbb.io import locks as _locks
    from gluon_bbb.experiments import runlock
    assert fetch.waiting_lock is _locks.waiting_lock is runlock.waiting_lock
    assert runlock.try_lock is _locks.try_lock


#: A process that holds the lock on the file argv[1] until its standard input closes. It runs
#: the locks module's file argv[2] alone: importing the package would import MXNet (seconds).
HOLD_LOCK = """
import importlib.util, sys
spec = importlib.util.spec_from_file_location("locks", sys.argv[2])
locks = importlib.util.module_from_spec(spec)
spec.loader.exec_module(locks)
with locks.waiting_lock(sys.argv[1]):
    print("locked", flush=True)
    sys.stdin.read()
"""


@pytest.fixture
def held_fetch_lock(tmp_path):
    """(the folder ``tmp_path/mnist``, the process that holds its fetch lock)."""
    folder = tmp_path / "mnist"
    folder.mkdir()
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(folder / fetch.LOCK_NAME),
                               locks.__file__],
                              env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        yield folder, holder
    finally:
        holder.kill()
        holder.wait()


def test_a_fetch_waits_for_a_held_lock_at_most_its_lock_timeout(held_fetch_lock, monkeypatch,
                                                                server):
    folder, _ = held_fetch_lock
    use_sources(monkeypatch, server, "files")
    started = time.monotonic()
    with pytest.raises(locks.LockTimeout) as caught:
        fetch.fetch_file(folder, tiny_file(), progress=False, lock_timeout=0.3)
    assert time.monotonic() - started < 60  # bounded (not the default wait), however loaded
    assert str(caught.value) == (f"another process holds {folder / fetch.LOCK_NAME}; "
                                 "waited 0.3 s (let it finish, or stop it)")
    assert leftovers(folder) == [] and not server.counts  # nothing was requested


def test_by_default_a_fetch_waits_as_long_as_the_holder_may_take(held_fetch_lock, monkeypatch,
                                                                 server):
    """Two sources, each allowed its deadline plus its timeout: 2 x (0.2 + 0.1) s."""
    folder, _ = held_fetch_lock
    use_sources(monkeypatch, server, "404", "files")
    with pytest.raises(locks.LockTimeout, match=r"; waited 0\.6 s"):
        fetch.fetch_file(folder, tiny_file(), progress=False, timeout=0.1, deadline=0.2)


def test_data_fetch_says_in_one_line_that_another_process_holds_the_lock(monkeypatch, capsys):
    def held(*args, **kwargs):
        raise locks.LockTimeout("another process holds /data/mnist/.fetch.lock; waited 1 s "
                                "(let it finish, or stop it)")

    monkeypatch.setattr(fetch, "fetch", held)
    assert main(["data", "fetch", "mnist", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert err == ["gluon-bbb: error: another process holds /data/mnist/.fetch.lock; waited 1 s "
                   "(let it finish, or stop it)"]


def test_the_fetch_lock_of_a_killed_holder_is_free_at_once(held_fetch_lock, monkeypatch, server):
    """The operating system's lock, not a lock file that outlives its holder: SIGKILL frees it."""
    folder, holder = held_fetch_lock
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    use_sources(monkeypatch, server, "files")
    found = fetch.fetch_file(folder, tiny_file(), progress=False, lock_timeout=0)
    assert gzip.decompress(found.read_bytes()) == TINY_CONTENT


def test_the_loaders_error_names_every_file_not_downloaded_with_one_way_to_fix(monkeypatch,
                                                                               server):
    use_sources(monkeypatch, server, "missing")
    with pytest.raises(datafolders.DataNotFoundError) as info:
        load_raw("mnist", "test")
    message = str(info.value)
    assert message.count("To fix") == 1, message
    for data_file in sources.files_of("mnist"):
        assert f"could not download mnist/{data_file.name}" in message
    assert "GLUON_BBB_MIRROR" in message


# ---------------------------------------------------------------------------- edges
def test_an_html_page_served_with_status_200_is_called_so(monkeypatch, server, tmp_path):
    use_sources(monkeypatch, server, "html")
    with pytest.raises(fetch.FetchError, match=r"html/mnist/tiny-ubyte.gz: an HTML page, not "
                                               r"the file"):
        fetch.fetch_file(tmp_path / "mnist", tiny_file(), progress=False)


def test_a_plain_folder_as_the_mirror_is_read_as_one(monkeypatch, served, tmp_path):
    monkeypatch.setenv(sources.MIRROR_ENV_VAR, str(served))
    found = fetch.fetch_file(tmp_path / "mnist", tiny_file(), progress=False)
    assert gzip.decompress(found.read_bytes()) == TINY_CONTENT
    assert sources.mirror_urls(tiny_file(), str(served))[0] == (
        served.resolve().as_uri() + "/mnist/tiny-ubyte.gz")
