"""Faithful conversions: what a NetCDF (or re-written ``.tgm``) input holds survives ``to_tgm``
and ``tgm-xarray convert``: CF scale/offset packing as simple packing, CF attributes of keyed
coordinates, text variables skipped (not a failed conversion), hypercube holes not written.

Inputs are the shared upstream NetCDF samples, the real IFS fixture, and an ERA5-like file
packed in int16 that the tests write with netCDF4."""

from __future__ import annotations

import os

import numpy as np
import pytest
import xarray as xr

from tests.helpers.oracle import ENGINE
from tests.helpers.shared import FIXTURES, NETCDF, require_shared
from tgm_xarray import _core, attrs, cf, export
from tgm_xarray.cli import main
from tgm_xarray.writer import to_tgm

pytest.importorskip("netCDF4")


def open_tgm(path) -> xr.Dataset:
    with xr.open_dataset(path, engine=ENGINE) as ds:
        return ds.load()


def descriptors(path) -> list[dict]:
    handle = _core.FileHandle(os.fspath(path))
    return [handle.descriptors(i)[0] for i in range(len(handle))]


@pytest.fixture(scope="module")
def era5_like(tmp_path_factory):
    """2 m temperature as ERA5 ships it: int16 with scale_factor/add_offset and a _FillValue,
    6 hourly fields of a 1-degree grid (smooth field plus noise, some missing points)."""
    path = tmp_path_factory.mktemp("era5") / "era5-t2m.nc"
    rng = np.random.default_rng(7)
    lat, lon = np.arange(90.0, -90.5, -1.0), np.arange(0.0, 360.0, 1.0)
    field = 273.0 + 30 * np.cos(np.deg2rad(lat))[:, None] + 5 * np.sin(np.deg2rad(lon))[None, :]
    values = field[None] + rng.normal(0, 2, (6, lat.size, lon.size))
    values[:, :3, :5] = np.nan
    low, high = np.nanmin(values), np.nanmax(values)
    scale = (high - low) / (2**16 - 2)
    ds = xr.Dataset(
        {"t2m": (("time", "latitude", "longitude"), values.astype("float32"),
                 {"units": "K", "long_name": "2 metre temperature"})},
        coords={"time": ("time", np.arange("2024-01-01T00", "2024-01-01T06", dtype="datetime64[h]")
                         .astype("datetime64[ns]"), {"standard_name": "time", "long_name": "time"}),
                "latitude": ("latitude", lat, {"units": "degrees_north"}),
                "longitude": ("longitude", lon, {"units": "degrees_east"})})
    ds.to_netcdf(path, engine="netcdf4", encoding={"t2m": {
        "dtype": "int16", "scale_factor": scale, "add_offset": (high + low) / 2,
        "_FillValue": np.int16(-32767)}})
    return path


# --------------------------------------------------------------------------------------------
# Scale/offset packing


def test_int16_packing_becomes_24_bit_simple_packing(era5_like, tmp_path):
    """ERA5's scale_factor is no packing step 2**E * 10**-D: the values are packed 8 bits wider
    than the int16, so that the CF packing recorded beside gives the same integers again."""
    out = tmp_path / "era5.tgm"
    with xr.open_dataset(era5_like) as source:
        scale = source.t2m.encoding["scale_factor"]
        to_tgm(source, out)
        expected = source.load()
    assert {(d["encoding"], d["params"].get("sp_bits_per_value")) for d in descriptors(out)} == {("simple_packing", 24)}
    # 1.5 times the input's size, not the 2x (float32) or 4x (float64) of unpacked values.
    assert os.path.getsize(out) < 1.6 * os.path.getsize(era5_like)
    read = open_tgm(out)
    np.testing.assert_array_equal(np.isnan(read.t2m), np.isnan(expected.t2m))
    assert float(np.nanmax(np.abs(read.t2m - expected.t2m))) <= scale / 200
    assert {k: read.t2m.encoding[k] for k in ("dtype", "scale_factor", "_FillValue")} == {
        k: expected.t2m.encoding[k] for k in ("dtype", "scale_factor", "_FillValue")}


def test_shared_packed_netcdf_sample_keeps_its_precision(tmp_path):
    source_path = require_shared(NETCDF / "cf_temperature.nc")
    out = tmp_path / "cf.tgm"
    assert main(["convert", str(source_path), str(out), "--no-progress"]) == 0
    assert {d["params"].get("sp_bits_per_value") for d in descriptors(out)} == {16}
    with xr.open_dataset(source_path) as source:
        np.testing.assert_allclose(open_tgm(out).temperature, source.temperature, atol=0.01)


