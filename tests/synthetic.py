"""Shared test data: small synthetic problems, and the marker for tests that need real MNIST."""
import gzip
import os
from pathlib import Path

import numpy as np
import pytest

from gluon_bbb import data


def blobs(num_examples=512, num_features=8, num_classes=3, seed=0, scale=3.0):
    """Gaussian blobs around class centres drawn with std ``scale`` (3: linearly separable).

    Returns inputs (num_examples, num_features) float32 and labels (num_examples,) int32.
    """
    rng = np.random.default_rng(seed)
    centers = rng.normal(scale=scale, size=(num_classes, num_features))
    labels = rng.integers(0, num_classes, size=num_examples)
    inputs = centers[labels] + rng.normal(size=(num_examples, num_features))
    return inputs.astype(np.float32), labels.astype(np.int32)


def _mnist_root():
    root = os.environ.get(data.DATA_ENV_VAR)
    if not root or not (Path(root) / "mnist").is_dir():
        return None
    return root


needs_mnist = pytest.mark.skipif(
    _mnist_root() is None, reason=f"set {data.DATA_ENV_VAR} to a folder holding mnist/")


def require_mnist():
    """Skip the calling test or fixture when the real MNIST is not available."""
    if _mnist_root() is None:
        pytest.skip(f"set {data.DATA_ENV_VAR} to a folder holding mnist/")


# Small synthetic IDX files (MNIST's format)
def idx_bytes(array, magic=None):
    """IDX encoding of a uint8 array (header + payload)."""
    array = np.asarray(array, dtype=np.uint8)
    if magic is None:
        magic = 0x0800 + array.ndim
    header = magic.to_bytes(4, "big") + b"".join(
        d.to_bytes(4, "big") for d in array.shape)
    return header + array.tobytes()


def write_content(path, content, gz=True):
    """Write bytes to ``path`` (``path.gz``, gzip-compressed, with ``gz``); returns the path."""
    path = Path(path)
    if gz:
        path = path.with_name(path.name + ".gz")
        with gzip.open(path, "wb") as stream:
            stream.write(content)
    else:
        path.write_bytes(content)
    return path


def write_idx(path, array, gz=True, magic=None):
    return write_content(path, idx_bytes(array, magic), gz=gz)


def make_split(n, seed):
    rng = np.random.default_rng(seed)
    images = rng.integers(0, 256, size=(n, 28, 28), dtype=np.uint8)
    labels = (np.arange(n) % 10).astype(np.uint8)
    return images, labels


def write_dataset(folder, n_train=12, n_test=5, gz=True, seed=0):
    """Write the four IDX files into ``folder``; return the arrays written."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    arrays = {}
    for split, prefix, n in (("train", "train", n_train), ("test", "t10k", n_test)):
        images, labels = make_split(n, seed + (split == "test"))
        write_idx(folder / f"{prefix}-images-idx3-ubyte", images, gz=gz)
        write_idx(folder / f"{prefix}-labels-idx1-ubyte", labels, gz=gz)
        arrays[split] = (images, labels)
    return arrays
