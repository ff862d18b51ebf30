"""MARS conventions (``tgm_xarray.mars``): which metadata keys become cfgrib-like dimensions, how
their values decode, and the keys the writer gives each value. Checked on literal keys, on the
real IFS file's metadata, and against cfgrib's own reading of the GRIB 2 fields that file was
made from."""

from __future__ import annotations

import numpy as np
import pytest

import tgm_xarray
from tests.helpers.shared import FIXTURES, REAL, require_shared
from tgm_xarray import attrs, cf, mars

GRIB = FIXTURES / "upstream" / "grib"


# --------------------------------------------------------------------------------------------
# Finding axes: which keys name which dimension
# --------------------------------------------------------------------------------------------


def test_lookup_prefers_the_mars_namespace_and_skips_none():
    assert mars.lookup({"levtype": "sfc", "mars.levtype": "pl"}, "levtype") == ("mars.levtype", "pl")
    assert mars.lookup({"levtype": "sfc", "mars.levtype": None}, "levtype") == ("levtype", "sfc")
    assert mars.lookup({"step": 0}, "step") == ("step", 0)  # a falsy value is still a value
    assert mars.lookup({"mars.date": "20260404"}, "step") is None


@pytest.mark.parametrize(("levtype", "dim"), [
    ("pl", "isobaricInhPa"), ("ml", "hybrid"), ("pt", "theta"), ("pv", "potentialVorticity"),
    ("sol", "soilLayer"), ("dp", "level"), (None, "level"),
])
def test_level_names(levtype, dim):
    keys = {"mars.levelist": 1} | ({"mars.levtype": levtype} if levtype else {})
    assert list(mars.find_axes(keys)) == [dim]
    assert mars.level_dim(levtype) == dim
    assert mars.is_level(dim)
    values, positions = mars.sort_values(dim, np.array([1, 3, 2]))
    assert values.tolist() == ([3, 2, 1] if dim == "isobaricInhPa" else [1, 2, 3])
    assert values[positions].tolist() == [1, 3, 2]


def test_a_level_type_naming_the_dimension_is_consumed_with_the_level():
    """``pl`` is said by the dimension's name (its key becomes the coordinate's); ``dp`` is not,
    so it stays a key of its own."""
    pl = mars.find_axes({"mars.levtype": "pl", "mars.levelist": 500})["isobaricInhPa"]
    assert pl == mars.Axis(("mars.levtype", "mars.levelist"), 500, "pl")
    dp = mars.find_axes({"mars.levtype": "dp", "mars.levelist": 5})["level"]
    assert dp == mars.Axis(("mars.levelist",), 5, "dp")
    plain = mars.find_axes({"level": 3})["level"]
    assert plain == mars.Axis(("level",), 3, None)


def test_surface_without_levelist():
    assert mars.find_axes({"levtype": "sfc"}) == {"surface": mars.Axis(("levtype",), mars.SURFACE_VALUE, "sfc")}
    assert mars.find_axes({"levtype": "ml"}) == {}  # a level type without a level is no axis


def test_height_above_ground_from_the_ecCodes_keys():
    """A field the stored ecCodes keys put at a height above the ground is on cfgrib's
    ``heightAboveGround`` (metres, float), whatever its parameter; those keys are consumed with
    ``mars.levtype``. Another stored level type wins over the parameter's height."""
    keys = {"mars.levtype": "sfc", "mars.param": "t", "grib.typeOfLevel": "heightAboveGround", "grib.level": 50}
    assert mars.find_axes(keys) == {"heightAboveGround": mars.Axis(
        ("mars.levtype", "grib.typeOfLevel", "grib.level"), 50.0, "sfc")}
    surface = {"mars.levtype": "sfc", "mars.param": "2t", "grib.typeOfLevel": "surface", "grib.level": 0}
    assert list(mars.find_axes(surface)) == ["surface"]
    no_level = {"mars.levtype": "sfc", "grib.typeOfLevel": "heightAboveGround"}
    assert list(mars.find_axes(no_level)) == ["surface"]


