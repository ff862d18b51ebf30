"""One read split across threads (``threads=``): bit-identical to the serial read for every
codec, each element decoded once, and the process-wide budget that keeps reads from many
threads serial."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import zarr

import tgm_xarray
from tests.helpers.oracle import assert_same_bits
from tests.helpers.shared import REAL, require_shared
from tgm_xarray import _core
from tgm_xarray.zarr_codec import TensogramCodec

pytestmark = pytest.mark.thread_unsafe(reason="counts decoded elements and starts its own threads")

CODECS = REAL / "2t-codecs.tgm"
#: Reads that fill one run of elements (split) and reads that do not (serial either way).
KEYS = [None, (slice(100, 600),), (slice(7, 8),), (slice(180, 360), slice(360, 720)), (slice(None, None, -1),)]


def _field(shape=(721, 1440)) -> np.ndarray:
    """A smooth field with noise (compressors have work to do)."""
    y, x = np.meshgrid(np.linspace(0, 3, shape[0]), np.linspace(0, 6, shape[1]), indexing="ij")
    return 270 + 20 * np.sin(y) * np.cos(x) + np.random.default_rng(0).standard_normal(shape)


@pytest.fixture(scope="module")
def codecs_file():
    return tgm_xarray.open_file(require_shared(CODECS))


@pytest.mark.parametrize("msg", range(13))
@pytest.mark.parametrize("threads", [2, 4, None])
def test_every_codec_reads_the_same_bits_on_many_threads(codecs_file, msg, threads):
    """The real 2 m temperature field under every codec of the shared fixture (raw, packing,
    szip, zstd, lz4, blosc2, shuffle, zfp, sz3): whole reads, bands of rows, a row, a box and
    a reversed read give the serial read's bits, before and after a partial read has found
    the szip offsets upstream's writer left unchecked."""
    for _ in range(2):
        for key in KEYS:
            expected = codecs_file.read(msg, 0, key, threads=1)
            assert_same_bits(codecs_file.read(msg, 0, key, threads=threads), expected, f"msg {msg} {key}")
        codecs_file.read(msg, 0, (slice(3, 4), slice(5, 9)))


@pytest.fixture(scope="module")
def ours(tmp_path_factory):
    """Our writer's packed + szip field (checked RSI offsets): reads of it split at once."""
    path = tmp_path_factory.mktemp("parallel") / "t2m.tgm"
    ds = xr.Dataset({"t2m": (("latitude", "longitude"), _field())})
    tgm_xarray.to_tgm(ds, path, encoding={"t2m": {"bits": 24, "compression": "szip"}})
    f = tgm_xarray.open_file(path)
    obj = next(i for i, d in enumerate(f.descriptors(0)) if d["shape"] == [721, 1440])
    return f, obj


def test_a_split_read_decodes_each_element_once(ours):
    f, obj = ours
    serial = f.read(0, obj, threads=1)
    out = np.full_like(serial, np.nan)
    before = _core.decoded_elements()
    f.read(0, obj, out=out, threads=4)
    assert _core.decoded_elements() - before == serial.size
    assert_same_bits(out, serial)
    np.testing.assert_allclose(serial, _field(), atol=1e-4)  # 24-bit packing of a 40 K range


def test_rows_that_start_inside_an_rsi_block_split_on_block_boundaries(ours):
    f, obj = ours
    whole = f.read(0, obj, threads=1)
    for rows in [slice(1, 720), slice(333, 700), slice(0, 200)]:
        before = _core.decoded_elements()
        assert_same_bits(f.read(0, obj, (rows,), threads=3), whole[rows], str(rows))
        assert _core.decoded_elements() - before == whole[rows].size


def test_many_readers_with_the_default_budget_get_the_serial_bits(ours):
    f, obj = ours
    expected = f.read(0, obj, threads=1)
    barrier = threading.Barrier(6)

    def work(_):
        barrier.wait()
        return [f.read(0, obj) for _ in range(4)]

    with ThreadPoolExecutor(6) as pool:
        for results in pool.map(work, range(6)):
            for got in results:
                assert_same_bits(got, expected)


