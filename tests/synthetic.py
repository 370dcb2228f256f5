"""Shared test data: small synthetic problems, and the marker for tests that need real MNIST."""
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
