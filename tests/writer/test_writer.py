"""The writer: ``to_tgm`` / ``ds.tgm.to_file`` round trips through ``xr.open_dataset``, encodings
and their bounds, upstream ``tensogram`` as an independent reader, atomic writes and appends,
dask streaming with bounded memory.

Every test writes and reads real ``.tgm`` files; nothing is mocked.
"""

from __future__ import annotations

import os
import tracemalloc
import warnings

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import tgm_xarray
from tests.helpers.oracle import ENGINE, upstream_decode
from tests.helpers.shared import FIXTURES, require_shared
from tgm_xarray import _core, cf, mars
from tgm_xarray.atomic import AtomicFile
from tgm_xarray.attrs import attr_name, flatten
from tgm_xarray.errors import TgmCodecError, TgmFormatError, TgmIndexWarning
from tgm_xarray.pipeline import SZIP_PACKED_BITS
from tgm_xarray.plans import index
from tgm_xarray.table import MetadataTable
from tgm_xarray.writer import TgmWriter, to_tgm

dask = pytest.importorskip("dask")
import dask.array as da  # noqa: E402
from dask.delayed import Delayed  # noqa: E402

LAYOUTS = ("field", "variable")
NUMERIC_DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64",
                  "float16", "float32", "float64", "complex64", "complex128")


# --------------------------------------------------------------------------------------------
# Helpers
# --------------------------------------------------------------------------------------------


def open_tgm(path, **kwargs) -> xr.Dataset:
    with xr.open_dataset(path, engine=ENGINE, **kwargs) as ds:
        return ds.load()


def assert_round_trip(read: xr.Dataset, written: xr.Dataset) -> None:
    """``read`` is ``written``: values, dims, coords, attrs, and the dtype of every number."""
    xr.testing.assert_identical(read, written)
    for name, var in written.variables.items():
        if var.dtype.kind in "biufc":
            assert read[name].dtype == var.dtype, f"{name}: {read[name].dtype} != {var.dtype}"


def cfgrib_like(rng: np.random.Generator, dtype="float32") -> xr.Dataset:
    """A cfgrib-style ensemble forecast: (number, time, step, isobaricInhPa, lat, lon) and a
    3-D variable, with cfgrib's coordinate attributes and valid_time."""
    lat, lon = np.linspace(90, -90, 5), np.arange(0, 360, 60.0)
    ds = xr.Dataset(
        {"t": (("number", "time", "step", "isobaricInhPa", "latitude", "longitude"),
               (250 + 30 * rng.standard_normal((2, 2, 3, 2, 5, 6))).astype(dtype),
               {"units": "K", "long_name": "Temperature", "standard_name": "air_temperature",
                "GRIB_paramId": 130, "GRIB_shortName": "t"}),
         "z": (("time", "latitude", "longitude"), rng.standard_normal((2, 5, 6)),
               {"units": "m**2 s**-2"})},
        coords={"number": ("number", [0, 1], {"units": "1", "standard_name": "realization",
                                              "long_name": "ensemble member numerical id"}),
                "time": ("time", pd.date_range("2026-04-04", periods=2, freq="12h"),
                         {"standard_name": "forecast_reference_time",
                          "long_name": "initial time of forecast"}),
                "step": ("step", pd.to_timedelta([0, 6, 12], unit="h"),
                         {"standard_name": "forecast_period",
                          "long_name": "time since forecast_reference_time"}),
                "isobaricInhPa": ("isobaricInhPa", [850.0, 500.0],
                                  {"units": "hPa", "positive": "down", "stored_direction": "decreasing",
                                   "standard_name": "air_pressure", "long_name": "pressure"}),
                "latitude": ("latitude", lat, {"units": "degrees_north", "standard_name": "latitude"}),
                "longitude": ("longitude", lon, {"units": "degrees_east", "standard_name": "longitude"})},
        attrs={"Conventions": "CF-1.7", "institution": "ECMWF", "GRIB_edition": 2})
    ds = ds.assign_coords(valid_time=ds.time + ds.step)
    ds.valid_time.attrs.update({"standard_name": "time", "long_name": "time"})
    return ds


def dtype_values(rng: np.random.Generator, dtype: str, shape) -> np.ndarray:
    dt = np.dtype(dtype)
    if dt.kind in "iu":
        info = np.iinfo(dt)
        values = rng.integers(info.min, info.max, size=shape, dtype=dt, endpoint=True)
        values.flat[:2] = [info.min, info.max]
        return values
    values = 100 * rng.standard_normal(shape) + (1j * rng.standard_normal(shape) if dt.kind == "c" else 0)
    values = values.astype(dt)
    # (complex: both parts, as upstream's masks mark whole elements; see the test below)
    both = 1 + 1j if dt.kind == "c" else 1
    values.flat[1:4] = [np.nan * both, np.inf * both, -np.inf * both]
    return values


def dtype_dataset(rng: np.random.Generator) -> xr.Dataset:
    """One variable per numeric dtype, 1-D to 4-D in turn, with NaN/Inf in the floats, over a
    MARS dimension, generic integer and string dimensions, and an inner dimension without a
    coordinate."""
    sizes = {"number": 2, "ens": 3, "y": 4, "x": 5}
    layouts = [("x",), ("y", "x"), ("ens", "y", "x"), ("number", "ens", "y", "x")]
    data = {}
    for i, dtype in enumerate(NUMERIC_DTYPES):
        dims = layouts[i % 4]
        data[f"v_{dtype}"] = (dims, dtype_values(rng, dtype, [sizes[d] for d in dims]),
                              {"units": "1", "dtype_name": dtype})
    realization = {"units": "1", "standard_name": "realization",
                   "long_name": "ensemble member numerical id"}  # the reader's (cfgrib's) attrs
    return xr.Dataset(data, coords={"number": ("number", [1, 2], realization), "ens": [10, 20, 30],
                                    "y": ("y", np.arange(4) * 0.5, {"units": "km"})})


