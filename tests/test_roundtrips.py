"""Round trips with the formats users already have: NetCDF laid out as the CDS serves ERA5 today
converted to ``.tgm`` and read back as it was.

Every input is built here, small (a few fields of 20 x 30), written with netCDF4 and converted
with the command (``tgm_xarray.cli.main``, in-process)."""

from __future__ import annotations

import os

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from conftest import ENGINE
from tgm_xarray import _core
from tgm_xarray.cli import main

pytest.importorskip("netCDF4")

LATITUDES = np.linspace(90.0, -90.0, 20)  # descending, as ERA5's
LONGITUDES = np.arange(30) * 12.0


def open_tgm(path) -> xr.Dataset:
    with xr.open_dataset(path, engine=ENGINE) as ds:
        return ds.load()


def convert(*args) -> None:
    assert main(["convert", *map(str, args), "--no-progress"]) == 0


def era5_cds(levels=(1000.0, 850.0, 500.0)) -> xr.Dataset:
    """Temperature as the new CDS writes an ERA5 ensemble download: ``valid_time`` (no ``time``
    nor ``step``), ``pressure_level`` in hPa, ``number``, and ``expver`` as text per time."""
    rng = np.random.default_rng(41)
    shape = (2, 2, len(levels), LATITUDES.size, LONGITUDES.size)
    return xr.Dataset(
        {"t": (("valid_time", "number", "pressure_level", "latitude", "longitude"),
               rng.normal(260.0, 15.0, shape).astype("float32"),
               {"units": "K", "long_name": "Temperature", "standard_name": "air_temperature",
                "GRIB_paramId": 130, "GRIB_typeOfLevel": "isobaricInhPa"})},
        coords={
            "valid_time": ("valid_time", pd.date_range("2024-01-01", periods=2, freq="6h"),
                           {"standard_name": "time", "long_name": "time"}),
            "number": ("number", [0, 1], {"long_name": "ensemble member numerical id",
                                          "units": "1", "standard_name": "realization"}),
            "pressure_level": ("pressure_level", list(levels), {
                "long_name": "pressure", "units": "hPa", "positive": "down",
                "stored_direction": "decreasing", "standard_name": "air_pressure"}),
            "latitude": ("latitude", LATITUDES, {"units": "degrees_north", "standard_name": "latitude"}),
            "longitude": ("longitude", LONGITUDES, {"units": "degrees_east", "standard_name": "longitude"}),
        },
        attrs={"GRIB_centre": "ecmf", "Conventions": "CF-1.7",
               "institution": "European Centre for Medium-Range Weather Forecasts"})


def messages(path) -> list[dict]:
    handle = _core.FileHandle(os.fspath(path))
    return [handle.metadata(i)["base"][0] for i in range(len(handle))]


@pytest.mark.parametrize("levels", [(1000.0, 850.0, 500.0), (500.0, 850.0, 1000.0)],
                         ids=["descending", "ascending"])
def test_cds_era5_is_one_message_per_field_and_reads_back_as_it_was(tmp_path, levels):
    source = era5_cds(levels)
    source.to_netcdf(tmp_path / "era5.nc")
    convert(tmp_path / "era5.nc", tmp_path / "era5.tgm")
    fields = [m for m in messages(tmp_path / "era5.tgm") if m["name"] == "t"]
    assert len(fields) == 2 * 2 * 3  # valid_time x number x pressure_level
    assert {(m["mars"]["levtype"], m["mars"]["levelist"]) for m in fields} == {("pl", v) for v in levels}
    with xr.open_dataset(tmp_path / "era5.nc") as expected:
        back = open_tgm(tmp_path / "era5.tgm")
        xr.testing.assert_identical(back, expected.load())
    assert back.t.dims == source.t.dims
    assert back.pressure_level.values.tolist() == list(levels)


def test_a_single_pressure_level_stays_a_dimension(tmp_path):
    """Not squeezed into a scalar coordinate, as cfgrib's ``isobaricInhPa`` would be."""
    era5_cds().isel(pressure_level=[1]).to_netcdf(tmp_path / "era5.nc")
    convert(tmp_path / "era5.nc", tmp_path / "era5.tgm")
    with xr.open_dataset(tmp_path / "era5.nc") as expected:
        xr.testing.assert_identical(open_tgm(tmp_path / "era5.tgm"), expected.load())


def test_time_without_attributes_stays_without(tmp_path):
    """A NetCDF ``time`` that says nothing of itself is not made cfgrib's reference time."""
    ds = era5_cds().isel(number=0, pressure_level=0, drop=True).rename(valid_time="time")
    ds["time"].attrs = {}
    ds.to_netcdf(tmp_path / "t.nc")
    convert(tmp_path / "t.nc", tmp_path / "t.tgm")
    assert {m["mars"]["time"] for m in messages(tmp_path / "t.tgm")} == {"0000", "0600"}
    back = open_tgm(tmp_path / "t.tgm")
    assert back.time.attrs == {}
    with xr.open_dataset(tmp_path / "t.nc") as expected:
        xr.testing.assert_identical(back, expected.load())


def test_field_dims_option_names_what_stays_inside_each_field(tmp_path, capsys):
    """Levels in no order cannot be stacked: the warning says how to keep them in the field in
    the command's words, and following it converts without the warning."""
    era5_cds((850.0, 1000.0, 500.0)).to_netcdf(tmp_path / "era5.nc")
    convert(tmp_path / "era5.nc", tmp_path / "a.tgm")
    err = capsys.readouterr().err
    assert "dimension 'pressure_level' stays inside each field" in err
    advice = "--field-dims latitude,longitude,pressure_level"
    assert advice in err
    convert(tmp_path / "era5.nc", tmp_path / "b.tgm", *advice.split())
    assert "warning" not in capsys.readouterr().err
    assert len(messages(tmp_path / "b.tgm")) == 2 * 2
    with xr.open_dataset(tmp_path / "era5.nc") as expected:
        xr.testing.assert_identical(open_tgm(tmp_path / "b.tgm"), expected.load())


def test_field_dims_option_for_fields_the_rules_cannot_tell(tmp_path, capsys):
    """A reduced Gaussian grid's one ``values`` axis: by default the field would take
    ``valid_time`` too; ``--field-dims values`` makes one message per time and level."""
    ds = era5_cds().isel(number=0, latitude=0, drop=True).rename(longitude="values")
    ds.to_netcdf(tmp_path / "gg.nc")
    convert(tmp_path / "gg.nc", tmp_path / "default.tgm")
    assert len(messages(tmp_path / "default.tgm")) == 3
    convert(tmp_path / "gg.nc", tmp_path / "gg.tgm", "--field-dims", "values")
    assert len(messages(tmp_path / "gg.tgm")) == 2 * 3
    with xr.open_dataset(tmp_path / "gg.nc") as expected:
        xr.testing.assert_identical(open_tgm(tmp_path / "gg.tgm"), expected.load())
    with pytest.raises(SystemExit) as exit_:
        main(["convert", str(tmp_path / "gg.nc"), str(tmp_path / "x.tgm"), "--field-dims", "value"])
    assert exit_.value.code == 2 and not (tmp_path / "x.tgm").exists()
    assert "--field-dims: no input has the dimensions ['value']" in capsys.readouterr().err
