"""Hypercube planning (``tgm_xarray.hypercube``): metadata in, Dataset layout out.

Files are read with upstream ``tensogram`` (metadata only, through ``decode_descriptors``) and
written with ``tensogram.encode``. ``_materialize`` decodes the planned fields with upstream too,
so every test that checks values also proves xarray accepts the layout.
"""

from __future__ import annotations

import hashlib
import itertools
import logging
import os
import random
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

tensogram = pytest.importorskip("tensogram")

from tests.helpers.attrs import assert_netcdf_friendly  # noqa: E402
from tests.helpers.shared import FIXTURES, require_shared, shared_files  # noqa: E402
from tests.helpers.tables import distinct_steps_table  # noqa: E402
from tgm_xarray import attrs as attrs_module  # noqa: E402
from tgm_xarray import cf  # noqa: E402
from tgm_xarray.errors import (  # noqa: E402
    TgmConflictError,
    TgmDuplicateError,
    TgmError,
    TgmIndexError,
)
from tgm_xarray.hypercube import (  # noqa: E402  # noqa: E402
    HypercubePlan,
    MetadataTable,
    PlanOptions,
    build_hypercube,
    extra,
    objects,
    split_groups,
    variables,
)

#: The read-only fixtures shared by every developer and CI (``<repo>/../shared``).
IFS = FIXTURES / "real" / "ifs-0p25-20260404.tgm"
CODECS = FIXTURES / "real" / "2t-codecs.tgm"
THOUSAND = FIXTURES / "upstream" / "remote-parity" / "thousand-msg.tgm"
MULTI_MESSAGE = FIXTURES / "upstream" / "golden" / "multi_message.tgm"

# The real IFS file (through require_shared: skipped without the shared fixtures, failed in CI).
needs = pytest.mark.usefixtures("ifs_file")


# --------------------------------------------------------------------------------------------
# Helpers: reading with upstream, writing test files, materialising plans
# --------------------------------------------------------------------------------------------


def _table(path) -> MetadataTable:
    """The file's metadata table, built by the core from its bytes (no payload decoded)."""
    return MetadataTable.of_bytes(Path(path).read_bytes())


class _Fingerprint:
    """Identity of a stored object (sha256 of its decoded values), counting the calls."""

    def __init__(self, path):
        self.path = str(path)
        self.calls = 0

    def __call__(self, msg: int, obj: int) -> str:
        self.calls += 1
        with tensogram.TensogramFile.open(self.path) as f:
            _, _, array = tensogram.decode_object(f.read_message(msg), obj)
        return hashlib.sha256(np.ascontiguousarray(array).tobytes()).hexdigest()


def _plan(path, **options) -> HypercubePlan:
    return build_hypercube(_table(path), PlanOptions(**options, source=str(path)), source=str(path),
                           fingerprint=_Fingerprint(path))


def _groups(path, **options) -> dict[str, HypercubePlan]:
    return split_groups(_table(path), PlanOptions(**options, source=str(path)), source=str(path),
                        fingerprint=_Fingerprint(path))


def _desc(array: np.ndarray, **codec) -> dict:
    return {"type": "ntensor", "shape": list(array.shape), "dtype": str(array.dtype),
            "byte_order": "little", "encoding": "none", "filter": "none", "compression": "none",
            **codec}


def _write(path, messages) -> Path:
    """Write ``[(global metadata, [(descriptor or None, array), ...]), ...]`` as a .tgm file."""
    with open(path, "wb") as f:
        for meta, objects in messages:
            pairs = [(d or _desc(a), np.ascontiguousarray(a)) for d, a in objects]
            f.write(tensogram.encode(meta, pairs, hash=None))
    return Path(path)


def _message(*objects, extra=None):
    """One message from ``(per-object metadata, array)`` pairs."""
    return ({"base": [m for m, _ in objects], **(extra or {})}, [(None, a) for _, a in objects])


def _field(value=0.0, shape=(3, 4), dtype="float64"):
    return np.full(shape, value, dtype=dtype)


def _materialize(plan: HypercubePlan, path) -> xr.Dataset:
    """Build the planned Dataset eagerly, decoding each field with upstream (holes are NaN)."""
    with tensogram.TensogramFile.open(str(path)) as f:
        raw = {}

        def read(msg, obj):
            if msg not in raw:
                raw[msg] = f.read_message(msg)
            return tensogram.decode_object(raw[msg], obj)[2]

        variables = {}
        for name, var in plan.variables.items():
            data = np.full(var.shape, np.nan if var.dtype.kind in "fc" else 0, dtype=var.dtype)
            for index in np.ndindex(var.fields.shape):
                which = int(var.fields[index])
                if which >= 0:
                    data[index] = read(*var.refs[which])
            variables[name] = xr.Variable(var.dims, data, var.attrs, var.encoding)
    coords = {name: variables.pop(name) for name in plan.coord_names}
    coords.update({name: xr.Variable(dims, values, attrs)
                   for name, (dims, values, attrs) in plan.index_coords.items()})
    return xr.Dataset(variables, coords=coords, attrs=plan.attrs)


def _assert_plan_consistent(plan: HypercubePlan) -> None:
    """Invariants every plan keeps: refs exist, fields index refs, every dim has one size."""
    sizes = {}
    for name, var in plan.variables.items():
        assert var.name == name
        assert len(var.dims) == len(var.shape)
        assert var.fields.dtype == np.int64 and var.fields.shape == var.shape[: var.fields.ndim]
        used = sorted(int(i) for i in var.fields.ravel() if i >= 0)
        assert used == list(range(len(var.refs)))
        assert var.encoding["preferred_chunks"] == {
            d: 1 if i < var.fields.ndim else n for i, (d, n) in enumerate(zip(var.dims, var.shape))}
        assert_netcdf_friendly(var.attrs)
        for dim, size in zip(var.dims, var.shape):
            assert sizes.setdefault(dim, size) == size, dim
    for name, (dims, values, _) in plan.index_coords.items():
        assert values.ndim == len(dims), name
        assert values.dtype != object, name
        for dim, size in zip(dims, values.shape):
            assert sizes.setdefault(dim, size) == size, dim
    assert_netcdf_friendly(plan.attrs)


# --------------------------------------------------------------------------------------------
# (1) The real IFS file: 2t sfc, lsm sfc, q pl 150, t pl 600
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def ifs_plan():
    return _plan(IFS)


@needs
def test_ifs_variables_and_shared_coordinates(ifs_plan):
    plan = ifs_plan
    _assert_plan_consistent(plan)
    data = [n for n in plan.variables if n not in plan.coord_names]
    assert data == ["2t", "lsm", "q", "t"]
    assert plan.coord_names == {"latitude", "longitude"}
    assert plan.variables["latitude"].dims == ("latitude",)
    assert plan.variables["latitude"].refs == ((0, 1),)
    assert plan.variables["latitude"].fields.shape == ()
    assert plan.variables["longitude"].shape == (1440,)
    for name in ("2t", "lsm"):
        assert plan.variables[name].dims == ("latitude", "longitude")
    for name in ("q", "t"):
        assert plan.variables[name].dims == ("isobaricInhPa", "latitude", "longitude")
        assert plan.variables[name].shape == (2, 721, 1440)


@needs
def test_ifs_levels_union_with_holes_sorted_descending(ifs_plan):
    dims, levels, attrs = ifs_plan.index_coords["isobaricInhPa"]
    assert dims == ("isobaricInhPa",) and levels.tolist() == [600, 150]
    assert attrs["units"] == "hPa" and attrs["standard_name"] == "air_pressure"
    assert ifs_plan.variables["q"].fields.tolist() == [-1, 0]
    assert ifs_plan.variables["q"].refs == ((2, 0),)
    assert ifs_plan.variables["t"].fields.tolist() == [0, -1]
    assert ifs_plan.variables["t"].refs == ((3, 0),)
    assert ifs_plan.variables["q"].dtype == np.float64


@needs
def test_ifs_time_step_surface_scalars(ifs_plan):
    coords = ifs_plan.index_coords
    assert coords["time"][0] == () and coords["time"][1] == np.datetime64("2026-04-04T00:00", "ns")
    assert coords["time"][1].dtype == np.dtype("datetime64[ns]")
    assert coords["step"][0] == () and coords["step"][1] == np.timedelta64(0, "ns")
    assert coords["step"][1].dtype == np.dtype("timedelta64[ns]")
    assert coords["valid_time"][0] == () and coords["valid_time"][1] == coords["time"][1]
    assert coords["surface"][0] == () and coords["surface"][1] == 0
    assert coords["time"][2]["standard_name"] == "forecast_reference_time"
    assert "number" not in coords


