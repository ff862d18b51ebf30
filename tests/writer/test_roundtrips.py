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

from tests.helpers.oracle import ENGINE
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
            "expver": ("valid_time", np.array(["0001", "0005"], dtype=object), {"long_name": "experiment version"}),
        },
        attrs={"GRIB_centre": "ecmf", "Conventions": "CF-1.7",
               "institution": "European Centre for Medium-Range Weather Forecasts"})


def messages(path) -> list[dict]:
    handle = _core.FileHandle(os.fspath(path))
    return [handle.metadata(i)["base"][0] for i in range(len(handle))]


@pytest.mark.parametrize("levels", [(1000.0, 850.0, 500.0), (500.0, 850.0, 1000.0)],
                         ids=["descending", "ascending"])
def test_cds_era5_is_one_message_per_field_and_reads_back_as_it_was(tmp_path, capsys, levels):
    source = era5_cds(levels)
    source.to_netcdf(tmp_path / "era5.nc")
    convert(tmp_path / "era5.nc", tmp_path / "era5.tgm")
    assert "warning" not in capsys.readouterr().err
    fields = [m for m in messages(tmp_path / "era5.tgm") if m["name"] == "t"]
    assert len(fields) == 2 * 2 * 3  # valid_time x number x pressure_level
    assert {(m["mars"]["levtype"], m["mars"]["levelist"]) for m in fields} == {("pl", v) for v in levels}
    assert {m["expver"] for m in fields} == {"0001", "0005"}  # the text coordinate, as keys
    with xr.open_dataset(tmp_path / "era5.nc") as expected:
        back = open_tgm(tmp_path / "era5.tgm")
        xr.testing.assert_identical(back, expected.load())
    assert back.t.dims == source.t.dims
    assert back.pressure_level.values.tolist() == list(levels)
    assert back.expver.dims == ("valid_time",) and back.expver.values.tolist() == ["0001", "0005"]


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


def netcdf(path, **kw) -> xr.Dataset:
    with xr.open_dataset(path, **kw) as ds:
        return ds.load()


def test_cds_era5_netcdf_to_tgm_to_netcdf_is_exact(tmp_path):
    era5_cds().to_netcdf(tmp_path / "era5.nc")
    convert(tmp_path / "era5.nc", tmp_path / "era5.tgm")
    convert(tmp_path / "era5.tgm", tmp_path / "back.nc")
    for raw in (False, True):
        xr.testing.assert_identical(netcdf(tmp_path / "back.nc", mask_and_scale=not raw),
                                    netcdf(tmp_path / "era5.nc", mask_and_scale=not raw))


# --------------------------------------------------------------------------------------------
# CF packing kept: NetCDF -> .tgm -> NetCDF


def cf_packed(tmp_path, dtype, scale, offset, fill) -> xr.Dataset:
    """3 fields of 20 x 30 temperatures packed as CF packs them, with missing points."""
    rng = np.random.default_rng(3)
    top = offset + scale * (np.iinfo(dtype).max - 1)
    values = np.clip(offset + rng.normal(0.0, 200.0 * scale, (3, 20, 30)), offset - 100 * scale, top)
    values[0, :2, :3] = np.nan
    ds = xr.Dataset({"t": (("time", "latitude", "longitude"), values, {"units": "K"})},
                    coords={"time": pd.date_range("2024-01-01", periods=3, freq="D"),
                            "latitude": LATITUDES, "longitude": LONGITUDES})
    ds.to_netcdf(tmp_path / "cf.nc", encoding={"t": {"dtype": dtype, "scale_factor": scale,
                                                      "add_offset": offset, "_FillValue": fill}})
    return netcdf(tmp_path / "cf.nc")