def test_unpacked_encoding_of_a_packed_variable_warns_how_much_larger(era5_like, tmp_path):
    with xr.open_dataset(era5_like) as source, \
            pytest.warns(UserWarning, match=r"'t2m' was packed in 16 bits .* 64-bit values: about 4 times larger"):
        to_tgm(source, tmp_path / "zstd.tgm", encoding={"t2m": {"compression": "zstd"}})
    assert {d["encoding"] for d in descriptors(tmp_path / "zstd.tgm")} == {"none"}


def test_explicit_bits_override_the_input_packing(era5_like, tmp_path):
    with xr.open_dataset(era5_like) as source:
        to_tgm(source, tmp_path / "t.tgm", encoding={"t2m": {"bits": 12}})
    assert {d["params"].get("sp_bits_per_value") for d in descriptors(tmp_path / "t.tgm")} == {12}


# --------------------------------------------------------------------------------------------
# CF attributes of keyed coordinates


def test_cf_time_attributes_of_a_netcdf_input_survive(tmp_path):
    source_path = require_shared(NETCDF / "cf_temperature.nc")
    out = tmp_path / "cf.tgm"
    with xr.open_dataset(source_path) as source:
        to_tgm(source, out)
        attrs = dict(source.time.attrs)
    read = open_tgm(out)
    assert read.time.attrs == attrs == {"standard_name": "time", "axis": "T"}
    assert read.sizes["time"] == 3


def test_cfgrib_time_attributes_are_not_stored_again(tmp_path, ifs_file):
    """A cfgrib-style input's MARS coordinates already read back with cfgrib's attributes:
    their attributes are not repeated in every message."""
    out = tmp_path / "ifs.tgm"
    with xr.open_dataset(ifs_file, engine=ENGINE) as source:
        to_tgm(source, out)
        attrs = {name: dict(source[name].attrs) for name in source.coords}
    handle = _core.FileHandle(os.fspath(out))
    assert "coordinate_attrs" not in handle.metadata(0).get("_extra_", {})
    assert {name: dict(c.attrs) for name, c in open_tgm(out).coords.items()} == attrs


# --------------------------------------------------------------------------------------------
# Text variables


def test_text_variable_is_skipped_with_a_warning(tmp_path):
    source_path = require_shared(NETCDF / "multi_var.nc")
    out = tmp_path / "multi.tgm"
    with xr.open_dataset(source_path) as source, \
            pytest.warns(UserWarning, match=r"\['description'\] hold text.*--drop-variables description"):
        to_tgm(source, out)
        expected = source.drop_vars("description").load()
    xr.testing.assert_equal(open_tgm(out), expected)


def test_text_coordinate_of_a_field_dimension_is_skipped(tmp_path):
    ds = xr.Dataset({"v": (("station", "x"), np.ones((2, 3)))},
                    coords={"name": ("station", np.array(["oslo", "bergen"], dtype=object)),
                            "station": [10, 20]})
    with pytest.warns(UserWarning, match=r"\['name'\] hold text"):
        to_tgm(ds, tmp_path / "t.tgm", field_dims=("station", "x"))
    assert "name" not in open_tgm(tmp_path / "t.tgm").variables


def test_cli_drop_variables(tmp_path, recwarn):
    source_path = require_shared(NETCDF / "multi_var.nc")
    out = tmp_path / "multi.tgm"
    assert main(["convert", str(source_path), str(out), "--drop-variables", "description,pressure",
                 "--no-progress"]) == 0
    assert not [w for w in recwarn.list if "text" in str(w.message)]
    assert sorted(open_tgm(out).data_vars) == ["humidity", "temperature"]
    with pytest.raises(SystemExit) as usage:
        main(["convert", str(source_path), str(tmp_path / "x.tgm"), "--drop-variables", "nope", "--no-progress"])
    assert usage.value.code == 2
    assert not (tmp_path / "x.tgm").exists()


# --------------------------------------------------------------------------------------------
# Holes of a union hypercube


