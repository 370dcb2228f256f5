"""File formats: everything gluon_bbb writes and reads, none of it pickled.

- :mod:`~gluon_bbb.io.checkpoint`: the checkpoint container (a zip of JSON metadata and raw
  arrays), atomic writes, JSON records, the integrity checks;
- :mod:`~gluon_bbb.io.ndfile`: MXNet's ``.params`` array files, read without MXNet's loader;
- :mod:`~gluon_bbb.io.paramfile`: a network's parameters in a file that is checked to fit it;
- :mod:`~gluon_bbb.io.sparse_weights`: pruned weights as index-value pairs;
- :mod:`~gluon_bbb.io.optimizer_state`: an optimizer's state as plain arrays;
- :mod:`~gluon_bbb.io.persistence`: a plain network with its optimizer state, saved and loaded;
- :mod:`~gluon_bbb.io.locks`: one exclusive file lock between processes (run folders, downloads).
"""
