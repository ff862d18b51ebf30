"""Writes of dask-backed Datasets at scale: a Dataset larger than the memory the writing process
may use streams to its file, and a dask.distributed cluster writes one file per task that then
open as one Dataset (the recipe of docs/writer.md). Real files, real worker processes."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import tgm_xarray
from tests.helpers.hostile import MEMORY_LIMIT
from tests.helpers.oracle import ENGINE
from tgm_xarray import _core

dask = pytest.importorskip("dask")

# A child writes a dask Dataset of `n` fields of 500 x 500 random float64 (2 MB each, seeded by
# their index, computed when the writer reads them; messages as large as the fields) on 2 threads, under RLIMIT_AS: its address space after
# the imports plus `budget`. One malloc arena (MALLOC_ARENA_MAX=1, set by the test), so the
# limit counts what the write allocates, not glibc's 64 MB reservation per thread.
STREAMING_CHILD = textwrap.dedent("""
    import sys
    import dask.array as da, numpy as np, pandas as pd, xarray as xr
    import tgm_xarray
    path, budget, n = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])

    def field(block_info=None):
        return np.random.default_rng(block_info[None]["array-location"][0][0]).random((1, 500, 500))

    data = da.map_blocks(field, chunks=((1,) * n, (500,), (500,)), dtype="float64",
                         meta=np.array((), "float64"))
    ds = xr.Dataset({"t": (("time", "y", "x"), data)},
                    coords={"time": pd.date_range("2026-01-01", periods=n, freq="h")})
""") + MEMORY_LIMIT + textwrap.dedent("""
    tgm_xarray.to_tgm(ds, path, threads=2, encoding={"t": {"compression": "lz4"}})
    print(ds.nbytes, (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) * 1024)
""")


@pytest.mark.slow
@pytest.mark.thread_unsafe(reason="runs a subprocess")
def test_a_dask_dataset_five_times_the_memory_left_streams_to_its_file(tmp_path):
    """800 MB of dask data written by a process allowed 150 MiB more address space than its
    imports: the writer holds the fields in flight (a few per thread), never the Dataset nor
    the messages written. The file then holds every field, in order, bit for bit."""
    n, budget = 400, 150 * 2**20
    path = tmp_path / "streamed.tgm"
    run = subprocess.run([sys.executable, "-c", STREAMING_CHILD, str(path), str(budget), str(n)],
                         capture_output=True, text=True, timeout=600, env={**os.environ, "MALLOC_ARENA_MAX": "1"})
    assert run.returncode == 0, run.stderr[-3000:]
    nbytes, rss_growth = map(int, run.stdout.split())
    assert nbytes > n * 500 * 500 * 8 > 5 * budget
    assert rss_growth < budget
    assert len(_core.FileHandle(os.fspath(path))) == n
    with xr.open_dataset(path, engine=ENGINE, chunks={}) as read:
        assert read["t"].shape == (n, 500, 500)
        for t in range(n):
            np.testing.assert_array_equal(read["t"][t].values, np.random.default_rng(t).random((500, 500)))


# --------------------------------------------------------------------------------------------
# dask.distributed: one file per task, opened together
# --------------------------------------------------------------------------------------------

STEPS = [0, 6, 12, 18]


@pytest.fixture(scope="module")
def forecast() -> xr.Dataset:
    """A small forecast held in memory: 2 variables, 4 steps, 2 levels, random values."""
    rng = np.random.default_rng(27)
    shape = (len(STEPS), 2, 7, 12)
    return xr.Dataset(
        {"t": (("step", "isobaricInhPa", "latitude", "longitude"), 250 + 30 * rng.random(shape), {"units": "K"}),
         "q": (("step", "isobaricInhPa", "latitude", "longitude"), rng.random(shape), {"units": "kg kg**-1"})},
        coords={"time": np.datetime64("2026-04-04T00:00", "ns"), "step": pd.to_timedelta(STEPS, unit="h"),
                "isobaricInhPa": [850, 500], "latitude": np.linspace(90, -90, 7),
                "longitude": np.linspace(0, 330, 12)})




def assert_is_forecast(read: xr.Dataset, forecast: xr.Dataset) -> None:
    """The values and coordinates written, bit for bit (the reader adds ``valid_time`` and
    cfgrib's attributes of the MARS coordinates)."""
    xr.testing.assert_equal(read.drop_vars("valid_time"), forecast)
    assert read.t.attrs == forecast.t.attrs and read.q.attrs == forecast.q.attrs


@pytest.mark.thread_unsafe(reason="starts a cluster of worker processes")
def test_one_file_per_step_written_by_the_workers_opens_as_the_dataset(forecast, dask_client, tmp_path):
    """docs/writer.md's recipe: ``to_tgm(..., compute=False)`` of each step of a lazy Dataset,
    computed together on the cluster; each write runs as one task on a worker, which computes
    its fields there; the files then open as one Dataset, equal to the one in memory."""
    distributed = pytest.importorskip("distributed")
    lazy = forecast.chunk({"step": 1, "isobaricInhPa": 1})
    paths = [tmp_path / f"step{step:03d}.tgm" for step in STEPS]
    writes = [tgm_xarray.to_tgm(lazy.isel(step=[i]), path, threads=1, compute=False) for i, path in enumerate(paths)]
    with distributed.get_task_stream(dask_client) as stream:
        dask_client.compute(writes, sync=True)
    assert len(stream.data) == len(paths)  # one task per file, nothing computed here
    assert [len(_core.FileHandle(str(path))) for path in paths] == [4] * len(paths)  # 2 variables x 2 levels
    with xr.open_dataset([str(p) for p in paths[::-1]], engine=ENGINE) as read:
        assert_is_forecast(read.load(), forecast)


def convert(source: str, target: str) -> str:
    """A task of the recipe's other form: one input file in, one ``.tgm`` out."""
    with xr.open_dataset(source) as ds:
        tgm_xarray.to_tgm(ds, target, threads=1)
    return target


@pytest.mark.thread_unsafe(reason="starts a cluster of worker processes")
def test_inputs_converted_one_per_task_open_as_the_dataset(forecast, dask_client, tmp_path):
    pytest.importorskip("netCDF4")
    sources = [str(tmp_path / f"step{step:03d}.nc") for step in STEPS]
    for i, source in enumerate(sources):
        forecast.isel(step=[i]).to_netcdf(source, engine="netcdf4")
    targets = dask_client.gather(dask_client.map(convert, sources, [s.replace(".nc", ".tgm") for s in sources]))
    with xr.open_dataset(targets, engine=ENGINE) as read:
        assert_is_forecast(read.load(), forecast)


@pytest.mark.thread_unsafe(reason="starts a cluster of worker processes")
def test_one_file_with_its_fields_computed_on_the_workers(forecast, dask_client, tmp_path):
    """With a distributed client as the scheduler, each writer thread has its field computed on
    the cluster and the file is written here, in order."""
    distributed = pytest.importorskip("distributed")
    path = tmp_path / "forecast.tgm"
    with dask.config.set(scheduler=dask_client), distributed.get_task_stream(dask_client) as stream:
        tgm_xarray.to_tgm(forecast.chunk({"step": 1, "isobaricInhPa": 1}), path, threads=2)
    assert len(stream.data) >= 16  # at least a task per field (2 variables x 4 steps x 2 levels)
    with xr.open_dataset(path, engine=ENGINE) as read:
        assert_is_forecast(read.load(), forecast)
