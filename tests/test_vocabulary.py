"""cfgrib's vocabulary on our engine: ``filter_by_keys`` with ecCodes keys, a warning with close
matches when a filter matches nothing, and ``decode_times=False`` / ``decode_timedelta=False``
giving cfgrib's raw values with their units. On the shared IFS file (written by upstream's GRIB
converter: MARS keys and ``grib.*`` ecCodes keys) and on our writer's output (MARS keys, and the level of
2t as ecCodes keys)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import xarray as xr

from tests.helpers.shared import require_shared
from tgm_xarray import vocabulary
from tgm_xarray.cf import RAW_TIME_ATTRS, RAW_TIMEDELTA_ATTRS

ENGINE = "tgm"


def _data_vars(path, **kwargs):
    with warnings.catch_warnings():
        warnings.filterwarnings("error", ".*matches no data object")  # a filter that matches must not warn
        with xr.open_dataset(path, engine=ENGINE, **kwargs) as ds:
            return sorted(ds.data_vars)


@pytest.fixture(scope="module")
def mars_only_file(tmp_path_factory, ifs_file):
    """Our writer's copy of the IFS file without its ``grib.*`` attributes: MARS keys only, but
    for 2t's level, which our writer writes as ecCodes' ``typeOfLevel``/``level`` (cfgrib's
    ``heightAboveGround`` coordinate)."""
    require_shared(ifs_file)
    path = tmp_path_factory.mktemp("vocab") / "ifs-written.tgm"
    with xr.open_dataset(ifs_file, engine=ENGINE) as ds:
        ds = ds.load()
        for var in ds.data_vars.values():
            var.attrs = {k: v for k, v in var.attrs.items() if not k.startswith("grib.")}
        ds.tgm.to_file(path)
    return path


@pytest.mark.parametrize(("filter_by_keys", "expected"), [
    ({"shortName": "2t"}, ["2t"]),
    ({"shortName": ["q", "t"]}, ["q", "t"]),
    ({"paramId": 130}, ["t"]),
    ({"paramId": "133"}, ["q"]),
    ({"typeOfLevel": "isobaricInhPa"}, ["q", "t"]),
    ({"typeOfLevel": "surface"}, ["lsm"]),  # 2t is heightAboveGround in GRIB, as cfgrib says
    ({"typeOfLevel": "isobaricInhPa", "level": 150}, ["q"]),
    ({"dataType": "fc"}, ["2t", "lsm", "q", "t"]),
    ({"centre": "ecmf", "shortName": "lsm"}, ["lsm"]),
    ({"dataDate": 20260404, "dataTime": 0, "shortName": "t"}, ["t"]),
])
def test_cfgrib_keys_on_converted_grib(ifs_file, filter_by_keys, expected):
    require_shared(ifs_file)
    assert _data_vars(ifs_file, filter_by_keys=filter_by_keys) == expected


@pytest.mark.parametrize(("filter_by_keys", "expected"), [
    ({"shortName": "2t"}, ["2t"]),
    ({"typeOfLevel": "isobaricInhPa"}, ["q", "t"]),
    ({"typeOfLevel": "surface"}, ["lsm"]),  # MARS says sfc for both; 2t is at 2 m
    ({"typeOfLevel": "heightAboveGround", "level": 2}, ["2t"]),
    ({"level": 150, "shortName": "q"}, ["q"]),
    ({"dataType": "fc", "shortName": "q"}, ["q"]),
    ({"stepType": "instant", "shortName": "lsm"}, ["lsm"]),
    ({"endStep": 0, "shortName": "lsm"}, ["lsm"]),
    ({"levtype": "pl"}, ["q", "t"]),  # our own spellings keep working
])
def test_cfgrib_keys_on_our_writers_output(mars_only_file, filter_by_keys, expected):
    with xr.open_dataset(mars_only_file, engine=ENGINE) as ds:
        assert sorted(ds.data_vars) == ["2t", "lsm", "q", "t"]
    assert _data_vars(mars_only_file, filter_by_keys=filter_by_keys) == expected


def test_cfgrib_filter_selects_the_same_fields(ifs_file):
    """The vocabulary only names fields: the values are the stored ones."""
    require_shared(ifs_file)
    with xr.open_dataset(ifs_file, engine=ENGINE, filter_by_keys={"typeOfLevel": "isobaricInhPa",
                                                                   "shortName": "t"}) as ds, \
            xr.open_dataset(ifs_file, engine=ENGINE, filter_by_keys={"mars.levtype": "pl",
                                                                     "mars.param": "t"}) as ours:
        xr.testing.assert_identical(ds.load(), ours.load())


@pytest.mark.parametrize(("filter_by_keys", "said"), [
    ({"nope": 1}, ["no data object has a key 'nope'"]),
    ({"typeOfLevl": "surface"}, ["no data object has a key 'typeOfLevl'", "'typeOfLevel'"]),
    ({"shortName": "2tt"}, ["'shortName' is '2tt' in no data object", "'2t'", "'lsm'"]),
    ({"typeOfLevel": "isobaricInhPa", "shortName": "lsm"},
     ["no data object matches them all"]),
])
def test_filter_matching_nothing_warns_with_close_matches(ifs_file, filter_by_keys, said):
    require_shared(ifs_file)
    with pytest.warns(UserWarning, match="matches no data object") as record:
        with xr.open_dataset(ifs_file, engine=ENGINE, filter_by_keys=filter_by_keys) as ds:
            assert not ds.data_vars
    message = str(record[0].message)
    assert str(ifs_file) in message
    for text in said:
        assert text in message


def test_filter_matching_nothing_warns_in_datatree(ifs_file):
    require_shared(ifs_file)
    with pytest.warns(UserWarning, match="'shortName' is 'zz'"):
        xr.open_datatree(ifs_file, engine=ENGINE, filter_by_keys={"shortName": "zz"}).close()


def test_vocabulary_prefers_the_ecCodes_key_over_the_mars_translation():
    keys = {"grib.typeOfLevel": "heightAboveGround", "mars.levtype": "sfc"}
    assert vocabulary.values(keys, "typeOfLevel") == ["heightAboveGround"]
    assert vocabulary.values({"mars.levtype": "sfc"}, "typeOfLevel") == ["surface"]
    # a MARS surface parameter at a height is on that level, as the engine reads it
    two_metres = {"mars.levtype": "sfc", "mars.param": "2t"}
    assert vocabulary.values(two_metres, "typeOfLevel") == ["heightAboveGround"]
    assert vocabulary.values(two_metres, "level") == [2.0]
    assert vocabulary.values({"mars.levtype": "sfc", "mars.param": "lsm"}, "level") == []
    assert vocabulary.values({"mars.step": "0-6"}, "stepType") == [None]
    assert vocabulary.values({"mars.step": "0-6"}, "endStep") == ["6"]
    assert vocabulary.values({"mars.time": "1200"}, "dataTime") == [1200]
    assert vocabulary.values({"mars.time": "12"}, "dataTime") == [1200]


# -- decode_times / decode_timedelta ----------------------------------------------------------


def test_decode_times_false_gives_cfgrib_raw_times(ifs_file):
    require_shared(ifs_file)
    with xr.open_dataset(ifs_file, engine=ENGINE) as decoded, \
            xr.open_dataset(ifs_file, engine=ENGINE, decode_times=False, decode_timedelta=True) as raw:
        for name in ("time", "valid_time"):
            assert raw[name].dtype == np.int64
            assert raw[name].attrs["units"] == RAW_TIME_ATTRS["units"]
            assert raw[name].attrs["calendar"] == "proleptic_gregorian"
            assert raw[name].attrs["standard_name"] == decoded[name].attrs["standard_name"]
            assert int(raw[name]) == int(np.datetime64("2026-04-04T00:00", "s").astype(np.int64))
        assert raw["step"].dtype.kind == "m"  # decode_timedelta=True still decodes
        # xarray's own decoder turns them back
        xr.testing.assert_identical(xr.decode_cf(raw)["time"], decoded["time"])
        np.testing.assert_array_equal(raw["t"].values, decoded["t"].values)


def test_decode_timedelta_false_gives_hours(ifs_file):
    require_shared(ifs_file)
    with xr.open_dataset(ifs_file, engine=ENGINE, decode_timedelta=False) as ds:
        assert ds["step"].dtype == np.float64
        assert float(ds["step"]) == 0.0
        assert ds["step"].attrs["units"] == RAW_TIMEDELTA_ATTRS["units"]
        assert ds["time"].dtype.kind == "M"


def test_decode_times_false_on_stacked_dimensions(tmp_path):
    """Dimension coordinates (several times and steps) come back raw too, in the same order."""
    times = np.array(["2026-04-04T00", "2026-04-04T12"], dtype="datetime64[ns]")
    steps = np.array([0, 6, 90], dtype="timedelta64[h]").astype("timedelta64[ns]")
    ds = xr.Dataset({"t": (("time", "step", "y"), np.arange(12.0).reshape(2, 3, 2))},
                    coords={"time": times, "step": steps, "y": [0.0, 1.0]})
    path = tmp_path / "stacked.tgm"
    ds.tgm.to_file(path)
    with xr.open_dataset(path, engine=ENGINE) as decoded, \
            xr.open_dataset(path, engine=ENGINE, decode_times=False) as raw:
        np.testing.assert_array_equal(decoded["time"].values, times)
        np.testing.assert_array_equal(raw["time"].values, times.astype("datetime64[s]").astype(np.int64))
        np.testing.assert_array_equal(raw["step"].values, [0.0, 6.0, 90.0])  # follows decode_times
        assert raw["step"].attrs["units"] == "hours"
        np.testing.assert_array_equal(raw["t"].values, decoded["t"].values)
        xr.testing.assert_identical(xr.decode_cf(raw)["time"], decoded["time"])
