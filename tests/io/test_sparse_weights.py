"""Sparse storage of pruned networks (gluon_bbb.io.sparse_weights), against scipy-free NumPy
references, and the pruned network's sparse file (PrunedNetwork.save(sparse=True))."""
import json
import pickle
import shutil
import zipfile

import mxnet as mx
import numpy as np
import pytest
from mxnet import gluon

from gluon_bbb import pruning
from gluon_bbb.io import sparse_weights
from gluon_bbb.io.checkpoint import CheckpointError, write_checkpoint
from gluon_bbb.io.paramfile import structural_parameters

from test_fuzz_readers import _Payload, _pickled, _with_entry, _with_metadata
from test_fuzz_readers import no_unpickling  # noqa: F401 -- autouse: no reader may unpickle
from test_pruning import HIDDEN, NUM_WEIGHTS, net_values, small_mlp, trained  # noqa: F401 -- fixture


def sparse_array(shape, density, seed=0):
    rng = np.random.default_rng(seed)
    values = rng.normal(size=shape).astype(np.float32)
    return np.where(rng.random(shape) < density, values, 0).astype(np.float32)


@pytest.mark.parametrize("shape", [(5, 7), (3, 2, 4, 4), (4,), (0, 3), (6, 70_000)])
@pytest.mark.parametrize("density", [0.0, 0.3, 1.0])
def test_csr_round_trip_matches_a_row_by_row_reference(shape, density):
    array = sparse_array(shape, density)
    indptr, indices, values = sparse_weights.to_csr(array)
    matrix = array.reshape(shape[0], int(np.prod(shape[1:])))
    # reference: row by row, the nonzero columns in order
    expected_indptr = [0]
    for row in matrix:
        expected_indptr.append(expected_indptr[-1] + int(np.count_nonzero(row)))
    np.testing.assert_array_equal(indptr, expected_indptr)
    expected_columns = np.concatenate([np.flatnonzero(row) for row in matrix] or [np.zeros(0)])
    np.testing.assert_array_equal(indices, expected_columns)
    np.testing.assert_array_equal(values, matrix[matrix != 0])
    assert indptr.dtype == np.int32 and values.dtype == np.float32
    assert indices.dtype == (np.uint16 if matrix.shape[1] <= 2 ** 16 else np.int32)
    np.testing.assert_array_equal(sparse_weights.from_csr(indptr, indices, values, shape), array)


def test_sparse_nbytes_counts_values_indices_and_row_pointers():
    weight = sparse_array((400, 784), 0.05)
    bias = np.ones(400, np.float32)
    nnz = int(np.count_nonzero(weight))
    expected = nnz * (4 + 2) + 401 * 4 + 400 * 4
    assert sparse_weights.sparse_nbytes({"w": weight, "b": bias}, {"w"}) == expected


@pytest.mark.parametrize("parts, message", [
    ((np.array([0, 2, 1]), np.array([0, 1]), np.ones(2)), "rise"),
    ((np.array([1, 2, 2]), np.array([0, 1]), np.ones(2)), "rise"),
    ((np.array([0, 1, 2]), np.array([0, 9]), np.ones(2)), "outside"),
    ((np.array([0, 2, 2]), np.array([1, 1]), np.ones(2)), "increase"),
    ((np.array([0, 2, 2]), np.array([1, 0]), np.ones(2)), "increase"),
    ((np.array([0, 2]), np.array([0, 1]), np.ones(2)), "indptr"),
    ((np.array([0, 1, 2]), np.array([0, 1, 2]), np.ones(2)), "one length"),
])
def test_bad_csr_parts_are_refused(parts, message):
    with pytest.raises(ValueError, match=message):
        sparse_weights.from_csr(*parts, (2, 3), source="x")


def test_file_round_trip_and_refusals(tmp_path):
    arrays = {"a.weight": sparse_array((8, 5), 0.2), "a.bias": np.arange(8, dtype=np.float32)}
    path = tmp_path / "net.sparse"
    sparse_weights.write_sparse(path, arrays, {"a.weight"})
    loaded = sparse_weights.read_sparse(path, expected={"a.weight": (8, 5), "a.bias": (8,)})
    assert set(loaded) == set(arrays)
    for name in arrays:
        np.testing.assert_array_equal(loaded[name], arrays[name])
    with pytest.raises(CheckpointError, match="does not fit"):
        sparse_weights.read_sparse(path, expected={"a.weight": (8, 6), "a.bias": (8,)})
    with pytest.raises(ValueError, match="no arrays named"):
        sparse_weights.write_sparse(path, arrays, {"b.weight"})
    other = tmp_path / "other.bbb"
    write_checkpoint(other, {"x": np.zeros(2, np.float32)}, {"kind": "trainer"})
    with pytest.raises(CheckpointError, match="not a sparsely stored network"):
        sparse_weights.read_sparse(other)
    # a crafted file whose column index points outside the matrix: one line naming the file
    crafted = tmp_path / "crafted.sparse"
    indptr, indices, values = sparse_weights.to_csr(arrays["a.weight"])
    indices = indices.astype(np.int32)
    indices[0] = 99
    write_checkpoint(crafted, {"a.weight:indptr": indptr, "a.weight:indices": indices,
                               "a.weight:values": values},
                     {"kind": sparse_weights.KIND, "sparse_shapes": {"a.weight": [8, 5]}})
    with pytest.raises(CheckpointError, match=r"crafted.sparse: a.weight: a column index"):
        sparse_weights.read_sparse(crafted)
    # a crafted shape asking for a huge dense array is refused before anything is built
    huge = tmp_path / "huge.sparse"
    empty = sparse_weights.to_csr(np.zeros((2, 3), np.float32))
    write_checkpoint(huge, {"w:indptr": np.zeros(10 ** 6 + 1, np.int32), "w:indices": empty[1],
                            "w:values": empty[2]},
                     {"kind": sparse_weights.KIND, "sparse_shapes": {"w": [10 ** 6, 10 ** 6]}})
    with pytest.raises(CheckpointError, match="huge.sparse declares 4000000000000 bytes"):
        sparse_weights.read_sparse(huge)
    with pytest.raises(CheckpointError, match="huge.sparse does not fit"):
        sparse_weights.read_sparse(huge, expected={"w": (8, 5)})
    missing = tmp_path / "missing.sparse"
    write_checkpoint(missing, {"a.weight:indptr": indptr}, {
        "kind": sparse_weights.KIND, "sparse_shapes": {"a.weight": [8, 5]}})
    with pytest.raises(CheckpointError, match="incomplete"):
        sparse_weights.read_sparse(missing)


