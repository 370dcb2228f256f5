"""Fixtures shared by several test modules."""
import pytest

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
