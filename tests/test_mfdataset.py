"""Many files as one Dataset: xr.open_mfdataset over one file per forecast step."""

import dask
import numpy as np
import pandas as pd
import pytest
import xarray as xr

import tgm_xarray
from tests.helpers.oracle import ENGINE

STEPS = [0, 6, 12, 18]


@pytest.fixture(scope="module")
def forecast():
    """A small forecast: 2 variables on pressure levels, the values encoding (step, level, point)."""
    lat = np.linspace(90, -90, 7)
    lon = np.linspace(0, 350, 12)
    step = pd.to_timedelta(STEPS, unit="h")
    levels = [850, 500]
    grid = np.arange(7 * 12, dtype="float64").reshape(7, 12)
    values = (np.arange(len(STEPS))[:, None, None, None] * 1000
              + np.array([1, 2])[None, :, None, None] * 100_000 + grid)
    return xr.Dataset(
        {"t": (("step", "isobaricInhPa", "latitude", "longitude"), values, {"units": "K"}),
         "q": (("step", "isobaricInhPa", "latitude", "longitude"), -values, {"units": "kg kg**-1"})},
        coords={"time": np.datetime64("2026-04-04T00:00", "ns"), "step": step,
                "isobaricInhPa": levels, "latitude": lat, "longitude": lon},
    )


@pytest.fixture(scope="module")
def step_files(forecast, tmp_path_factory):
    """One file per step, as forecast archives are usually laid out."""
    root = tmp_path_factory.mktemp("steps")
    paths = []
    for i in range(len(STEPS)):
        path = root / f"fc_step{STEPS[i]:03d}.tgm"
        tgm_xarray.to_tgm(forecast.isel(step=[i]), path)
        paths.append(str(path))
    return paths


def _open(paths):
    return xr.open_mfdataset(paths, engine=ENGINE, combine="nested", concat_dim="step",
                             coords="different", compat="equals", parallel=True, chunks={})


@pytest.mark.parametrize("scheduler", ["threads", "synchronous"])
def test_open_mfdataset_rebuilds_the_forecast(forecast, step_files, scheduler):
    with dask.config.set(scheduler=scheduler), _open(step_files) as ds:
        assert ds.t.dims == ("step", "isobaricInhPa", "latitude", "longitude")
        assert ds.t.data.chunksize == (1, 1, 7, 12)  # one chunk per stored field
        xr.testing.assert_equal(ds.step.drop_vars("valid_time"), forecast.step)
        xr.testing.assert_equal(ds.t.compute().drop_vars("valid_time"), forecast.t)
        xr.testing.assert_equal(ds.q.compute().drop_vars("valid_time"), forecast.q)
        np.testing.assert_array_equal(ds.valid_time.values, (forecast.time + forecast.step).values)


@pytest.mark.thread_unsafe(reason="starts a cluster of worker processes")
def test_open_mfdataset_under_distributed(forecast, step_files):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(processes=True, n_workers=2, threads_per_worker=1,
                                  dashboard_address=None) as cluster, distributed.Client(cluster):
        with _open(step_files) as ds:
            means = ds.mean(("latitude", "longitude")).compute()
    xr.testing.assert_allclose(means.t.drop_vars("valid_time"), forecast.t.mean(("latitude", "longitude")))
    xr.testing.assert_allclose(means.q.drop_vars("valid_time"), forecast.q.mean(("latitude", "longitude")))


def test_squeeze_false_combines_files_by_coords(forecast, step_files):
    """cfgrib's ``squeeze=False`` keeps a file's single step (and time) a dimension of length 1,
    so ``combine="by_coords"`` orders the files by it, in whatever order they come."""
    with xr.open_mfdataset(step_files[::-1], engine=ENGINE, combine="by_coords", squeeze=False) as ds:
        assert ds.t.dims == ("time", "step", "isobaricInhPa", "latitude", "longitude")
        assert ds.valid_time.dims == ("time", "step")
        read = ds.isel(time=0).compute()
    xr.testing.assert_equal(read.t.drop_vars("valid_time"), forecast.t)
    xr.testing.assert_equal(read.q.drop_vars("valid_time"), forecast.q)
    np.testing.assert_array_equal(read.valid_time.values, (forecast.time + forecast.step).values)


def test_squeeze_is_a_plan_of_its_own(step_files):
    """An index holding the default (squeezed) plan is not used for ``squeeze=False``."""
    with xr.open_dataset(step_files[0], engine=ENGINE) as squeezed:  # its index holds this plan
        assert squeezed.step.dims == () and squeezed.t.dims[0] == "isobaricInhPa"
    with xr.open_dataset(step_files[0], engine=ENGINE, squeeze=False) as kept:
        assert dict(kept.sizes)["step"] == 1 and kept.t.dims[:2] == ("time", "step")
    with pytest.raises(TypeError, match="squeeze must be True or False"):
        xr.open_dataset(step_files[0], engine=ENGINE, squeeze="no")


# -- a list of files planned as one Dataset --------------------------------------------------


def test_a_list_of_files_opens_as_one_forecast(forecast, step_files):
    """``open_dataset([paths])`` plans the messages of every file together: the steps combine by
    their metadata, whatever order the files come in, with no ``preprocess`` or ``combine``."""
    for paths in (step_files, step_files[::-1]):
        with xr.open_dataset(paths, engine=ENGINE, chunks={}) as ds:
            assert ds.t.data.chunksize == (1, 1, 7, 12)
            xr.testing.assert_equal(ds.t.compute().drop_vars("valid_time"), forecast.t)
            xr.testing.assert_equal(ds.q.compute().drop_vars("valid_time"), forecast.q)


def test_a_list_of_files_equals_one_file_of_the_same_fields(forecast, step_files, tmp_path):
    whole = tmp_path / "whole.tgm"
    tgm_xarray.to_tgm(forecast, whole)
    with xr.open_dataset(whole, engine=ENGINE) as one, xr.open_dataset(step_files, engine=ENGINE) as many:
        xr.testing.assert_identical(one.drop_encoding(), many.drop_encoding())
        assert many.t.encoding["source"].endswith(f"(and {len(step_files) - 1} more files)")


@pytest.mark.thread_unsafe(reason="starts a cluster of worker processes")
def test_a_list_of_files_reads_on_distributed_workers(forecast, step_files):
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(processes=True, n_workers=2, threads_per_worker=1,
                                  dashboard_address=None) as cluster, distributed.Client(cluster):
        with xr.open_dataset(step_files, engine=ENGINE, chunks={}) as ds:
            means = ds.t.mean(("latitude", "longitude")).compute()
    xr.testing.assert_allclose(means.drop_vars("valid_time"), forecast.t.mean(("latitude", "longitude")))


def test_a_bad_message_in_a_later_file_is_named_by_that_file(step_files, tmp_path):
    broken = tmp_path / "broken.tgm"
    data = bytearray(open(step_files[1], "rb").read())
    data[40:48] = b"\xff" * 8  # inside the first message's metadata frame
    broken.write_bytes(bytes(data))
    with pytest.raises(tgm_xarray.TgmError, match=f"{broken}: message 0"):
        xr.open_dataset([step_files[0], str(broken)], engine=ENGINE)


def test_an_empty_list_of_files_is_an_error():
    with pytest.raises(ValueError, match="empty list"):
        xr.open_dataset([], engine=ENGINE)