def with_mars_attrs(ds: xr.Dataset) -> xr.Dataset:
    """``ds`` with the attributes the reader gives coordinates rebuilt from MARS keys (cfgrib's),
    and the ``valid_time`` it derives from ``time`` and ``step``."""
    if "time" in ds.coords and "step" in ds.coords and "valid_time" not in ds.coords:
        ds = ds.assign_coords(valid_time=ds.time + ds.step)
    for name in ("number", "time", "step", "valid_time", "isobaricInhPa"):
        if name in ds.coords:
            ds[name].attrs.update(cf.COORD_ATTRS[name])
    return ds


def messages(path) -> list[dict]:
    handle = _core.FileHandle(os.fspath(path))
    return [handle.metadata(i) for i in range(len(handle))]


def no_temporary_files(directory) -> bool:
    return not [p for p in os.listdir(directory) if p.endswith(".tmp")]


# --------------------------------------------------------------------------------------------
# Round trips
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("layout", LAYOUTS)
def test_round_trip_cfgrib_style(tmp_path, layout):
    ds = cfgrib_like(np.random.default_rng(0))
    path = tmp_path / "fc.tgm"
    to_tgm(ds, path, layout=layout)
    assert_round_trip(open_tgm(path), ds)
    metas = messages(path)
    if layout == "field":
        # one message per 2-D field, MARS keys for the stacked dimensions
        assert len(metas) == 2 * 2 * 3 * 2 + 2
        mars_keys = metas[0]["base"][0]["mars"]
        assert mars_keys == {"number": 0, "date": "20260404", "time": "0000", "step": 0,
                             "levtype": "pl", "levelist": 850.0}
        assert metas[0]["base"][0]["dim_names"] == ["latitude", "longitude"]
        assert [b["name"] for b in metas[0]["base"]] == ["t", "latitude", "longitude"]
        assert metas[0]["_extra_"] == {"Conventions": "CF-1.7", "institution": "ECMWF",
                                       "GRIB_edition": 2}
    else:
        assert len(metas) == 3  # t, z, and valid_time (not rebuilt from keys here)


@pytest.mark.parametrize("layout", LAYOUTS)
def test_round_trip_every_numeric_dtype(tmp_path, layout):
    ds = dtype_dataset(np.random.default_rng(1))
    path = tmp_path / "dtypes.tgm"
    to_tgm(ds, path, layout=layout)
    assert_round_trip(open_tgm(path), ds)


def test_complex_non_finite_values_follow_upstream_masks(tmp_path):
    """Upstream masks NaN/Inf per element: a complex value with one non-finite part reads back
    with both parts non-finite (documented in docs/writer.md)."""
    values = np.array([1 + 2j, complex(np.nan, 0), complex(np.inf, 0), complex(1, -np.inf)])
    to_tgm(xr.Dataset({"c": ("x", values)}), tmp_path / "c.tgm")
    read = open_tgm(tmp_path / "c.tgm")["c"].values
    assert read[0] == 1 + 2j
    assert np.isnan(read[1].real) and np.isnan(read[1].imag)
    assert read[2] == complex(np.inf, np.inf) and read[3] == complex(-np.inf, -np.inf)


def test_round_trip_string_dimension(tmp_path):
    """A dimension labelled by strings is stacked under a plain key (field layout); its labels
    cannot be an object, so the variable layout leaves them out, with a warning naming them."""
    ds = xr.Dataset({"w": (("region", "y", "x"), np.arange(24.0).reshape(2, 3, 4))},
                    coords={"region": ["north", "south"]})
    path = tmp_path / "regions.tgm"
    to_tgm(ds, path)
    assert [m["base"][0]["region"] for m in messages(path)] == ["north", "south"]
    assert_round_trip(open_tgm(path), ds)
    with pytest.warns(UserWarning, match=r"\['region'\] hold text"):
        to_tgm(ds, tmp_path / "variable.tgm", layout="variable")
    assert_round_trip(open_tgm(tmp_path / "variable.tgm"), ds.drop_vars("region"))