@needs
def test_ifs_attributes(ifs_plan):
    q = ifs_plan.variables["q"].attrs
    assert list(q)[:2] == ["units", "long_name"]
    assert q["units"] == "kg kg**-1" and q["long_name"] == "Specific humidity"
    assert q["mars.class"] == "od" and q["GRIB_paramId"] == 133 and q["mars.param"] == "q"
    # keys that became coordinates (the level type names isobaricInhPa) or the variable's name
    # are gone, and so are structural ones
    for key in ("mars.date", "mars.time", "mars.step", "mars.levelist", "mars.levtype", "name",
                "dim_names", "_reserved_"):
        assert key not in q
    assert "mars.levtype" not in ifs_plan.variables["2t"].attrs  # it names `surface`
    assert not any(k.startswith("_reserved_") for k in q)
    # per-message _extra_ entries that differ between messages stay on the variable, as JSON
    assert q["grib_files"].startswith('[{"file": "q_150.grib2"')
    # those common to every message are the Dataset's, not repeated on variables
    assert ifs_plan.attrs["license"] == "CC-BY-4.0"
    assert ifs_plan.attrs["converted_with.eccodes"] == "2.50.0"
    assert "license" not in q and "grib_files" not in ifs_plan.attrs
    lat = ifs_plan.variables["latitude"].attrs
    assert lat == {"units": "degrees_north", "standard_name": "latitude"}


@needs
def test_ifs_encoding(ifs_plan):
    enc = ifs_plan.variables["t"].encoding
    assert enc["source"] == str(IFS)
    assert (enc["message_index"], enc["object_index"]) == (3, 0)
    assert enc["tensogram_encoding"] == "simple_packing"
    assert enc["tensogram_compression"] == "szip"
    assert enc["tensogram_filter"] == "none"
    assert enc["bits_per_value"] == 24
    assert enc["tensogram_params"]["szip_rsi"] == 128
    assert "szip_block_offsets" not in enc["tensogram_params"]
    assert "compression" not in enc  # would be taken for netCDF's own compression setting
    assert enc["preferred_chunks"] == {"isobaricInhPa": 1, "latitude": 721, "longitude": 1440}


@needs
def test_ifs_values_land_in_place():
    plan = _plan(IFS, filter_by_keys={"levtype": "pl"})
    ds = _materialize(plan, IFS)
    assert list(ds.data_vars) == ["q", "t"]
    with tensogram.TensogramFile.open(str(IFS)) as f:
        q150 = tensogram.decode_object(f.read_message(2), 0)[2]
        lat = tensogram.decode_object(f.read_message(2), 1)[2]
    np.testing.assert_array_equal(ds["q"].sel(isobaricInhPa=150).values, q150)
    assert np.isnan(ds["q"].sel(isobaricInhPa=600).values).all()
    assert np.isnan(ds["t"].sel(isobaricInhPa=150).values).all()
    np.testing.assert_array_equal(ds["latitude"].values, lat)
    assert float(ds["latitude"][0]) == 90.0


@needs
@pytest.mark.parametrize(("filter_by_keys", "expected"), [
    ({"levtype": "pl"}, ["q", "t"]),
    ({"mars.levtype": "sfc"}, ["2t", "lsm"]),
    ({"param": ["2t", "t"]}, ["2t", "t"]),
    ({"levelist": "600"}, ["t"]),
    ({"mars.levelist": 150, "name": "q"}, ["q"]),
    ({"levtype": "ml"}, []),
    ({"levtype": "pl", "mars.param": "lsm"}, []),
])
def test_ifs_filter_by_keys(filter_by_keys, expected):
    plan = _plan(IFS, filter_by_keys=filter_by_keys)
    _assert_plan_consistent(plan)
    assert [n for n in plan.variables if n not in plan.coord_names] == expected
    assert plan.coord_names == ({"latitude", "longitude"} if expected else set())


@needs
def test_ifs_single_level_becomes_scalar_coordinate():
    plan = _plan(IFS, filter_by_keys={"levelist": 600})
    assert plan.index_coords["isobaricInhPa"][0] == ()
    assert plan.index_coords["isobaricInhPa"][1] == 600
    assert plan.variables["t"].dims == ("latitude", "longitude")
    assert "surface" not in plan.index_coords


@needs
def test_ifs_split_groups():
    groups = _groups(IFS)
    # 2t and lsm, both MARS `sfc`, have other cfgrib dimensions: groups named as cfgrib's levels
    assert list(groups) == ["heightAboveGround", "surface", "isobaricInhPa"]
    height, sfc, pl = groups["heightAboveGround"], groups["surface"], groups["isobaricInhPa"]
    assert [n for n in height.variables if n not in height.coord_names] == ["2t"]
    assert [n for n in sfc.variables if n not in sfc.coord_names] == ["lsm"]
    assert [n for n in pl.variables if n not in pl.coord_names] == ["q", "t"]
    assert height.coord_names == sfc.coord_names == pl.coord_names == {"latitude", "longitude"}
    assert "isobaricInhPa" not in sfc.index_coords and "surface" in sfc.index_coords
    assert height.index_coords["heightAboveGround"][:2] == ((), 2.0) and "surface" not in height.index_coords
    assert pl.index_coords["isobaricInhPa"][1].tolist() == [600, 150]


@needs
def test_message_index_and_merge_objects():
    plan = _plan(IFS, message_index=2)
    assert [n for n in plan.variables if n not in plan.coord_names] == ["q"]
    assert plan.index_coords["isobaricInhPa"][0] == ()
    assert plan.variables["q"].dims == ("latitude", "longitude")
    plan = _plan(IFS, merge_objects=False)  # upstream's default: message 0 only
    assert [n for n in plan.variables if n not in plan.coord_names] == ["2t"]
    with pytest.raises(TgmIndexError, match=r"message_index 4 is out of range \(the file has 4"):
        _plan(IFS, message_index=4)
    with pytest.raises(IndexError):
        _plan(IFS, message_index=-1)


# --------------------------------------------------------------------------------------------
# (2) A generated 2 params x 4 dates x 3 steps x 5 levels x 2 members file, shuffled
# --------------------------------------------------------------------------------------------

PARAMS = ["t", "q"]
DATES = ["20260403", "20260401", "20260404", "20260402"]  # written unsorted on purpose
STEPS = [12, 0, 6]
LEVELS = [500, 1000, 100, 850, 300]
MEMBERS = [2, 1]
LAT = np.array([10.0, 0.0, -10.0])
LON = np.array([0.0, 90.0, 180.0, 270.0])


def _code(p, d, s, lev, m) -> float:
    """Sentinel field value: one decimal digit per coordinate (indices into the sorted axes)."""
    return 10000 * p + 1000 * d + 100 * s + 10 * lev + m


@pytest.fixture(scope="module")
def cube_file(tmp_path_factory):
    sorted_dates, sorted_steps = sorted(DATES), sorted(STEPS)
    sorted_levels, sorted_members = sorted(LEVELS, reverse=True), sorted(MEMBERS)
    messages = []
    for p, date, step, level, member in itertools.product(PARAMS, DATES, STEPS, LEVELS, MEMBERS):
        code = _code(PARAMS.index(p), sorted_dates.index(date), sorted_steps.index(step),
                     sorted_levels.index(level), sorted_members.index(member))
        values = code + np.arange(12, dtype=np.float64).reshape(3, 4) / 100
        field_meta = {
            "name": p, "units": "K" if p == "t" else "kg kg**-1",
            "dim_names": ["latitude", "longitude"],
            "mars": {"class": "od", "stream": "enfo", "type": "pf", "expver": "0001",
                     "param": p, "date": date, "time": "1200", "step": step,
                     "levtype": "pl", "levelist": level, "number": member},
        }
        messages.append(_message(
            (field_meta, values),
            ({"name": "latitude", "units": "degrees_north", "dim_names": ["latitude"]}, LAT),
            ({"name": "longitude", "units": "degrees_east", "dim_names": ["longitude"]}, LON),
            extra={"producer": "test-suite"},
        ))
    random.Random(7).shuffle(messages)
    return _write(tmp_path_factory.mktemp("cube") / "cube.tgm", messages)


def test_cube_dims_and_coordinates(cube_file):
    fingerprint = _Fingerprint(cube_file)
    plan = build_hypercube(_table(cube_file), source=str(cube_file),
                           fingerprint=fingerprint)
    _assert_plan_consistent(plan)
    dims = ("number", "time", "step", "isobaricInhPa", "latitude", "longitude")
    for p in PARAMS:
        var = plan.variables[p]
        assert var.dims == dims and var.shape == (2, 4, 3, 5, 3, 4)
        assert (var.fields >= 0).all() and len(var.refs) == 120
        assert "message_index" not in var.encoding
        assert var.encoding["preferred_chunks"] == dict(zip(dims, (1, 1, 1, 1, 3, 4)))
        assert var.attrs["mars.type"] == "pf" and "mars.number" not in var.attrs
    c = plan.index_coords
    assert c["number"][0] == ("number",) and c["number"][1].tolist() == [1, 2]
    assert c["time"][1].tolist() == [np.datetime64(f"2026-04-0{d}T12:00", "ns").item()
                                     for d in range(1, 5)]
    assert c["step"][1].astype("timedelta64[h]").astype(int).tolist() == [0, 6, 12]
    assert c["isobaricInhPa"][1].tolist() == [1000, 850, 500, 300, 100]
    vt_dims, vt, vt_attrs = c["valid_time"]
    assert vt_dims == ("time", "step") and vt.shape == (4, 3) and vt_attrs["standard_name"] == "time"
    assert vt[1, 2] == np.datetime64("2026-04-03T00:00", "ns")
    assert plan.coord_names == {"latitude", "longitude"}
    # every message carries the same latitude/longitude: shared once, compared by fingerprint
    assert fingerprint.calls == 2 * 240
    assert plan.attrs == {"producer": "test-suite"}