def test_holes_of_the_real_ifs_file_are_not_written(tmp_path, ifs_file):
    """q (150 hPa) and t (600 hPa) read as one isobaricInhPa dimension with a NaN hole each:
    re-written by default, the file holds the original four fields, and reads back the same."""
    out = tmp_path / "ifs.tgm"
    with xr.open_dataset(ifs_file, engine=ENGINE) as source:
        assert source.sizes["isobaricInhPa"] == 2
        to_tgm(source, out)
        expected = source.load()
    assert len(_core.FileHandle(os.fspath(out))) == len(_core.FileHandle(os.fspath(ifs_file))) == 4
    xr.testing.assert_identical(open_tgm(out), expected)
    to_tgm(expected, out, skip_nan_fields=False)
    assert len(_core.FileHandle(os.fspath(out))) == 6


def test_all_nan_fields_that_hold_a_value_are_kept(tmp_path):
    """An all-NaN field is written when nothing else keeps its variable or coordinate value:
    the Dataset reads back identical."""
    values = np.ones((3, 2, 2))
    values[1] = np.nan  # number=1 is NaN in every variable: its fields keep the value
    ds = xr.Dataset({"a": (("number", "y", "x"), values), "b": (("number", "y", "x"), values * 2),
                     "gone": (("y", "x"), np.full((2, 2), np.nan))},
                    coords={"number": ("number", [0, 1, 2], cf.COORD_ATTRS["number"])})
    out = tmp_path / "holes.tgm"
    to_tgm(ds, out)
    assert len(_core.FileHandle(os.fspath(out))) == 3 + 2 + 1  # b at number=1 is a hole
    xr.testing.assert_identical(open_tgm(out), ds)


def test_holes_are_judged_over_every_input_of_a_conversion(tmp_path):
    """Two inputs converted into one file: an all-NaN field at a level only the second input has
    keeps that level (its place along the dimension is 0 in both inputs, its value is not)."""
    attrs = cf.COORD_ATTRS["isobaricInhPa"]
    upper = xr.Dataset({"v": (("isobaricInhPa", "y", "x"), np.ones((2, 2, 3)))},
                       coords={"isobaricInhPa": ("isobaricInhPa", [850, 500], attrs)})
    lower = xr.Dataset({"v": (("isobaricInhPa", "y", "x"), np.full((1, 2, 3), np.nan))},
                       coords={"isobaricInhPa": ("isobaricInhPa", [1000], attrs)})
    upper.to_netcdf(tmp_path / "upper.nc")
    lower.to_netcdf(tmp_path / "lower.nc")
    out = tmp_path / "levels.tgm"
    assert main(["convert", str(tmp_path / "upper.nc"), str(tmp_path / "lower.nc"), str(out),
                 "--no-progress"]) == 0
    read = open_tgm(out)
    assert read.isobaricInhPa.values.tolist() == [1000, 850, 500]
    assert np.isnan(read.v.sel(isobaricInhPa=1000)).all() and (read.v.sel(isobaricInhPa=500) == 1).all()


# --------------------------------------------------------------------------------------------
# .tgm -> NetCDF and Zarr (tgm-xarray convert in.tgm out.nc|out.zarr)
# --------------------------------------------------------------------------------------------

GRIB = FIXTURES / "upstream" / "grib"


def _half_step(values: np.ndarray, width: int) -> float:
    """The largest error CF packing of ``values`` into ``width`` bits may add (export.packing)."""
    return float(np.nanmax(values) - np.nanmin(values)) / (2 * (2 ** (width - 1) - 1)) * (1 + 1e-9)


@pytest.fixture(scope="module")
def grib_tgm(tmp_path_factory):
    """The shared GRIB2 fields (2 m temperature, two pressure levels) converted with 16-bit packing."""
    pytest.importorskip("cfgrib")
    inputs = [str(require_shared(GRIB / f)) for f in ("2t.grib2", "t_600.grib2", "q_150.grib2")]
    path = tmp_path_factory.mktemp("grib") / "fields.tgm"
    assert main(["convert", *inputs, str(path), "--bits", "16", "--no-progress"]) == 0
    return path, inputs


def _grib_fields(inputs: list[str]):
    """``(name, level selection, values)`` of each GRIB field, read by cfgrib."""
    import cfgrib

    for path in inputs:
        for ds in cfgrib.open_datasets(path, backend_kwargs={"indexpath": ""}):
            for name, var in ds.data_vars.items():
                at = {k: ds[k].item() for k in ("isobaricInhPa",) if k in ds.coords}
                yield name, at, var.values


