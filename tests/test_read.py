"""Reads against upstream ``tensogram``'s decode: the shared fixture files, the codec matrix with
random outer selections, the real land-sea mask row by row, partial decodes, and hash checks."""

from __future__ import annotations

import hashlib
import os
import shutil
import zlib

import numpy as np
import pytest
import xarray as xr

import tgm_xarray
from tests.helpers.matrix import MATRIX_IDS
from tests.helpers.oracle import ENGINE, assert_same_bits, check_dataset_against_upstream, upstream_decode
from tests.helpers.selections import describe_key, outer_index, random_outer_key
from tests.helpers.shared import REAL, require_shared, shared_files
from tgm_xarray import _core
from tgm_xarray.errors import TgmHashMismatchError

ALL_FIXTURE_FILES = shared_files("upstream/golden/*.tgm", "upstream/remote-parity/*.tgm", "real/*.tgm")


def upstream_all(path) -> list[list[np.ndarray]]:
    """Every message's objects as upstream decodes them (the file opened once)."""
    import tensogram

    with tensogram.TensogramFile.open(os.fspath(path)) as f:
        return [[np.asarray(a) for _, a in f.decode_message(i)[1]] for i in range(len(f))]


# --------------------------------------------------------------------------------------------
# (1) every shared fixture file, through open_file and open_dataset
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ALL_FIXTURE_FILES)
def test_fixture_file_open_file_matches_upstream(path):
    expected = upstream_all(path)
    f = tgm_xarray.open_file(path)
    assert len(f) == len(expected) > 0
    for msg, objects in enumerate(expected):
        descriptors = f.descriptors(msg)
        assert len(descriptors) == len(objects), f"message {msg}"
        for obj, want in enumerate(objects):
            assert tuple(descriptors[obj]["shape"]) == want.shape
            assert f.layout(msg, obj) == (want.shape, want.dtype.newbyteorder("="))
            assert_same_bits(f.read(msg, obj), want, f"{path.name} message {msg} object {obj}")


@pytest.mark.parametrize("path", ALL_FIXTURE_FILES)
def test_fixture_file_open_dataset_matches_upstream(path):
    """Every object appears in the Dataset (or is a coordinate shared with an identical one) and
    every variable's fields hold upstream's values."""
    check_dataset_against_upstream(path, upstream_all(path))


def test_real_files_match_manifest(manifest):
    for entry in manifest["files"]:
        path = REAL / entry["file"]
        data = path.read_bytes()
        assert len(data) == entry["bytes"], entry["file"]
        assert hashlib.sha256(data).hexdigest() == entry["sha256"], entry["file"]
        assert len(tgm_xarray.open_file(path)) == entry["messages"]
    assert len(manifest["objects"]) >= 29
    for e in manifest["objects"]:
        f = tgm_xarray.open_file(REAL / e["file"])
        where = f"{e['file']} message {e['message']} object {e['object']}"
        arr = f.read(e["message"], e["object"])
        assert str(arr.dtype) == e["dtype"] and list(arr.shape) == e["shape"], where
        little = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<"))
        assert hashlib.sha256(little.tobytes()).hexdigest() == e["sha256"], where
        a = arr.astype(np.float64)
        assert int(np.isnan(a).sum()) == e["nan_count"], where
        assert np.nanmin(a) == e["min"] and np.nanmax(a) == e["max"], where
        assert abs(np.nanmean(a) - e["mean"]) <= 1e-12 * max(1.0, abs(e["mean"])), where
        descriptor = f.descriptors(e["message"])[e["object"]]
        for key in ("encoding", "filter", "compression", "byte_order"):
            assert descriptor[key] == e[key], (where, key)


# --------------------------------------------------------------------------------------------
# (2) the codec matrix: full reads and random outer selections
# --------------------------------------------------------------------------------------------


def _seed(text: str) -> int:
    return zlib.crc32(text.encode())