@pytest.mark.parametrize(("param", "height"), [
    ("2t", 2.0), ("2d", 2.0), ("10u", 10.0), ("10v", 10.0), ("100u", 100.0),
    ("167", 2.0), ("165.128", 10.0), (166, 10.0),  # paramIds, as MARS also writes them
])
def test_height_above_ground_from_a_surface_parameter(param, height):
    """A MARS surface parameter defined at a height (ecCodes encodes ``2t`` at 2 m in GRIB 2)."""
    axes = mars.find_axes({"mars.levtype": "sfc", "mars.param": param})
    assert axes == {"heightAboveGround": mars.Axis(("mars.levtype",), height, "sfc")}


@pytest.mark.parametrize("keys", [
    {"mars.levtype": "sfc", "mars.param": "lsm"},  # on the surface
    {"mars.levtype": "sfc", "mars.param": "10fg6"},  # on the surface in ecCodes 2.50
    {"mars.param": "2t"},  # no level type: no level
    {"mars.levtype": "pl", "mars.levelist": 2, "mars.param": "2t"},  # the level the keys say
])
def test_no_height_where_the_keys_do_not_say_one(keys):
    assert "heightAboveGround" not in mars.find_axes(keys)


@pytest.mark.parametrize("height", [2.0, 10.0, 0.5])
def test_height_keys_read_back_as_their_height(height):
    """The writer's keys for a height give that height back, for any parameter."""
    keys = attrs.flatten({**mars.height_keys(height), "mars": {"levtype": "sfc", "param": "2t"}})
    (decoded,) = mars.decode_axes([mars.find_axes(keys)])
    assert decoded["heightAboveGround"].value == height


def test_number_time_and_step_axes_and_their_keys():
    axes = mars.find_axes({"mars.number": 3, "mars.date": 20260404, "mars.step": "6h", "param": "t"})
    assert list(axes) == ["number", "time", "step"]
    assert axes["number"] == mars.Axis(("mars.number",), 3)
    assert axes["time"] == mars.Axis(("mars.date",), (20260404, 0))  # no time of day: midnight
    assert axes["step"] == mars.Axis(("mars.step",), "6h")
    assert mars.AXIS_ORDER == ("number", "time", "step") and not any(map(mars.is_level, mars.AXIS_ORDER))


def test_iso_time_and_generic_keys():
    axes = mars.decode_axes([mars.find_axes({"time": "2026-04-04T06:00:00", "level": "3",
                                              "number": "7"})])[0]
    assert axes["time"].value == np.datetime64("2026-04-04T06:00", "ns")
    assert axes["level"].value == 3 and axes["number"].value == 7
    assert "time" not in mars.find_axes({"time": "0000"})  # a time of day alone is no time


# --------------------------------------------------------------------------------------------
# Decoding values
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("date", "time", "expected"), [
    ("20260404", "0000", "2026-04-04T00:00"),
    (20260404, 1200, "2026-04-04T12:00"),
    ("2026-04-04", "12", "2026-04-04T12:00"),
    ("20260404", 600, "2026-04-04T06:00"),
    ("20260404", "12:30", "2026-04-04T12:30"),
])
def test_reference_time(date, time, expected):
    axes = mars.decode_axes([mars.find_axes({"mars.date": date, "mars.time": time})])
    assert axes[0]["time"].value == np.datetime64(expected, "ns")
    assert axes[0]["time"].keys == ("mars.date", "mars.time")


@pytest.mark.parametrize(("step", "hours"), [
    (0, 0), (6, 6), ("12", 12), ("0-6", 6), ("6h", 6), ("30m", 0.5), (1.5, 1.5), ("2d", 48),
    ("90s", 0.025), (" 3 ", 3),
])
def test_steps(step, hours):
    axes = mars.decode_axes([mars.find_axes({"step": step})])
    assert axes[0]["step"].value == np.timedelta64(int(hours * 3600), "s")