@pytest.mark.parametrize("dtype, scale, offset, fill, bits", [
    ("int16", 0.01, 273.15, -32768, 16),                       # scale_factor = 10**-2: its grid
    ("uint8", 0.5, 250.0, 255, 8),                             # = 2**-1
    ("int16", np.float32(0.01), np.float32(273.15), -32767, 24),  # float32(0.01): no packing step
    ("int16", 0.0017593, 270.2, -32767, 24),                   # ERA5's kind of scale_factor
], ids=["int16-0.01", "uint8-0.5", "int16-float32", "int16-era5"])
def test_cf_packing_is_kept(tmp_path, dtype, scale, offset, fill, bits):
    source = cf_packed(tmp_path, dtype, scale, offset, fill)
    convert(tmp_path / "cf.nc", tmp_path / "cf.tgm")
    handle = _core.FileHandle(os.fspath(tmp_path / "cf.tgm"))
    params = [handle.descriptors(i)[0]["params"] for i in range(len(handle)) if handle.metadata(i)["base"][0]["name"] == "t"]
    assert {p["sp_bits_per_value"] for p in params} == {bits}
    tgm = open_tgm(tmp_path / "cf.tgm")
    assert tgm.t.dtype == source.t.dtype
    if bits == 16:  # on the CF grid itself: one reference and step 10**-2 for every field
        assert len({(p["sp_reference_value"], p["sp_binary_scale_factor"], p["sp_decimal_scale_factor"])
                    for p in params}) == 1
    np.testing.assert_allclose(tgm.t, source.t, rtol=0, atol=1e-12 if bits < 24 else float(scale) / 200)
    for key in ("dtype", "scale_factor", "add_offset", "_FillValue"):
        assert tgm.t.encoding[key] == source.t.encoding[key]
        assert type(tgm.t.encoding[key]) is type(source.t.encoding[key])
    convert(tmp_path / "cf.tgm", tmp_path / "back.nc")
    for raw in (False, True):  # the integers and CF attributes; the values decoded from them
        xr.testing.assert_identical(netcdf(tmp_path / "back.nc", mask_and_scale=not raw),
                                    netcdf(tmp_path / "cf.nc", mask_and_scale=not raw))


# --------------------------------------------------------------------------------------------
# Packing exported exactly: .tgm -> NetCDF or Zarr -> .tgm


def packed_tgm(path, dtype="float64", bits=16, fields=1) -> xr.Dataset:
    """A 20 x 30 temperature field (or several) with missing points, packed to ``bits``."""
    rng = np.random.default_rng(4)
    values = (250.0 + 60.0 * rng.random((fields, 20, 30))).astype(dtype)
    values[0, :2, :3] = np.nan
    ds = xr.Dataset({"t": (("step", "latitude", "longitude"), values, {"units": "K"})},
                    coords={"step": pd.to_timedelta(np.arange(fields) * 6, unit="h"),
                            "latitude": LATITUDES, "longitude": LONGITUDES})
    from tgm_xarray import to_tgm

    to_tgm(ds, path, encoding={"t": {"bits": bits}})
    return open_tgm(path)


def open_output(path, **kw) -> xr.Dataset:
    if str(path).endswith(".zarr"):
        kw |= {"engine": "zarr", "consolidated": False}
    return netcdf(path, **kw)


@pytest.mark.parametrize("dtype, bits, stored", [
    ("float64", 16, "uint16"), ("float32", 16, "uint16"), ("float64", 8, "uint8"), ("float64", 24, "uint32")])
@pytest.mark.parametrize("suffix", [".nc", ".zarr"])
def test_packing_exports_as_its_own_integers(tmp_path, dtype, bits, stored, suffix):
    """The packed integers under the packing's own scale and offset: CF decoding gives the
    .tgm's values bit for bit (Zarr, whose attributes are JSON numbers, decodes float32 packing
    into float64: the packed values, of which the .tgm's float32 are the rounding)."""
    tgm = packed_tgm(tmp_path / "p.tgm", dtype, bits)
    params = tgm.t.encoding["tensogram_params"]
    out = tmp_path / f"p{suffix}"
    convert(tmp_path / "p.tgm", out)
    raw, back = open_output(out, mask_and_scale=False), open_output(out)
    assert raw.t.dtype == stored and raw.t.attrs["_FillValue"] == np.iinfo(stored).max
    assert raw.t.attrs["add_offset"] == params["sp_reference_value"]
    assert raw.t.attrs["scale_factor"] == 2.0 ** params["sp_binary_scale_factor"]
    narrow = suffix == ".nc" and stored != "uint32"
    assert back.t.dtype == (tgm.t.dtype if narrow else np.float64)
    np.testing.assert_array_equal(back.t.values.astype(tgm.t.dtype), tgm.t.values)
    # and back into a .tgm: the same packing (to the integers' width: CF says no other), the same values
    convert(out, tmp_path / "again.tgm")
    again = open_tgm(tmp_path / "again.tgm")
    assert again.t.encoding["tensogram_params"] == {**params, "sp_bits_per_value": np.iinfo(stored).bits}
    np.testing.assert_array_equal(again.t.values.astype(tgm.t.dtype), tgm.t.values)
    if narrow:
        xr.testing.assert_identical(again.drop_encoding(), tgm.drop_encoding())