@pytest.mark.parametrize("object_id", MATRIX_IDS)
def test_matrix_full_read(codec_matrix, object_id):
    o = codec_matrix[object_id]
    want = o.upstream()
    assert want.shape == o.shape and want.dtype == o.dtype
    f = tgm_xarray.open_file(o.path)
    assert_same_bits(f.read(o.msg, o.obj), want, o.description)
    # The core directly, into a caller's buffer.
    out = np.empty(o.shape, o.dtype)
    f.handle.read_into(o.msg, o.obj, None, out)
    assert_same_bits(out, want, o.description)
    # The oracle itself: lossless codecs give back exactly what was encoded.
    if not o.spec.lossy and o.spec.params.get("encoding") != "simple_packing":
        assert_same_bits(want, o.input, f"{o.description} (upstream vs input)")
    elif o.spec.params.get("encoding") == "simple_packing":
        bits = o.spec.params["sp_bits_per_value"]
        span = float(np.ptp(o.input))
        assert np.max(np.abs(want - o.input)) <= span / 2 ** (bits - 1), o.description


@pytest.mark.parametrize("object_id", MATRIX_IDS)
def test_matrix_random_outer_selections(codec_matrix, object_id):
    o = codec_matrix[object_id]
    full = o.upstream()
    f = tgm_xarray.open_file(o.path)
    rng = np.random.default_rng(_seed(object_id))
    for _ in range(200):
        key = random_outer_key(rng, o.shape)
        want = outer_index(full, key)
        got = f.read(o.msg, o.obj, key)
        assert_same_bits(got, want, f"{o.description}[{describe_key(key)}]")


@pytest.mark.parametrize("object_id", [i for i in MATRIX_IDS if "-f64-" in i])
def test_matrix_float64_objects_read_as_float32(codec_matrix, object_id):
    """A float32 ``out`` for a float64 object (``values_dtype="float32"``): upstream's float64
    values rounded to float32, whole, split over threads and by selection (packed objects
    unpack straight into float32, the others through float64)."""
    o = codec_matrix[object_id]
    full = o.upstream().astype(np.float32)
    f = tgm_xarray.open_file(o.path)
    for threads in (1, 2):
        out = np.empty(o.shape, np.float32)
        assert f.read(o.msg, o.obj, out=out, threads=threads) is out
        assert_same_bits(out, full, f"{o.description}, {threads} threads")
    rng = np.random.default_rng(_seed(object_id))
    for _ in range(40):
        key = random_outer_key(rng, o.shape)
        want = outer_index(full, key)
        got = f.read(o.msg, o.obj, key, out=np.empty(want.shape, np.float32))
        assert_same_bits(got, want, f"{o.description}[{describe_key(key)}] as float32")


@pytest.mark.parametrize("object_id", ["none-f32-4d", "sp24+szip-f64-3d", "zstd-f64-4d", "be-blosc2-i32-2d",
                                       "nan-shuffle+szip-f32-4d"])
def test_matrix_edge_selections(codec_matrix, object_id):
    """Selections at the edges: empty, single elements at both ends, whole reversed, every
    element one by one along the flattened first and last axes."""
    o = codec_matrix[object_id]
    full = o.upstream()
    f = tgm_xarray.open_file(o.path)
    nd = len(o.shape)
    keys = [
        (slice(0, 0),),
        (slice(5, 2),),
        (np.array([], dtype=np.int64),),
        (np.zeros(o.shape[0], dtype=bool),),
        tuple([0] * nd),
        tuple([-1] * nd),
        tuple(slice(None, None, -1) for _ in range(nd)),
        (Ellipsis,),
        (Ellipsis, 0),
        (Ellipsis, slice(None, None, -1)),
        tuple(np.arange(n)[::-1] for n in o.shape),
        tuple(slice(n - 1, None, -n) for n in o.shape),  # one element per axis, negative step
        # What else numpy accepts as an index: lists, numpy and 0-d integers, other integer
        # types, strided arrays, boolean lists.
        ([2, 0, -1],),
        (np.int64(1), [True] + [False] * (o.shape[1] - 1)),
        (np.array(-2),),
        (np.array([1, 0], dtype=np.uint8),),
        (np.arange(o.shape[0])[::2],),
    ]
    keys += [(i,) for i in range(o.shape[0])]
    keys += [(Ellipsis, j) for j in range(o.shape[-1])]
    for key in keys:
        assert_same_bits(f.read(o.msg, o.obj, key), outer_index(full, key), f"{o.description}[{describe_key(key)}]")