@pytest.mark.parametrize("keys", [
    {"mars.date": "-1"}, {"mars.date": "20260404", "mars.time": "2400"},
    {"mars.date": "20260404", "mars.time": "1260"}, {"mars.date": "20260404", "mars.time": "12345"},
    {"step": "soon"}, {"step": True}, {"step": "6y"}, {"number": "first"}, {"number": 1.5},
])
def test_undecodable_values_drop_their_dimension(keys):
    assert mars.decode_axes([mars.find_axes(keys)]) == [{}]


def test_one_undecodable_field_drops_the_dimension_from_every_field():
    """A dimension never mixes decoded and raw values: ``time`` goes from both fields, ``step``
    (decodable in both) stays."""
    fields = [mars.find_axes({"mars.date": d, "mars.step": s}) for d, s in (("20260404", 0), ("soon", 6))]
    decoded = mars.decode_axes(fields)
    assert [list(axes) for axes in decoded] == [["step"], ["step"]]
    assert [axes["step"].value for axes in decoded] == [np.timedelta64(0, "h"), np.timedelta64(6, "h")]
    assert "time" in fields[0]  # the input is not changed


def test_level_values_become_numbers_when_they_are_numeric():
    fields = [mars.find_axes({"mars.levtype": "pl", "mars.levelist": v}) for v in ("500", "0.5", "top", 850)]
    assert [axes["isobaricInhPa"].value for axes in mars.decode_axes(fields)] == [500, 0.5, "top", 850]


def test_valid_time_spans_the_dimensions_of_time_and_step():
    time = np.array(["2026-04-04T00", "2026-04-04T12"], dtype="datetime64[ns]")
    step = np.array([0, 6, 12], dtype="timedelta64[h]").astype("timedelta64[ns]")
    dims, values = mars.valid_time(time, ("time",), step, ("step",))
    assert dims == ("time", "step") and values.dtype == np.dtype("datetime64[ns]")
    assert values[1, 2] == np.datetime64("2026-04-05T00", "ns")
    dims, values = mars.valid_time(time[0], (), step, ("step",))  # a scalar time
    assert dims == ("step",) and values.tolist() == (time[0] + step).tolist()


# --------------------------------------------------------------------------------------------
# On real files
# --------------------------------------------------------------------------------------------


def _ifs_fields() -> list[dict]:
    """Each field's flattened metadata in the real IFS file (the first object of a message)."""
    with tgm_xarray.open_file(require_shared(REAL / "ifs-0p25-20260404.tgm")) as f:
        return [attrs.flatten(f.metadata(m)["base"][0]) for m in range(len(f))]


def test_axes_of_the_real_ifs_file():
    fields = _ifs_fields()
    assert [f["mars.param"] for f in fields] == ["2t", "lsm", "q", "t"]
    decoded = mars.decode_axes([mars.find_axes(f) for f in fields])
    assert [sorted(axes) for axes in decoded] == [["heightAboveGround", "step", "time"], ["step", "surface", "time"]] \
        + [["isobaricInhPa", "step", "time"]] * 2
    for axes in decoded:
        assert axes["time"].value == np.datetime64("2026-04-04T00:00", "ns")
        assert axes["time"].keys == ("mars.date", "mars.time")
        assert axes["step"].value == np.timedelta64(0, "ns")
    # 2t: levtype sfc, grib.typeOfLevel heightAboveGround, grib.level 2 (as cfgrib reads its GRIB)
    assert decoded[0]["heightAboveGround"] == mars.Axis(("mars.levtype", "grib.typeOfLevel", "grib.level"), 2.0, "sfc")
    assert decoded[1]["surface"].value == 0
    assert [axes["isobaricInhPa"].value for axes in decoded[2:]] == [150, 600]


