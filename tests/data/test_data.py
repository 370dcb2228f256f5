"""Tests of gluon_bbb.data: synthetic IDX files, search order, preprocessing,
ArrayLoader, and (when available) the real MNIST / Fashion-MNIST files."""
import os
from pathlib import Path

import numpy as np
import pytest
from mxnet import nd

from gluon_bbb import data as gdata
from gluon_bbb.data import datafolders
from gluon_bbb.data import (
    ArrayLoader,
    DataNotFoundError,
    EpochShuffled,
    IDXFormatError,
    find_data_dir,
    load_dataset,
    load_splits,
    preprocess,
    read_idx,
)
from synthetic import idx_bytes, make_split, write_content, write_dataset, write_idx

@pytest.fixture
def isolated(tmp_path, monkeypatch):
    """No data anywhere by default: empty GLUON_BBB_DATA, MXNET_HOME, Debian root."""
    monkeypatch.delenv("GLUON_BBB_DATA", raising=False)
    monkeypatch.setenv("MXNET_HOME", str(tmp_path / "mxnet_home"))
    monkeypatch.setattr(datafolders, "DEBIAN_DATA_ROOT", tmp_path / "debian")

    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg-cache"))

    def no_download(name, *args, **kwargs):
        raise AssertionError("tests must not download")

    monkeypatch.setattr(gdata.fetch, "fetch", no_download)
    return tmp_path


# ----------------------------------------------------------------------------
# read_idx
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("gz", [True, False])
@pytest.mark.parametrize("shape", [(3, 28, 28), (7,), (2, 3, 4, 5)])
def test_read_idx_round_trip(tmp_path, gz, shape):
    array = np.random.default_rng(1).integers(0, 256, size=shape, dtype=np.uint8)
    path = write_idx(tmp_path / "x-ubyte", array, gz=gz)
    result = read_idx(path)
    assert result.dtype == np.uint8
    assert result.shape == shape
    np.testing.assert_array_equal(result, array)
    result[...] = 0  # writable, independent copy


def test_read_idx_gzip_detected_by_content(tmp_path):
    array = np.arange(10, dtype=np.uint8)
    gz_path = write_idx(tmp_path / "labels", array, gz=True)
    renamed = gz_path.rename(tmp_path / "labels-no-suffix")
    np.testing.assert_array_equal(read_idx(renamed), array)


@pytest.mark.parametrize("gz", [True, False])
def test_read_idx_truncated_names_file_and_sizes(tmp_path, gz):
    content = idx_bytes(np.zeros((60000, 28, 28), np.uint8))[:16 + 1000]
    path = write_content(tmp_path / "train-images-idx3-ubyte", content, gz=gz)
    with pytest.raises(IDXFormatError) as info:
        read_idx(path)
    message = str(info.value)
    assert str(path) in message
    assert "expected 47040000 bytes of pixel data" in message
    assert "found 1000" in message


def test_read_idx_extra_bytes(tmp_path):
    path = tmp_path / "labels"
    path.write_bytes(idx_bytes(np.arange(5, dtype=np.uint8)) + b"\x00\x00")
    with pytest.raises(IDXFormatError, match="expected 5 bytes of label data.*found 7"):
        read_idx(path)


@pytest.mark.parametrize("magic", [0x0803 + 0x01000000, 0x0903, 0x0D03, 0x0800])
def test_read_idx_wrong_magic(tmp_path, magic):
    path = write_idx(tmp_path / "bad", np.zeros((2, 28, 28), np.uint8), magic=magic)
    with pytest.raises(IDXFormatError) as info:
        read_idx(path)
    assert str(path) in str(info.value)
    assert "magic" in str(info.value)


def test_read_idx_header_too_short(tmp_path):
    path = tmp_path / "short"
    path.write_bytes(b"\x00\x00\x08\x03\x00\x00")
    with pytest.raises(IDXFormatError, match="truncated IDX header"):
        read_idx(path)
    path.write_bytes(b"\x00\x00")
    with pytest.raises(IDXFormatError, match="too short"):
        read_idx(path)