@pytest.mark.parametrize("layout", LAYOUTS)
def test_round_trip_cf_times_and_booleans(tmp_path, layout):
    """datetime64 and timedelta64 coordinates and variables (with NaT and sub-second times),
    and booleans, go through CF encoding and come back."""
    times = pd.date_range("2026-01-01T00:00:00.25", periods=3, freq="90s")  # not whole minutes
    ds = with_mars_attrs(xr.Dataset(
        {"t": (("time", "step", "y", "x"), np.arange(48.0).reshape(3, 2, 2, 4)),
         "peak_time": (("y", "x"), np.array([["2026-01-01T06", "NaT", "2025-12-31T23:59:59.5", "1970-01-01"],
                                              ["2100-01-01", "2026-01-01", "2026-01-02", "NaT"]],
                                             "datetime64[ns]")),
         "lead": (("x",), pd.to_timedelta([0, 90, 3600, 86400 * 3], unit="s").values),
         "wet": (("y", "x"), np.array([[True, False, True, True], [False, False, True, False]]))},
        coords={"time": times, "step": ("step", pd.to_timedelta([30, 90], unit="min"))}))
    path = tmp_path / "times.tgm"
    to_tgm(ds, path, layout=layout)
    assert_round_trip(open_tgm(path), ds)
    if layout == "field":
        bases = [m["base"][0] for m in messages(path)[:3]]
        assert [b["time"] for b in bases] == [str(np.datetime64(t, "ns")) for t in times[[0, 0, 1]]]
        assert [b["mars"] for b in bases] == [{"step": "30m"}, {"step": "90m"}, {"step": "30m"}]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_round_trip_attributes(tmp_path, layout):
    attrs = {"units": "K", "long_name": "air temperature", "standard_name": "air_temperature",
             "scale": np.float32(0.5), "count": np.int64(3), "flags": np.array([1, 2, 4]),
             "levels": [1000.0, 850.0], "names": ["a", "b"], "grib.paramId": 130,
             "grib.shortName": "t"}
    ds = xr.Dataset({"t": (("y", "x"), np.ones((2, 3)), attrs)},
                    coords={"y": ("y", [1.0, 2.0], {"axis": "Y", "units": "m"})},
                    attrs={"title": "demo", "history": "made by a test", "version": 2,
                           "source.model": "IFS", "source.cycle": "49r1"})
    path = tmp_path / "attrs.tgm"
    to_tgm(ds, path, layout=layout)
    expected = ds.copy()  # GRIB facts read back as cfgrib names them, whoever wrote them
    expected["t"].attrs = {k.replace("grib.", "GRIB_"): v for k, v in attrs.items()}
    assert_round_trip(open_tgm(path), expected)
    meta = messages(path)[0]
    # dotted attribute names are written as the nested maps the reader flattens
    assert meta["base"][0]["grib"] == {"paramId": 130, "shortName": "t"}
    assert meta["_extra_"]["source"] == {"model": "IFS", "cycle": "49r1"}


@pytest.mark.parametrize("layout", LAYOUTS)
def test_round_trip_auxiliary_coordinates(tmp_path, layout):
    """Non-index coordinates (2-D, 1-D along another dimension) and a coordinate on a dimension
    no variable uses go to a trailing message, named in the CF ``coordinates`` attribute."""
    rng = np.random.default_rng(2)
    ds = with_mars_attrs(xr.Dataset(
        {"a": (("time", "y", "x"), rng.standard_normal((2, 3, 4))),
         "b": (("y", "x"), rng.standard_normal((3, 4)))},
        coords={"time": pd.date_range("2026-01-01", periods=2),
                "area": (("y", "x"), rng.random((3, 4)), {"units": "m2"}),
                "row_label": ("y", [7, 8, 9]),
                "band": ("band", [0.5, 1.5])}))
    path = tmp_path / "aux.tgm"
    to_tgm(ds, path, layout=layout)
    assert_round_trip(open_tgm(path), ds)
    last = messages(path)[-1]
    assert sorted(b["name"] for b in last["base"]) == ["area", "band", "row_label"]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_round_trip_scalar_coordinates_and_variables(tmp_path, layout):
    """cfgrib's scalar coordinates: time/step/heightAboveGround become keys (0-d objects in the
    variable layout), its attributes other than cfgrib's kept; a 0-d data variable."""
    ds = with_mars_attrs(xr.Dataset(
        {"t2m": (("latitude", "longitude"), np.ones((2, 3), "float32")), "mean": ((), 3.5)},
        coords={"latitude": [10.0, 0.0], "longitude": [0.0, 1.0, 2.0],
                "time": np.datetime64("2026-04-04", "ns"), "step": np.timedelta64(0, "ns"),
                "heightAboveGround": ((), 2.0, {"units": "m"})}))
    path = tmp_path / "scalars.tgm"
    to_tgm(ds, path, layout=layout)
    assert_round_trip(open_tgm(path), ds)


def test_round_trip_height_levels(tmp_path):
    """cfgrib's ``heightAboveGround``, a dimension or scalar, is written as ecCodes encodes a
    field at a height (MARS ``levtype: sfc``, ``typeOfLevel: heightAboveGround``, ``level``):
    upstream reads those keys, we read the level back. Of two scalar levels, each variable keys
    the one its CF ``coordinates`` names (``2t`` at 2 m, ``lsm`` on the surface)."""
    import tensogram

    rng = np.random.default_rng(7)
    height_attrs = cf.COORD_ATTRS["heightAboveGround"]
    profile = with_mars_attrs(xr.Dataset(
        {"t": (("heightAboveGround", "y", "x"), rng.random((3, 2, 3)))},
        coords={"heightAboveGround": ("heightAboveGround", [10.0, 50.0, 100.0], height_attrs),
                "time": np.datetime64("2026-04-04", "ns"), "step": np.timedelta64(6, "h").astype("m8[ns]")}))
    surface = xr.Dataset({"2t": (("y", "x"), rng.random((2, 3))), "lsm": (("y", "x"), rng.random((2, 3)))},
                         coords={"heightAboveGround": ((), 2.0, height_attrs),
                                 "surface": ((), mars.SURFACE_VALUE, cf.COORD_ATTRS["surface"])})
    surface["2t"].encoding["coordinates"] = "heightAboveGround"
    surface["lsm"].encoding["coordinates"] = "surface"
    for ds, levels in ((profile, [10.0, 50.0, 100.0]), (surface, [2.0, None])):
        path = tmp_path / "heights.tgm"
        to_tgm(ds, path)
        assert_round_trip(open_tgm(path), ds)
        with tensogram.TensogramFile.open(str(path)) as f:
            written = [tensogram.decode_metadata(f.read_message(i)).base[0] for i in range(len(f))]
        assert [b["mars"]["levtype"] for b in written] == ["sfc"] * len(levels)
        assert [b.get("grib") for b in written] == [
            {"typeOfLevel": "heightAboveGround", "level": h} if h is not None else None for h in levels]