def test_cube_every_value_in_place(cube_file):
    plan = _plan(cube_file)
    ds = _materialize(plan, cube_file)
    grid = np.arange(12).reshape(3, 4) / 100
    for p_index, p in enumerate(PARAMS):
        codes = np.zeros((2, 4, 3, 5))
        for idx in np.ndindex(codes.shape):
            m, d, s, lev = idx
            codes[idx] = _code(p_index, d, s, lev, m)
        np.testing.assert_array_equal(ds[p].values, codes[..., None, None] + grid)
    # label-based selection agrees with the metadata of the selected message
    value = ds["q"].sel(number=2, time="2026-04-02T12:00", step=np.timedelta64(6, "h"),
                        isobaricInhPa=300, latitude=0.0, longitude=90.0)
    assert float(value) == _code(1, 1, 1, 3, 1) + 0.05
    np.testing.assert_array_equal(ds["latitude"].values, LAT)


def test_cube_is_independent_of_message_order(cube_file, tmp_path):
    with tensogram.TensogramFile.open(str(cube_file)) as f:
        raw = [f.read_message(i) for i in range(len(f))]
    reordered = tmp_path / "reordered.tgm"
    reordered.write_bytes(b"".join(reversed(raw)))
    a, b = _plan(cube_file), _plan(reordered)
    assert a.variables["t"].dims == b.variables["t"].dims
    for name, (dims, values, _) in a.index_coords.items():
        assert b.index_coords[name][0] == dims
        np.testing.assert_array_equal(b.index_coords[name][1], values)
    n = len(raw)
    assert [(n - 1 - m, o) for m, o in a.variables["t"].refs] == list(b.variables["t"].refs)


def test_union_of_levels_and_dtype_promotion(tmp_path):
    """t on 500/850, q on 850/1000 (int32 with a hole -> float64), t mixing float32/float64."""
    messages = []
    for name, level, dtype in [("t", 500, "float32"), ("t", 850, "float64"),
                               ("q", 850, "int32"), ("q", 1000, "int32")]:
        meta = {"name": name, "mars": {"levtype": "pl", "levelist": level}}
        messages.append(_message((meta, _field(level, dtype=dtype))))
    path = _write(tmp_path / "union.tgm", messages)
    plan = _plan(path)
    _assert_plan_consistent(plan)
    assert plan.index_coords["isobaricInhPa"][1].tolist() == [1000, 850, 500]
    # refs are numbered in grid order
    assert plan.variables["t"].fields.tolist() == [-1, 0, 1]
    assert plan.variables["t"].refs == ((1, 0), (0, 0))
    assert plan.variables["q"].fields.tolist() == [0, 1, -1]
    assert plan.variables["q"].refs == ((3, 0), (2, 0))
    assert plan.variables["t"].dtype == np.float64
    assert plan.variables["q"].dtype == np.float64  # int with a hole
    assert plan.variables["q"].encoding["tensogram_dtype"] == "int32"
    assert "tensogram_dtype" not in plan.variables["t"].encoding
    ds = _materialize(plan, path)
    assert ds["q"].sel(isobaricInhPa=1000).values.tolist()[0][0] == 1000.0
    assert np.isnan(ds["q"].sel(isobaricInhPa=500)).all()
    # without a hole an int variable stays int
    plan = _plan(path, filter_by_keys={"name": "q"})
    assert plan.variables["q"].dtype == np.int32


# --------------------------------------------------------------------------------------------
# (3) The examples of upstream's xarray guide, in tensogram 0.24's metadata layout
# --------------------------------------------------------------------------------------------


def _assert_no_dict_coordinates(ds: xr.Dataset) -> None:
    for name, coord in ds.coords.items():
        assert coord.dtype != object, name
        assert not any(isinstance(v, dict) for v in np.ravel(coord.values)), name


def test_guide_example_1_single_object(tmp_path):
    data = np.arange(60, dtype=np.float32).reshape(6, 10)
    path = _write(tmp_path / "simple.tgm", [({"version": 2}, [(None, data)])])
    plan = _plan(path)
    assert plan.variables["object_0"].dims == ("dim_0", "dim_1")
    assert plan.attrs == {"version": 2}
    ds = _materialize(plan, path)
    np.testing.assert_array_equal(ds["object_0"].values, data)
    plan = _plan(path, dim_names=["latitude", "longitude"])
    assert plan.variables["object_0"].dims == ("latitude", "longitude")


def test_guide_example_2_coordinate_objects(tmp_path):
    lat = np.linspace(-90, 90, 5)
    lon = np.linspace(0, 360, 8, endpoint=False)
    temp = np.random.default_rng(42).random((5, 8)).astype(np.float32)
    path = _write(tmp_path / "with_coords.tgm", [_message(
        ({"name": "latitude"}, lat), ({"name": "longitude"}, lon), ({"name": "temperature"}, temp))])
    plan = _plan(path)
    assert plan.coord_names == {"latitude", "longitude"}
    assert plan.variables["temperature"].dims == ("latitude", "longitude")
    ds = _materialize(plan, path)
    _assert_no_dict_coordinates(ds)
    np.testing.assert_array_equal(ds["longitude"].values, lon)
    assert float(ds["temperature"].sel(latitude=45.0, longitude=90.0)) == temp[3, 2]


def test_guide_example_3_variable_key(tmp_path):
    meta = {"mars": {"class": "od", "date": "20260401", "type": "fc"},
            "base": [{"mars": {"param": "2t", "levtype": "sfc"}},
                     {"mars": {"param": "10u", "levtype": "sfc"}}]}
    path = _write(tmp_path / "mars.tgm", [(meta, [(None, _field(273.15, dtype="float32")),
                                                  (None, _field(5.0, dtype="float32"))])])
    for options in ({}, {"variable_key": "mars.param"}):
        plan = _plan(path, **options)
        assert list(plan.variables) == ["2t", "10u"]
        assert plan.attrs == {"mars.class": "od", "mars.type": "fc"}
        assert plan.index_coords["time"][1] == np.datetime64("2026-04-01", "ns")
        # 2t at 2 m and 10u at 10 m (ecCodes' heights of these surface parameters) share
        # cfgrib's `heightAboveGround`, each with a hole where the other is
        dims, values, _ = plan.index_coords["heightAboveGround"]
        assert dims == ("heightAboveGround",) and values.tolist() == [2.0, 10.0]
        assert plan.variables["2t"].fields.tolist() == [0, -1] and plan.variables["10u"].fields.tolist() == [-1, 0]
        # mars.param named the variable, mars.levtype (with the param) names `heightAboveGround`
        assert plan.variables["2t"].attrs == {}
        _assert_no_dict_coordinates(_materialize(plan, path))


def test_guide_example_4_many_messages(tmp_path):
    rng = np.random.default_rng(99)
    messages, expected = [], {}
    for param in ["2t", "10u"]:
        for date in ["20260401", "20260402"]:
            data = rng.random((3, 4), dtype=np.float32)
            expected[param, date] = data
            messages.append(_message(({"mars": {"param": param, "date": date}}, data)))
    path = _write(tmp_path / "multi.tgm", messages)
    for options in ({}, {"variable_key": "mars.param"}):
        plan = _plan(path, **options)
        assert list(plan.variables) == ["2t", "10u"]
        assert plan.variables["2t"].dims == ("time", "dim_0", "dim_1")
        ds = _materialize(plan, path)
        _assert_no_dict_coordinates(ds)
        np.testing.assert_array_equal(ds["10u"].sel(time="2026-04-02").values,
                                      expected["10u", "20260402"])


def test_guide_example_5_heterogeneous_file(tmp_path):
    path = _write(tmp_path / "hetero.tgm", [
        _message(({"name": "temp"}, np.ones((3, 4), dtype=np.float32))),
        _message(({"name": "wind"}, np.ones((3, 4), dtype=np.float32) * 2)),
        _message(({"name": "counts"}, np.array([1, 2, 3, 4, 5], dtype=np.int32))),
    ])
    plan = _plan(path)  # one Dataset: dim_0 at two sizes names neither (obj_0 taken: the variable's name)
    assert plan.variables["temp"].dims == plan.variables["wind"].dims == ("obj_0_dim_0", "dim_1")
    assert plan.variables["counts"].dims == ("counts_dim_0",)
    assert plan.variables["counts"].dtype == np.int32
    ds = _materialize(plan, path)
    assert ds["counts"].values.tolist() == [1, 2, 3, 4, 5]
    groups = _groups(path)
    assert list(groups) == ["3x4", "5"]
    assert list(groups["3x4"].variables) == ["temp", "wind"]
    assert groups["5"].variables["counts"].dims == ("dim_0",)


# --------------------------------------------------------------------------------------------
# (4) Conflicts, duplicates and filters
# --------------------------------------------------------------------------------------------