def test_read_idx_corrupt_gzip(tmp_path):
    path = write_idx(tmp_path / "x", np.zeros((50, 28, 28), np.uint8), gz=True)
    content = path.read_bytes()
    path.write_bytes(content[: len(content) // 2])  # cut the gzip stream
    with pytest.raises(IDXFormatError, match="gzip") as info:
        read_idx(path)
    assert str(path) in str(info.value)
    path.write_bytes(b"\x1f\x8b" + b"garbage" * 10)  # gzip magic, bad stream
    with pytest.raises(IDXFormatError, match="gzip"):
        read_idx(path)


def test_read_idx_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="nope"):
        read_idx(tmp_path / "nope")


# ----------------------------------------------------------------------------
# Loading synthetic data sets
# ----------------------------------------------------------------------------


@pytest.mark.parametrize("gz", [True, False])
def test_load_dataset_synthetic(isolated, gz):
    arrays = write_dataset(isolated / "d" / "mnist", gz=gz)
    for split in ("train", "test"):
        X, y = load_dataset("mnist", split, data_dir=isolated / "d",
                            preprocessing="255", download=False)
        images, labels = arrays[split]
        assert X.dtype == np.float32 and X.shape == (len(images), 784)
        assert y.dtype == np.int32 and y.shape == (len(images),)
        np.testing.assert_allclose(X, images.reshape(-1, 784) / 255.0, rtol=1e-6)
        np.testing.assert_array_equal(y, labels)


def test_mismatched_counts(isolated):
    folder = isolated / "mnist"
    write_dataset(folder)
    write_idx(folder / "train-labels-idx1-ubyte", np.zeros(11, np.uint8))
    with pytest.raises(IDXFormatError, match="12 images.*11 labels"):
        load_dataset("mnist", "train", data_dir=folder, download=False)


def test_label_out_of_range(isolated):
    folder = isolated / "mnist"
    write_dataset(folder)
    labels = np.zeros(12, np.uint8)
    labels[4] = 10
    write_idx(folder / "train-labels-idx1-ubyte", labels)
    with pytest.raises(IDXFormatError, match="label 10 at index 4"):
        load_dataset("mnist", "train", data_dir=folder, download=False)


def test_wrong_image_shape(isolated):
    folder = isolated / "mnist"
    write_dataset(folder)
    write_idx(folder / "t10k-images-idx3-ubyte", np.zeros((5, 4, 4), np.uint8))
    with pytest.raises(IDXFormatError, match=r"\(n, 28, 28\)"):
        load_dataset("mnist", "test", data_dir=folder, download=False)


def test_raw_preferred_over_gz(isolated):
    folder = isolated / "mnist"
    write_dataset(folder, gz=True)
    raw_labels = np.full(12, 7, np.uint8)
    write_idx(folder / "train-labels-idx1-ubyte", raw_labels, gz=False)
    _, y = load_dataset("mnist", "train", data_dir=folder, download=False)
    np.testing.assert_array_equal(y, raw_labels)


# ----------------------------------------------------------------------------
# Search order and errors
# ----------------------------------------------------------------------------


def test_search_order(isolated, monkeypatch):
    explicit = isolated / "explicit"
    env_root = isolated / "env"
    mx_cache = isolated / "mxnet_home" / "datasets"
    debian = isolated / "debian"
    for root in (explicit, env_root, mx_cache, debian):
        write_dataset(root / "fashion-mnist")
    monkeypatch.setenv("GLUON_BBB_DATA", str(env_root))

    assert find_data_dir("fashion-mnist", explicit) == explicit / "fashion-mnist"
    # the folder holding the files directly is accepted too
    assert (find_data_dir("fashion-mnist", explicit / "fashion-mnist")
            == explicit / "fashion-mnist")
    assert find_data_dir("fashion-mnist") == env_root / "fashion-mnist"
    monkeypatch.delenv("GLUON_BBB_DATA")
    assert find_data_dir("fashion-mnist") == mx_cache / "fashion-mnist"
    monkeypatch.setenv("MXNET_HOME", str(isolated / "empty_mxnet_home"))
    assert find_data_dir("fashion-mnist") == debian / "fashion-mnist"


def test_incomplete_folder_is_skipped(isolated, monkeypatch):
    env_root = isolated / "env"
    write_dataset(env_root / "mnist")
    partial = isolated / "partial" / "mnist"
    write_dataset(partial)
    (partial / "t10k-labels-idx1-ubyte.gz").unlink()
    monkeypatch.setenv("GLUON_BBB_DATA", str(env_root))
    assert find_data_dir("mnist", isolated / "partial") == env_root / "mnist"


def test_other_dataset_folder_not_used_directly(isolated):
    mnist = isolated / "mnist"
    write_dataset(mnist)
    assert find_data_dir("mnist", mnist) == mnist
    with pytest.raises(DataNotFoundError):
        find_data_dir("fashion-mnist", mnist)


def test_missing_everywhere_lists_searched_paths(isolated, monkeypatch):
    explicit = isolated / "explicit"
    explicit.mkdir()
    env_root = isolated / "env"
    monkeypatch.setenv("GLUON_BBB_DATA", str(env_root))
    with pytest.raises(DataNotFoundError) as info:
        load_dataset("mnist", data_dir=explicit, download=False)
    message = str(info.value)
    for path in (explicit / "mnist", explicit, env_root / "mnist",
                 isolated / "mxnet_home" / "datasets" / "mnist",
                 isolated / "debian" / "mnist"):
        assert str(path) in message
    assert "data_dir=" in message and "GLUON_BBB_DATA=" in message
    assert "download=False" in message
    with pytest.raises(DataNotFoundError):
        find_data_dir("mnist")
    assert isinstance(info.value, FileNotFoundError)


def test_explicit_missing_data_dir(isolated):
    missing = isolated / "does-not-exist"
    with pytest.raises(DataNotFoundError, match="does-not-exist"):
        find_data_dir("mnist", missing)
    with pytest.raises(DataNotFoundError, match="does-not-exist"):
        load_dataset("mnist", data_dir=missing, download=False)


def test_download_failure_is_reported_with_every_folder(isolated, monkeypatch):
    def offline(name, *args, **kwargs):
        raise gdata.FetchError("could not download fashion-mnist/x: http://host/x: refused")

    monkeypatch.setattr(gdata.fetch, "fetch", offline)
    with pytest.raises(DataNotFoundError) as info:
        load_dataset("fashion-mnist", download=True)
    message = str(info.value)
    assert "Downloading failed: could not download fashion-mnist/x: http://host/x: refused" in message
    assert str(isolated / "debian" / "fashion-mnist") in message
    assert str(isolated / "xdg-cache" / "gluon_bbb" / "data" / "fashion-mnist") in message


def test_a_download_is_read_from_the_folder_it_went_to(isolated, monkeypatch):
    calls = []

    def fake_fetch(name, *args, **kwargs):
        calls.append(name)
        folder = isolated / "downloaded" / name
        write_dataset(folder, n_train=4, n_test=6, seed=3)
        return folder

    monkeypatch.setattr(gdata.fetch, "fetch", fake_fetch)
    X, y = load_dataset("mnist", "test", preprocessing="paper")
    assert calls == ["mnist"]
    X_direct, y_direct = load_dataset("mnist", "test", data_dir=isolated / "downloaded",
                                      download=False)
    np.testing.assert_array_equal(X, X_direct)
    np.testing.assert_array_equal(y, y_direct)


def test_the_download_cache_is_searched_last_and_only_without_gluon_bbb_data(isolated,
                                                                             monkeypatch):
    cache = isolated / "xdg-cache" / "gluon_bbb" / "data"
    write_dataset(cache / "mnist")
    write_dataset(isolated / "debian" / "mnist")
    assert find_data_dir("mnist") == isolated / "debian" / "mnist"
    (isolated / "debian" / "mnist" / "t10k-labels-idx1-ubyte.gz").unlink()
    assert find_data_dir("mnist") == cache / "mnist"
    assert datafolders.download_root() == cache
    monkeypatch.setenv("GLUON_BBB_DATA", str(isolated / "root"))
    assert datafolders.download_root() == isolated / "root"
    with pytest.raises(DataNotFoundError) as info:
        find_data_dir("mnist")
    assert str(cache) not in str(info.value)


def test_unknown_names(isolated):
    write_dataset(isolated / "mnist")
    with pytest.raises(ValueError, match="fashion-mnist"):
        load_dataset("cifar10", data_dir=isolated, download=False)
    with pytest.raises(ValueError, match="mnist"):
        find_data_dir("MNIST")
    with pytest.raises(ValueError, match="train, test"):
        load_dataset("mnist", "valid", data_dir=isolated, download=False)
    with pytest.raises(ValueError, match="paper, 255, standardize"):
        load_dataset("mnist", data_dir=isolated, preprocessing="minmax",
                     download=False)


# ----------------------------------------------------------------------------
# Preprocessing
# ----------------------------------------------------------------------------


def test_preprocess_values():
    images = np.array([[[0, 126], [252, 255]], [[1, 2], [3, 4]]], dtype=np.uint8)
    flat = images.reshape(2, 4).astype(np.float64)

    paper = preprocess(images, "paper")
    assert paper.dtype == np.float32 and paper.shape == (2, 4)
    np.testing.assert_allclose(paper, flat / 126, rtol=1e-6)
    assert paper[0, 1] == 1.0 and paper[0, 2] == 2.0

    scaled = preprocess(images, "255")
    assert scaled.dtype == np.float32
    np.testing.assert_allclose(scaled, flat / 255, rtol=1e-6)

    standard = preprocess(images, "standardize", mean=0.1307, std=0.3081)
    np.testing.assert_allclose(standard, (flat / 255 - 0.1307) / 0.3081,
                               rtol=1e-5, atol=1e-6)

    own = preprocess(images, "standardize")  # statistics of the images themselves
    expected = (flat / 255 - (flat / 255).mean()) / (flat / 255).std()
    np.testing.assert_allclose(own, expected, rtol=1e-5, atol=1e-6)
    assert abs(own.mean()) < 1e-6 and abs(own.std() - 1) < 1e-5


def test_preprocess_errors():
    images = np.zeros((2, 28, 28), np.uint8)
    with pytest.raises(ValueError, match="paper, 255, standardize"):
        preprocess(images, "minmax")
    with pytest.raises(ValueError, match="positive std"):
        preprocess(images, "standardize")  # constant images: std 0
    with pytest.raises(ValueError, match="2 dimensions"):
        preprocess(np.zeros(5, np.uint8))


def test_load_raw_returns_the_stored_pixels(isolated):
    arrays = write_dataset(isolated / "d" / "fashion-mnist")
    images, labels = gdata.load_raw("fashion-mnist", "test", data_dir=isolated / "d", download=False)
    assert images.dtype == np.uint8 and images.shape == (5, 28, 28)
    np.testing.assert_array_equal(images.reshape(5, -1), arrays["test"][0].reshape(5, -1))
    np.testing.assert_array_equal(labels, arrays["test"][1])
    with pytest.raises(gdata.DataNotFoundError):
        gdata.load_raw("mnist", "test", data_dir=isolated / "d", download=False)


def test_load_dataset_standardize_uses_training_constants(isolated):
    arrays = write_dataset(isolated / "mnist")
    X, _ = load_dataset("mnist", "test", data_dir=isolated,
                        preprocessing="standardize", download=False)
    images = arrays["test"][0].reshape(-1, 784) / 255.0
    np.testing.assert_allclose(X, (images - 0.1307) / 0.3081, rtol=1e-5, atol=1e-5)


# ----------------------------------------------------------------------------
# load_splits / get_loaders
# ----------------------------------------------------------------------------


def test_load_splits_validation_and_subset(isolated):
    arrays = write_dataset(isolated / "mnist", n_train=20, n_test=7)
    images, labels = arrays["train"]
    splits = load_splits("mnist", data_dir=isolated, preprocessing="255",
                         num_validation=6, download=False)
    assert set(splits) == {"train", "validation", "test"}
    np.testing.assert_array_equal(splits["train"][1], labels[:14])
    np.testing.assert_array_equal(splits["validation"][1], labels[14:])
    np.testing.assert_allclose(splits["validation"][0] * 255,
                               images[14:].reshape(6, 784), rtol=1e-5)
    assert len(splits["test"][0]) == 7

    small = load_splits("mnist", data_dir=isolated, num_validation=6, subset=3,
                        download=False)
    assert {k: len(v[0]) for k, v in small.items()} == {
        "train": 3, "validation": 3, "test": 3}
    np.testing.assert_array_equal(small["validation"][1], labels[14:17])

    assert set(load_splits("mnist", data_dir=isolated, download=False)) == {
        "train", "test"}


@pytest.mark.parametrize("bad", [-1, 20, 25, 1.5, True])
def test_load_splits_bad_num_validation(isolated, bad):
    write_dataset(isolated / "mnist", n_train=20)
    with pytest.raises(ValueError, match="num_validation"):
        load_splits("mnist", data_dir=isolated, num_validation=bad, download=False)


def test_get_loaders(isolated):
    write_dataset(isolated / "mnist", n_train=20, n_test=7)
    loaders = gdata.get_loaders("mnist", batch_size=4, data_dir=isolated,
                                num_validation=5, download=False)
    assert {k: (v.num_examples, len(v), v.shuffle) for k, v in loaders.items()} == {
        "train": (15, 4, True), "validation": (5, 2, False), "test": (7, 2, False)}


# ----------------------------------------------------------------------------
# ArrayLoader
# ----------------------------------------------------------------------------


def toy_arrays(n=23, d=5):
    X = np.arange(n * d, dtype=np.float32).reshape(n, d)
    y = np.arange(n, dtype=np.int32)
    return X, y


def epoch(loader):
    return [(data.asnumpy(), label.asnumpy()) for data, label in loader]


def test_array_loader_shuffled_covers_each_example_once():
    X, y = toy_arrays()
    loader = ArrayLoader(X, y, batch_size=5, shuffle=True, seed=0)
    orders = []
    for _ in range(2):
        batches = epoch(loader)
        assert [len(label) for _, label in batches] == [5, 5, 5, 5, 3]
        for data, label in batches:
            assert data.dtype == np.float32 and label.dtype == np.float32
            assert data.shape == (len(label), 5)
            np.testing.assert_array_equal(data, X[label.astype(int)])  # pairs kept
        order = np.concatenate([label for _, label in batches]).astype(int)
        np.testing.assert_array_equal(np.sort(order), y)
        orders.append(order)
    assert not np.array_equal(orders[0], orders[1])  # new permutation each epoch
    assert not np.array_equal(orders[0], y)


def test_array_loader_same_seed_same_order():
    X, y = toy_arrays()
    first = [epoch(ArrayLoader(X, y, 4, shuffle=True, seed=7)) for _ in range(2)]
    for (d1, l1), (d2, l2) in zip(*first):
        np.testing.assert_array_equal(d1, d2)
        np.testing.assert_array_equal(l1, l2)
    other = epoch(ArrayLoader(X, y, 4, shuffle=True, seed=8))
    assert not all(np.array_equal(a[1], b[1]) for a, b in zip(first[0], other))


def _labels(loader):
    return np.concatenate([label for _, label in epoch(loader)]).astype(int)


def test_reseed_restarts_the_permutations():
    X, y = toy_arrays()
    loader = ArrayLoader(X, y, 4, shuffle=True, seed=3)
    first, second = _labels(loader), _labels(loader)
    loader.reseed(3)
    np.testing.assert_array_equal(_labels(loader), first)
    np.testing.assert_array_equal(_labels(loader), second)
    loader.reseed([3, 1])  # a sequence seed, as EpochShuffled uses
    np.testing.assert_array_equal(_labels(loader), np.random.default_rng([3, 1]).permutation(23))


def test_epoch_shuffled_order_depends_only_on_seed_and_epoch():
    X, y = toy_arrays()
    current = {"epoch": 0}
    straight = EpochShuffled(ArrayLoader(X, y, 4, shuffle=True), 5, lambda: current["epoch"])
    orders = []
    for current["epoch"] in range(3):
        orders.append(_labels(straight))
    assert not np.array_equal(orders[1], orders[2])
    # A fresh loader (as after a restart) at epoch 2 repeats epoch 2, whatever its own seed.
    resumed = EpochShuffled(ArrayLoader(X, y, 4, shuffle=True, seed=99), 5, lambda: 2)
    np.testing.assert_array_equal(_labels(resumed), orders[2])
    assert len(resumed) == 6 and resumed.num_examples == 23


def test_epoch_shuffled_needs_a_reseedable_loader():
    with pytest.raises(TypeError, match="reseed"):
        EpochShuffled([(1, 2)], 0, lambda: 0)


def test_array_loader_unshuffled_in_order():
    X, y = toy_arrays()
    batches = epoch(ArrayLoader(X, y, 10))
    np.testing.assert_array_equal(np.concatenate([d for d, _ in batches]), X)
    np.testing.assert_array_equal(np.concatenate([l for _, l in batches]), y)


@pytest.mark.parametrize("n, batch_size, last_batch, expected", [
    (23, 5, "keep", 5), (23, 5, "discard", 4), (20, 5, "keep", 4),
    (20, 5, "discard", 4), (3, 5, "keep", 1), (3, 5, "discard", 0),
    (1, 1, "keep", 1)])
def test_array_loader_len(n, batch_size, last_batch, expected):
    X, y = toy_arrays(n)
    for shuffle in (False, True):
        loader = ArrayLoader(X, y, batch_size, shuffle=shuffle, seed=0,
                             last_batch=last_batch)
        assert len(loader) == expected
        batches = epoch(loader)
        assert len(batches) == expected
        sizes = [len(label) for _, label in batches]
        assert all(size == batch_size for size in sizes[:-1])
        if last_batch == "discard":
            assert sum(sizes) == expected * batch_size
        else:
            assert sum(sizes) == n
    assert loader.num_examples == n and loader.batch_size == batch_size


def test_array_loader_reshapes_images_and_dtype():
    images = np.zeros((6, 28, 28), np.uint8)
    loader = ArrayLoader(images, np.zeros(6), 4, dtype="float16")
    data, label = next(iter(loader))
    assert data.shape == (4, 784) and data.dtype == np.float16
    assert label.shape == (4,) and label.dtype == np.float32
    assert isinstance(data, nd.NDArray)


@pytest.mark.parametrize("X, y, batch_size, match", [
    (np.zeros(5), np.zeros(5), 2, "X must have shape"),
    (np.zeros((5, 3)), np.zeros(4), 2, "different lengths"),
    (np.zeros((5, 3)), np.zeros((5, 1)), 2, "y must have shape"),
    (np.zeros((5, 3)), np.zeros(5), 0, "batch_size"),
    (np.zeros((5, 3)), np.zeros(5), 2.0, "batch_size"),
    (np.zeros((0, 3)), np.zeros(0), 2, "empty"),
])
def test_array_loader_bad_inputs(X, y, batch_size, match):
    with pytest.raises(ValueError, match=match):
        ArrayLoader(X, y, batch_size)


def test_array_loader_bad_last_batch():
    X, y = toy_arrays()
    with pytest.raises(ValueError, match="keep, discard"):
        ArrayLoader(X, y, 4, last_batch="rollover")


# ----------------------------------------------------------------------------
# Real data (skipped when GLUON_BBB_DATA does not hold it)
# ----------------------------------------------------------------------------

REAL_ROOT = os.environ.get("GLUON_BBB_DATA", "")
MNIST_TRAIN_COUNTS = [5923, 6742, 5958, 6131, 5842, 5421, 5918, 6265, 5851, 5949]
MNIST_TEST_COUNTS = [980, 1135, 1032, 1010, 982, 892, 958, 1028, 974, 1009]


def _real_data_or_skip(name):
    folder = Path(REAL_ROOT) / name
    if not REAL_ROOT or not folder.is_dir():
        pytest.skip(f"real {name} data not found (set GLUON_BBB_DATA)")
    return folder


@pytest.fixture(scope="module")
def mnist_raw():
    folder = _real_data_or_skip("mnist")
    return {split: gdata.load_raw("mnist", split, data_dir=folder, download=False)
            for split in ("train", "test")}


@pytest.fixture(scope="module")
def fashion_labels():
    folder = _real_data_or_skip("fashion-mnist")
    return {split: read_idx(folder / name)
            for split, name in (("train", "train-labels-idx1-ubyte.gz"),
                                ("test", "t10k-labels-idx1-ubyte.gz"))}


def test_real_mnist_counts_and_labels(mnist_raw):
    train_images, train_labels = mnist_raw["train"]
    test_images, test_labels = mnist_raw["test"]
    assert train_images.shape == (60000, 28, 28) and train_labels.shape == (60000,)
    assert test_images.shape == (10000, 28, 28) and test_labels.shape == (10000,)
    assert np.bincount(train_labels).tolist() == MNIST_TRAIN_COUNTS
    assert np.bincount(test_labels).tolist() == MNIST_TEST_COUNTS
    assert train_labels[:8].tolist() == [5, 0, 4, 1, 9, 2, 1, 3]
    pixels = train_images / 255.0
    assert pixels.mean() == pytest.approx(0.1307, abs=1e-4)
    assert pixels.std() == pytest.approx(0.3081, abs=1e-4)


def test_real_mnist_preprocessing(mnist_raw):
    images = mnist_raw["train"][0]
    X = preprocess(images, "paper")
    assert X.shape == (60000, 784) and X.dtype == np.float32
    assert X.max() == pytest.approx(255 / 126)
    Z = preprocess(images, "standardize", *gdata.TRAIN_PIXEL_STATS["mnist"])
    assert abs(float(Z.mean())) < 1e-3 and float(Z.std()) == pytest.approx(1, abs=1e-3)


def test_real_mnist_find_data_dir():
    folder = _real_data_or_skip("mnist")
    assert find_data_dir("mnist") == folder  # found through GLUON_BBB_DATA


def test_real_mnist_array_loader_epoch(mnist_raw):
    images, labels = mnist_raw["train"]
    loader = ArrayLoader(preprocess(images), labels, 128, shuffle=True, seed=0)
    assert len(loader) == 469
    total = nd.zeros((1,))
    count = 0
    for data, label in loader:
        total = total + label.sum()
        count += data.shape[0]
    assert count == 60000
    assert total.asscalar() == float(labels.sum())


def test_real_fashion_mnist_labels(fashion_labels):
    assert np.bincount(fashion_labels["train"]).tolist() == [6000] * 10
    assert np.bincount(fashion_labels["test"]).tolist() == [1000] * 10
    assert len(gdata.CLASS_NAMES["fashion-mnist"]) == 10