@pytest.mark.parametrize("dtype, bits, stored", [
    ("float32", 16, np.float32), ("float64", 16, np.float64), ("float64", 24, np.float64)])
def test_fields_with_parameters_of_their_own_export_exactly_as_floats(tmp_path, capsys, dtype, bits, stored):
    """No one scale and offset holds the integers of fields packed each over its own range: the
    values as floats, float32 where it holds them, and back into a .tgm the same values."""
    tgm = packed_tgm(tmp_path / "p.tgm", dtype, bits, fields=2)
    assert "sp_reference_value" not in tgm.t.encoding["tensogram_params"]
    convert(tmp_path / "p.tgm", tmp_path / "p.nc")
    raw, back = netcdf(tmp_path / "p.nc", mask_and_scale=False), netcdf(tmp_path / "p.nc")
    assert raw.t.dtype == stored and "scale_factor" not in raw.t.attrs
    np.testing.assert_array_equal(back.t.values, tgm.t.values)
    assert "warning" not in capsys.readouterr().err
    convert(tmp_path / "p.nc", tmp_path / "again.tgm")
    np.testing.assert_array_equal(open_tgm(tmp_path / "again.tgm").t.values, tgm.t.values)


@pytest.mark.parametrize("suffix", [".nc", ".zarr"])
def test_packing_over_the_range_trades_half_a_step_for_size_when_asked(tmp_path, capsys, suffix):
    """--pack-over-range: to 16 bits, int16 CF packing over the variable's range, within half its
    step; wider packing stays floating point, with a warning naming it."""
    for bits, stored in [(16, np.int16), (24, np.float64)]:
        tgm = packed_tgm(tmp_path / "p.tgm", "float64", bits, fields=2)
        out = tmp_path / f"p{suffix}"
        convert(tmp_path / "p.tgm", out, "--force", "--pack-over-range")
        raw, back = open_output(out, mask_and_scale=False), open_output(out)
        assert raw.t.dtype == stored, bits
        if stored == np.int16:
            step = float(np.nanmax(tgm.t) - np.nanmin(tgm.t)) / (2 * 32767)
            np.testing.assert_allclose(back.t, tgm.t, rtol=0, atol=step / 2 * (1 + 1e-9))
            assert not np.array_equal(back.t.values, tgm.t.values, equal_nan=True)
        else:
            np.testing.assert_array_equal(back.t.values, tgm.t.values)
        warned = "t (24 bits): fields packed to more than 16 bits with parameters of their own" in capsys.readouterr().err
        assert warned == (bits == 24)


@pytest.mark.parametrize("output", ["out.tgm", "out.grib2"])
def test_packing_over_the_range_is_only_for_netcdf_and_zarr(tmp_path, capsys, output):
    tgm = tmp_path / "p.tgm"
    packed_tgm(tgm, "float64", 16, fields=2)
    with pytest.raises(SystemExit) as exit:
        main(["convert", str(tgm), str(tmp_path / output), "--pack-over-range", "--no-progress"])
    assert exit.value.code == 2
    assert "--pack-over-range: only for a .nc or .zarr OUTPUT" in capsys.readouterr().err
    assert not (tmp_path / output).exists()
