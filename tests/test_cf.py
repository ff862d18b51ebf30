"""CF conventions (``tgm_xarray.cf``): the ``coordinates`` attribute as the writer names it and
the reader names it back, times as CF numbers, and raw times when decoding is off. Checked on
literal attributes and Datasets, and through a file written and read back."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

import tgm_xarray
from tgm_xarray import cf
from tgm_xarray.errors import TgmCodecError


def test_named_coordinates_prefer_the_encoding_xarray_decoded_them_into():
    assert cf.named_coordinates({"coordinates": "lat lon"}) == {"lat", "lon"}
    assert cf.named_coordinates({"coordinates": "lat"}, {"coordinates": "surface"}) == {"surface"}
    assert cf.named_coordinates({"units": "K"}, {}) is None
    assert cf.named_coordinates({"coordinates": ""}) == set()  # names none, but says so


def test_naming_adds_to_what_a_variable_names_sorted_and_once():
    attrs = {"units": "K", "coordinates": "surface lat"}
    assert cf.naming(attrs, ["lat", "heightAboveGround"]) == \
        {"units": "K", "coordinates": "heightAboveGround lat surface"}
    assert attrs == {"units": "K", "coordinates": "surface lat"}  # a new map, the input unchanged
    assert cf.coordinates_attr(["b", "a", "b"]) == "a b"


def test_attached_coordinates_lie_on_the_variables_dimensions_only():
    coords = {"lat": ("y", "x"), "time": (), "member": ("number",), "x": ("x",)}
    assert cf.attached_to(("y", "x"), coords) == ["lat", "time"]
    assert cf.attached_to(("number", "y", "x"), coords) == ["lat", "member", "time"]


def test_times_and_booleans_encode_as_numbers_that_decode_back():
    times = xr.Variable("x", np.array(["2026-04-04T06", "2026-04-05T06"], "datetime64[ns]"))
    encoded = cf.encode("t", times)
    assert encoded.dtype.kind in "iu" and encoded.attrs["units"].startswith("days since 2026-04-04")
    assert (xr.conventions.decode_cf_variable("t", encoded).values == times.values).all()
    flags = cf.encode("ok", xr.Variable("x", [True, False]))
    assert flags.dtype == np.dtype("int8") and flags.attrs["dtype"] == "bool"


def test_numbers_encode_as_they_are_without_a_copy_or_their_source_encoding():
    values = np.arange(4.0)
    var = xr.Variable("x", values, {"units": "K"}, {"scale_factor": 0.1, "dtype": "int16"})
    encoded = cf.encode("v", var)
    assert np.shares_memory(encoded.values, values)
    assert encoded.attrs == {"units": "K"} and encoded.encoding == {}


def test_what_cf_cannot_encode_as_numbers_is_a_codec_error_naming_the_variable():
    with pytest.raises(TgmCodecError, match="variable 'station': Tensogram stores numbers"):
        cf.encode("station", xr.Variable("x", np.array([{"a": 1}, None], dtype=object)))


def test_raw_times_are_cfgribs_seconds_and_hours_with_their_units():
    time = xr.Variable((), np.datetime64("2026-04-04T06", "ns"), {"long_name": "initial time"})
    raw = cf.raw_times(time, decode_times=False, decode_timedelta=True)
    assert raw is not None and raw.dtype == np.int64 and int(raw.values) == 1775282400
    assert raw.attrs == {"long_name": "initial time", **cf.RAW_TIME_ATTRS}
    step = cf.raw_times(xr.Variable("step", np.array([0, 90], "m8[m]")), True, False)
    assert step is not None and step.values.tolist() == [0.0, 1.5] and step.attrs == cf.RAW_TIMEDELTA_ATTRS
    assert cf.raw_times(time, decode_times=True, decode_timedelta=False) is None


def test_coordinates_written_are_coordinates_read_back(tmp_path):
    """The writer names auxiliary coordinates in ``coordinates`` (a variable's, or the Dataset's
    for one no variable spans); the reader names them back, so they stay coordinates."""
    ds = xr.Dataset(
        {"t": (("y", "x"), np.ones((2, 3))), "u": (("x",), np.zeros(3))},
        coords={"lat": (("y", "x"), np.arange(6.0).reshape(2, 3)), "ref": ((), 1.5),
                "z": (("z",), [1.0, 2.0]), "zlabel": (("z",), [10.0, 20.0])},
    )
    path = tmp_path / "c.tgm"
    tgm_xarray.to_tgm(ds, path)
    back = xr.open_dataset(path, engine="tgm")
    assert set(back.coords) >= {"lat", "ref", "zlabel"} and set(back.data_vars) == {"t", "u"}
    assert back["t"].encoding["coordinates"].split() == ["lat", "ref"]
    xr.testing.assert_identical(back["lat"].reset_coords(drop=True), ds["lat"].reset_coords(drop=True))