def test_round_trip_cfgrib_height_level(tmp_path):
    """cfgrib's own Dataset of the 2 m temperature (``heightAboveGround = 2.0``) comes back
    identical from our file."""
    pytest.importorskip("cfgrib")  # no free-threaded wheel of eccodes
    grib = require_shared(FIXTURES / "upstream" / "grib" / "2t.grib2")
    with xr.open_dataset(grib, engine="cfgrib", backend_kwargs={"indexpath": ""}) as source:
        source = source.load()
    assert float(source["heightAboveGround"]) == 2.0
    path = tmp_path / "t2m.tgm"
    to_tgm(source, path)
    assert_round_trip(open_tgm(path), source)


def test_round_trip_real_ifs_file(tmp_path, ifs_file):
    """The real IFS fixture, re-written: an identical Dataset, the source's codecs kept (24-bit
    packing + szip) and, with skip_nan_fields, the same four messages as the original (the
    hypercube holes of q and t are not written)."""
    with xr.open_dataset(ifs_file, engine=ENGINE) as source:
        path = tmp_path / "ifs.tgm"
        to_tgm(source, path, skip_nan_fields=True)
        assert_round_trip(open_tgm(path), source.load())
    original, rewritten = messages(ifs_file), messages(path)
    assert len(rewritten) == len(original) == 4
    for a, b in zip(original, rewritten):
        for obj in range(3):  # every original key is back (plus `_extra_` entries that differ
            kept = flatten(a["base"][obj])  # per message); upstream's `grib.<key>` as the reader
            back = flatten(b["base"][obj])  # names it, `GRIB_<key>`, unless a level's
            assert {k: back.get(attr_name(k), back.get(k)) for k in kept} == kept
    handle = _core.FileHandle(os.fspath(path))
    d = handle.descriptors(0)[0]
    assert (d["encoding"], d["compression"], d["params"]["sp_bits_per_value"]) == ("simple_packing", "szip", 24)
    assert abs(os.path.getsize(path) - os.path.getsize(ifs_file)) < 1000


# --------------------------------------------------------------------------------------------
# Encodings
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("bits", [1, 8, 12, 16, 24, 32])
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_packing_error_bound(tmp_path, bits, dtype):
    """Packing (float32 is upcast to float64, and read back as float32) stays within half a
    quantum, and below (max - min) / (2**bits - 1), plus float32's own rounding where read back
    so; NaN and Inf are masked, not packed."""
    rng = np.random.default_rng(bits)
    values = (250 + 40 * rng.standard_normal((3, 20, 30))).astype(dtype)
    values[0, 0, :5] = np.nan
    values[1, 3, 3] = np.inf
    ds = xr.Dataset({"t": (("time", "y", "x"), values)},
                    coords={"time": pd.date_range("2026-01-01", periods=3)})
    path = tmp_path / "p.tgm"
    to_tgm(ds, path, encoding={"t": {"bits": bits}})
    read = open_tgm(path)["t"].values
    assert read.dtype == values.dtype
    finite = np.isfinite(values)
    np.testing.assert_array_equal(np.isnan(read), np.isnan(values))
    np.testing.assert_array_equal(read[~finite & ~np.isnan(values)], values[~finite & ~np.isnan(values)])
    handle = _core.FileHandle(os.fspath(path))
    for field in range(3):
        params = handle.descriptors(field)[0]["params"]
        assert params["sp_bits_per_value"] == bits
        f = values[field][finite[field]].astype(np.float64)
        error = np.abs(read[field][finite[field]].astype(np.float64) - f).max()
        rounding = float(np.spacing(np.abs(values[field][finite[field]]).max())) / 2  # float32's, on read
        assert error <= 2.0 ** params["sp_binary_scale_factor"] / 2 * (1 + 1e-9) + rounding
        assert error <= (f.max() - f.min()) / (2**bits - 1) + rounding


@pytest.mark.parametrize("bits", SZIP_PACKED_BITS)
def test_packing_with_szip(tmp_path, bits):
    values = np.linspace(0, 1, 1000).reshape(20, 50)
    ds = xr.Dataset({"t": (("y", "x"), values)})
    path = tmp_path / "p.tgm"
    to_tgm(ds, path, encoding={"t": {"bits": bits, "compression": "szip"}})
    read = open_tgm(path)["t"].values
    assert np.abs(read - values).max() <= 1 / (2**bits - 1)


