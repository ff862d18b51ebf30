"""Broken files and bad requests raise the documented exception classes, with messages that name
the file (and the message and object where there is one); nothing crashes or hangs."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import xarray as xr

import tgm_xarray
from tests.helpers.matrix import Spec, encode_message
from tests.helpers.oracle import ENGINE
from tests.helpers.shared import NETCDF, require_shared
from tgm_xarray import _core
from tgm_xarray.errors import (
    TgmCodecError,
    TgmError,
    TgmFormatError,
    TgmIndexError,
)


def raises_naming(exc, path, *parts):
    """``pytest.raises`` whose message must contain ``path`` and every one of ``parts``."""

    class _Check:
        def __enter__(self):
            self._ctx = pytest.raises(exc)
            self.info = self._ctx.__enter__()
            return self.info

        def __exit__(self, *args):
            swallowed = self._ctx.__exit__(*args)
            if swallowed:
                text = str(self.info.value)
                for part in (os.fspath(path), *parts):
                    assert part in text, f"{part!r} is not in the error message {text!r}"
            return swallowed

    return _Check()


def assert_open_fails(path, exc=TgmFormatError, *parts):
    """``open_file``, the raw handle and ``xr.open_dataset`` all refuse ``path``."""
    with raises_naming(exc, path, *parts):
        tgm_xarray.open_file(path)
    with raises_naming(exc, path, *parts):
        _core.FileHandle(os.fspath(path))
    with raises_naming(exc, path, *parts):
        xr.open_dataset(path, engine=ENGINE)


@pytest.fixture(scope="module")
def ifs_bytes(ifs_file) -> bytes:
    return ifs_file.read_bytes()


@pytest.fixture(scope="module")
def ifs_spans(ifs_file):
    h = _core.FileHandle(os.fspath(ifs_file))
    return [h.message_span(i) for i in range(len(h))]


# --------------------------------------------------------------------------------------------
# Files that are not (whole) Tensogram files
# --------------------------------------------------------------------------------------------


def test_truncated_in_the_middle_of_a_message(ifs_bytes, ifs_spans, tmp_path):
    offset, length = ifs_spans[1]
    path = tmp_path / "cut-middle.tgm"
    path.write_bytes(ifs_bytes[: offset + length // 2])
    assert_open_fails(path, TgmFormatError, "truncated")


def test_truncated_one_byte_before_a_message_boundary(ifs_bytes, ifs_spans, tmp_path):
    for msg in (0, 1, 3):
        offset, length = ifs_spans[msg]
        path = tmp_path / f"cut-before-end-of-{msg}.tgm"
        path.write_bytes(ifs_bytes[: offset + length - 1])
        assert_open_fails(path, TgmFormatError)


def test_truncated_inside_the_preamble_of_a_message(ifs_bytes, ifs_spans, tmp_path):
    path = tmp_path / "cut-preamble.tgm"
    path.write_bytes(ifs_bytes[: ifs_spans[2][0] + 10])
    assert_open_fails(path, TgmFormatError)


def test_truncated_streaming_messages(tmp_path):
    """Messages written in streaming mode (length 0 in the preamble) cut anywhere."""
    import tensogram

    messages = []
    for k in range(3):
        enc = tensogram.StreamingEncoder({"base": [{"name": "s", "k": k}]})
        enc.write_object({"type": "ntensor", "shape": [500], "dtype": "float32", "byte_order": "little",
                          "encoding": "none", "filter": "none", "compression": "zstd"},
                         np.arange(500, dtype=np.float32) * (k + 1))
        messages.append(enc.finish())
    data = b"".join(messages)
    whole = tmp_path / "streaming.tgm"
    whole.write_bytes(data)
    f = tgm_xarray.open_file(whole)
    assert len(f) == 3
    np.testing.assert_array_equal(f.read(2, 0), np.arange(500, dtype=np.float32) * 3)
    for cut in (len(data) - 1, len(data) - 30, len(messages[0]) + 100, len(messages[0]) - 1):
        path = tmp_path / f"streaming-cut-{cut}.tgm"
        path.write_bytes(data[:cut])
        assert_open_fails(path, TgmFormatError)


def test_a_streaming_message_whose_frame_lacks_its_end_marker(tmp_path):
    """Its frames are walked to find where it ends, each checked as upstream checks it: the file
    does not open (upstream refuses the message too) rather than failing at a read."""
    import tensogram

    enc = tensogram.StreamingEncoder({"base": [{"name": "s"}]})
    enc.write_object({"type": "ntensor", "shape": [4], "dtype": "float32", "byte_order": "little",
                      "encoding": "none", "filter": "none", "compression": "none"}, np.arange(4, dtype=np.float32))
    data = bytearray(enc.finish())
    frame = data.index(b"FR", 24 + 8)  # the data-object frame, after the header metadata frame
    end = frame + int.from_bytes(data[frame + 8:frame + 16], "big")
    assert data[end - 4:end] == b"ENDF"
    data[end - 4:end] = b"ENDX"
    with pytest.raises(ValueError):
        tensogram.decode(bytes(data))
    path = tmp_path / "no-endf.tgm"
    path.write_bytes(bytes(data))
    assert_open_fails(path, TgmFormatError, "streaming-mode", "does not end with ENDF")


def test_random_bytes_named_tgm(tmp_path):
    path = tmp_path / "garbage.tgm"
    path.write_bytes(np.random.default_rng(0).bytes(10_000))
    assert_open_fails(path, TgmFormatError)
    # Random bytes that start with the magic, too.
    path = tmp_path / "garbage-magic.tgm"
    path.write_bytes(b"TENSOGRM" + np.random.default_rng(1).bytes(10_000))
    assert_open_fails(path, TgmFormatError)


def test_empty_file(tmp_path):
    path = tmp_path / "empty.tgm"
    path.write_bytes(b"")
    assert_open_fails(path, TgmFormatError, "empty")


def test_netcdf_renamed_tgm(tmp_path):
    path = tmp_path / "cf_temperature.tgm"
    shutil.copyfile(require_shared(NETCDF / "cf_temperature.nc"), path)
    assert_open_fails(path, TgmFormatError, "not a Tensogram file: it is HDF5 (NetCDF-4)")


def test_trailing_garbage_after_valid_messages(ifs_bytes, ifs_spans, tmp_path):
    valid = ifs_bytes[: ifs_spans[1][0] + ifs_spans[1][1]]
    for name, tail in [("zeros", b"\x00" * 64), ("text", b"garbage\n"), ("one-byte", b"\n"),
                       ("magic", b"TENSOGRM"), ("half-preamble", ifs_bytes[:20])]:
        path = tmp_path / f"trailing-{name}.tgm"
        path.write_bytes(valid + tail)
        assert_open_fails(path, TgmFormatError)
    path = tmp_path / "leading-garbage.tgm"
    path.write_bytes(b"\x00" * 16 + valid)
    assert_open_fails(path, TgmFormatError)


def test_corrupt_message_length_in_the_preamble(codec_matrix, tmp_path):
    """A message whose preamble claims another length no longer tiles the file."""
    o = codec_matrix["zstd-f32-2d"]
    data = bytearray(open(o.path, "rb").read())
    h = _core.FileHandle(o.path)
    offset, length = h.message_span(1)
    (stored,) = struct.unpack(">Q", data[offset + 16 : offset + 24])
    assert stored == length  # the preamble's total length field
    for i, bad in enumerate((length - 8, length + 8, length * 1000, 2**63)):
        data2 = bytearray(data)
        data2[offset + 16 : offset + 24] = struct.pack(">Q", bad)
        path = tmp_path / f"bad-length-{i}.tgm"
        path.write_bytes(bytes(data2))
        assert_open_fails(path, TgmFormatError)


# --------------------------------------------------------------------------------------------
# A corrupt frame inside a message
# --------------------------------------------------------------------------------------------


def _frames(message: bytes):
    """``(offset, type)`` of every frame header in a message (walked by their lengths)."""
    pos, frames = 24, []
    while message[pos : pos + 2] == b"FR":
        ftype, _, _, flen = struct.unpack(">HHHQ", message[pos + 2 : pos + 16])
        frames.append((pos, ftype))
        pos = (pos + flen + 7) // 8 * 8  # frames start 8-byte aligned
    return frames


@pytest.mark.parametrize("field, value", [
    ("type", b"\x00\x63"),                           # an unknown frame type
    ("length", struct.pack(">Q", 2**40)),            # longer than the message
    ("length-small", struct.pack(">Q", 3)),          # shorter than any frame
    ("magic", b"XX"),                                # no frame magic
], ids=["type", "length-huge", "length-small", "magic"])
@pytest.mark.parametrize("which", ["metadata", "object"])
def test_corrupt_frame_header(tmp_path, field, value, which):
    specs = [Spec(f"v{i}", "float32", (40, 50), {"compression": "zstd"} if i else {}) for i in range(2)]
    good = encode_message(specs)
    bad_message = bytearray(encode_message(specs))
    frames = _frames(bytes(bad_message))
    assert [t for _, t in frames].count(9) == 2
    pos = next(p for p, t in frames if (t == 9 if which == "object" else t == 1))
    at = {"type": 2, "length": 8, "length-small": 8, "magic": 0}[field]
    bad_message[pos + at : pos + at + len(value)] = value
    path = tmp_path / "bad-frame.tgm"
    path.write_bytes(good + bytes(bad_message) + good)
    f = tgm_xarray.open_file(path)  # the message index comes from the preambles
    assert len(f) == 3
    for call in (lambda: f.metadata(1), lambda: f.descriptors(1), lambda: f.read(1, 0),
                 lambda: f.handle.parse_all()):
        with raises_naming(TgmFormatError, path, "message 1"):
            call()
    # The other messages are intact.
    for msg in (0, 2):
        for obj in range(2):
            np.testing.assert_array_equal(f.read(msg, obj), specs[obj].values())
    with raises_naming(TgmFormatError, path, "message 1"):
        xr.open_dataset(path, engine=ENGINE)


# --------------------------------------------------------------------------------------------
# Bad indices
# --------------------------------------------------------------------------------------------


def test_message_and_object_indices_out_of_range(codec_matrix):
    o = codec_matrix["sp24+szip-f64-3d"]
    f = tgm_xarray.open_file(o.path)
    n = len(f)
    for msg, call in ((n, lambda: f.read(n, 0)), (n, lambda: f.metadata(n)), (n, lambda: f.descriptors(n)),
                      (n, lambda: f.layout(n, 0)), (n + 1000, lambda: f.read(n + 1000, 0))):
        with raises_naming(TgmIndexError, o.path, f"message {msg}") as err:
            call()
        assert isinstance(err.value, IndexError) and isinstance(err.value, ValueError)
    n_obj = len(f.descriptors(o.msg))
    for obj in (n_obj, n_obj + 7, -1):
        with raises_naming(TgmIndexError, o.path, f"message {o.msg}", f"object {obj}"):
            f.read(o.msg, obj)


@pytest.mark.parametrize("call", ["read", "metadata", "descriptors", "layout"])
def test_negative_message_index(codec_matrix, call):
    o = codec_matrix["zstd-f32-2d"]
    f = tgm_xarray.open_file(o.path)
    args = {"read": (-1, 0), "metadata": (-1,), "descriptors": (-1,), "layout": (-1, 0)}[call]
    with raises_naming(TgmIndexError, o.path, "message -1"):
        getattr(f, call)(*args)


@pytest.mark.parametrize("key", [
    (45,), (-46,), (0, 67), (0, -68), (np.array([0, 45]),), (slice(None), np.array([3, -68])),
    (np.array([True, False]),), (0, 0, 0), (slice(None), np.ones(66, dtype=bool)),
], ids=["int", "neg-int", "int-axis1", "neg-int-axis1", "array", "neg-array", "bool-length",
        "too-many", "bool-axis1"])
def test_element_indices_out_of_bounds(codec_matrix, key):
    o = codec_matrix["sp24-f64-2d"]  # shape (45, 67)
    f = tgm_xarray.open_file(o.path)
    with raises_naming(TgmIndexError, o.path, f"message {o.msg}", f"object {o.obj}") as err:
        f.read(o.msg, o.obj, key)
    assert isinstance(err.value, IndexError)


def test_core_selection_out_of_bounds(codec_matrix):
    o = codec_matrix["sp24-f64-2d"]
    h = _core.FileHandle(o.path)
    for selection, shape in [((slice(0, 1, 1), np.array([67], dtype=np.int64)), (1, 1)),
                             ((slice(0, 1, 1), np.array([-68], dtype=np.int64)), (1, 1))]:
        with raises_naming(TgmIndexError, o.path, f"message {o.msg}", f"object {o.obj}"):
            h.read_into(o.msg, o.obj, selection, np.empty(shape))
    # Negative indices count from the end, as in numpy.
    last, first = np.empty((1, 1)), np.empty((1, 1))
    h.read_into(o.msg, o.obj, (slice(0, 1, 1), np.array([-67], dtype=np.int64)), first)
    h.read_into(o.msg, o.obj, (slice(0, 1, 1), np.array([-1], dtype=np.int64)), last)
    whole = np.empty((45, 67))
    h.read_into(o.msg, o.obj, None, whole)
    assert first[0, 0] == whole[0, 0] and last[0, 0] == whole[0, -1]


# --------------------------------------------------------------------------------------------
# Unsupported codecs and types
# --------------------------------------------------------------------------------------------


def test_unknown_compression_in_the_descriptor(tmp_path):
    """A descriptor naming a compression nobody knows (upstream's bytes with the name patched)."""
    spec = Spec("v", "float32", (30, 20), {"compression": "lz4"})
    data = bytearray(encode_message([spec], hashed=False))
    at = data.find(b"\x6bcompression\x63lz4")  # CBOR: text(11) "compression", text(3) "lz4"
    assert at > 0
    data[at + 13 : at + 16] = b"lzq"
    path = tmp_path / "unknown-codec.tgm"
    path.write_bytes(bytes(data))
    f = tgm_xarray.open_file(path)
    assert f.descriptors(0)[0]["compression"] == "lzq"
    for key in (None, (slice(0, 2),), (3, 4)):
        with raises_naming(TgmCodecError, path, "message 0", "object 0", "lzq"):
            f.read(0, 0, key)
    with raises_naming(TgmCodecError, path, "lzq"):
        xr.open_dataset(path, engine=ENGINE).load()


def test_bitmask_object(tmp_path):
    import tensogram

    bits = np.packbits(np.arange(64) % 3 == 0)
    descriptor = {"type": "ntensor", "shape": [64], "dtype": "bitmask", "byte_order": "little",
                  "encoding": "none", "filter": "none", "compression": "rle"}
    path = tmp_path / "bitmask.tgm"
    path.write_bytes(tensogram.encode({"base": [{"name": "m"}]}, [(descriptor, bits)]))
    f = tgm_xarray.open_file(path)
    assert f.descriptors(0)[0]["dtype"] == "bitmask"
    with raises_naming(TgmCodecError, path, "message 0", "object 0", "bitmask"):
        f.read(0, 0)
    with raises_naming(TgmCodecError, path, "bitmask"):
        xr.open_dataset(path, engine=ENGINE).load()


def test_bfloat16_object_without_ml_dtypes(tmp_path):
    import tensogram

    try:
        import ml_dtypes  # noqa: F401
    except ImportError:
        pass
    else:
        pytest.skip("ml_dtypes is installed: bfloat16 objects are readable")
    descriptor = {"type": "ntensor", "shape": [8], "dtype": "bfloat16", "byte_order": "little",
                  "encoding": "none", "filter": "none", "compression": "none"}
    path = tmp_path / "bf16.tgm"
    path.write_bytes(tensogram.encode({"base": [{"name": "b"}]}, [(descriptor, np.arange(8, dtype=np.uint16).tobytes())]))
    with raises_naming(TgmCodecError, path, "message 0", "object 0", "bfloat16"):
        tgm_xarray.open_file(path).read(0, 0)
    with raises_naming(TgmCodecError, path, "bfloat16"):
        xr.open_dataset(path, engine=ENGINE).load()


# --------------------------------------------------------------------------------------------
# Corrupt payloads, read without verify_hash: an error or wrong values, never a crash or a hang
# --------------------------------------------------------------------------------------------

CORRUPT_READ = textwrap.dedent("""
    import sys, numpy as np, tgm_xarray
    from tgm_xarray.errors import TgmError
    path, msg, obj = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
    f = tgm_xarray.open_file(path)
    outcomes = []
    for key in (None, (slice(0, 3),), (slice(-3, None),), (0,)):
        try:
            # The decoders themselves, on the damaged bytes (the default would stop at the hash).
            f.read(msg, obj, key, verify_hash=False)
            outcomes.append("values")
        except TgmError as e:
            assert path in str(e), e
            outcomes.append(type(e).__name__)
    print(",".join(outcomes))
""")


@pytest.mark.thread_unsafe(reason="runs subprocesses")
@pytest.mark.parametrize("object_id", ["zstd-f32-2d", "lz4-f64-1d", "blosc2-f32-2d", "sp24+szip-f64-3d",
                                       "szip-f32-2d", "shuffle+szip-f32-4d", "zfp-rate-f64-2d", "sz3-abs-f64-2d",
                                       "nan-shuffle+szip-f32-4d", "nan-zstd-f64-3d"])
def test_corrupt_compressed_payload_does_not_crash(codec_matrix, tmp_path, object_id):
    o = codec_matrix[object_id]
    message = encode_message([o.spec], hashed=True)
    frames = _frames(message)
    pos = next(p for p, t in frames if t == 9)
    rng = np.random.default_rng(0)
    bad = bytearray(message)
    # Scribble over 32 bytes in the first half of the object's payload.
    start = pos + 16 + int(rng.integers(0, 64))
    bad[start : start + 32] = rng.bytes(32)
    path = tmp_path / "corrupt.tgm"
    path.write_bytes(bytes(bad))
    run = subprocess.run([sys.executable, "-c", CORRUPT_READ, os.fspath(path), "0", "0"],
                         capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, f"exit code {run.returncode}: {run.stderr[-2000:]}"
    outcomes = run.stdout.strip().split(",")
    # A stored hash is checked before sz3 decodes, even with verify_hash=False (SZ3's C++
    # exceptions would abort the process).
    allowed = {"TgmHashMismatchError"} if o.spec.params.get("compression") == "sz3" else {"values", "TgmCodecError"}
    assert len(outcomes) == 4 and set(outcomes) <= allowed, outcomes


# --------------------------------------------------------------------------------------------
# Paths that are not files
# --------------------------------------------------------------------------------------------


def test_missing_file(tmp_path):
    path = tmp_path / "missing.tgm"
    with raises_naming(FileNotFoundError, path):
        tgm_xarray.open_file(path)
    with raises_naming(FileNotFoundError, path):
        xr.open_dataset(path, engine=ENGINE)
    with raises_naming(OSError, path):
        _core.FileHandle(os.fspath(path))


def test_directory_path(tmp_path):
    path = tmp_path / "a-directory.tgm"
    path.mkdir()
    for call in (lambda: tgm_xarray.open_file(path), lambda: xr.open_dataset(path, engine=ENGINE),
                 lambda: _core.FileHandle(os.fspath(path))):
        with raises_naming(OSError, path) as err:
            call()
        assert not isinstance(err.value, TgmError)


def test_error_classes():
    assert issubclass(TgmFormatError, TgmError) and issubclass(TgmError, ValueError)
    assert issubclass(TgmIndexError, IndexError) and issubclass(TgmIndexError, TgmError)
    assert issubclass(TgmCodecError, TgmError)
    assert tgm_xarray.TgmFormatError is TgmFormatError
