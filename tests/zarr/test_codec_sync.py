"""``TensogramCodec`` on zarr's synchronous pipeline (``FusedCodecPipeline``, zarr >= 3.3) and as
a sharding inner codec: every read equals the default (async, batched) pipeline's bit for bit.

Arrays hold the real 2 m temperature field (with NaN and infinities in some chunks, so chunks
with masks decode whole and the others partially), written to ``LocalStore``s in ``tmp_path``
and read back by zarr on both pipelines, unsharded and sharded. The tests on the fused pipeline
skip, saying why, on older zarr; the version gate itself is checked on both sides.
"""

from __future__ import annotations

import inspect
import threading

import numpy as np
import pytest
import zarr
from zarr.storage import LocalStore

from tests.helpers.oracle import assert_same_bits
from tests.helpers.zarr_codec import CONFIGURATIONS, SHAPE, as_dtype, valid
from tgm_xarray import TensogramCodec, _core
from tgm_xarray.zarr_codec import ZARR_SYNC_PIPELINE, TensogramFrameCodec

FUSED = "zarr.core.codec_pipeline.FusedCodecPipeline"
BATCHED = "zarr.core.codec_pipeline.BatchedCodecPipeline"
CHUNKS, SHARDS = (16, 30), (32, 60)  # 3 x 3 chunks of 45 x 67, in 2 x 2 shards, edges partial
needs_fused = pytest.mark.skipif(not ZARR_SYNC_PIPELINE,
                                 reason=f"zarr {zarr.__version__} has no FusedCodecPipeline (zarr >= 3.3)")

#: Whole array, windows across chunks (basic, integer, strided), orthogonal and coordinate picks.
READS = {
    "whole": lambda z: z[...],
    "window": lambda z: z[5:20, 7:50],
    "row": lambda z: z[17, 3:61],
    "strided": lambda z: z[1:44:3, 2:60:7],
    "oindex": lambda z: z.oindex[[0, 5, 33], 10:40],
    "vindex": lambda z: z.vindex[[1, 2, 40], [3, 50, 66]],
}


def reopen(path, pipeline: str) -> zarr.Array:
    with zarr.config.set({"codec_pipeline.path": pipeline}):
        return zarr.open_array(LocalStore(path, read_only=True), mode="r")


def write(path, values: np.ndarray, codec: TensogramCodec, pipeline: str = BATCHED, **layout) -> None:
    with zarr.config.set({"codec_pipeline.path": pipeline}):
        z = zarr.create_array(LocalStore(path), shape=values.shape, dtype=values.dtype, serializer=codec,
                              compressors=None, fill_value=np.nan, **layout)
        z[...] = values


class AsyncCalls:
    """Counts the async entry points and sync partial decodes of codec class ``codec`` while
    installed."""

    def __init__(self, monkeypatch, codec: type = TensogramCodec):
        self.lock, self.calls = threading.Lock(), {"async": 0, "partial_sync": 0}
        for name in ("_decode_single", "_decode_partial_single", "decode_partial"):
            monkeypatch.setattr(codec, name, self._counting(getattr(codec, name), "async"))
        if ZARR_SYNC_PIPELINE:
            monkeypatch.setattr(codec, "_decode_partial_sync",
                                self._counting(codec._decode_partial_sync, "partial_sync"))

    def _counting(self, method, key):
        def counted(*args, **kwargs):
            with self.lock:
                self.calls[key] += 1
            return method(*args, **kwargs)
        return counted


def test_sync_hook_exists_exactly_where_zarr_has_the_fused_pipeline():
    """The version gate, on both sides of zarr 3.3: the hook is defined where (and only where)
    zarr's fused pipeline exists and calls it by that name."""
    import zarr.core.codec_pipeline as codec_pipeline

    assert ZARR_SYNC_PIPELINE == hasattr(codec_pipeline, "FusedCodecPipeline")
    for codec in (TensogramCodec, TensogramFrameCodec):
        assert hasattr(codec, "_decode_partial_sync") == ZARR_SYNC_PIPELINE
    if ZARR_SYNC_PIPELINE:
        assert "_decode_partial_sync" in inspect.getsource(codec_pipeline.FusedCodecPipeline.read_sync)