def test_threads_through_the_engine_and_the_zarr_codec(ours, tmp_path):
    f, obj = ours
    with xr.open_dataset(f.path, engine="tgm", threads=2) as ds:
        assert_same_bits(ds["t2m"].values, f.read(0, obj, threads=1))
    codec = TensogramCodec(encoding="simple_packing", bits_per_value=24, compression="szip", szip_rsi=16,
                           threads=2)
    assert "threads" not in codec.to_dict()["configuration"]  # a runtime setting, not stored
    z = zarr.create_array(tmp_path / "z.zarr", shape=(721, 1440), chunks=(721, 1440), dtype="float64",
                          fill_value=np.nan, serializer=codec, compressors=None)
    z[:] = _field()
    assert_same_bits(z[:], zarr.open_array(tmp_path / "z.zarr")[:])
    with pytest.raises(ValueError, match="threads"):
        TensogramCodec(threads=0)


def test_threads_through_the_frame_codec(ours, tmp_path, monkeypatch):
    """The frame codec (virtual references) hands its ``threads`` to the core's frame read: the
    core's read is wrapped to record what it is given, and still does the read."""
    from tgm_xarray.zarr_codec import TensogramFrameCodec

    f, obj = ours
    table = f.table()
    (start, end), = [(int(s), int(e)) for o, s, e in zip(table.obj, table.frame_start, table.frame_end, strict=True)
                     if o == obj]
    codec = TensogramFrameCodec(descriptor={"shape": [721, 1440]}, threads=2)
    assert "threads" not in codec.to_dict()["configuration"]  # a runtime setting, not stored
    z = zarr.create_array(tmp_path / "z.zarr", shape=(1, 721, 1440), chunks=(1, 721, 1440), dtype="float64",
                          fill_value=np.nan, serializer=codec, compressors=None)
    (tmp_path / "z.zarr" / "c" / "0" / "0").mkdir(parents=True)
    (tmp_path / "z.zarr" / "c" / "0" / "0" / "0").write_bytes(Path(f.path).read_bytes()[start:end])
    given = []
    read_frame = _core.read_frame

    def recording(*args, **kwargs):
        given.append(kwargs.get("threads"))
        return read_frame(*args, **kwargs)

    monkeypatch.setattr(_core, "read_frame", recording)
    assert_same_bits(z[0], f.read(0, obj, threads=1))
    assert_same_bits(z[0, 100:600], f.read(0, obj, (slice(100, 600),), threads=1))
    assert given == [2, 2]


def test_bad_threads_are_refused(ours):
    f, obj = ours  # every entry point and value: test_threads_option.py
    with pytest.raises(ValueError, match="threads must be None or an integer from 1 to 1024; got -1"):
        f.read(0, obj, threads=-1)
    with pytest.raises(ValueError, match="threads .* got 'two'"):
        f.read(0, obj, threads="two")


def test_a_field_upstream_wrote_finds_its_offsets_on_its_first_split_read(tmp_path):
    """Upstream's szip offsets are not vouched for: the first split read decodes the field once
    (as a serial read would) and finds them on the way; later reads split with them."""
    import tensogram

    values = _field()
    desc = {"type": "ntensor", "shape": list(values.shape), "dtype": "float64", "byte_order": "little",
            "encoding": "simple_packing", "sp_bits_per_value": 24, "sp_reference_value": float(values.min()),
            "sp_binary_scale_factor": -14, "sp_decimal_scale_factor": 0, "filter": "none",
            "compression": "szip", "szip_rsi": 16, "szip_block_size": 32, "szip_flags": 8}
    path = tmp_path / "upstream.tgm"
    path.write_bytes(tensogram.encode({}, [(desc, values)]))
    expected = tensogram.decode_object(path.read_bytes(), 0)[2]
    f = tgm_xarray.open_file(path)
    for _ in range(3):
        before = _core.decoded_elements()
        assert_same_bits(f.read(0, 0, threads=2), expected)
        assert _core.decoded_elements() - before == values.size
    assert_same_bits(f.read(0, 0, (slice(100, 300),), threads=2), expected[100:300])


