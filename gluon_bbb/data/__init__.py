"""Loading MNIST and Fashion-MNIST: splits, preprocessing and loaders. The file format is
:mod:`gluon_bbb.data.idx`, the search for the files :mod:`gluon_bbb.data.datafolders`, their
download :mod:`gluon_bbb.data.fetch` (sources and checksums in :mod:`gluon_bbb.data.sources`) and
the batches :mod:`gluon_bbb.data.loaders`; their public names are importable from here too, as are
those of :mod:`gluon_bbb.data.series` (time series cut into windows for regression). The UCI
mushrooms of the bandit are :mod:`gluon_bbb.data.mushroom`.

The four files of each data set, ``{train,t10k}-{images-idx3,labels-idx1}-ubyte``
(gzip-compressed with a ``.gz`` suffix, or raw), are looked for in these places,
in order (see :func:`find_data_dir`):

1. the ``data_dir`` argument: the folder holding the files, or a parent folder
   holding ``<name>/``;
2. ``$GLUON_BBB_DATA/<name>`` (``GLUON_BBB_DATA`` holds ``mnist/``,
   ``fashion-mnist/`` and ``mushroom/``);
3. MXNet's download cache, ``$MXNET_HOME/datasets/<name>`` (``MXNET_HOME``
   defaults to ``~/.mxnet``);
4. Debian's ``/usr/share/datasets/<name>`` (package ``dataset-fashion-mnist``);
5. without ``$GLUON_BBB_DATA``, the download cache ``$XDG_CACHE_HOME/gluon_bbb/data/<name>``
   (by default ``~/.cache/gluon_bbb/data/<name>``).

A folder whose files all verify (SHA-256 of their content, :mod:`gluon_bbb.data.checks`,
remembered by size and modification time) wins over one, earlier in the order, holding a copy
that fails its check; one report, :func:`gluon_bbb.data.state.dataset_state`, says where each
file is and whether it verifies, for the loaders and ``gluon-bbb data`` alike.

If none holds all four files, :func:`load_dataset` (with ``download=True``, the default)
downloads them with :func:`gluon_bbb.data.fetch.fetch` into ``$GLUON_BBB_DATA/<name>``, or the
download cache without it: from ``$GLUON_BBB_MIRROR`` if set, then from several public mirrors,
each file checked by the SHA-256 of its content and written atomically. When that fails too, it
raises a single :class:`DataNotFoundError` listing every folder it searched and every source it
tried, with the reason of each.

Typical use::

    loaders = get_loaders("mnist", batch_size=128, num_validation=10000)
    for data, label in loaders["train"]:   # data: (128, 784), label: (128,)
        ...
"""
from __future__ import annotations

from . import checks, datafolders, fetch, state
from .datafolders import (DATA_ENV_VAR, DATASETS, SPLITS, DataNotFoundError, find_data_dir,
                          idx_filenames)
from .fetch import FetchError
from .idx import IDXFormatError, read_idx
from .loaders import ArrayLoader, EpochShuffled
from .series import Windows, sliding_windows
from .images import (CLASS_NAMES, IMAGE_SHAPE, NUM_CLASSES, PAPER_PIXEL_SCALE,
                     PREPROCESSING_METHODS, TRAIN_PIXEL_STATS, find_or_fetch, get_loaders,
                     load_dataset, load_raw, load_splits, preprocess)

__all__ = [
    "DATASETS",
    "CLASS_NAMES",
    "SPLITS",
    "PREPROCESSING_METHODS",
    "TRAIN_PIXEL_STATS",
    "DATA_ENV_VAR",
    "DataNotFoundError",
    "FetchError",
    "IDXFormatError",
    "idx_filenames",
    "read_idx",
    "find_data_dir",
    "find_or_fetch",
    "preprocess",
    "load_raw",
    "load_dataset",
    "load_splits",
    "ArrayLoader",
    "EpochShuffled",
    "Windows",
    "sliding_windows",
    "get_loaders",
]
