"""Where each data file comes from, and what it must hold: the catalogue of the fetcher
(:mod:`gluon_bbb.data.fetch`).

Every file has several public sources, tried in order, each list taken from a library that
maintains one for the same files (named beside each list below); MXNet's retired host stays
last. ``$GLUON_BBB_MIRROR``, a base URL laid out like a data folder (``mnist/``,
``fashion-mnist/``, ``mushroom/``, the files named as the public sources name them, gzipped or
not), is tried before them all.

A file is checked by the SHA-256 of its decompressed content (:data:`DATA_FILES`), so a
re-compressed copy is accepted and a wrong or truncated one is not. For the mushroom file, a
text file, the digest is of its canonical text: each line without its line ending (``\\n``,
``\\r\\n``), blank lines dropped, each line ended by ``\\n``, so that copies that differ only in
line endings or a final newline agree (:mod:`gluon_bbb.data.digests`).
"""
import os
from dataclasses import dataclass
from pathlib import Path
from typing import List, Optional, Tuple

__all__ = ["DataFile", "DATA_FILES", "FETCHABLE", "MIRROR_ENV_VAR", "PUBLIC_SOURCES",
           "files_of", "public_urls", "mirror_urls", "source_urls", "check_fetchable"]

MIRROR_ENV_VAR = "GLUON_BBB_MIRROR"
"""Environment variable naming a base URL laid out like a data folder, tried first."""


@dataclass(frozen=True)
class DataFile:
    """One file of a data set, as the fetcher stores and checks it.

    Attributes
    ----------
    dataset : str
        Its data set, also the name of its folder: "mnist", "fashion-mnist" or "mushroom".
    name : str
        Its name without ``.gz``, e.g. "train-images-idx3-ubyte".
    sha256 : str
        SHA-256 (hex) of the decompressed content (of the canonical text when ``text``).
    size : int
        Bytes of that content; the fetcher reads at most a few times this much.
    text : bool
        Checked as canonical text (line endings and blank lines aside), not as bytes.
    keep_gzip : bool
        A gzip download is stored as it came (``<name>.gz``, which the IDX reader reads);
        otherwise a compressed download is stored decompressed, as ``<name>``.
    """

    dataset: str
    name: str
    sha256: str
    size: int
    text: bool = False
    keep_gzip: bool = True


def _idx_files(dataset, digests):
    return tuple(DataFile(dataset, name, sha256, size) for name, (sha256, size) in digests.items())


# The digests are of the decompressed files, computed from the development copies (whose MNIST
# gzip files were re-compressed, their content unchanged); the IDX sizes are those of the format:
# a 16-byte header and 28x28 pixels per image, an 8-byte header and a byte per label.
DATA_FILES = {
    "mnist": _idx_files("mnist", {
        "train-images-idx3-ubyte": (
            "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db", 47040016),
        "train-labels-idx1-ubyte": (
            "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5", 60008),
        "t10k-images-idx3-ubyte": (
            "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7", 7840016),
        "t10k-labels-idx1-ubyte": (
            "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2", 10008),
    }),
    "fashion-mnist": _idx_files("fashion-mnist", {
        "train-images-idx3-ubyte": (
            "c59f468a2f672dc815687fe0f83887768d799fd8a3f3276145d20f83aa44d888", 47040016),
        "train-labels-idx1-ubyte": (
            "bad3541b69d912435c50bb6ba87bec294ff4f6a2e1246121d8633921760443d9", 60008),
        "t10k-images-idx3-ubyte": (
            "5b4141f0afbad91edebe8549f8fcffe087ea10ca49f1dbef5c9a5cd8815ce37b", 7840016),
        "t10k-labels-idx1-ubyte": (
            "0402a96d92fd2663957122ceb108a494c5af83dab82d92729df917d7dec38c34", 10008),
    }),
    # 8,124 lines of 23 letters and 22 commas, in canonical text (see the module docstring)
    "mushroom": (DataFile("mushroom", "agaricus-lepiota.data",
                          "e65d082030501a3ebcbcd7c9f7c71aa9d28fdfff463bf4cf4716a3fe13ac360e",
                          373704, text=True, keep_gzip=False),),
}
"""Data set -> its files, with their digests."""

FETCHABLE = tuple(DATA_FILES)
"""Names of the data sets the fetcher knows."""

_MXNET_RETIRED = "https://apache-mxnet.s3-accelerate.dualstack.amazonaws.com/gluon/dataset/"