@pytest.mark.thread_unsafe  # patches the codec's class
@pytest.mark.parametrize("name", CONFIGURATIONS)
def test_fused_batched_and_sharded_reads_are_equal(t2m, tmp_path, monkeypatch, name):
    configuration = CONFIGURATIONS[name]
    if not valid(configuration, "float32"):
        pytest.skip(f"{name} does not store float32")
    values = as_dtype(t2m[: SHAPE[0], : SHAPE[1]], "float32")
    codec = TensogramCodec(**configuration)
    write(tmp_path / "plain", values, codec, chunks=CHUNKS)
    write(tmp_path / "sharded", values, codec, chunks=CHUNKS, shards=SHARDS)
    arrays = {"sharded batched": reopen(tmp_path / "sharded", BATCHED)}
    if ZARR_SYNC_PIPELINE:
        arrays["fused"] = reopen(tmp_path / "plain", FUSED)
        arrays["sharded fused"] = reopen(tmp_path / "sharded", FUSED)
    expected = {what: read(reopen(tmp_path / "plain", BATCHED)) for what, read in READS.items()}
    calls = AsyncCalls(monkeypatch)
    for pipeline, z in arrays.items():
        before = dict(calls.calls)
        with zarr.config.set({"codec_pipeline.max_workers": 2}):
            for what, read in READS.items():
                assert_same_bits(read(z), expected[what], f"{name}, {pipeline}, {what}")
        if pipeline == "fused":  # the codec's own sync partial decode, once per chunk read
            assert calls.calls["async"] == before["async"], "the fused pipeline took the async path"
            assert calls.calls["partial_sync"] > before["partial_sync"]
        elif pipeline == "sharded fused":  # inner chunks through zarr's sync chain (_decode_sync)
            assert calls.calls["async"] == before["async"], "the fused pipeline took the async path"


@needs_fused
def test_fused_writes_store_the_batched_pipeline_s_chunks(t2m, tmp_path):
    """The same chunks, of the same sizes, reading back bit for bit (bytes differ only in each
    message's encode time and uuid, which Tensogram stamps)."""
    values = as_dtype(t2m[: SHAPE[0], : SHAPE[1]], "float32")
    codec = TensogramCodec(encoding="simple_packing", bits_per_value=24, compression="szip")
    write(tmp_path / "batched", values, codec, chunks=CHUNKS)
    write(tmp_path / "fused", values, codec, pipeline=FUSED, chunks=CHUNKS)
    sizes = {pipeline: {p.relative_to(tmp_path / pipeline): p.stat().st_size
                        for p in (tmp_path / pipeline / "c").rglob("*") if p.is_file()}
             for pipeline in ("batched", "fused")}
    assert sizes["fused"] == sizes["batched"] and len(sizes["batched"]) == 9
    assert_same_bits(reopen(tmp_path / "fused", BATCHED)[...], reopen(tmp_path / "batched", BATCHED)[...])


@needs_fused
@pytest.mark.thread_unsafe  # the core's counters are process-wide
def test_fused_window_reads_decode_only_the_window_and_fill_missing_chunks(t2m, tmp_path):
    codec = TensogramCodec(encoding="simple_packing", bits_per_value=16, compression="blosc2")
    values = t2m[:360, :720].copy()
    with zarr.config.set({"codec_pipeline.path": FUSED}):
        z = zarr.create_array(LocalStore(tmp_path / "a"), shape=(720, 720), chunks=(360, 720), dtype="float64",
                              serializer=codec, compressors=None, fill_value=np.nan)
        z[:360] = values  # the second chunk is never written
    fused = reopen(tmp_path / "a", FUSED)
    before = _core.decoded_elements()
    window = fused[100:110, 200:230]
    assert _core.decoded_elements() - before == 300  # of the chunk's 259,200
    assert_same_bits(window, reopen(tmp_path / "a", BATCHED)[100:110, 200:230])
    assert_same_bits(fused[350:370, :5], reopen(tmp_path / "a", BATCHED)[350:370, :5])
    assert np.isnan(fused[360:, :]).all()