def test_a_large_szip_field_is_written_alike_on_any_threads_and_upstream_reads_it(tmp_path, ifs_file):
    """The 2 m temperature (721 x 1440, 24-bit packing + szip) is encoded in pieces on as many
    threads as it is given: the stored bytes never depend on how many, and upstream decodes
    them to the values our reader gives, within the packing bound."""
    with xr.open_dataset(ifs_file, engine=ENGINE) as source:
        ds = source[["2t"]].load()
    payloads = []
    for threads in (1, 2, 4):
        path = tmp_path / f"threads{threads}.tgm"
        to_tgm(ds, path, threads=threads, encoding={"2t": {"bits": 24, "compression": "szip"}})
        table = MetadataTable(_core.table_of_files([_core.FileHandle(os.fspath(path))]))
        start, end = table.payload_start[0], table.payload_end[0]
        payloads.append(path.read_bytes()[start:end])
        read = open_tgm(path)["2t"].values
        np.testing.assert_array_equal(upstream_decode(path, 0, verify_hash=True)[0].reshape(read.shape), read)
        span = float(ds["2t"].max() - ds["2t"].min())
        assert np.abs(read - ds["2t"].values).max() <= span / (2**24 - 1)
    assert payloads[0] == payloads[1] == payloads[2]


def test_writer_threads_are_checked_where_they_are_taken(tmp_path):
    with pytest.raises(ValueError, match=r"threads must be None or an integer from 1 to 1024; got 0"):
        to_tgm(xr.Dataset({"a": ("x", [1.0])}), tmp_path / "a.tgm", threads=0)
    assert not os.listdir(tmp_path)


@pytest.mark.thread_unsafe(reason="counts the process-wide decoded_elements")
def test_szip_fields_store_checked_offsets_so_the_first_window_read_decodes_only_it(tmp_path, ifs_file):
    """The land-sea mask (runs of equal values, where libaec 1.1.4's encoder stores wrong szip
    RSI offsets) written with packing + szip: its offsets are marked verified, so a window read
    on a fresh handle decodes only the RSI blocks it spans, and every row read alone, by us and by
    upstream's ``decode_range``, equals the full decode."""
    tensogram = pytest.importorskip("tensogram")
    lsm = upstream_decode(ifs_file, 1)[0]
    ds = xr.Dataset({"lsm": (("latitude", "longitude"), lsm)},
                    coords={"latitude": np.linspace(90, -90, 721), "longitude": np.arange(1440) * 0.25})
    path = tmp_path / "lsm.tgm"
    to_tgm(ds, path, encoding={"lsm": {"bits": 24, "compression": "szip"}})
    f = tgm_xarray.open_file(path)
    # The mark is internal (our descriptors leave it out, as the offsets); upstream shows it.
    assert "szip_block_offsets_verified" not in f.descriptors(0)[0]["params"]
    descriptor, _ = tensogram.decode(path.read_bytes()).objects[0]
    assert len(descriptor.params["szip_block_offsets_verified"]) == 16
    before = _core.decoded_elements()
    window = f.read(0, 0, (slice(300, 310), slice(100, 120)))
    assert 200 <= _core.decoded_elements() - before <= 10 * 1440  # rows 300..309, not 1,038,240
    full = f.read(0, 0)
    np.testing.assert_array_equal(window, full[300:310, 100:120])
    assert np.abs(full - lsm).max() <= 1 / (2**24 - 1)
    assert len(f) == 1  # the file is the field's message
    rows = tensogram.decode_range(path.read_bytes(), 0, [(r * 1440, 1440) for r in range(721)])
    for row in range(721):
        np.testing.assert_array_equal(f.read(0, 0, (row,)), full[row], f"row {row}")
        np.testing.assert_array_equal(rows[row], full[row], f"row {row} (upstream decode_range)")


@pytest.mark.parametrize("options, bound", [
    ({"compression": "zfp", "zfp_mode": "fixed_accuracy", "zfp_tolerance": 0.01}, 0.01),
    ({"compression": "sz3", "sz3_error_bound_mode": "abs", "sz3_error_bound": 0.05}, 0.05),
])
def test_lossy_float_compressors(tmp_path, options, bound):
    y, x = np.meshgrid(np.linspace(0, 3, 40), np.linspace(0, 6, 60), indexing="ij")
    values = (np.sin(y) * np.cos(x)).astype("float32")
    path = tmp_path / "l.tgm"
    to_tgm(xr.Dataset({"f": (("y", "x"), values)}), path, encoding={"f": options})
    read = open_tgm(path)["f"].values
    assert read.dtype == np.float32  # stored as float64 (upstream 0.24 runs zfp and sz3 on it only), read as given
    assert np.abs(read - values).max() <= bound


@pytest.mark.parametrize("options", [
    {},
    {"compression": "none"},
    {"compression": "zstd", "zstd_level": 9},
    {"compression": "lz4"},
    {"compression": "blosc2", "blosc2_codec": "lz4hc", "blosc2_clevel": 9},
    {"compression": "szip", "filter": "shuffle"},  # 8-byte samples need the shuffle
    {"filter": "shuffle", "compression": "zstd"},
    {"filter": "shuffle", "compression": "szip", "szip_rsi": 32, "szip_block_size": 16},
])
@pytest.mark.parametrize("dtype", ["int16", "uint64", "float32", "float64", "complex128"])
def test_lossless_encodings(tmp_path, options, dtype):
    values = dtype_values(np.random.default_rng(3), dtype, (17, 23))
    ds = xr.Dataset({"v": (("y", "x"), values)})
    path = tmp_path / "v.tgm"
    to_tgm(ds, path, encoding={"v": options})
    read = open_tgm(path)["v"].values
    assert read.dtype == values.dtype
    assert read.tobytes() == values.tobytes() or np.array_equal(read, values, equal_nan=True)