@pytest.mark.parametrize("suffix, engine", [(".nc", "netcdf4"), (".zarr", "zarr")])
def test_grib_to_tgm_to_netcdf_and_zarr(grib_tgm, tmp_path, suffix, engine):
    """16-bit simple packing becomes uint16 scale/offset packing of its own integers: values
    equal the .tgm's bit for bit, so the GRIB source's within the Tensogram packing error."""
    path, inputs = grib_tgm
    out = tmp_path / f"fields{suffix}"
    assert main(["convert", str(path), str(out)]) == 0
    kw = {"consolidated": False} if engine == "zarr" else {}
    with xr.open_dataset(path, engine=ENGINE) as tgm, xr.open_dataset(out, engine=engine, **kw) as ds, \
            xr.open_dataset(out, engine=engine, mask_and_scale=False, **kw) as raw:
        assert sorted(ds.data_vars) == ["q", "t", "t2m"]
        for name in ds.data_vars:
            params = tgm[name].encoding["tensogram_params"]
            assert raw[name].dtype == np.uint16
            assert raw[name].attrs["add_offset"] == params["sp_reference_value"]
            assert raw[name].attrs["scale_factor"] == 2.0 ** params["sp_binary_scale_factor"]
            # NaN (a hole of the hypercube) is the one value 16 bits leave free
            assert raw[name].attrs.get("_FillValue") == (65535 if name in ("q", "t") else None)
            # NetCDF decodes into cfgrib's float32, as the .tgm reads; Zarr, whose attributes
            # are JSON numbers, into float64: the packed values, which round to the .tgm's
            assert ds[name].dtype == (np.float32 if engine == "netcdf4" else np.float64)
            np.testing.assert_array_equal(ds[name].values.astype(np.float32), tgm[name].values)
            if engine == "netcdf4":
                assert raw[name].encoding["zlib"]  # from the default blosc2 compression
            else:
                assert raw[name].encoding["compressors"]  # zarr's default compressors
                assert raw[name].encoding["chunks"] == tuple(tgm[name].encoding["preferred_chunks"].values())
        for name, at, expected in _grib_fields(inputs):
            tgm_error = float(expected.max() - expected.min()) / (2**16 - 1)
            assert np.abs(ds[name].sel(at).values - expected).max() <= tgm_error, (name, at)
        for name in ("latitude", "longitude", "isobaricInhPa", "time"):
            np.testing.assert_array_equal(ds[name].values, tgm[name].values)
        expected = tgm.load()
    if engine == "netcdf4":  # and back: the same Dataset, MARS keys and packing
        again = tmp_path / "again.tgm"
        assert main(["convert", str(out), str(again), "--no-progress"]) == 0
        xr.testing.assert_identical(open_tgm(again), expected)
        first, second = _core.FileHandle(os.fspath(path)), _core.FileHandle(os.fspath(again))
        assert len(first) == len(second)
        for i in range(len(first)):
            assert second.metadata(i)["base"][0]["mars"] == first.metadata(i)["base"][0]["mars"]
            assert second.descriptors(i)[0]["params"] == first.descriptors(i)[0]["params"]


def test_real_24_bit_file_to_zarr_is_its_own_integers(tmp_path, ifs_file, capsys):
    out = tmp_path / "ifs.zarr"
    assert main(["convert", str(ifs_file), str(out)]) == 0
    assert capsys.readouterr().err == ""
    with xr.open_dataset(ifs_file, engine=ENGINE) as tgm, xr.open_zarr(out, consolidated=False) as ds, \
            xr.open_zarr(out, consolidated=False, mask_and_scale=False) as raw:
        for name in tgm.data_vars:
            assert raw[name].dtype == np.uint32 and ds[name].encoding["compressors"]
            assert ds[name].dtype == np.float64
            np.testing.assert_array_equal(ds[name].values, tgm[name].values)


