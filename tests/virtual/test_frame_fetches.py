"""How the frame codec fetches referenced frames (``tgm_xarray.frame_fetches``): the chunks zarr
wants in one event-loop turn come from one ``get_partial_values`` request to the store, read back
bit for bit as the engine reads them; a store without batched requests (the parser's
``ManifestStore``) and a batch with a failing chunk fall back to one request a chunk, so each
chunk gets its own value or error; each event loop batches its own reads and keeps nothing once
it is gone. Real files, real Icechunk repositories on disk; the store wrapper only counts the
requests it forwards."""

from __future__ import annotations

import asyncio
import gc
import os
import time
import weakref
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import xarray as xr

pytest.importorskip("icechunk", reason="pip install 'tgm-xarray[virtual]' (no free-threaded wheels)")
pytest.importorskip("virtualizarr")
pytest.importorskip("obstore")

import zarr  # noqa: E402
from virtualizarr import open_virtual_mfdataset  # noqa: E402
from zarr.core.array_spec import ArraySpec  # noqa: E402
from zarr.core.buffer import default_buffer_prototype  # noqa: E402
from zarr.storage import MemoryStore, StorePath, WrapperStore  # noqa: E402

from tests.helpers.virtual import LOCAL, commit, engine, forecast_file, frame_spans, parse  # noqa: E402
from tgm_xarray.virtual import READ_CONFIG, TensogramParser, local_repository  # noqa: E402
from tgm_xarray.zarr_codec import TensogramFrameCodec  # noqa: E402

pytestmark = pytest.mark.thread_unsafe  # files rewritten in place, repositories on disk

LEVELS = (1000, 850, 700, 500, 300, 200)


class CountingStore(WrapperStore):
    """The wrapped store, with the chunk keys of every ``get`` and ``get_partial_values``."""

    def __init__(self, store):
        super().__init__(store)
        self.gets: list[str] = []
        self.batches: list[list[str]] = []

    async def get(self, key, prototype, byte_range=None):
        if "/c/" in key:
            self.gets.append(key)
        return await super().get(key, prototype, byte_range)

    async def get_partial_values(self, prototype, key_ranges):
        key_ranges = list(key_ranges)
        self.batches.append([key for key, _ in key_ranges])
        return await super().get_partial_values(prototype, key_ranges)


@pytest.fixture
def archive(tmp_path):
    """Two forecast steps committed to an Icechunk repository: (repository, data folder)."""
    data = tmp_path / "data"
    data.mkdir()
    urls = [forecast_file(data / f"fc{step}.tgm", step, seed=step, levels=LEVELS) for step in (0, 6)]
    vds = open_virtual_mfdataset([f"file://{u}" for u in urls], registry=LOCAL, parser=TensogramParser(),
                                 combine="nested", concat_dim="step", coords="minimal", compat="override")
    repo = local_repository(tmp_path / "repo", data)
    commit(repo, vds, "two steps")
    return repo, data


def engine_values(data, name: str) -> np.ndarray:
    return np.stack([engine(data / f"fc{step}.tgm")[name].values for step in (0, 6)])


@pytest.mark.parametrize("config", [{}, READ_CONFIG], ids=["zarr defaults", "READ_CONFIG"])
def test_the_frames_of_one_read_come_in_one_request(archive, config):
    repo, data = archive
    store = CountingStore(repo.readonly_session("main").store)
    with zarr.config.set(config):
        array = zarr.open_group(store, mode="r", zarr_format=3)["t"]
    got = array[1]  # the levels of step 6: one chunk each
    assert store.gets == []
    assert [sorted(batch) for batch in store.batches] == [sorted(f"t/c/1/{k}/0/0" for k in range(len(LEVELS)))]
    np.testing.assert_array_equal(got, engine_values(data, "t")[1], strict=True)


def test_dask_reads_through_icechunk_equal_the_engine(archive):
    repo, data = archive
    with xr.open_zarr(repo.readonly_session("main").store, consolidated=False, zarr_format=3,
                      chunks={"isobaricInhPa": -1}) as ds:
        for name in ("t", "q"):
            np.testing.assert_array_equal(ds[name].values, engine_values(data, name), strict=True)


def test_a_store_without_batched_requests_reads_one_chunk_a_request(archive):
    _, data = archive
    store = CountingStore(parse(data / "fc6.tgm"))  # VirtualiZarr's ManifestStore: no get_partial_values
    got = zarr.open_group(store, mode="r", zarr_format=3)["q"][:]
    assert len(store.batches) == 1 and sorted(store.gets) == sorted(store.batches[0])
    np.testing.assert_array_equal(got, engine_values(data, "q")[1], strict=True)