@pytest.mark.parametrize("dtype, options, message", [
    ("int32", {"bits": 16}, r"encoding 'simple_packing' is lossy and needs floating-point values; got int32"),
    ("complex64", {"bits": 16}, "needs floating-point values"),
    ("int16", {"compression": "zfp", "zfp_mode": "fixed_rate", "zfp_rate": 8},
     "compression 'zfp' is lossy and needs floating-point values"),
    ("float64", {"compression": "szip", "filter": "none"}, "need filter 'shuffle'"),
    ("float64", {"bits": 12, "compression": "szip"}, r"bits_per_value must be one of \(8, 16, 24, 32\)"),
    ("float64", {"bits": 0}, "bits_per_value must be an integer from 1 to 64"),
    ("float64", {"bits": 12, "filter": "shuffle"}, "a multiple of 8 with filter 'shuffle'"),
    ("float64", {"bits": 16, "compression": "sz3", "sz3_error_bound_mode": "abs", "sz3_error_bound": 1},
     "needs encoding 'none' and filter 'none'"),
    ("float64", {"compression": "gzip"}, r"compression must be one of"),
    ("float64", {"compresion": "zstd"}, "unknown encoding option 'compresion'"),
    ("float64", {"compression": "lz4", "zstd_level": 3}, "zstd_level is a parameter of compression 'zstd', not of 'lz4'"),
    ("float64", {"compression": "zstd", "zstd_level": 99}, "zstd_level must be an integer from -131072 to 22"),
    ("float64", {"compression": "zfp", "zfp_mode": "fixed_accuracy"}, "zfp_tolerance is required"),
    ("float64", {"compression": "sz3", "sz3_error_bound": 0}, "sz3_error_bound must be a finite number > 0"),
    ("float64", {"sp_decimal_scale_factor": 2}, "decimal_scale_factor applies to encoding 'simple_packing'"),
])
def test_invalid_encodings_fail_before_writing(tmp_path, dtype, options, message):
    path = tmp_path / "bad.tgm"
    path.write_bytes(b"previous contents")
    ds = xr.Dataset({"ok": ("x", np.zeros(3)), "v": ("x", np.zeros(3, dtype))})
    with pytest.raises(TgmCodecError, match=message):
        to_tgm(ds, path, encoding={"v": options})
    with pytest.raises(TgmCodecError, match=message):
        to_tgm(ds, path, encoding={"v": options}, compute=False)
    assert path.read_bytes() == b"previous contents"
    assert no_temporary_files(tmp_path)


def test_encoding_of_an_unknown_variable(tmp_path):
    with pytest.raises(ValueError, match="encoding names 'nope'"):
        to_tgm(xr.Dataset({"a": ("x", [1.0])}), tmp_path / "a.tgm", encoding={"nope": {"bits": 8}})


def test_default_encodings(tmp_path):
    ds = cfgrib_like(np.random.default_rng(4))
    path = tmp_path / "d.tgm"
    to_tgm(ds, path)
    handle = _core.FileHandle(os.fspath(path))
    field, lat, _ = handle.descriptors(0)
    assert (field["encoding"], field["filter"], field["compression"]) == ("none", "none", "blosc2")
    assert field["params"] == {"blosc2_codec": "zstd", "blosc2_clevel": 1}
    assert (lat["encoding"], lat["compression"]) == ("none", "none")


def test_skip_nan_fields(tmp_path):
    values = np.ones((3, 2, 2))
    values[1] = np.nan
    ds = with_mars_attrs(xr.Dataset({"v": (("number", "y", "x"), values)}, coords={"number": [0, 1, 2]}))
    path = tmp_path / "holes.tgm"
    to_tgm(ds, path, skip_nan_fields=True, encoding={"v": {"bits": 8}})
    assert [m["base"][0]["mars"]["number"] for m in messages(path)] == [0, 2]
    read = open_tgm(path)
    assert read.number.values.tolist() == [0, 2]  # a value whose fields are all skipped is gone
    to_tgm(ds, path)
    assert_round_trip(open_tgm(path), ds)


# --------------------------------------------------------------------------------------------
# Upstream tensogram reads what we write
# --------------------------------------------------------------------------------------------


def test_upstream_reads_identical_values_and_metadata(tmp_path):
    tensogram = pytest.importorskip("tensogram")
    ds = cfgrib_like(np.random.default_rng(5))
    ds["t"][0, 0, 0, 0, 0, :3] = np.nan
    path = tmp_path / "up.tgm"
    to_tgm(ds, path, encoding={"z": {"bits": 16, "compression": "szip"}})
    report = tensogram.validate_file(os.fspath(path), level="full", check_canonical=True)
    assert not report.get("file_issues") and all(not m.get("issues") for m in report["messages"]), report
    t = ds["t"].transpose("number", "time", "step", "isobaricInhPa", ...).values
    with tensogram.TensogramFile.open(os.fspath(path)) as f:
        assert f.message_count() == len(messages(path))
        for i, index in enumerate(np.ndindex(t.shape[:4])):
            meta, objects = f.decode_message(i, verify_hash=True)
            base = meta.base[0]
            assert base["name"] == "t" and base["units"] == "K" and base["GRIB_paramId"] == 130
            assert base["dim_names"] == ["latitude", "longitude"]
            number, time, step, level = index
            assert base["mars"]["number"] == int(ds.number[number])
            assert base["mars"]["levelist"] == float(ds.isobaricInhPa[level])
            assert base["mars"]["step"] == int(ds.step[step] / np.timedelta64(1, "h"))
            np.testing.assert_array_equal(objects[0][1], t[index])
            assert objects[0][1].dtype == np.float32
            np.testing.assert_array_equal(objects[1][1], ds.latitude.values)
            np.testing.assert_array_equal(objects[2][1], ds.longitude.values)
            assert meta.extra["Conventions"] == "CF-1.7"
        z_meta, z_objects = f.decode_message(24)
        assert z_meta.base[0]["name"] == "z"
        assert np.abs(z_objects[0][1] - ds.z.values[0]).max() <= np.ptp(ds.z.values[0]) / (2**16 - 1)