def test_conflicting_shapes_raise_with_advice(tmp_path):
    path = _write(tmp_path / "shapes.tgm", [
        _message(({"name": "t", "mars": {"grid": "1/1"}}, _field(shape=(3, 4)))),
        _message(({"name": "t", "mars": {"grid": "2/2"}}, _field(shape=(2, 2)))),
    ])
    with pytest.raises(TgmConflictError) as info:
        _plan(path)
    text = str(info.value)
    assert str(path) in text and "'t'" in text
    assert "message 0 object 0" in text and "message 1 object 0" in text
    assert "filter_by_keys={'mars.grid': '1/1'}" in text and "open_datatree" in text
    assert isinstance(info.value, TgmError) and isinstance(info.value, ValueError)
    groups = _groups(path)
    assert list(groups) == ["3x4", "2x2"]


@pytest.mark.parametrize(("second", "detail"), [
    (({"name": "t"}, _field(dtype="int32")), "dtype kind"),
    (({"name": "t", "dim_names": ["y", "x"]}, _field()), "dimension names"),
    (({"name": "t", "mars": {"levtype": "ml", "levelist": 1}}, _field()), "level type"),
    (({"name": "t", "mars": {"levtype": "pl", "levelist": 1, "number": 1}}, _field()),
     "dimensions"),
])
def test_structural_conflicts(tmp_path, second, detail):
    first = ({"name": "t", "mars": {"levtype": "pl", "levelist": 500}}, _field())
    if detail in ("dtype kind", "dimension names"):
        first = ({"name": "t"}, _field())
    path = _write(tmp_path / "conflict.tgm", [_message(first), _message(second)])
    with pytest.raises(TgmConflictError, match=detail):
        _plan(path)
    groups = _groups(path)  # ...but the file still opens as groups
    assert len(groups) == 2
    assert all(list(g.variables) == ["t"] for g in groups.values())


def test_ensemble_control_and_members_split(tmp_path):
    """cf (no number) and pf (numbers) of one parameter cannot share a hypercube."""
    messages = [_message(({"name": "2t", "mars": {"type": "cf", "levtype": "sfc"}}, _field()))]
    messages += [_message(({"name": "2t", "mars": {"type": "pf", "levtype": "sfc", "number": n}},
                           _field(n))) for n in (1, 2)]
    path = _write(tmp_path / "ens.tgm", messages)
    with pytest.raises(TgmConflictError, match="filter_by_keys=\\{'mars.type': 'cf'\\}"):
        _plan(path)
    pf = _plan(path, filter_by_keys={"type": "pf"})
    assert pf.variables["2t"].dims == ("number", "dim_0", "dim_1")
    groups = _groups(path)
    assert list(groups) == ["surface", "surface_2"]
    assert groups["surface_2"].index_coords["number"][1].tolist() == [1, 2]


def test_level_types_sharing_the_generic_level_dimension(tmp_path):
    path = _write(tmp_path / "levels.tgm", [
        _message(({"name": "a", "mars": {"levtype": "dp", "levelist": 1}}, _field())),
        _message(({"name": "b", "mars": {"levtype": "o2d", "levelist": 2}}, _field())),
    ])
    with pytest.raises(TgmConflictError, match="would share the level dimension 'level'"):
        _plan(path)
    assert list(_groups(path)) == ["dp", "o2d"]  # level types that name no level of their own
    plan = _plan(path, filter_by_keys={"levtype": "dp"})
    assert plan.index_coords["level"][1] == 1


def test_groups_of_one_level_on_several_grids_name_the_grid(tmp_path):
    path = _write(tmp_path / "grids.tgm", [
        _message(({"name": "t", "mars": {"levtype": "pl", "levelist": 500}}, _field())),
        _message(({"name": "t", "mars": {"levtype": "pl", "levelist": 500}}, _field(shape=(2, 2)))),
        _message(({"name": "2t", "mars": {"levtype": "sfc", "param": "2t"}}, _field())),
        _message(({"name": "ml", "mars": {"levtype": "ml", "levelist": 1}}, _field())),
    ])
    assert list(_groups(path)) == ["isobaricInhPa_3x4", "isobaricInhPa_2x2", "heightAboveGround", "hybrid"]


def test_differing_coordinates_conflict(tmp_path):
    def msg(name, lat):
        return _message(({"name": name, "dim_names": ["latitude", "longitude"]}, _field()),
                        ({"name": "latitude"}, lat), ({"name": "longitude"}, LON))
    path = _write(tmp_path / "coords.tgm", [msg("a", LAT), msg("b", LAT + 1)])
    with pytest.raises(TgmConflictError, match="coordinate 'latitude' differs between "
                                               "message 0 object 1 and message 1 object 1"):
        _plan(path)
    groups = _groups(path)
    assert list(groups) == ["3x4", "3x4_2"]
    assert [list(g.variables) for g in groups.values()] == [["a", "latitude", "longitude"],
                                                            ["b", "latitude", "longitude"]]


def test_duplicates(tmp_path):
    meta = {"name": "t", "mars": {"step": 6}}
    path = _write(tmp_path / "dup.tgm", [
        _message((meta, _field(1))), _message((meta, _field(1))), _message((meta, _field(1))),
    ])
    with pytest.raises(TgmDuplicateError) as info:
        _plan(path)
    text = str(info.value)
    assert "variable 't' has 3 fields at the same place" in text
    assert "message 0 object 0 and message 1 object 0" in text and "duplicates='first'" in text
    assert isinstance(info.value, TgmConflictError)
    assert _plan(path, duplicates="first").variables["t"].refs == ((0, 0),)
    assert _plan(path, duplicates="last").variables["t"].refs == ((2, 0),)
    with pytest.raises(ValueError, match="duplicates must be one of"):
        _plan(path, duplicates="any")


def test_duplicates_name_their_coordinates(tmp_path):
    path = _write(tmp_path / "dup.tgm", [
        _message(({"name": "t", "mars": {"step": s}}, _field())) for s in (0, 6, 6)])
    with pytest.raises(TgmDuplicateError, match=r"2 fields at \(step=.*6"):
        _plan(path)


def test_duplicates_name_only_the_clashing_fields(tmp_path):
    # two fields clash at step 0; the field at step 6 (next on the grid) is not one of them
    path = _write(tmp_path / "dup.tgm", [
        _message(({"name": "t", "mars": {"step": s}}, _field())) for s in (0, 0, 6)])
    with pytest.raises(TgmDuplicateError) as info:
        _plan(path)
    text = str(info.value)
    assert "message 0 object 0 and message 1 object 0 have the same metadata" in text
    assert "message 2" not in text


def test_same_metadata_different_contents_stack_by_message(tmp_path):
    meta = {"name": "t", "mars": {"step": 6}}
    path = _write(tmp_path / "unlabelled.tgm", [
        _message((meta, _field(1))), _message((meta, _field(2))), _message((meta, _field(3))),
    ])
    var = _plan(path).variables["t"]
    assert var.dims[0] == "message" and var.refs == ((0, 0), (1, 0), (2, 0))
    # one byte-identical copy among them is a duplicate again
    path = _write(tmp_path / "mixed.tgm", [
        _message((meta, _field(1))), _message((meta, _field(2))), _message((meta, _field(1))),
    ])
    with pytest.raises(TgmDuplicateError):
        _plan(path)


def test_upstream_golden_multi_message_stacks_by_message():
    # Two messages with identical metadata but different values ([1, 2] and [3, 4]).
    plan = _plan(require_shared(MULTI_MESSAGE))
    var = plan.variables["object_0"]
    assert var.dims == ("message", "dim_0") and var.refs == ((0, 0), (1, 0))
    assert plan.index_coords["message"][1].tolist() == [0, 1]
    assert var.attrs == {"parameter": "pressure", "product": "efi"}


def test_name_clash_with_a_coordinate(tmp_path):
    path = _write(tmp_path / "clash.tgm", [
        _message(({"name": "t", "mars": {"number": n}}, _field()),
                 ({"name": "number", "mars": {"number": n}}, _field())) for n in (1, 2)])
    with pytest.raises(TgmConflictError, match="the name 'number' is used"):
        _plan(path)


def test_filter_plain_key_matches_mars_namespace_and_values_loosely():
    keys = {"mars.levtype": "pl", "mars.levelist": 500, "levtype": "x", "name": "t"}
    assert objects._matches(keys, {"levtype": "pl"})
    assert objects._matches(keys, {"levtype": "x"})
    assert objects._matches(keys, {"mars.levelist": "500"})
    assert objects._matches(keys, {"levelist": [850, 500]})
    assert not objects._matches(keys, {"mars.levtype": "x"})
    assert not objects._matches(keys, {"number": 1})
    assert objects._matches(keys, None) and objects._matches(keys, {})


# --------------------------------------------------------------------------------------------
# (5) The 1000-message upstream fixture opens from metadata only
# --------------------------------------------------------------------------------------------


def test_thousand_messages_from_metadata_only():
    require_shared(THOUSAND)
    fingerprint = _Fingerprint(THOUSAND)
    plan = build_hypercube(_table(THOUSAND), source=str(THOUSAND),
                           fingerprint=fingerprint)
    _assert_plan_consistent(plan)
    var = plan.variables["object_0"]
    assert var.dims == ("fixture.msg_index", "dim_0") and var.shape == (1000, 4)
    assert var.fields.tolist() == list(range(1000))
    assert var.refs == tuple((i, 0) for i in range(1000))
    assert var.attrs == {"fixture.shape": [4]}
    assert plan.index_coords["fixture.msg_index"][1].tolist() == list(range(1000))
    assert fingerprint.calls == 0