def _upstream_packed(tmp_path, values, bits, rsi, block_size=32):
    """``values`` as upstream writes packed + szip (offsets not vouched for), our writer's
    bytes of the same field (offsets checked), and upstream's decode of its own file."""
    import tensogram

    ref = float(values.min())
    scale = int(np.ceil(np.log2(max(float(values.max()) - ref, 1e-9)))) - bits
    desc = {"type": "ntensor", "shape": list(values.shape), "dtype": "float64", "byte_order": "little",
            "encoding": "simple_packing", "sp_bits_per_value": bits, "sp_reference_value": ref,
            "sp_binary_scale_factor": scale, "sp_decimal_scale_factor": 0, "filter": "none",
            "compression": "szip", "szip_rsi": rsi, "szip_block_size": block_size, "szip_flags": 8}
    theirs = tmp_path / f"upstream-{bits}-{rsi}.tgm"
    theirs.write_bytes(tensogram.encode({}, [(desc, values)]))
    expected = tensogram.decode_object(theirs.read_bytes(), 0)[2]
    ours = tmp_path / f"ours-{bits}-{rsi}.tgm"
    ours.write_bytes(_core.encode_message({}, [(desc, values)]))
    return theirs, ours, expected


@pytest.mark.parametrize("bits", [8, 16, 24, 32])
@pytest.mark.parametrize("rsi", [1, 3, 16, 128])
def test_streamed_decodes_match_upstream_for_every_width_and_rsi(tmp_path, bits, rsi):
    """Whole reads (streamed in pieces from the first block), split reads (parts that start on
    RSI blocks, bands that start inside one) and windows give upstream's decode bit for bit:
    a field of 400,010 values (large enough for 3 threads; no whole number of RSI blocks, nor of
    pieces, and rows that start inside blocks), upstream's file and ours."""
    values = _field((10, 40_001))
    theirs, ours, expected = _upstream_packed(tmp_path, values, bits, rsi)
    keys = [None, (slice(1, 9),), (slice(2, 5),), (slice(1, 9), slice(3, 39_999)),
            (slice(None), slice(20_000, 20_001)), (slice(9, 10), slice(40_000, 40_001)), (slice(0, 1), slice(0, 1))]
    for path in (theirs, ours):
        f = tgm_xarray.open_file(path)
        for key in keys:
            want = expected if key is None else expected[key]
            for threads in (1, 2, 3):
                assert_same_bits(f.read(0, 0, key, threads=threads), want, f"{path.name} {key} threads={threads}")


def test_a_split_read_of_one_block_and_of_many_small_parts(tmp_path):
    """Edges of the part queue: an object of one RSI block (one part, whatever the threads) and
    a long field cut into many shrinking parts by 8 threads on 2 cores."""
    values = _field((3, 50))
    _, ours, expected = _upstream_packed(tmp_path, values, 24, 4096, 64)
    assert_same_bits(tgm_xarray.open_file(ours).read(0, 0, threads=8), expected)
    values = _field((1200, 1440))
    _, ours, expected = _upstream_packed(tmp_path, values, 16, 16)
    f = tgm_xarray.open_file(ours)
    before = _core.decoded_elements()
    assert_same_bits(f.read(0, 0, threads=8), expected)
    assert _core.decoded_elements() - before == values.size


def test_szip_parameters_libaec_never_writes_are_refused(tmp_path):
    """A descriptor whose RSI or block size libaec's encoder never writes gets a clear error
    before the decoder sees the stream (an RSI of 0 would make a block hold no values), for
    whole, split, band and window reads."""
    theirs, _, _ = _upstream_packed(tmp_path, _field((400, 500)), 24, 16)
    data = theirs.read_bytes()
    for good, bad in [(b"hszip_rsi\x10", b"hszip_rsi\x00"), (b"oszip_block_size\x18\x20", b"oszip_block_size\x18\x0c")]:
        assert data.count(good) == 1
        forged = tmp_path / "forged.tgm"
        forged.write_bytes(data.replace(good, bad))
        f = tgm_xarray.open_file(forged)
        for key, threads in [(None, 1), (None, 2), ((slice(10, 300),), 2), ((slice(3, 9), slice(7, 20)), 1)]:
            with pytest.raises(tgm_xarray.errors.TgmError, match="szip"):
                f.read(0, 0, key, threads=threads)