def test_read_out_parameter(codec_matrix):
    o = codec_matrix["sp24+szip-f64-3d"]
    f = tgm_xarray.open_file(o.path)
    full = o.upstream()
    out = np.full(o.shape, -1.0)
    result = f.read(o.msg, o.obj, out=out)
    assert result is out
    assert_same_bits(out, full, "out= whole")
    key = (2, slice(3, 15, 2), np.array([5, 1, 1, -1]))  # the int axis is dropped from out's shape
    out = np.empty((6, 4))
    assert f.read(o.msg, o.obj, key, out=out) is out
    assert_same_bits(out, outer_index(full, key), "out= selection")
    # float32 for float64 objects: the float64 values rounded (values_dtype="float32").
    narrow = np.empty((6, 4), np.float32)
    assert f.read(o.msg, o.obj, key, out=narrow) is narrow
    assert_same_bits(narrow, outer_index(full, key).astype(np.float32), "out= float32")
    for bad in (np.empty((6, 5)), np.empty((1, 6, 4)), np.empty((6, 4), np.float16),
                np.empty((6, 4), ">f8"), np.empty(24)):
        with pytest.raises(ValueError):
            f.read(o.msg, o.obj, key, out=bad)
    with pytest.raises(ValueError):
        f.read(o.msg, o.obj, key, out=np.empty((6, 8))[:, ::2])  # not C-contiguous
    readonly = np.empty((6, 4))
    readonly.flags.writeable = False
    with pytest.raises(ValueError):
        f.read(o.msg, o.obj, key, out=readonly)


# --------------------------------------------------------------------------------------------
# (3) the real land-sea mask (and the other real szip fields), one row at a time
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("file, msg", [
    ("ifs-0p25-20260404.tgm", 1),  # lsm: packed 24 bit + szip, runs of all-zero blocks
    ("ifs-0p25-20260404.tgm", 0),  # 2t
    ("2t-codecs.tgm", 3),          # szip on raw float32
    ("2t-codecs.tgm", 4),          # packed 24 bit + szip
    ("2t-codecs.tgm", 7),          # blosc2 (range decode of blocks)
], ids=["lsm", "2t", "2t-szip-f32", "2t-sp24-szip", "2t-blosc2"])
def test_real_field_every_row_alone(file, msg):
    """Each of the 721 rows read on its own equals the row of the full decode (upstream's own
    ``decode_range`` gets 55 rows of the land-sea mask wrong: stale szip RSI offsets)."""
    path = require_shared(REAL / file)
    full = upstream_decode(path, msg)[0]
    f = tgm_xarray.open_file(path)
    for row in range(full.shape[0]):
        assert_same_bits(f.read(msg, 0, (row,)), full[row], f"{file} message {msg} row {row}")
    # Ranges that start and stop inside RSI blocks, crossing several of them.
    rng = np.random.default_rng(msg)
    for _ in range(100):
        a = int(rng.integers(0, full.shape[0]))
        b = int(rng.integers(a + 1, min(a + 6, full.shape[0]) + 1))
        c = int(rng.integers(0, full.shape[1]))
        key = (slice(a, b), slice(c, None))
        assert_same_bits(f.read(msg, 0, key), full[a:b, c:], f"{file} message {msg} {describe_key(key)}")


# --------------------------------------------------------------------------------------------
# (4) partial decodes decode only what they need; opening decodes nothing
# --------------------------------------------------------------------------------------------


