"""``load_async``: values identical to ``load()``, local reads handed to worker threads so the
event loop keeps running, and remote field requests that overlap instead of queueing."""

from __future__ import annotations

import asyncio
import shutil
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import xarray as xr

import tgm_xarray
from tests.helpers.oracle import assert_same_bits
from tgm_xarray.source import remote

pytestmark = pytest.mark.thread_unsafe(reason="runs event loops and a server")

ENGINE = "tgm"
FIELDS = 48


def _members(path, shape=(73, 144), compression="szip") -> None:
    """``FIELDS`` packed fields of a variable ``t`` along ``member``: one message each."""
    values = np.random.default_rng(1).standard_normal((FIELDS, *shape))
    ds = xr.Dataset({"t": (("member", "latitude", "longitude"), values)},
                    coords={"member": np.arange(FIELDS), "latitude": np.linspace(90, -90, shape[0]),
                            "longitude": np.arange(shape[1]) * 360 / shape[1]})
    tgm_xarray.to_tgm(ds, path, encoding={"t": {"bits": 24, "compression": compression}})


@pytest.fixture(scope="module")
def members(tmp_path_factory):
    path = tmp_path_factory.mktemp("async") / "members.tgm"
    _members(path)
    return path


def test_load_async_gives_load_s_values(members, ifs_file):
    async def both(path, select):
        with xr.open_dataset(path, engine=ENGINE) as ds, xr.open_dataset(path, engine=ENGINE) as again:
            return await select(ds).load_async(), select(again).load()

    cases = [(members, lambda ds: ds), (members, lambda ds: ds["t"].isel(member=[3, 1], latitude=slice(10, 40))),
             (members, lambda ds: ds["t"].isel(member=7, longitude=-1)), (ifs_file, lambda ds: ds)]
    for path, select in cases:
        got, expected = asyncio.run(both(path, select))
        assert got.identical(expected)
        for name in getattr(got, "data_vars", [None]):
            a, b = (got[name], expected[name]) if name else (got, expected)
            assert_same_bits(a.values, b.values, str(name))


class _GatedPool(ThreadPoolExecutor):
    """The loop's default executor, whose jobs wait for ``gate`` before they run: a read handed to
    a worker thread cannot finish until a coroutine on the loop opens the gate."""

    def __init__(self):
        super().__init__(max_workers=4)
        self.gate = threading.Event()
        self.submitted = threading.Event()

    def submit(self, fn, /, *args, **kwargs):
        def gated():
            if not self.gate.wait(60):
                raise TimeoutError("the gate was never opened: the event loop was blocked")
            return fn(*args, **kwargs)
        self.submitted.set()
        return super().submit(gated)


def test_a_local_read_waits_in_a_worker_thread_not_on_the_event_loop(tmp_path):
    """Deterministic, whatever the machine's load: the read cannot end before a coroutine on the
    loop opens the gate, so a read that ran on the loop (or blocked it) fails instead of passing."""
    path = tmp_path / "big.tgm"
    _members(path, shape=(361, 720))

    async def read_behind_the_gate():
        pool = _GatedPool()
        asyncio.get_running_loop().set_default_executor(pool)
        with xr.open_dataset(path, engine=ENGINE) as ds:
            reading = asyncio.create_task(ds["t"].load_async())
            for _ in range(6000):  # up to 60 s for the read to reach the pool
                if pool.submitted.is_set() or reading.done():
                    break
                await asyncio.sleep(0.01)
            handed_over = pool.submitted.is_set() and not reading.done()
            pool.gate.set()
            loaded = await reading
            return handed_over, loaded, ds["t"].values

    handed_over, loaded, expected = asyncio.run(read_behind_the_gate())
    assert handed_over, "load_async read on the event loop instead of handing the read to a worker thread"
    assert_same_bits(loaded.values, expected)