def test_uncompressed_and_nan_to_netcdf(tmp_path):
    """No compression stays uncompressed; NaN becomes the packed _FillValue and NaN again; an
    8-bit packed variable becomes its own uint8 integers; an unpacked one stays as it is."""
    rng = np.random.default_rng(3)
    t = 250 + 50 * rng.random((4, 30))
    t[0, :3] = np.nan
    ds = xr.Dataset({"t": (("y", "x"), t), "n": (("y", "x"), rng.integers(0, 9, (4, 30)).astype("int32")),
                     "u": (("y", "x"), rng.random((4, 30)))})
    src = tmp_path / "a.tgm"
    to_tgm(ds, src, encoding={"t": {"bits": 8, "compression": "none"}, "n": {"compression": "none"},
                              "u": {"compression": "none"}})
    out = tmp_path / "a.nc"
    assert main(["convert", str(src), str(out)]) == 0
    with xr.open_dataset(src, engine=ENGINE) as tgm, xr.open_dataset(out) as back, \
            xr.open_dataset(out, mask_and_scale=False) as raw:
        assert raw["t"].dtype == np.uint8 and raw["t"].attrs["_FillValue"] == 255
        assert not raw["t"].encoding.get("zlib") and not raw["u"].encoding.get("zlib")
        assert np.isnan(back["t"].values[0, :3]).all()
        np.testing.assert_array_equal(back["t"].values, tgm["t"].values)
        assert raw["n"].dtype == np.int32 and raw["u"].dtype == np.float64
        np.testing.assert_array_equal(back["n"].values, ds["n"].values)
        np.testing.assert_array_equal(back["u"].values, ds["u"].values)


def test_netcdf_export_writes_other_attributes_as_the_json_of_tgm_attributes(tmp_path):
    """What NetCDF has no attribute type for is JSON text by the rule of the engine's attributes
    (byte strings as hex, numpy numbers as numbers, keys sorted); booleans become 0/1."""
    nested = {"b": [b"\x01\xff", np.int64(3)], "a": float("nan")}
    ds = xr.Dataset({"v": ("x", np.arange(3.0), {"flag": np.bool_(True), "nested": nested})},
                    attrs={"names": ["a", "b"], "levels": [1, 2]})
    out = tmp_path / "attrs.nc"
    export.export(ds, str(out), "netcdf", warn=pytest.fail)
    with xr.open_dataset(out) as back:
        assert back.attrs["names"] == attrs.json_text(["a", "b"]) == '["a", "b"]'
        assert list(back.attrs["levels"]) == [1, 2]
        assert back["v"].attrs["flag"] == 1
        assert back["v"].attrs["nested"] == attrs.json_text(nested) == '{"a": NaN, "b": ["01ff", 3]}'


@pytest.fixture
def small_tgm(tmp_path):
    path = tmp_path / "small.tgm"
    to_tgm(xr.Dataset({"v": ("x", np.arange(5.0))}), path)
    return path


@pytest.mark.parametrize("extra, message", [
    (["--bits", "16"], "--bits: only for .tgm outputs"),
    (["--compression", "zstd", "--no-hash"], "--compression, --no-hash: only for .tgm outputs"),
    (["--layout", "variable"], "--layout: only for .tgm outputs"),
    (["--append"], "--append: only for .tgm outputs"),
])
def test_export_refuses_bad_options(small_tgm, tmp_path, capsys, extra, message):
    out = tmp_path / "out.nc"
    assert main(["convert", str(small_tgm), str(out), *extra]) == 1
    err = capsys.readouterr().err
    assert message in err and err.count("\n") == 1
    assert not out.exists() and os.listdir(tmp_path) == ["small.tgm"]  # no temporary left



def test_export_takes_one_tgm_input(small_tgm, tmp_path, capsys):
    nc = tmp_path / "in.nc"
    xr.Dataset({"v": ("x", np.arange(3.0))}).to_netcdf(nc)
    for inputs in ([str(small_tgm), str(small_tgm)], [str(nc)]):
        assert main(["convert", *inputs, str(tmp_path / "out.zarr")]) == 1
        assert "convert writes Zarr from one .tgm INPUT" in capsys.readouterr().err
    assert not (tmp_path / "out.zarr").exists()


@pytest.mark.parametrize("name", ["out.nc", "out.zarr"])
def test_existing_output_needs_force(small_tgm, tmp_path, capsys, name):
    out = tmp_path / name
    assert main(["convert", str(small_tgm), str(out)]) == 0
    before = sorted(os.listdir(tmp_path))
    assert main(["convert", str(small_tgm), str(out)]) == 1
    assert "exists: --force replaces it" in capsys.readouterr().err
    to_tgm(xr.Dataset({"v": ("x", np.arange(7.0))}), small_tgm)
    assert main(["convert", str(small_tgm), str(out), "--force"]) == 0
    assert sorted(os.listdir(tmp_path)) == before  # replaced in place, nothing left beside
    with xr.open_dataset(out, **({"engine": "zarr", "consolidated": False} if name.endswith("zarr") else {})) as ds:
        np.testing.assert_array_equal(ds["v"].values, np.arange(7.0))