def chunk_decoder(store, name: str):
    """``decode(key)``: the codec's ``decode_partial`` of the whole chunk ``key`` of array ``name``,
    as zarr calls it for a read (from a coroutine)."""
    array = zarr.open_group(store, mode="r", zarr_format=3)[name]
    # What zarr's read passes the codec for a chunk of a regular grid (zarr builds it internally).
    spec = ArraySpec(shape=array.chunks, dtype=array.metadata.data_type, fill_value=array.fill_value,
                     config=array.config, prototype=default_buffer_prototype())
    whole = (slice(None),) * array.ndim
    return lambda key: array.serializer.decode_partial([(StorePath(store, key), whole, spec)])


def test_a_failing_chunk_fails_alone_in_a_shared_request(archive):
    """Two decodes started in one loop turn (as zarr starts a read's chunks) share a request;
    when it fails, each chunk is fetched alone and only the stale one fails."""
    repo, data = archive
    store = CountingStore(repo.readonly_session("main").store)
    decode = chunk_decoder(store, "t")
    time.sleep(1.1)  # Icechunk keeps the commit time with one-second precision
    forecast_file(data / "fc6.tgm", 6, seed=99, levels=LEVELS)  # rewritten after the commit
    os.utime(data / "fc6.tgm")

    async def both_steps():
        return await asyncio.gather(*(decode(f"t/c/{i}/0/0/0") for i in (0, 1)), return_exceptions=True)

    step0, step6 = asyncio.run(both_steps())
    assert store.batches == [["t/c/0/0/0/0", "t/c/1/0/0/0"]]
    assert sorted(store.gets) == ["t/c/0/0/0/0", "t/c/1/0/0/0"]
    np.testing.assert_array_equal(step0[0].as_numpy_array()[0, 0], engine_values(data, "t")[0, 0], strict=True)
    assert isinstance(step6, Exception) and "fc6.tgm" in str(step6) and "changed" in str(step6)


class StalledStore(WrapperStore):
    """The wrapped store, whose batched request never answers (a server that stopped talking)."""

    def __init__(self, store):
        super().__init__(store)
        self.stalled = asyncio.Event()

    async def get_partial_values(self, prototype, key_ranges):
        self.stalled.set()
        await asyncio.Event().wait()


def test_a_cancelled_fetch_leaves_no_reader_waiting(archive):
    """The readers of a shared request await its result from their own tasks: when the request is
    cancelled (its loop shutting down, an interrupt), each reader is cancelled too instead of
    waiting forever."""
    repo, _ = archive
    store = StalledStore(repo.readonly_session("main").store)
    decode = chunk_decoder(store, "t")

    async def read_then_cancel_the_fetch():
        readers = {asyncio.ensure_future(decode(f"t/c/{i}/0/0/0")) for i in (0, 1)}
        await asyncio.wait_for(store.stalled.wait(), 10)
        fetches = asyncio.all_tasks() - readers - {asyncio.current_task()}
        assert len(fetches) == 1  # one request for both readers
        fetches.pop().cancel()
        done, waiting = await asyncio.wait(readers, timeout=10)
        assert not waiting, "a reader still waits for a cancelled fetch"
        return [task.cancelled() for task in done]

    assert asyncio.run(read_then_cancel_the_fetch()) == [True, True]


def test_each_event_loop_batches_its_own_reads_and_keeps_nothing(archive):
    """Two event loops in two threads read the same store at once: each gets its values from a
    request of its own (a batch never mixes loops), and a finished loop is freed."""
    _, data = archive
    path = data / "fc0.tgm"
    spans = [span for (_, obj), span in sorted(frame_spans(path).items()) if obj == 0]
    raw = path.read_bytes()
    store = CountingStore(MemoryStore())
    array = zarr.open_group(store, mode="w", zarr_format=3).create_array(
        "t", shape=(len(spans), 19, 36), chunks=(1, 19, 36), dtype="float64", fill_value=np.nan,
        serializer=TensogramFrameCodec(descriptor={"shape": [19, 36]}), compressors=None)

    async def put_frames():
        for i, (offset, length) in enumerate(spans):
            await store.set(f"t/c/{i}/0/0", default_buffer_prototype().buffer.from_bytes(raw[offset:offset + length]))

    asyncio.run(put_frames())
    decode = chunk_decoder(store, "t")
    loops = []

    async def read_all():
        loops.append(weakref.ref(asyncio.get_running_loop()))
        chunks = await asyncio.gather(*(decode(f"t/c/{i}/0/0") for i in range(len(spans))))
        return np.stack([chunk[0].as_numpy_array()[0] for chunk in chunks])

    with ThreadPoolExecutor(2) as pool:
        reads = [pool.submit(asyncio.run, read_all()) for _ in range(2)]
        got = [read.result() for read in reads]
    with engine(path) as want:
        values = np.concatenate([want["t"].values, want["q"].values])
    for read in got:
        np.testing.assert_array_equal(read, values, strict=True)
    keys = sorted(f"t/c/{i}/0/0" for i in range(len(spans)))
    assert [sorted(batch) for batch in store.batches] == [keys, keys]
    assert array[...].shape == values.shape  # zarr's own read, on its own loop
    gc.collect()
    assert [loop() for loop in loops] == [None, None]