def test_remote_fields_are_requested_at_once(members, range_server):
    """48 fields from a server that holds every answer until 8 requests are in flight together:
    ``load_async`` keeps its requests in flight at once, so it takes a few round trips, not 48."""
    shutil.copy(members, range_server.root / "members.tgm")
    url = range_server.url("members.tgm")
    local = xr.open_dataset(members, engine=ENGINE)["t"].values
    range_server.latency = 0.05  # the printed timings' round trip

    async def timed(select, gather=0):
        with xr.open_dataset(url, engine=ENGINE) as ds:
            range_server.reset()
            range_server.gather = gather
            start = time.perf_counter()
            values = (await select(ds).load_async()).values
            return values, time.perf_counter() - start, range_server.max_in_flight, range_server.count("/members.tgm")

    one, t_one, _, _ = asyncio.run(timed(lambda ds: ds["t"].isel(member=-1)))
    every, t_all, in_flight, requests = asyncio.run(timed(lambda ds: ds["t"], gather=8))
    assert_same_bits(one, local[-1])
    assert_same_bits(every, local)
    assert in_flight >= 8, f"at most {in_flight} requests were in flight at once"
    # One request per field at most: an async request that fails over to a blocking retry in a worker
    # thread (a pool of a few threads, so a few requests at a time) shows as a second request.
    assert requests <= FIELDS, f"{requests} requests for {FIELDS} fields"
    # How long it takes is the `async` benchmark's to say (timings in tests fail on a busy machine).
    print(f"load_async: one field {t_one:.3f} s, {FIELDS} fields {t_all:.3f} s ({t_all / t_one:.2f}x), {in_flight} requests in flight")


def _threads_started(before: set[threading.Thread]) -> list[str]:
    """Threads alive now that were not ``before``, less fsspec's IO thread (its event loop runs
    every request) and the loopback server's request handlers."""
    return sorted(t.name for t in threading.enumerate()
                  if t not in before and t.name != "fsspecIO" and "process_request_thread" not in t.name)


def test_remote_load_async_runs_without_worker_threads(members, range_server, monkeypatch):
    """``load_async`` of a remote file whose messages are read by their header (so each read first
    fetches the descriptors, awaited), whole fields and a window read from byte ranges of packed,
    szip-compressed payloads: no thread starts (a ``to_thread`` would leave its executor's
    thread alive until the loop closes), and the values are the local read's, bit for bit."""
    monkeypatch.setattr(remote, "WHOLE_MESSAGE_MAX", 0)  # every message read by its header
    shutil.copy(members, range_server.root / "members.tgm")
    url = range_server.url("members.tgm")
    local = xr.open_dataset(members, engine=ENGINE)["t"].values
    window = dict(member=slice(0, 6), latitude=slice(10, 12), longitude=slice(20, 30))

    async def load(select):
        before = set(threading.enumerate())
        seen: set[str] = set()
        with xr.open_dataset(url, engine=ENGINE, index=False) as ds:
            range_server.reset()
            loading = asyncio.ensure_future(select(ds["t"]).load_async())
            while not loading.done():  # the threads while the reads are in flight
                seen.update(_threads_started(before))
                await asyncio.sleep(0)
            values = (await loading).values
        seen.update(_threads_started(before))
        return values, sorted(seen), range_server.sent_bytes("/members.tgm")

    every, started, _ = asyncio.run(load(lambda t: t))
    assert started == [], f"load_async started threads: {started}"
    assert_same_bits(every, local)
    part, started, sent = asyncio.run(load(lambda t: t.isel(window)))
    assert started == [], f"load_async started threads: {started}"
    assert_same_bits(part, local[0:6, 10:12, 20:30])
    # Byte ranges of the payloads, not the 6 frames (the descriptors come from the frames' ends).
    frame_bytes = sum(n for _, n in remote.RemoteHandle(url).frame_spans(0)) * 6
    assert sent < frame_bytes / 2, f"{sent} bytes sent for a window of 6 frames of {frame_bytes} bytes"