@pytest.mark.parametrize("path", shared_files("upstream/*/*.tgm"))
def test_every_upstream_fixture_opens(path):
    """Any file opens somehow: as one Dataset (keeping the first of duplicates) and as groups."""
    plan = _plan(path, duplicates="first")
    _assert_plan_consistent(plan)
    assert plan.variables
    for group in _groups(path, duplicates="first").values():
        _assert_plan_consistent(group)


# --------------------------------------------------------------------------------------------
# Extra dimensions from generic metadata keys
# --------------------------------------------------------------------------------------------


def test_codec_file_stacks_along_codec_only():
    plan = _plan(require_shared(CODECS))
    _assert_plan_consistent(plan)
    var = plan.variables["2t"]
    # `input_dtype` follows from `codec`: stacking on both would leave half the grid empty
    assert var.dims == ("codec", "latitude", "longitude") and var.shape == (13, 721, 1440)
    assert (var.fields >= 0).all()
    assert var.dtype == np.float64  # float32 and float64 fields
    assert "codec" not in var.attrs and "input_dtype" not in var.attrs
    assert "tensogram_compression" not in var.encoding
    codecs = plan.index_coords["codec"][1].tolist()
    assert codecs == sorted(codecs) and "zstd" in codecs
    assert var.refs[codecs.index("none")] == (0, 0)


def test_extra_dims_prefer_the_full_factorisation(tmp_path):
    messages = []
    for n, (expid, member) in enumerate(itertools.product(["a", "b"], [1, 2, 3])):
        meta = {"name": "t", "expid": expid, "member": member, "source_file": f"f{n}.grib",
                "mars": {"step": 0}}
        messages.append(_message((meta, _field(n))))
    path = _write(tmp_path / "factor.tgm", messages)
    plan = _plan(path)
    assert plan.variables["t"].dims == ("expid", "member", "dim_0", "dim_1")
    assert plan.variables["t"].fields.tolist() == [[0, 1, 2], [3, 4, 5]]
    assert "source_file" not in plan.variables["t"].attrs
    assert plan.index_coords["member"][1].dtype == np.int64


def test_keys_following_mars_dims_do_not_become_dims(tmp_path):
    messages = [_message(({"name": "t", "grib": {"level": level},
                           "mars": {"levtype": "pl", "levelist": level}}, _field()))
                for level in (500, 850)]
    plan = _plan(_write(tmp_path / "dep.tgm", messages))
    assert plan.variables["t"].dims == ("isobaricInhPa", "dim_0", "dim_1")
    assert "GRIB_level" not in plan.variables["t"].attrs and "grib.level" not in plan.variables["t"].attrs


def test_keys_that_cannot_label_a_dimension(tmp_path):
    """A list-valued or partly missing key cannot be a dimension: the fields are duplicates."""
    path = _write(tmp_path / "nolabel.tgm", [
        _message(({"name": "t", "tags": ["a"]}, _field())),
        _message(({"name": "t", "tags": ["b"], "note": "x"}, _field())),
    ])
    with pytest.raises(TgmDuplicateError):
        _plan(path)


def test_greedy_extra_dims_with_many_candidate_keys():
    """Past the exhaustive search limit the greedy pick still finds the one separating key."""
    n = extra._MAX_EXHAUSTIVE_KEYS + 2
    data = b"".join(tensogram.encode(
        {"base": [{"name": "v", "id": i, **{f"flag{j:02d}": int(i == j) for j in range(n - 1)}}]},
        [(_desc(np.zeros(2, "float32")), np.zeros(2, "float32"))]) for i in range(n))
    plan = build_hypercube(MetadataTable.of_bytes(data), source="mem", fingerprint=lambda m, o: b"")
    assert plan.variables["v"].dims == ("id", "dim_0")
    # the flags follow from `id`: they are neither dims nor attributes
    assert plan.variables["v"].attrs == {}


def test_generic_key_colliding_with_a_mars_coordinate(tmp_path):
    path = _write(tmp_path / "time.tgm", [
        _message(({"name": "a", "mars": {"date": d}}, _field())) for d in ("20260101", "20260102")
    ] + [_message(({"name": "b", "time": t}, _field())) for t in (1, 2)])
    with pytest.raises(TgmConflictError, match="metadata key 'time'"):
        _plan(path)


# --------------------------------------------------------------------------------------------
# Dimension names of the objects' own axes
# --------------------------------------------------------------------------------------------


def test_dim_names_sources_and_priority(tmp_path, caplog):
    path = _write(tmp_path / "dims.tgm", [
        _message(({"name": "hinted", "dim_names": ["y", "x"]}, _field()),
                 ({"name": "plain"}, _field(shape=(3, 5))),
                 extra={"dim_names": {"3": "rows", "5": "cols"}}),
    ])
    plan = _plan(path)
    assert plan.variables["hinted"].dims == ("y", "x")
    assert plan.variables["plain"].dims == ("rows", "cols")
    assert "dim_names" not in plan.attrs and "dim_names.3" not in plan.attrs
    plan = _plan(path, dim_names={"plain": ["a", "b"], 4: "four"})
    assert plan.variables["plain"].dims == ("a", "b")
    assert plan.variables["hinted"].dims == ("y", "four")
    # b is 4 in one variable and 5 in the other: upstream's fallback names neither, with a warning
    with caplog.at_level(logging.WARNING, logger="tgm_xarray"):
        plan = _plan(path, dim_names=["a", "b"])
    assert plan.variables["hinted"].dims == ("a", "obj_0_dim_1") and plan.variables["plain"].dims == ("a", "obj_1_dim_1")
    assert "dimension 'b' is given the sizes [4, 5]; its axes in the variables ['hinted', 'plain']" in caplog.text
    with pytest.raises(ValueError, match="does not fit variable"):
        _plan(path, dim_names=["a"])
    with pytest.raises(TypeError):
        _plan(path, dim_names="ab")


def test_message_level_list_hint(tmp_path):
    path = _write(tmp_path / "extra.tgm", [_message(({"name": "t"}, _field()),
                                                    extra={"dim_names": ["lat", "lon"]})])
    assert _plan(path).variables["t"].dims == ("lat", "lon")


def test_coordinates_declared_by_hints_and_grid_messages(tmp_path):
    rlat, rlon = np.arange(3.0), np.arange(4.0)
    grid = _message(({"name": "rlat"}, rlat), ({"name": "rlon"}, rlon),
                    ({"name": "other"}, np.arange(7.0)))
    # the grid message names its own dims, so rlat/rlon are coordinates there
    grid[0]["base"][2]["dim_names"] = ["rlat_unused"]
    grid[0]["base"][0]["dim_names"] = ["rlat"]
    grid[0]["base"][1]["dim_names"] = ["rlon"]
    data = [_message(({"name": "t", "mars": {"step": s}}, _field(s))) for s in (0, 6)]
    path = _write(tmp_path / "grid.tgm", [grid] + data)
    plan = _plan(path)
    assert plan.coord_names == {"rlat", "rlon"}
    # no hints on the fields: their axes match the coordinates' sizes
    assert plan.variables["t"].dims == ("step", "rlat", "rlon")
    assert plan.variables["other"].dims == ("rlat_unused",)
    groups = _groups(path)
    assert list(groups) == ["7", "3x4"]
    assert groups["3x4"].coord_names == {"rlat", "rlon"}
    assert groups["3x4"].variables["t"].dims == ("step", "rlat", "rlon")


def test_coordinates_only_file(tmp_path):
    path = _write(tmp_path / "grid_only.tgm", [_message(({"name": "latitude"}, LAT))])
    plan = _plan(path)
    assert list(plan.variables) == ["latitude"] and plan.coord_names == {"latitude"}
    assert list(_groups(path)) == ["coordinates"]


def test_curvilinear_coordinates(tmp_path):
    lat2d, lon2d = np.ones((3, 4)), np.zeros((3, 4))
    path = _write(tmp_path / "curvi.tgm", [_message(
        ({"name": "latitude", "dim_names": ["y", "x"]}, lat2d),
        ({"name": "longitude"}, lon2d),  # no hint: takes the dims of a variable of its shape
        ({"name": "t", "dim_names": ["y", "x"]}, _field()))])
    plan = _plan(path)
    assert plan.variables["latitude"].dims == ("y", "x")
    assert plan.variables["longitude"].dims == ("y", "x")
    ds = _materialize(plan, path)
    assert set(ds["t"].coords) == {"latitude", "longitude"}


def test_generic_dim_conflicts_fall_back_to_variable_names(tmp_path):
    path = _write(tmp_path / "generic.tgm", [
        _message(({"name": "a"}, _field(shape=(3,)))),
        _message(({"name": "b"}, _field(shape=(4,)))),
        _message(({"name": "c"}, _field(shape=(5,)))),
    ])
    plan = _plan(path)
    assert [plan.variables[n].dims for n in "abc"] == [("obj_0_dim_0",), ("b_dim_0",), ("c_dim_0",)]