@pytest.mark.thread_unsafe(reason="counts the process-wide decoded_elements")
def test_window_of_packed_szip_field_decodes_a_fraction(ifs_file, tmp_path):
    copy = tmp_path / "ifs.tgm"  # a file no handle has read yet
    shutil.copyfile(ifs_file, copy)
    f = tgm_xarray.open_file(copy)
    total, rsi = 721 * 1440, 128 * 32
    # The first partial read of an szip object decodes it once to recover its RSI block offsets
    # (the stored ones can be wrong, see core-rs/src/encoding/szip.rs); later reads decode only a window.
    before = _core.decoded_elements()
    f.read(0, 0, (slice(0, 1), slice(0, 1)))
    assert total <= _core.decoded_elements() - before <= total + rsi
    # An szip range decode starts at an RSI block (2.8 rows here), so a box costs the rows it
    # spans; a band of rows costs about itself.
    for key, size, bound in [((slice(300, 345),), 45 * 1440, total / 8),              # 1/16 of the rows
                             ((slice(0, 180), slice(0, 360)), 180 * 360, 180 * 1440 + rsi),  # a 1/16 box
                             ((slice(700, 721), slice(1400, 1440)), 21 * 40, 21 * 1440 + rsi)]:
        before = _core.decoded_elements()
        window = f.read(0, 0, key)
        decoded = _core.decoded_elements() - before
        assert window.size == size
        assert size <= decoded <= bound, (key, decoded)
    before = _core.decoded_elements()
    f.read(0, 0)
    assert _core.decoded_elements() - before == total  # the counter does count full decodes


@pytest.mark.thread_unsafe(reason="counts the process-wide decoded_elements")
def test_open_dataset_decodes_nothing():
    path = require_shared(REAL.parent / "upstream" / "remote-parity" / "thousand-msg.tgm")
    before = _core.decoded_elements()
    # Without an index: opening from one decodes the index's own columns (docs/archives.md).
    ds = xr.open_dataset(path, engine=ENGINE, index=False)
    repr(ds)
    assert sum(v.size for v in ds.data_vars.values()) == 4000
    assert _core.decoded_elements() - before == 0
    ds.close()
    lazy = xr.open_dataset(path, engine=ENGINE, chunks={}, index=False)
    assert _core.decoded_elements() - before == 0
    lazy["object_0"][10:12].compute()
    assert _core.decoded_elements() - before == 8
    lazy.close()


# --------------------------------------------------------------------------------------------
# (5) verify_hash
# --------------------------------------------------------------------------------------------


def test_verify_hash_on_hashed_files(ifs_file, codec_matrix):
    f = tgm_xarray.open_file(ifs_file)
    for msg in range(len(f)):
        for obj in range(len(f.descriptors(msg))):
            f.read(msg, obj, (0,), verify_hash=True)
    for o in codec_matrix.values():
        if o.hashed:
            got = tgm_xarray.open_file(o.path).read(o.msg, o.obj, verify_hash=True)
            assert_same_bits(got, o.upstream(), o.description)


def test_verify_hash_detects_a_flipped_payload_byte_in_a_raw_object(codec_matrix, tmp_path):
    o = codec_matrix["none-f32-2d"]
    data = bytearray(open(o.path, "rb").read())
    payload = o.input.tobytes()
    at = data.find(payload)
    assert at > 0 and data.find(payload, at + 1) == -1
    element = 1234
    data[at + 4 * element + 1] ^= 0x40
    path = tmp_path / "corrupt-raw.tgm"
    path.write_bytes(bytes(data))
    f = tgm_xarray.open_file(path)
    with pytest.raises(TgmHashMismatchError) as err:
        f.read(o.msg, o.obj, verify_hash=True)
    assert str(path) in str(err.value) and f"message {o.msg}" in str(err.value) and f"object {o.obj}" in str(err.value)
    with pytest.raises(TgmHashMismatchError):  # a one-element read checks the whole object too
        f.read(o.msg, o.obj, (0, 0), verify_hash=True)
    # By default too: every object that carries a hash is checked.
    with pytest.raises(TgmHashMismatchError):
        f.read(o.msg, o.obj)
    # With verify_hash=False the flipped byte comes through, in exactly that element.
    got = f.read(o.msg, o.obj, verify_hash=False)
    diff = np.flatnonzero(got.reshape(-1).view(np.uint32) != o.input.reshape(-1).view(np.uint32))
    assert diff.tolist() == [element]
    # Other objects of the message and other messages still verify.
    for obj in range(len(f.descriptors(o.msg))):
        if obj != o.obj:
            f.read(o.msg, obj, verify_hash=True)
    for msg in range(len(f)):
        if msg != o.msg:
            for obj in range(len(f.descriptors(msg))):
                f.read(msg, obj, verify_hash=True)


