"""Stacked dimensions as the writer laid them out (``tgm_xarray.hypercube.written``), and what
the writer's round trips need of the planner.

Files are read with upstream ``tensogram`` (metadata only, through ``decode_descriptors``) and
written with ``tensogram.encode``; ``_materialize`` decodes the planned fields with upstream too,
so every test that checks values also proves xarray accepts the layout.
"""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest
import xarray as xr

tensogram = pytest.importorskip("tensogram")

from tests.helpers.hypercube import (  # noqa: E402
    LAT,
    LON,
    _assert_plan_consistent,
    _field,
    _materialize,
    _message,
    _plan,
    _write,
)
from tgm_xarray import attrs as attrs_module  # noqa: E402
from tgm_xarray import cf  # noqa: E402

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