PUBLIC_SOURCES = {
    # The two of torchvision.datasets.MNIST.mirrors (which lists LeCun's page first, then the
    # PyTorch team's S3 copy) in the other order, since LeCun's page has answered scripted
    # downloads with HTTP 403 since 2024 (pytorch/vision#8717, cvdfoundation/mnist#4); between
    # them tensorflow_datasets' MNIST URL (_MNIST_URL, the CVDF mirror of LeCun's page); then
    # MXNet's (mxnet.gluon.data.vision.MNIST, retired with MXNet).
    "mnist": ("https://ossci-datasets.s3.amazonaws.com/mnist/{file}",
              "https://storage.googleapis.com/cvdf-datasets/mnist/{file}",
              "http://yann.lecun.com/exdb/mnist/{file}",
              _MXNET_RETIRED + "mnist/{file}"),
    # Zalando's own hosting, named in its README and used by torchvision.datasets.FashionMNIST
    # .mirrors and tensorflow_datasets' fashion_mnist; Keras' copy
    # (keras.datasets.fashion_mnist.load_data); Zalando's repository (data/fashion/ on GitHub);
    # then MXNet's (mxnet.gluon.data.vision.FashionMNIST, retired).
    "fashion-mnist": (
        "http://fashion-mnist.s3-website.eu-central-1.amazonaws.com/{file}",
        "https://storage.googleapis.com/tensorflow/tf-keras-datasets/{file}",
        "https://raw.githubusercontent.com/zalandoresearch/fashion-mnist/master/data/fashion/"
        "{file}",
        _MXNET_RETIRED + "fashion-mnist/{file}"),
    # The UCI Machine Learning Repository: its current archive of data set 73 (the zip that the
    # data set's page offers; the file is one of its members), then the path of the same file
    # before UCI's 2023 relaunch, which most references cite and which may answer 404 as such
    # paths have for other data sets (interpretml/DiCE#373). No second host is known to serve
    # the same rows in the same order (OpenML's data set 24 is an ARFF table with the class in
    # the last column): docs/install.md says how to place the file by hand.
    "mushroom": ("https://archive.ics.uci.edu/static/public/73/mushroom.zip",
                 "https://archive.ics.uci.edu/ml/machine-learning-databases/mushroom/{file}"),
}
"""Data set -> URL patterns of its public sources, in the order they are tried; ``{file}`` is
the file's published name (``.gz`` for the IDX files), a URL without it an archive holding it."""

#: The names a mirror may give a file, in the order they are tried: the IDX files as published
#: (gzipped) or raw; the mushroom file plain, gzipped, or in UCI's zip.
_MIRROR_NAMES = {
    "mnist": ("{name}.gz", "{name}"),
    "fashion-mnist": ("{name}.gz", "{name}"),
    "mushroom": ("{name}", "{name}.gz", "mushroom.zip"),
}


def check_fetchable(name):
    """Raise ValueError unless ``name`` is a data set the fetcher knows."""
    if name not in DATA_FILES:
        raise ValueError(f"unknown data set {name!r}; valid names: {', '.join(FETCHABLE)}")


def files_of(name) -> Tuple[DataFile, ...]:
    """The files of data set ``name`` (see :data:`DATA_FILES`)."""
    check_fetchable(name)
    return DATA_FILES[name]


def _published_name(data_file):
    return data_file.name if data_file.text else data_file.name + ".gz"


def public_urls(data_file: DataFile) -> List[str]:
    """URLs of ``data_file`` at its public sources, in order."""
    return [pattern.format(file=_published_name(data_file))
            for pattern in PUBLIC_SOURCES[data_file.dataset]]


def mirror_urls(data_file: DataFile, mirror: Optional[str]) -> List[str]:
    """URLs of ``data_file`` under the base URL ``mirror`` (none when it is empty or None); a
    ``mirror`` without a scheme is a folder, read through ``file://`` URLs."""
    if not mirror:
        return []
    if "://" not in mirror:  # a folder: read as a file:// URL
        mirror = Path(mirror).expanduser().resolve().as_uri()
    base = mirror.rstrip("/")
    return [f"{base}/{data_file.dataset}/" + pattern.format(name=data_file.name)
            for pattern in _MIRROR_NAMES[data_file.dataset]]


def source_urls(data_file: DataFile) -> List[str]:
    """Every URL the fetcher tries for ``data_file``, in order: ``$GLUON_BBB_MIRROR``'s, then
    the public sources'."""
    return mirror_urls(data_file, os.environ.get(MIRROR_ENV_VAR)) + public_urls(data_file)