def test_scalar_objects(tmp_path):
    path = _write(tmp_path / "scalar.tgm", [
        _message(({"name": "co2", "mars": {"step": s}}, np.array(400.0 + s))) for s in (0, 6)])
    plan = _plan(path)
    assert plan.variables["co2"].dims == ("step",) and plan.variables["co2"].shape == (2,)
    assert _materialize(plan, path)["co2"].values.tolist() == [400.0, 406.0]
    assert list(_groups(path)) == ["scalar"]


def test_dimension_twice_in_one_variable(tmp_path, caplog):
    path = _write(tmp_path / "twice.tgm", [
        _message(({"name": "t", "dim_names": ["step", "x"], "mars": {"step": s}}, _field()))
        for s in (0, 6)])
    # the hinted 'step' axis (size 3) collides with the stacked step (size 2): upstream's fallback
    with caplog.at_level(logging.WARNING, logger="tgm_xarray"):
        plan = _plan(path)
    assert "dimension 'step' is given the sizes [2, 3]; its axes in the variables ['t']" in caplog.text
    assert plan.variables["t"].dims == ("step", "obj_0_dim_0", "x")


# --------------------------------------------------------------------------------------------
# Metadata details: descriptor params, attributes, variable names
# --------------------------------------------------------------------------------------------


def test_descriptor_params_as_metadata_fallback(tmp_path):
    messages = []
    for step in (0, 6):
        data = _field(step)
        desc = _desc(data, encoding="simple_packing", sp_bits_per_value=16, step=step)
        messages.append(({"base": [{"name": "t"}]}, [(desc, data)]))
    path = _write(tmp_path / "params.tgm", messages)
    plan = _plan(path)
    var = plan.variables["t"]
    assert var.dims == ("step", "dim_0", "dim_1")
    assert not any(k.startswith("sp_") for k in var.attrs)
    assert var.encoding["bits_per_value"] == 16
    assert "sp_reference_value" not in var.encoding["tensogram_params"]  # differs per field


def test_variable_name_chain():
    def name(keys, variable_key):
        return variables.variable_name(keys, 3, variable_key)

    assert name({"name": "a", "mars.param": "b"}, None) == "a"
    assert name({"mars.param": "b", "param": 7}, None) == "b"
    assert name({"shortName": "s", "param": 7}, None) == "s"
    assert name({"param": 167}, None) == "167"
    assert name({"name": "a", "grib.paramId": 167}, "grib.paramId") == "167"
    assert name({"name": "a"}, "missing") == "a"
    assert name({}, None) == "object_3"


def test_attributes_survive_to_netcdf(cube_file, tmp_path):
    pytest.importorskip("netCDF4")  # no wheel for free-threaded 3.13
    ds = _materialize(_plan(cube_file, filter_by_keys={"number": 1, "step": 0}), cube_file)
    for var in ds.variables.values():
        var.encoding = {}
    ds.to_netcdf(tmp_path / "cube.nc", engine="netcdf4")
    back = xr.open_dataset(tmp_path / "cube.nc", engine="netcdf4")
    assert back["t"].attrs["mars.stream"] == "enfo"
    back.close()


def test_undecodable_time_falls_back_to_plain_keys(tmp_path):
    """Dates MARS conventions cannot decode (test_mars) leave the keys plain keys."""
    path = _write(tmp_path / "rel.tgm", [
        _message(({"name": "t", "mars": {"date": d}}, _field())) for d in ("-1", "-2")])
    plan = _plan(path)
    assert plan.variables["t"].dims == ("mars.date", "dim_0", "dim_1")
    assert plan.index_coords["mars.date"][1].tolist() == ["-1", "-2"]


# --------------------------------------------------------------------------------------------
# (6) What the writer's round trips need: the naming key and the level type are not
#     attributes, data named like coordinates stays data, `_extra_` does not leak into fields,
#     ISO 8601 keys are times, generic coordinates keep their attributes
# --------------------------------------------------------------------------------------------


def _round_trip(ds: xr.Dataset, path, **options) -> xr.Dataset:
    """``ds`` written by ``to_tgm`` and read back through the backend."""
    from tests.helpers.oracle import ENGINE
    from tgm_xarray.writer import to_tgm

    to_tgm(ds, path, **options)
    with xr.open_dataset(path, engine=ENGINE) as read:
        return read.load()


def test_the_naming_key_is_not_an_attribute(tmp_path):
    path = _write(tmp_path / "names.tgm", [_message(
        ({"name": "t", "units": "K", "mars": {"param": "130.128"}, "grib": {"paramId": 130}},
         _field()),
        ({"mars": {"param": "2t"}, "units": "K"}, _field()),
        ({"name": "latitude", "units": "degrees_north", "dim_names": ["latitude"]}, LAT))])
    plan = _plan(path)
    # `name` named t and stays out; `mars.param` did not name t: it is an attribute
    assert plan.variables["t"].attrs == {"units": "K", "GRIB_paramId": 130,
                                         "mars.param": "130.128"}
    assert plan.variables["2t"].attrs == {"units": "K"}  # named by mars.param
    assert plan.variables["latitude"].attrs == {"units": "degrees_north"}
    plan = _plan(path, variable_key="grib.paramId")
    assert plan.variables["130"].attrs == {"units": "K", "name": "t", "mars.param": "130.128"}


@pytest.mark.parametrize(("mars_keys", "dim", "kept"), [
    ({"levtype": "pl", "levelist": 500}, "isobaricInhPa", None),
    ({"levtype": "ml", "levelist": 10}, "hybrid", None),
    ({"levtype": "sfc"}, "surface", None),
    ({"levtype": "dp", "levelist": 3}, "level", "dp"),  # `level` does not say `dp`
    ({"levtype": "pl"}, None, "pl"),  # no level: nothing says pl
])
def test_a_level_type_naming_the_level_dimension_is_consumed(tmp_path, mars_keys, dim, kept):
    path = _write(tmp_path / "lev.tgm", [_message(({"name": "t", "mars": mars_keys}, _field()))])
    plan = _plan(path)
    assert plan.variables["t"].attrs.get("mars.levtype") == kept
    assert (dim in plan.index_coords) if dim else not plan.index_coords


def test_data_objects_named_like_coordinates_stay_data(tmp_path):
    """A name alone makes no coordinate: a 2-D `level`, a 0-d `height`, a 1-D `depth` over
    `points` and a hinted 2-D `latitude` without a field next to it are data, and they stack
    (before, each was a coordinate differing between messages: TgmConflictError)."""
    messages = []
    for step in (0, 6):
        mars_keys = {"step": step}
        messages.append(_message(
            ({"name": "level", "dim_names": ["y", "x"], "mars": mars_keys}, _field(step)),
            ({"name": "height", "mars": mars_keys}, np.array(2.0 + step)),
            ({"name": "depth", "dim_names": ["points"], "mars": mars_keys}, np.arange(5.0) + step),
        ))
        messages.append(_message(
            ({"name": "latitude", "dim_names": ["y", "x"], "mars": mars_keys}, _field(step)),
            ({"name": "y", "dim_names": ["y"]}, LAT), ({"name": "x", "dim_names": ["x"]}, LON)))
    path = _write(tmp_path / "named.tgm", messages)
    plan = _plan(path)
    _assert_plan_consistent(plan)
    assert plan.coord_names == {"x", "y"}  # 1-D, named after their own dimension
    dims = {n: plan.variables[n].dims for n in plan.variables if n not in plan.coord_names}
    assert dims == {"level": ("step", "y", "x"), "height": ("step",),
                    "depth": ("step", "points"), "latitude": ("step", "y", "x")}
    ds = _materialize(plan, path)
    assert ds["height"].values.tolist() == [2.0, 8.0]
    assert ds["depth"].sel(step=np.timedelta64(6, "h")).values.tolist() == [6, 7, 8, 9, 10]


def test_a_3d_data_variable_named_x(tmp_path):
    path = _write(tmp_path / "x.tgm", [_message(
        ({"name": "x", "dim_names": ["z", "rows", "cols"], "mars": {"step": s}},
         _field(s, shape=(2, 3, 4)))) for s in (0, 6)])
    plan = _plan(path)
    assert plan.coord_names == set()
    assert plan.variables["x"].dims == ("step", "z", "rows", "cols")