# --------------------------------------------------------------------------------------------
# Atomic writes, appends, modes
# --------------------------------------------------------------------------------------------


class Boom(Exception):
    pass


def failing_dataset(fail_at: int, error=Boom) -> xr.Dataset:
    """A dask-backed Dataset whose chunk ``fail_at`` (along ``time``) raises."""
    def block(block_info=None):
        index = block_info[None]["chunk-location"][0]
        if index == fail_at:
            raise error(f"chunk {index} is broken")
        return np.full((1, 4, 5), float(index))
    data = da.map_blocks(block, chunks=((1,) * 6, (4,), (5,)), dtype="float64",
                         meta=np.array((), "float64"))
    return xr.Dataset({"v": (("time", "y", "x"), data)},
                      coords={"time": pd.date_range("2026-01-01", periods=6)})


@pytest.mark.parametrize("error", [Boom, KeyboardInterrupt])
def test_failed_write_leaves_no_file(tmp_path, error):
    path = tmp_path / "new.tgm"
    with pytest.raises(error, match="chunk 2 is broken"):
        to_tgm(failing_dataset(2, error), path, threads=2)
    assert not path.exists()
    assert no_temporary_files(tmp_path)


@pytest.mark.parametrize("mode", ["w", "a"])
def test_failed_write_leaves_the_target_untouched(tmp_path, mode):
    path = tmp_path / "old.tgm"
    to_tgm(failing_dataset(fail_at=-1), path)
    before, inode = path.read_bytes(), path.stat().st_ino
    with pytest.raises(Boom):
        to_tgm(failing_dataset(2), path, mode=mode, threads=3)
    assert path.read_bytes() == before and path.stat().st_ino == inode
    assert no_temporary_files(tmp_path)
    assert open_tgm(path)["v"].values[:, 0, 0].tolist() == [0, 1, 2, 3, 4, 5]


def test_append_extends_the_hypercube(tmp_path):
    """Appending later forecast steps, one at a time, gives the concatenated Dataset."""
    full = cfgrib_like(np.random.default_rng(6)).drop_vars("z")
    path = tmp_path / "fc.tgm"
    to_tgm(full.isel(step=slice(0, 1)), path)
    for step in (1, 2):  # a single step is still stacked, so appends extend it
        full.isel(step=slice(step, step + 1)).tgm.to_file(path, mode="a")
    assert len(messages(path)) == 2 * 2 * 3 * 2
    assert_round_trip(open_tgm(path), full)


def test_an_append_leaves_no_stale_index(tmp_path):
    """The writer drops the indexes of the file it replaced (beside it and in the cache, under
    the name it was given and the file a symlink names), so the next open neither warns nor
    reads old values."""
    full = cfgrib_like(np.random.default_rng(8)).drop_vars("z")
    path = tmp_path / "fc.tgm"
    link = tmp_path / "link.tgm"
    link.symlink_to(path.name)
    to_tgm(full.isel(step=[0]), path)
    open_tgm(path, index="beside")  # an index beside the file
    open_tgm(link)  # and one in the cache, for the name the file was opened by
    indexes = [index.beside(str(path)), index.cached(str(link))]
    assert all(os.path.exists(p) for p in indexes)
    with warnings.catch_warnings():
        warnings.simplefilter("error", TgmIndexWarning)
        to_tgm(full.isel(step=[1]), link, mode="a")
        assert not any(os.path.exists(p) for p in indexes)
        assert_round_trip(open_tgm(link), full.isel(step=[0, 1]))
        open_tgm(path)
        full.isel(step=[2]).tgm.to_file(path, mode="a")
        assert_round_trip(open_tgm(path), full)


def test_append_does_not_repeat_auxiliary_coordinates(tmp_path):
    """An auxiliary coordinate already in the file is not written again (the reader would see
    two identical variables); a different one is."""
    rng = np.random.default_rng(7)
    ds = xr.Dataset({"v": (("time", "y", "x"), rng.random((2, 3, 4)))},
                    coords={"time": pd.date_range("2026-01-01", periods=2),
                            "area": (("y", "x"), rng.random((3, 4)), {"units": "m2"})})
    path = tmp_path / "a.tgm"
    to_tgm(ds.isel(time=[0]), path)
    to_tgm(ds.isel(time=[1]), path, mode="a")
    names = [b["name"] for m in messages(path) for b in m["base"]]
    assert names.count("area") == 1 and names.count("v") == 2
    read = open_tgm(path)
    np.testing.assert_array_equal(read["area"].values, ds["area"].values)
    np.testing.assert_array_equal(read["v"].values, ds["v"].values)
    to_tgm(ds.isel(time=[1]).assign_coords(area=ds.area * 2), path, mode="a")
    assert [b["name"] for m in messages(path) for b in m["base"]].count("area") == 2


