"""Tensogram metadata as flat, netCDF-friendly attributes and as JSON (``tgm_xarray.attrs``):
literal values of every CBOR shape, and the metadata of real files written to netCDF and read back."""

from __future__ import annotations

import json
import math
import types

import numpy as np
import pytest
import xarray as xr

import tgm_xarray
from tests.helpers.attrs import assert_netcdf_friendly
from tests.helpers.shared import FIXTURES, REAL, require_shared
from tgm_xarray import attrs


def test_flatten_dots_nested_maps_and_leaves_out_reserved_entries():
    assert attrs.flatten({"a": {"b": {"c": 1}}, "_reserved_": {"x": 1}, "empty": {}}) == {"a.b.c": 1}
    # `_reserved_` is the encoder's at any depth; other mappings than dict flatten too
    assert attrs.flatten({"m": types.MappingProxyType({"_reserved_": 1, "k": [1, {"x": 2}]})}) == \
        {"m.k": [1, {"x": 2}]}  # maps inside lists stay (to_attrs makes them JSON)
    assert attrs.flatten({"x": 1}, prefix="base.") == {"base.x": 1}


def test_freeze_makes_equal_values_equal_and_hashable():
    nan = float("nan")
    assert attrs.freeze(nan) == attrs.freeze(float("nan"))  # a constant NaN does not vary
    assert attrs.freeze({"b": 1, "a": [1, 2]}) == attrs.freeze({"a": [1, 2], "b": 1})
    assert attrs.freeze([1, [2, 3]]) == (1, (2, 3))
    assert attrs.freeze(bytearray(b"\x01")) == b"\x01"
    assert attrs.freeze(True) is True and attrs.freeze(None) is None
    values = [{"a": [1, {"b": nan}]}, [1.5, "x"], bytearray(b"xy"), np.float32(2.0), None]
    assert len({attrs.freeze(v) for v in values + values}) == len(values)


@pytest.mark.parametrize(("value", "expected"), [
    ("od", True), (0, True), (2.5, True), (False, True), (np.int16(3), True), (np.float64(1.0), True),
    (None, False), ([1], False), ((1,), False), ({"a": 1}, False), (1j, False), (b"x", False),
])
def test_is_scalar(value, expected):
    assert attrs.is_scalar(value) is expected


@pytest.mark.parametrize(("value", "expected"), [
    (True, 1), (2**63 - 1, 2**63 - 1), (-(2**63), -(2**63)), (2**63, str(2**63)), (2**70, str(2**70)),
    (np.uint64(2**64 - 1), str(2**64 - 1)), (np.float32(0.5), 0.5), (b"\x00\xab", "00ab"),
    (memoryview(b"\x01"), "01"), (1j, "1j"), (None, None),
    ([1, 2], [1, 2]), ([1, 2.5], [1.0, 2.5]), (["a", "b"], ["a", "b"]), ((3, 4), [3, 4]),
    (["a", 1], '["a", 1]'), ([], "[]"), ([True, 2], [1, 2]), ([2**64, 1], f'[{2**64}, 1]'),
    ([{"k": b"\x01"}], '[{"k": "01"}]'), ([{"n": np.int64(5)}, "x"], '[{"n": 5}, "x"]'),
    ({"b": 1, "a": b"\x02"}, '{"a": "02", "b": 1}'),
])
def test_attr_value(value, expected):
    got = attrs.attr_value(value)
    assert got == expected and type(got) is type(expected)


@pytest.mark.parametrize(("value", "expected"), [
    (None, None), ("od", "od"), (True, True), (2**70, 2**70), (1.5, 1.5), (b"\x00\xab", "00ab"),
    (bytearray(b"\x01"), "01"), (memoryview(b"\x02"), "02"), (np.bytes_(b"\x03"), "03"),
    (np.int64(7), 7), (np.uint64(2**64 - 1), 2**64 - 1), (np.float32(0.5), 0.5), (np.bool_(True), True),
    (np.arange(3, dtype="int16"), [0, 1, 2]), ((1, (2, b"\x04")), [1, [2, "04"]]),
    ({1: {"a": np.float64(2.5)}, b"\x05": None}, {"1": {"a": 2.5}, "05": None}),
    (1j, "1j"), ({"s"}, "{'s'}"),
])
def test_jsonable_gives_json_types(value, expected):
    """The one metadata-to-JSON rule: every value in JSON's types, numbers kept as numbers."""
    for strict in (False, True):
        got = attrs.jsonable(value, strict=strict)
        assert got == expected and type(got) is type(expected)
        assert json.loads(json.dumps(got, allow_nan=False)) == expected


def test_jsonable_non_finite_floats_are_strings_only_when_strict():
    values = {"v": [float("nan"), np.float32("inf"), -math.inf]}
    assert attrs.jsonable(values, strict=True) == {"v": ["NaN", "Infinity", "-Infinity"]}
    loose = attrs.jsonable(values)["v"]
    assert math.isnan(loose[0]) and loose[1:] == [math.inf, -math.inf]
    assert attrs.json_text({"b": loose, "a": b"\x01"}) == '{"a": "01", "b": [NaN, Infinity, -Infinity]}'


def test_to_attrs_orders_cf_keys_first_and_drops_none():
    got = attrs.to_attrs({"zeta": 1, "long_name": "x", "alpha": None, "units": "K", "beta": 2,
                          "standard_name": "air_temperature"})
    assert list(got) == ["units", "long_name", "standard_name", "beta", "zeta"]
    assert_netcdf_friendly(got)


@pytest.mark.parametrize("path", ["real/ifs-0p25-20260404.tgm", "upstream/remote-parity/metadata_parity.tgm",
                                  "upstream/golden/mars_metadata.tgm"])
def test_real_metadata_survives_netcdf(path, tmp_path):
    """Every object's metadata of real files, as attributes, written by netCDF4 and read back
    unchanged (integers stay integers; netCDF itself reads a one-element list as its element)."""
    pytest.importorskip("netCDF4")  # no free-threaded wheel
    with tgm_xarray.open_file(require_shared(FIXTURES / path)) as f:
        metadata = [f.metadata(m) for m in range(len(f))]
    for m, meta in enumerate(metadata):
        for obj, base in enumerate(meta["base"]):
            flat = attrs.flatten(base)
            assert not any(key.startswith("_reserved_") for key in flat)
            got = attrs.to_attrs(flat)
            assert_netcdf_friendly(got)
            target = tmp_path / f"{m}-{obj}.nc"
            xr.Dataset({"v": ((), 0.0, got)}, attrs=attrs.to_attrs(attrs.flatten(meta["_extra_"]))).to_netcdf(
                target, engine="netcdf4")
            with xr.open_dataset(target, engine="netcdf4") as back:
                read = {k: v.tolist() if isinstance(v, np.ndarray) else v for k, v in back["v"].attrs.items()}
                assert read == {k: v[0] if isinstance(v, list) and len(v) == 1 else v
                                for k, v in got.items()}, (path, m, obj)


def test_real_ifs_attributes():
    with tgm_xarray.open_file(require_shared(REAL / "ifs-0p25-20260404.tgm")) as f:
        got = attrs.to_attrs(attrs.flatten(f.metadata(2)["base"][0]))
    assert list(got)[:2] == ["units", "long_name"]
    assert got["GRIB_paramId"] == 133 and got["mars.levelist"] == 150 and got["mars.param"] == "q"
    assert got["dim_names"] == ["latitude", "longitude"]