@pytest.mark.parametrize(("objects", "coords"), [
    # 1-D and named after its own dimension, by its hint or a neighbour's
    ([({"name": "level", "dim_names": ["level"]}, np.arange(3.0))], {"level"}),
    ([({"name": "rlat"}, LAT), ({"name": "t", "dim_names": ["rlat", "lon"]}, _field())],
     {"rlat"}),
    # known names without hints, as upstream's guide writes them
    ([({"name": "lat"}, LAT), ({"name": "t"}, _field())], {"latitude"}),
    ([({"name": "level"}, np.arange(3.0)), ({"name": "t"}, _field())], {"level"}),
    ([({"name": "level"}, np.arange(7.0)), ({"name": "t"}, _field())], set()),  # no axis of 7
    ([({"name": "level"}, _field()), ({"name": "t"}, _field())], set()),  # 2-D
    # 1-D with another dimension: data, unless latitude/longitude of a field next to it
    ([({"name": "level", "dim_names": ["points"]}, np.arange(3.0))], set()),
    ([({"name": "latitude", "dim_names": ["values"]}, np.arange(5.0)),
      ({"name": "2t", "dim_names": ["values"]}, np.arange(5.0))], {"latitude"}),
    ([({"name": "latitude", "dim_names": ["values"]}, np.arange(5.0))], set()),
    # curvilinear: 2-D latitude/longitude next to a field of their dimensions
    ([({"name": "lat", "dim_names": ["y", "x"]}, _field()), ({"name": "lon"}, _field()),
      ({"name": "t", "dim_names": ["y", "x"]}, _field())], {"lat", "longitude"}),
    ([({"name": "latitude", "dim_names": ["y", "x"]}, _field()),
      ({"name": "longitude", "dim_names": ["y", "x"]}, _field())], set()),
])
def test_which_objects_are_coordinates(tmp_path, objects, coords):
    path = _write(tmp_path / "c.tgm", [_message(*objects)])
    plan = _plan(path)
    _assert_plan_consistent(plan)
    assert plan.coord_names == coords


def test_dataset_attributes_do_not_identify_fields(tmp_path):
    """Constant `_extra_` keys are Dataset attributes only: not names, not MARS axes, not
    attributes of the variables (whose own equal attributes stay)."""
    extra = {"time": "2026-01-01T00:00:00", "step": 3, "level": 850, "number": 1,
             "param": "p", "name": "n", "date": "20260101", "units": "K", "member": "a"}
    path = _write(tmp_path / "extra.tgm", [
        _message(({"name": "t", "units": "K", "mars": {"step": s}}, _field(s)),
                 ({"units": "m", "mars": {"step": s}}, _field()), extra=extra) for s in (0, 6)])
    plan = _plan(path)
    assert set(plan.variables) == {"t", "object_1"}
    assert plan.variables["t"].dims == ("step", "dim_0", "dim_1")
    assert set(plan.index_coords) == {"step"}
    assert plan.variables["t"].attrs == {"units": "K"}  # its own, equal to the Dataset's
    assert plan.variables["object_1"].attrs == {"units": "m"}
    assert plan.attrs == attrs_module.to_attrs(extra)
    # filters still see every key of a message
    assert "t" in _plan(path, filter_by_keys={"member": "a"}).variables


def test_extra_keys_that_vary_or_the_mars_namespace_identify_fields(tmp_path):
    path = _write(tmp_path / "vary.tgm", [
        _message(({"name": "t"}, _field(m)),
                 extra={"member": m, "history": "x", "mars": {"date": "20260101"}})
        for m in (1, 2)])
    plan = _plan(path)
    assert plan.variables["t"].dims == ("member", "dim_0", "dim_1")
    assert plan.index_coords["time"][0] == ()  # mars.date, constant but in the mars namespace
    assert plan.attrs == {"history": "x"}
    # upstream-style files name objects in `_extra_`, one per message
    path = _write(tmp_path / "named.tgm", [
        _message(({}, _field()), extra={"name": n, "mars": {"step": 6}}) for n in ("a", "b")])
    assert set(_plan(path).variables) == {"a", "b"}
    # ...decided over the whole file: the same with one message
    plan = _plan(path, message_index=1)
    assert set(plan.variables) == {"b"} and plan.attrs == {}


def test_iso_datetime_keys_are_times_and_coordinate_attrs(tmp_path):
    times = ["2026-01-01T00:00:00", "2026-01-01T06:00:00Z", "1970-01-01T00:00"]
    attrs = {"coordinate_attrs": {"valid_time": {"standard_name": "time", "long_name": "time"},
                                  "member": {"long_name": "member", "units": "1"}}}
    path = _write(tmp_path / "iso.tgm", [
        _message(({"name": "t", "valid_time": t, "member": m}, _field(i)), extra=attrs)
        for i, (t, m) in enumerate(itertools.product(times, [1, 2]))])
    plan = _plan(path)
    assert plan.variables["t"].dims == ("member", "valid_time", "dim_0", "dim_1")
    dims, values, coord_attrs = plan.index_coords["valid_time"]
    assert values.dtype == np.dtype("datetime64[ns]")
    assert values.tolist() == [np.datetime64(t.rstrip("Z"), "ns").item() for t in sorted(times)]
    assert coord_attrs == {"long_name": "time", "standard_name": "time"}
    assert plan.index_coords["member"][2] == {"units": "1", "long_name": "member"}
    assert "coordinate_attrs" not in plan.attrs and not any("coordinate" in k for k in plan.attrs)
    t = _materialize(plan, path)["t"]
    assert t.sel(valid_time=np.datetime64("1970-01-01", "ns"), member=2)[0, 0] == 5


@pytest.mark.parametrize("values", [
    ["2026-01-01", "2026-01-02"],  # dates alone
    ["2026-01-01T00:00", "soon"],  # not all
    ["2026-01-01T00:00+01:00", "2026-01-01T01:00+01:00"],  # offsets other than Z
    ["2026-13-01T00:00", "2026-01-01T00:00"],  # no month 13
    ["3000-01-01T00:00", "2026-01-01T00:00"],  # beyond datetime64[ns]
])
def test_other_strings_stay_strings(tmp_path, values):
    path = _write(tmp_path / "s.tgm", [_message(({"name": "t", "label": v}, _field()))
                                       for v in values])
    assert _plan(path).index_coords["label"][1].tolist() == sorted(values)


def test_coordinate_attrs_common_to_the_messages_of_a_coordinate(tmp_path):
    path = _write(tmp_path / "ca.tgm", [
        _message(({"name": "t", "member": 1}, _field()),
                 extra={"coordinate_attrs": {"member": {"units": "1", "long_name": "a"}}}),
        _message(({"name": "t", "member": 2}, _field()),
                 extra={"coordinate_attrs": {"member": {"units": "1", "long_name": "b"}}}),
    ])
    assert _plan(path).index_coords["member"][2] == {"units": "1"}
    path = _write(tmp_path / "ca2.tgm", [
        _message(({"name": "t", "member": 1}, _field()),
                 extra={"coordinate_attrs": {"member": {"units": "1"}}}),
        _message(({"name": "t", "member": 2}, _field())),
    ])
    assert _plan(path).index_coords["member"][2] == {}


def test_a_valid_time_key_is_not_overwritten_by_time_plus_step(tmp_path):
    path = _write(tmp_path / "vt.tgm", [_message((
        {"name": "t", "valid_time": t, "mars": {"date": "20260101", "time": "0000", "step": 0}},
        _field())) for t in ("2026-01-01T00:00", "2026-01-01T06:00")])
    plan = _plan(path)
    assert plan.index_coords["valid_time"][0] == ("valid_time",)
    assert plan.variables["t"].dims == ("valid_time", "dim_0", "dim_1")


@pytest.mark.parametrize("layout", ["field", "variable"])
def test_round_trip_names_levels_and_dataset_attributes(tmp_path, layout):
    """Through the writer: no `name` or `mars.levtype` attribute appears, Dataset attributes
    named like MARS keys stay Dataset attributes, and a variable attribute equal to a Dataset
    attribute stays on the variable."""
    lat, lon = np.array([10.0, 0.0]), np.array([0.0, 1.0, 2.0])
    ds = xr.Dataset(
        {"t": (("isobaricInhPa", "latitude", "longitude"), np.arange(12.0).reshape(2, 2, 3),
               {"units": "K", "source": "IFS"})},
        coords={"isobaricInhPa": ("isobaricInhPa", [850.0, 500.0],
                                  dict(cf.COORD_ATTRS["isobaricInhPa"])),
                "latitude": ("latitude", lat, {"units": "degrees_north"}), "longitude": lon},
        attrs={"time": "2026-01-01T00:00:00", "step": 3, "level": 1, "param": "p", "name": "n",
               "levtype": "sfc", "number": 4, "source": "IFS"})
    read = _round_trip(ds, tmp_path / "t.tgm", layout=layout)
    xr.testing.assert_identical(read, ds)


@pytest.mark.parametrize("layout", ["field", "variable"])
def test_round_trip_data_variables_named_like_coordinates(tmp_path, layout):
    rng = np.random.default_rng(5)
    ds = xr.Dataset(
        {"level": (("time", "y", "x"), rng.random((2, 3, 4))),
         "height": (("time",), [2.0, 10.0]),
         "depth": (("time", "points"), rng.random((2, 5))),
         "latitude": (("time", "y", "x"), rng.random((2, 3, 4)))},
        coords={"time": ("time", np.array(["2026-01-01", "2026-01-02"], "datetime64[ns]"),
                         dict(cf.COORD_ATTRS["time"])),
                "y": [1.0, 2.0, 3.0], "x": ("x", np.arange(4.0), {"units": "m"})})
    read = _round_trip(ds, tmp_path / "t.tgm", layout=layout)
    xr.testing.assert_identical(read, ds)