def test_verify_hash_detects_a_flipped_byte_in_a_compressed_payload(ifs_file, tmp_path):
    path = tmp_path / "corrupt-szip.tgm"
    shutil.copyfile(ifs_file, path)
    h = _core.FileHandle(os.fspath(path))
    offset, length = h.message_span(1)
    del h
    data = bytearray(path.read_bytes())
    data[offset + length // 2] ^= 0x01  # inside the lsm field's 0.9 MB szip payload
    path.write_bytes(bytes(data))
    f = tgm_xarray.open_file(path)
    with pytest.raises(TgmHashMismatchError) as err:
        f.read(1, 0, (slice(0, 2),), verify_hash=True)
    text = str(err.value)
    assert str(path) in text and "message 1" in text and "object 0" in text
    f.read(1, 1, verify_hash=True)
    f.read(1, 2, verify_hash=True)
    f.read(0, 0, (0,), verify_hash=True)
    with xr.open_dataset(path, engine=ENGINE, verify_hash=True) as ds:
        ds["2t"][:2].load()
        with pytest.raises(TgmHashMismatchError):
            ds["lsm"][:2].load()


def test_verify_hash_on_an_unhashed_file_raises(codec_matrix):
    o = codec_matrix["unhashed:zstd-f32-2d"]
    f = tgm_xarray.open_file(o.path)
    assert_same_bits(f.read(o.msg, o.obj), o.upstream(), o.description)
    with pytest.raises(TgmHashMismatchError) as err:
        f.read(o.msg, o.obj, verify_hash=True)
    assert o.path in str(err.value) and f"object {o.obj}" in str(err.value)


# --------------------------------------------------------------------------------------------
# Messages written in streaming mode (no length in the preamble: found by scanning)
# --------------------------------------------------------------------------------------------


def _streaming_file(path, payload: np.ndarray, count: int = 3) -> list[np.ndarray]:
    import tensogram

    arrays, messages = [], []
    for k in range(count):
        values = np.ascontiguousarray(np.roll(payload, k))
        enc = tensogram.StreamingEncoder({"base": [{"name": "s", "k": k}]})
        enc.write_object({"type": "ntensor", "shape": list(values.shape), "dtype": str(values.dtype),
                          "byte_order": "little", "encoding": "none", "filter": "none",
                          "compression": "none"}, values)
        messages.append(enc.finish())
        arrays.append(values)
    assert all(m[16:24] == bytes(8) for m in messages)  # streaming mode: length 0
    path.write_bytes(b"".join(messages))
    return arrays


def test_streaming_mode_messages(tmp_path):
    path = tmp_path / "streaming.tgm"
    arrays = _streaming_file(path, np.linspace(0, 1, 3000, dtype=np.float32))
    f = tgm_xarray.open_file(path)
    assert len(f) == len(arrays)
    for msg, want in enumerate(arrays):
        assert_same_bits(f.read(msg, 0), want, f"message {msg}")


def test_streaming_mode_message_whose_payload_holds_the_end_magic(tmp_path):
    """A valid streaming-mode file whose (raw) payload happens to contain the bytes of the end
    marker ``39277777`` and of the start marker ``TENSOGRM``: each message ends where its frames
    end, not at the first end marker in its payload."""
    payload = np.frombuffer((b"39277777" + b"TENSOGRM" + bytes(16)) * 40, dtype=np.uint8)
    path = tmp_path / "streaming-magic.tgm"
    arrays = _streaming_file(path, payload, count=2)
    f = tgm_xarray.open_file(path)
    assert len(f) == 2
    for msg, want in enumerate(arrays):
        assert_same_bits(f.read(msg, 0), want, f"message {msg}")