@pytest.mark.thread_unsafe  # patches the codec's class
@pytest.mark.parametrize("obj", [0, 1], ids=["fields", "latitudes"])  # decoded in a thread, inline
def test_referenced_frames_read_the_same_on_both_pipelines(ifs_file, tmp_path, monkeypatch, obj):
    """Chunks that are data-object frames of a .tgm file (the chunks of virtual references):
    fused reads (each frame fetched and decoded in zarr's worker threads) equal batched ones
    (frames fetched together per event-loop turn) and the engine's values."""
    from tgm_xarray import open_file

    source = open_file(ifs_file)
    table = source.table()
    data = ifs_file.read_bytes()
    frames = [(int(s), int(e)) for o, s, e in zip(table.obj, table.frame_start, table.frame_end, strict=True)
              if o == obj]
    shape = tuple(table.shapes[obj])
    codec = TensogramFrameCodec(descriptor={"shape": list(shape)})
    zarr.create_array(LocalStore(tmp_path / "a"), shape=(len(frames), *shape), chunks=(1, *shape),
                      dtype="float64", serializer=codec, compressors=None, fill_value=np.nan)
    for m, (start, end) in enumerate(frames):
        chunk = tmp_path.joinpath("a", "c", str(m), *["0"] * len(shape))  # zarr v3's default chunk keys
        chunk.parent.mkdir(parents=True, exist_ok=True)
        chunk.write_bytes(data[start:end])
    engine = np.stack([source.read(m, obj) for m in range(len(frames))])
    reads = {"whole": lambda z: z[...], "window": lambda z: z[1:3, 100:110, ...], "point": lambda z: z[2, 5, ...],
             "oindex": lambda z: z.oindex[[0, 3], [7, 500, 700]]}
    expected = {what: read(engine) if what != "oindex" else engine[[0, 3]][:, [7, 500, 700]]
                for what, read in reads.items()}
    batched = reopen(tmp_path / "a", BATCHED)
    for what, read in reads.items():
        assert_same_bits(read(batched), expected[what], f"batched, {what}")
    if not ZARR_SYNC_PIPELINE:
        pytest.skip(f"zarr {zarr.__version__} has no FusedCodecPipeline (zarr >= 3.3): batched reads only")
    calls = AsyncCalls(monkeypatch, TensogramFrameCodec)
    fused = reopen(tmp_path / "a", FUSED)
    with zarr.config.set({"codec_pipeline.max_workers": 2}):
        for what, read in reads.items():
            assert_same_bits(read(fused), expected[what], f"fused, {what}")
    assert calls.calls["async"] == 0 and calls.calls["partial_sync"] >= len(frames)


@needs_fused
@pytest.mark.thread_unsafe  # patches the codec's class
def test_virtual_store_reads_through_the_fused_pipeline(ifs_file, tmp_path, monkeypatch):
    """Icechunk's store has no synchronous IO: the fused pipeline hands the codec all of a read's
    referenced frames at once (``decode_partial``, fetched together), and the values are the engine's."""
    for package in ("virtualizarr", "icechunk", "obstore"):
        pytest.importorskip(package)
    import shutil

    import xarray as xr
    from virtualizarr import open_virtual_dataset

    from tests.helpers.virtual import LOCAL, assert_identical_bits, commit, engine
    from tgm_xarray.virtual import TensogramParser, local_repository

    data = tmp_path / "data"
    data.mkdir()
    path = data / "ifs.tgm"
    shutil.copyfile(ifs_file, path)
    commit(local_repository(tmp_path / "repo", data),
           open_virtual_dataset(path.as_uri(), registry=LOCAL, parser=TensogramParser()), "ifs")
    calls = AsyncCalls(monkeypatch, TensogramFrameCodec)
    with zarr.config.set({"codec_pipeline.path": FUSED}):
        got = xr.open_zarr(local_repository(tmp_path / "repo", data).readonly_session("main").store,
                           consolidated=False, zarr_format=3, chunks=None)
    with engine(path) as want, got:
        assert_identical_bits(got, want, "fused pipeline")
    assert calls.calls["async"] > 0 and calls.calls["partial_sync"] == 0


@needs_fused
@pytest.mark.thread_unsafe  # the core's counters are process-wide; patches the codec's class
def test_fused_pipeline_on_a_store_without_synchronous_io(t2m, tmp_path, monkeypatch):
    """zarr's ZipStore has no synchronous IO: the fused pipeline takes the async path, and the
    sharding codec's inner pipeline calls the codec's sync partial decode on the shard's bytes."""
    from zarr.storage import ZipStore

    codec = TensogramCodec(encoding="simple_packing", bits_per_value=16, compression="blosc2")
    values = t2m[:360, :720].copy()
    for name, layout in {"plain": {"chunks": (180, 360)}, "sharded": {"chunks": (180, 360), "shards": (360, 720)}}.items():
        with ZipStore(tmp_path / f"{name}.zip", mode="w") as store:
            zarr.create_array(store, shape=values.shape, dtype="float64", serializer=codec, compressors=None,
                              fill_value=np.nan, **layout)[...] = values

    def read(name, pipeline, selection):
        with zarr.config.set({"codec_pipeline.path": pipeline}), ZipStore(tmp_path / f"{name}.zip", mode="r") as store:
            z = zarr.open_array(store, mode="r")
            before = _core.decoded_elements()
            return z[selection], _core.decoded_elements() - before

    calls = AsyncCalls(monkeypatch)
    for selection in ((slice(None),) * 2, (slice(10, 20), slice(400, 420))):
        expected, _ = read("plain", BATCHED, selection)
        for name in ("plain", "sharded"):
            got, decoded = read(name, FUSED, selection)
            assert_same_bits(got, expected, f"{name}, {selection}")
            assert decoded == expected.size  # only the selection is decoded, sharded too
    assert calls.calls["partial_sync"] > 0 and calls.calls["async"] > 0