def test_round_trip_era5_valid_time(tmp_path):
    """ERA5 NetCDF's layout: a `valid_time` dimension (no time/step), stacked as ISO 8601 keys,
    with its attributes and those of a generic dimension back through `coordinate_attrs`."""
    rng = np.random.default_rng(6)
    ds = xr.Dataset(
        {"t2m": (("member", "valid_time", "latitude", "longitude"),
                 rng.random((2, 3, 2, 3)).astype("float32"), {"units": "K"})},
        coords={"valid_time": ("valid_time", np.array(["2024-01-01T00", "2024-01-01T01",
                                                        "2024-01-01T02:30:00.5"], "datetime64[ns]"),
                               {"standard_name": "time", "long_name": "time"}),
                "member": ("member", [1, 2], {"long_name": "member", "flags": [1, 2]}),
                "latitude": ("latitude", [10.0, 0.0], {"units": "degrees_north"}),
                "longitude": ("longitude", [0.0, 1.0, 2.0], {"units": "degrees_east"})},
        attrs={"Conventions": "CF-1.7"})
    path = tmp_path / "era5.tgm"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no dimension stays inside the field
        read = _round_trip(ds, path)
    xr.testing.assert_identical(read, ds)
    with tensogram.TensogramFile.open(str(path)) as f:
        meta = tensogram.decode_metadata(f.read_message(0))
    assert meta.base[0]["valid_time"] == "2024-01-01T00:00:00.000000000"
    assert meta.extra["coordinate_attrs"]["valid_time"] == {"standard_name": "time",
                                                            "long_name": "time"}


# --------------------------------------------------------------------------------------------
# Many distinct values: planning work grows linearly with the messages (counted, so a
# quadratic pass fails here, not in a 10^6-message archive)
# --------------------------------------------------------------------------------------------


def _planning_work(table: MetadataTable, monkeypatch) -> tuple[int, int]:
    """What planning ``table`` costs, counted rather than timed: function calls (Python and C),
    and elements of the arrays numpy's constructors allocate."""
    elements = [0]
    for name in ("full", "zeros", "ones", "empty"):
        def counted(shape, *args, _make=getattr(np, name), **kwargs):  # noqa: B008 (binds this name's function)
            array = _make(shape, *args, **kwargs)
            elements[0] += array.size
            return array
        monkeypatch.setattr(np, name, counted)
    calls = [0]

    def profile(frame, event, arg):
        if event in ("call", "c_call"):
            calls[0] += 1

    sys.setprofile(profile)
    try:
        plan = build_hypercube(table, source="steps.tgm", fingerprint=lambda m, o: b"")
    finally:
        sys.setprofile(None)
        monkeypatch.undo()
    assert plan.variables["2t"].shape == (table.n_messages,)
    return calls[0], elements[0]


def test_distinct_steps_plan_in_linear_work(monkeypatch):
    """Ten times the messages, each at a step of its own, cost at most ~ten times the calls and
    the allocated elements (an O(n) array per distinct step made it 100 times)."""
    small = _planning_work(distinct_steps_table(2_000), monkeypatch)
    big = _planning_work(distinct_steps_table(20_000), monkeypatch)
    for what, a, b in zip(("calls", "allocated elements"), small, big):
        assert b <= 11 * a, f"{what}: {a} for 2,000 messages but {b} for 20,000"


def test_distinct_steps_sorted_and_placed():
    """Steps written in reverse order come out ascending, each field at its own step."""
    n = 1_000
    table = distinct_steps_table(n, reverse=True)  # row i's step is n - 1 - i
    plan = build_hypercube(table, source="steps.tgm", fingerprint=lambda m, o: b"")
    step = plan.index_coords["step"][1]
    assert (step == np.arange(n) * np.timedelta64(3600, "s")).all()
    var = plan.variables["2t"]
    assert [var.refs[i][0] for i in var.fields.tolist()] == list(range(n))[::-1]


def test_classify_many_objects_of_one_message():
    """One message of 30,000 objects: classified in one pass over them (a pass over the others
    per object took 10^9 steps)."""
    n = 30_000
    names = [f"v{i}" for i in range(n)] + ["lat", "x"]
    shapes = [(7,)] * n + [(7,), (9,)]
    hints = [None] * (n + 2)
    found = objects._classify(names, shapes, hints)
    assert found[-2:] == ["latitude", None]  # `x` has no axis of its size to label
    assert found[:n] == [None] * n


# --------------------------------------------------------------------------------------------
# NaN among coordinate values: one label, last, the same in every process and from an index
# --------------------------------------------------------------------------------------------

_NAN = float("nan")

# Prints the coordinates and values of a file opened cold (`False`) or through the index cache.
_OPEN_AND_PRINT = """
import sys, warnings
import xarray as xr
warnings.simplefilter("ignore")
index = {"False": False}.get(sys.argv[2], sys.argv[2])
for path in sys.argv[1].split(","):
    ds = xr.open_dataset(path, engine="tgm", index=index)
    for name in sorted(ds.variables):
        print(name, ds[name].dims, ds[name].values.tolist())
"""


@pytest.fixture(scope="module")
def nan_files(tmp_path_factory):
    """A level NaN among 850, 500, 700 hPa, and a generic key ``band`` NaN among 2.0, 1.0."""
    d = tmp_path_factory.mktemp("nan")
    levels = _write(d / "levels.tgm", [_message(
        ({"mars": {"param": "t", "levtype": "pl", "levelist": level}}, np.full(2, float(i))))
        for i, level in enumerate([850, _NAN, 500, 700])])
    bands = _write(d / "bands.tgm", [_message(({"name": "x", "band": band}, np.full(2, float(i))))
                                     for i, band in enumerate([2.0, _NAN, 1.0])])
    return levels, bands


def test_nan_coordinate_value_sorts_last(nan_files):
    levels, bands = nan_files
    t = _plan(levels)
    np.testing.assert_array_equal(t.index_coords["isobaricInhPa"][1], [850.0, 700.0, 500.0, _NAN])
    assert [t.variables["t"].refs[i][0] for i in t.variables["t"].fields.tolist()] == [0, 3, 2, 1]
    x = _plan(bands)
    np.testing.assert_array_equal(x.index_coords["band"][1], [1.0, 2.0, _NAN])
    assert [x.variables["x"].refs[i][0] for i in x.variables["x"].fields.tolist()] == [2, 0, 1]


def test_nan_coordinate_order_is_the_same_in_every_process_and_from_an_index(nan_files, tmp_path):
    """8 processes with different hash seeds (NaN's hash is its address), cold and through the
    index each wrote or read: one output."""
    paths = ",".join(str(p) for p in nan_files)
    outputs = set()
    for seed in range(8):
        env = {**os.environ, "PYTHONHASHSEED": str(seed), "TGM_XARRAY_CACHE_DIR": str(tmp_path)}
        index = "False" if seed % 2 else "auto"
        done = subprocess.run([sys.executable, "-c", _OPEN_AND_PRINT, paths, index], env=env,
                              capture_output=True, text=True, timeout=300, check=True)
        outputs.add(done.stdout)
    assert len(list(tmp_path.glob("*.tgmidx"))) == 2  # the indexed opens had an index to read
    (output,) = outputs
    assert "isobaricInhPa ('isobaricInhPa',) [850.0, 700.0, 500.0, nan]" in output
    assert "t ('isobaricInhPa', 'dim_0') [[0.0, 0.0], [3.0, 3.0], [2.0, 2.0], [1.0, 1.0]]" in output
    assert "band ('band',) [1.0, 2.0, nan]" in output


@pytest.mark.parametrize("meta", [{"name": "v"}, {"name": "lat", "dim_names": ["lat"]}],
                         ids=["data", "coordinate"])
def test_shape_past_what_numpy_holds_is_a_format_error(meta):
    """A declared shape of more bytes than any array holds: a TgmFormatError at open naming the
    file, the message and the object (numpy's bare ValueError came at the first read)."""
    shape = [2**32 - 1] * 3 if meta["name"] == "v" else [2**63 // 4]
    # No encoder writes such a shape: the message holds one of ones, whose CBOR in the
    # descriptor (the last copy, after `_reserved_`'s in the metadata) the huge one replaces in
    # place, a descriptor parameter `pad` giving up the bytes it takes more.
    ones = np.zeros([1] * len(shape))
    message = tensogram.encode({"base": [meta]}, [({**_desc(ones), "pad": "x" * 20}, ones)], hash=None)

    def cbor_shape(dims):
        return bytes([0x80 + len(dims)]) + b"".join(
            bytes([n]) if n < 24 else bytes([0x1a]) + n.to_bytes(4, "big") if n < 2**32
            else bytes([0x1b]) + n.to_bytes(8, "big") for n in dims)

    grown = len(cbor_shape(shape)) - len(cbor_shape([1] * len(shape)))
    for old, new in ((b"eshape" + cbor_shape([1] * len(shape)), b"eshape" + cbor_shape(shape)),
                     (b"cpadt" + b"x" * 20, b"cpad" + bytes([0x60 + 20 - grown]) + b"x" * (20 - grown))):
        at = message.rfind(old)
        message = message[:at] + new + message[at + len(old):]
    table = MetadataTable.of_bytes(message)
    assert list(table.shapes[0]) == shape
    with pytest.raises(TgmError, match=r"huge\.tgm: .*message 0 object 0\) has shape") as err:
        build_hypercube(table, source="huge.tgm", fingerprint=lambda m, o: b"")
    assert type(err.value).__name__ == "TgmFormatError"