def test_a_pruned_network_stored_sparsely_reloads_exactly_and_is_smaller(trained, tmp_path):  # noqa: F811
    trainer, test, _ = trained
    pruned = pruning.prune(trainer, 0.9)
    x, _ = next(iter(test))
    expected = pruned.predict_proba(x).asnumpy()
    dense_path, sparse_path = tmp_path / "pruned.params", tmp_path / "pruned.sparse"
    pruned.save(dense_path)
    pruned.save(sparse_path, sparse=True)
    trainer.set_mean()
    loaded = pruning.load_pruned(sparse_path, small_mlp())
    assert (loaded.num_nonzero, loaded.num_weights) == (pruned.num_nonzero, NUM_WEIGHTS)
    for a, b in zip(net_values(loaded.net), [v.asnumpy() for v in pruned.arrays]):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(loaded.predict_proba(x).asnumpy(), expected, rtol=1e-6, atol=1e-7)
    # sizes: 4 bytes a value + 2 an index per kept weight, row pointers, dense biases
    nnz = pruned.num_nonzero
    num_biases = sum(v.size for v in pruned.arrays if v.ndim == 1)
    rows = sum(v.shape[0] + 1 for v in pruned.arrays if v.ndim == 2)
    assert pruned.sparse_nbytes == nnz * 6 + rows * 4 + num_biases * 4
    assert pruned.dense_nbytes == (NUM_WEIGHTS + num_biases) * 4
    with zipfile.ZipFile(sparse_path) as archive:
        metadata = json.loads(archive.read("metadata.json"))
        assert archive.getinfo("arrays.bin").file_size == pruned.sparse_nbytes
    assert metadata["kind"] == sparse_weights.KIND
    assert pruned.sparse_nbytes < pruned.dense_nbytes
    assert sparse_path.stat().st_size <= pruned.sparse_nbytes + 2048  # a small fixed header
    # the table reports the same sizes
    table = pruning.pruning_table(trainer, test, fractions=(0.0, 0.9), methods=("snr",))
    assert table[1]["sparse_bytes"] == pruned.sparse_nbytes
    assert table[0]["sparse_bytes"] > table[0]["dense_bytes"]  # nothing removed: CSR costs more
    assert "KiB" in table.to_markdown().splitlines()[-1]


SPARSE_MUTATIONS = {
    "missing": lambda path, marker, other: path.unlink(),
    "empty": lambda path, marker, other: path.write_bytes(b""),
    "random": lambda path, marker, other: path.write_bytes(
        np.random.default_rng(0).integers(0, 256, 4096, dtype=np.uint8).tobytes()),
    "truncated": lambda path, marker, other: path.write_bytes(path.read_bytes()[:len(path.read_bytes()) // 2]),
    "pickle": _pickled,
    "metadata-pickle": _with_entry("metadata.json", lambda e, m: pickle.dumps(_Payload(m))),
    "arrays-pickle": _with_entry("arrays.bin", lambda e, m: pickle.dumps(_Payload(m))),
    "shapes-text": _with_metadata(sparse_shapes="s"),
    "shape-text": _with_metadata(sparse_shapes={"0.weight": "16x8"}),
    "other-kind": _with_metadata(kind="trainer"),
    "other-architecture": lambda path, marker, other: shutil.copy(other, path),
}


@pytest.mark.parametrize("mutation", sorted(SPARSE_MUTATIONS))
def test_load_pruned_refuses_a_damaged_sparse_file_in_one_line(mutation, trained, tmp_path):  # noqa: F811
    trainer, _, _ = trained
    path, other = tmp_path / "pruned.sparse", tmp_path / "other.sparse"
    pruning.prune(trainer, 0.5).save(path, sparse=True)
    wider = gluon.nn.HybridSequential()  # another architecture: one more hidden unit
    wider.add(gluon.nn.Dense(HIDDEN + 1, activation="relu"), gluon.nn.Dense(3))
    wider.initialize()
    wider(mx.nd.zeros((1, 8)))
    sparse_weights.write_sparse(other, {name: p.data().asnumpy() for name, p in
                                        structural_parameters(wider).items()}, set())
    trainer.set_mean()
    marker = tmp_path / "marker"
    SPARSE_MUTATIONS[mutation](path, marker, other)
    error = FileNotFoundError if mutation == "missing" else ValueError
    with pytest.raises(error) as caught:
        pruning.load_pruned(path, small_mlp())
    message = str(caught.value)
    assert str(path) in message and "\n" not in message
    assert not marker.exists()