def test_append_to_a_damaged_file_fails_untouched(tmp_path):
    path = tmp_path / "cut.tgm"
    to_tgm(xr.Dataset({"a": ("x", np.arange(100.0))}), path)
    path.write_bytes(path.read_bytes()[:-10])
    before = path.read_bytes()
    with pytest.raises(TgmFormatError):
        to_tgm(xr.Dataset({"a": ("x", np.arange(3.0))}), path, mode="a")
    assert path.read_bytes() == before and no_temporary_files(tmp_path)


def test_modes(tmp_path):
    path = tmp_path / "m.tgm"
    ds = xr.Dataset({"a": ("x", np.arange(3.0))})
    to_tgm(ds, path, mode="a")  # appending to nothing creates the file
    with pytest.raises(FileExistsError):
        to_tgm(ds, path, mode="w-")
    with pytest.raises(ValueError, match="mode must be one of"):
        to_tgm(ds, path, mode="x")
    with pytest.raises(ValueError, match="layout must be one of"):
        to_tgm(ds, path, layout="grib")
    os.chmod(path, 0o640)
    to_tgm(ds, path)  # a replaced file keeps its permissions
    assert path.stat().st_mode & 0o777 == 0o640


def test_writer_writes_several_datasets_atomically(tmp_path):
    path = tmp_path / "two.tgm"
    with TgmWriter(path) as writer:
        writer.write(xr.Dataset({"a": ("x", [1.0, 2.0])}))
        assert not path.exists()
        writer.write(xr.Dataset({"b": ("x", [3.0, 4.0])}))
    assert writer.messages == 2
    read = open_tgm(path)
    assert read.a.values.tolist() == [1, 2] and read.b.values.tolist() == [3, 4]


def test_a_write_by_name_refuses_bytes_and_leaves_nothing(tmp_path):
    # by_name: a library writes the temporary name itself; there is no file to write bytes to.
    with pytest.raises(ValueError, match=r"store\.zarr: this write is by name"), \
            AtomicFile(tmp_path / "store.zarr", by_name=True) as out:
        out.write(b"bytes")
    assert list(tmp_path.iterdir()) == []


# --------------------------------------------------------------------------------------------
# dask: lazy writes, ordering, bounded memory
# --------------------------------------------------------------------------------------------


def test_compute_false_returns_a_delayed_write(tmp_path):
    ds = cfgrib_like(np.random.default_rng(8)).chunk({"step": 1})
    path = tmp_path / "lazy.tgm"
    delayed = to_tgm(ds, path, compute=False)
    assert isinstance(delayed, Delayed) and not path.exists()
    delayed.compute()
    assert_round_trip(open_tgm(path), ds.compute())


def test_messages_are_in_order_whatever_the_threads(tmp_path):
    ds = cfgrib_like(np.random.default_rng(9)).chunk({"number": 1, "time": 1, "step": 1})

    def content(path):
        handle = _core.FileHandle(os.fspath(path))
        return [({k: v for k, v in handle.metadata(i)["base"][0].items() if k != "_reserved_"},
                 tgm_xarray.open_file(path).read(i, 0).tobytes()) for i in range(len(handle))]

    to_tgm(ds, tmp_path / "one.tgm", threads=1)
    to_tgm(ds, tmp_path / "four.tgm", threads=4)
    assert content(tmp_path / "one.tgm") == content(tmp_path / "four.tgm")


def test_accessor_and_package_entry_point(tmp_path):
    ds = xr.Dataset({"a": ("x", np.arange(4.0))})
    ds.tgm.to_file(tmp_path / "a.tgm")
    tgm_xarray.to_tgm(ds, tmp_path / "b.tgm")
    assert_round_trip(open_tgm(tmp_path / "a.tgm"), ds)
    assert_round_trip(open_tgm(tmp_path / "b.tgm"), ds)


@pytest.mark.slow
@pytest.mark.thread_unsafe(reason="tracemalloc is process-wide")
def test_memory_stays_bounded_for_a_large_dask_dataset(tmp_path):
    """200 MB of dask data (50 fields of 4 MB, computed on demand) written with a peak of
    traced memory under 64 MB: fields stream through, the Dataset is never held."""
    ny, nx, nt = 500, 1000, 50

    def block(block_info=None):
        t = block_info[None]["array-location"][0][0]
        y = np.linspace(-1, 1, ny)[:, None]
        x = np.linspace(-2, 2, nx)[None, :]
        return (280.0 + np.sin(3 * x + 0.1 * t) * np.cos(2 * y))[None]

    data = da.map_blocks(block, chunks=((1,) * nt, (ny,), (nx,)), dtype="float64",
                         meta=np.array((), "float64"))
    ds = xr.Dataset({"t": (("time", "y", "x"), data)},
                    coords={"time": pd.date_range("2026-01-01", periods=nt, freq="6h"),
                            "y": np.arange(ny, dtype=float), "x": np.arange(nx, dtype=float)})
    assert ds.nbytes >= 200e6
    path = tmp_path / "big.tgm"
    tracemalloc.start()
    try:
        to_tgm(ds, path, threads=2, encoding={"t": {"compression": "lz4"}})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 64e6, f"peak traced memory {peak / 1e6:.0f} MB"
    assert len(messages(path)) == nt
    read = xr.open_dataset(path, engine=ENGINE, chunks={})
    np.testing.assert_array_equal(read["t"][[0, 37]].values, ds["t"][[0, 37]].values)