def test_coordinates_match_cfgrib_on_the_source_grib():
    """The IFS file was converted from these GRIB 2 fields: our decoded axes and the coordinate
    attributes we give them are cfgrib's."""
    xr = pytest.importorskip("xarray")
    pytest.importorskip("cfgrib")  # no free-threaded wheel of eccodes
    fields = _ifs_fields()
    decoded = mars.decode_axes([mars.find_axes(f) for f in fields])
    for grib, axes, level in (("t_600.grib2", decoded[3], "isobaricInhPa"), ("q_150.grib2", decoded[2], "isobaricInhPa"),
                              ("2t.grib2", decoded[0], "heightAboveGround"), ("lsm.grib2", decoded[1], "surface")):
        with xr.open_dataset(require_shared(GRIB / grib), engine="cfgrib",
                             backend_kwargs={"indexpath": ""}) as ds:
            for dim in ("time", "step", level):
                assert ds[dim].values == axes[dim].value, (grib, dim)
                assert ds[dim].attrs == cf.COORD_ATTRS[dim], (grib, dim)
            assert ds["valid_time"].attrs == cf.COORD_ATTRS["valid_time"]
            dims, valid = mars.valid_time(np.asarray(axes["time"].value), (), np.asarray(axes["step"].value), ())
            assert dims == () and valid == ds["valid_time"].values


def test_levtypes_invert_the_readers_level_dimensions():
    for dim, levtype in mars.LEVTYPES.items():
        assert mars.level_dim(levtype) == dim
    assert "surface" not in mars.LEVTYPES and mars.DIMS >= set(mars.AXIS_ORDER)


@pytest.mark.parametrize(("dim", "value"), [
    ("time", np.datetime64("2026-04-04T12:30", "ns")),
    ("time", np.datetime64("2026-04-04T00:00:01.5", "ns")),  # off the minute: ISO 8601
    ("step", np.timedelta64(6, "h")), ("step", np.timedelta64(90, "m")),
    ("step", np.timedelta64(1500, "ms")),
    ("number", np.int64(3)),
    ("isobaricInhPa", np.float64(500)), ("hybrid", np.int32(137)), ("level", np.int64(7)),
    ("heightAboveGround", np.float64(2)),
])
def test_the_keys_a_value_is_written_with_read_back_as_that_value(dim, value):
    """The writer's keys of each MARS dimension decode to the value they were made from."""
    keys = mars.key_maker(dim, value.dtype, level_free=True)(value)
    axes = mars.decode_axes([mars.find_axes(attrs.flatten(keys))])[0]
    assert list(axes) == [dim] and axes[dim].value == value


@pytest.mark.parametrize(("dim", "value"), [
    ("step", np.timedelta64(-6, "h")), ("step", np.timedelta64("NaT", "ns")),
    ("time", np.datetime64("NaT", "ns")), ("isobaricInhPa", np.float64("nan")),
])
def test_values_mars_keys_cannot_hold_have_no_keys(dim, value):
    assert mars.key_maker(dim, value.dtype, level_free=True)(value) is None


@pytest.mark.parametrize("keys", [
    {"mars.number": 1, "mars.date": "20260404", "mars.time": "1200", "mars.step": 6,
     "mars.levtype": "pl", "mars.levelist": 500, "mars.param": "t", "grib.level": 1},
    {"number": 1, "date": "20260404", "time": "12", "step": "0-6", "levtype": "sfc", "param": "2t"},
    {"time": "2026-04-04T12:00:00", "level": 3},
    {"mars.levtype": "sfc", "grib.typeOfLevel": "heightAboveGround", "grib.level": 10},
])
def test_axes_are_read_from_their_own_group_of_axis_keys(keys):
    """What a planner relies on to run ``find_axes`` once per distinct combination of a group's
    keys: each dimension is read from the keys of one group of ``AXIS_KEYS`` alone."""
    found = mars.find_axes(keys)
    assert found
    for group in mars.AXIS_KEYS:
        alone = mars.find_axes({k: v for k, v in keys.items() if k in group})
        assert alone == {dim: axis for dim, axis in found.items() if set(axis.keys) <= set(group)}
    assert all(any(set(axis.keys) <= set(group) for group in mars.AXIS_KEYS) for axis in found.values())
