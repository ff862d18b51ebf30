"""``load_async``: values identical to ``load()``, an event loop that keeps running while a read
is in flight, and remote field requests that overlap instead of queueing."""

from __future__ import annotations

import asyncio
import gc
import shutil
import time

import numpy as np
import pytest
import xarray as xr

import tgm_xarray
from conftest import assert_same_bits

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


def test_the_event_loop_keeps_running_during_a_large_read(tmp_path):
    path = tmp_path / "big.tgm"
    _members(path, shape=(361, 720))  # 48 x 260 K values: tens of milliseconds to decode

    async def read_while_ticking():
        ticks: list[float] = []
        stop = asyncio.Event()

        async def tick():
            while not stop.is_set():
                ticks.append(time.perf_counter())
                await asyncio.sleep(0.001)

        with xr.open_dataset(path, engine=ENGINE) as ds:
            ticker = asyncio.create_task(tick())
            await asyncio.sleep(0.005)
            start = time.perf_counter()
            loaded = await ds["t"].load_async()
            end = time.perf_counter()
            stop.set()
            await ticker
            return loaded, [t for t in ticks if start <= t <= end], end - start, ds["t"].values

    # The collector's pauses are the interpreter's, not the read's: late in a long session a full
    # collection on the free-threaded build stops every thread, the loop's too, for tens of ms.
    gc.collect()
    gc.disable()
    try:
        loaded, during, took, expected = asyncio.run(read_while_ticking())
    finally:
        gc.enable()
    assert_same_bits(loaded.values, expected)
    # A read that blocked the loop would leave no tick inside it; a read off the loop leaves
    # one about every millisecond (a loaded machine: at least a few).
    assert len(during) >= 3, f"{len(during)} ticks during a {took * 1e3:.0f} ms read"
    gaps = np.diff(during)
    assert gaps.max() < max(0.5 * took, 0.02), f"the loop stalled {gaps.max() * 1e3:.0f} ms of {took * 1e3:.0f} ms"


def test_remote_fields_are_requested_at_once(members, range_server):
    """48 fields from a server that answers every request after 50 ms: ``load_async`` keeps
    their requests in flight together, so it takes a few round trips, not 48."""
    shutil.copy(members, range_server.root / "members.tgm")
    url = range_server.url("members.tgm")
    local = xr.open_dataset(members, engine=ENGINE)["t"].values
    range_server.latency = 0.05

    async def timed(select):
        with xr.open_dataset(url, engine=ENGINE) as ds:
            range_server.reset()
            start = time.perf_counter()
            values = (await select(ds).load_async()).values
            return values, time.perf_counter() - start, range_server.max_in_flight, range_server.count("/members.tgm")

    one, t_one, _, _ = asyncio.run(timed(lambda ds: ds["t"].isel(member=-1)))
    every, t_all, in_flight, requests = asyncio.run(timed(lambda ds: ds["t"]))
    assert_same_bits(one, local[-1])
    assert_same_bits(every, local)
    assert in_flight >= 8, f"at most {in_flight} requests were in flight at once"
    # One request per field at most: an async request that fails over to a blocking retry in a worker
    # thread (a pool of a few threads, so a few requests at a time) shows as a second request.
    assert requests <= FIELDS, f"{requests} requests for {FIELDS} fields"
    # How long it takes is the `async` benchmark's to say (timings in tests fail on a busy machine).
    print(f"load_async: one field {t_one:.3f} s, {FIELDS} fields {t_all:.3f} s ({t_all / t_one:.2f}x), {in_flight} requests in flight")
