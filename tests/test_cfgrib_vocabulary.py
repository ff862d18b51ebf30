"""cfgrib's habits on the IFS file: its variable names (``cfVarName``) and CF names (``cfName``)
as filters, its ``backend_kwargs``, and its level coordinate for height levels."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import tgm_xarray
from tests.helpers.oracle import ENGINE
from tests.helpers.shared import FIXTURES, require_shared
from tgm_xarray import vocabulary


@pytest.mark.parametrize(("filter_by_keys", "names"), [
    ({"cfVarName": "t2m"}, ["2t"]),
    ({"cfVarName": ["t2m", "lsm"]}, ["2t", "lsm"]),
    ({"cfVarName": "t"}, ["t"]),
    ({"cfName": "air_temperature"}, ["2t", "t"]),
    ({"cfName": "land_binary_mask"}, ["lsm"]),
    ({"typeOfLevel": "heightAboveGround"}, ["2t"]),
    ({"paramId": 167}, ["2t"]),
])
def test_cfgrib_names_filter(ifs_file, filter_by_keys, names):
    with xr.open_dataset(ifs_file, engine=ENGINE, filter_by_keys=filter_by_keys) as ds:
        assert sorted(ds.data_vars) == names


def test_cf_names_of_numeric_params():
    """MARS's param may be the paramId (``167``, or ``167.128`` with its table)."""
    for param in ("2t", "167", "167.128", 167):
        assert vocabulary.values({"mars.param": param}, "cfVarName") == ["t2m"]
        assert vocabulary.values({"mars.param": param}, "cfName") == ["air_temperature"]
    assert vocabulary.values({"mars.param": "xyz"}, "cfVarName") == ["xyz"]  # ecCodes: the shortName
    assert vocabulary.values({"mars.param": "xyz"}, "cfName") == ["unknown"]
    assert vocabulary.values({"cfVarName": "own", "mars.param": "2t"}, "cfVarName") == ["own"]  # stored wins


def test_cfgrib_backend_kwargs_as_cfgrib_users_write_them(ifs_file):
    """cfgrib's usual ``backend_kwargs`` open without a TypeError; those with no meaning here are
    named in one warning."""
    kwargs = {"filter_by_keys": {"cfVarName": "t2m"}, "indexpath": "", "read_keys": ["centre"]}
    with xr.open_dataset(ifs_file, engine=ENGINE, backend_kwargs=kwargs) as ds:
        assert list(ds.data_vars) == ["2t"]
    with pytest.warns(UserWarning, match=r"ignore_keys=\['centre'\] mean nothing to engine='tgm'"):
        xr.open_dataset(ifs_file, engine=ENGINE, backend_kwargs={**kwargs, "ignore_keys": ["centre"]}).close()
    with xr.open_dataset(ifs_file, engine=ENGINE, backend_kwargs={**kwargs, "values_dtype": np.float32}) as ds:
        assert ds["2t"].dtype == np.float32  # honoured, as cfgrib does


# --------------------------------------------------------------------------------------------
# GRIB facts in cfgrib's vocabulary, whoever wrote the file
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def converted_lsm(tmp_path_factory):
    """lsm.grib2 converted through cfgrib by our CLI: its GRIB facts stored as ``GRIB_<key>``."""
    pytest.importorskip("cfgrib")  # no free-threaded wheel of eccodes
    from tgm_xarray.cli import main

    out = tmp_path_factory.mktemp("converted") / "lsm.tgm"
    grib = require_shared(FIXTURES / "upstream" / "grib" / "lsm.grib2")
    assert main(["convert", str(grib), str(out), "--no-progress"]) == 0
    return out


def test_grib_facts_read_as_cfgribs_attributes_whoever_wrote_the_file(ifs_file, converted_lsm):
    """Upstream's converter stores ``grib.paramId``, ours (through cfgrib) ``GRIB_paramId``: both
    read as cfgrib's attributes, with the same values for the facts both files hold."""
    with xr.open_dataset(ifs_file, engine=ENGINE, filter_by_keys={"shortName": "lsm"}) as upstream, \
            xr.open_dataset(converted_lsm, engine=ENGINE) as ours:
        theirs, mine = upstream["lsm"].attrs, ours["lsm"].attrs
    assert not [k for k in theirs if k.startswith("grib.")] and not [k for k in mine if k.startswith("grib.")]
    for key in ("paramId", "shortName", "gridType", "typeOfLevel", "name", "units",
                "iDirectionIncrementInDegrees", "latitudeOfFirstGridPointInDegrees"):
        assert theirs[f"GRIB_{key}"] == mine[f"GRIB_{key}"], key
    assert theirs["GRIB_paramId"] == 172 and theirs["mars.param"] == "lsm"  # other keys as they are


@pytest.mark.parametrize("filter_by_keys", [{"gridType": "regular_ll"}, {"typeOfLevel": "surface"},
                                            {"shortName": "lsm", "paramId": 172}, {"GRIB_gridType": "regular_ll"}])
def test_filter_by_ec_codes_keys_whoever_wrote_the_file(ifs_file, converted_lsm, filter_by_keys):
    with xr.open_dataset(converted_lsm, engine=ENGINE, filter_by_keys=filter_by_keys) as ours:
        assert list(ours.data_vars) == ["lsm"]
    expected = ["lsm"] if "gridType" not in filter_by_keys and "GRIB_gridType" not in filter_by_keys else \
        ["2t", "lsm", "q", "t"]
    with xr.open_dataset(ifs_file, engine=ENGINE, filter_by_keys=filter_by_keys) as upstream:
        assert sorted(upstream.data_vars) == expected
    with xr.open_dataset(ifs_file, engine=ENGINE, filter_by_keys={"mars.stream": "oper", "GRIB_paramId": 130}) as t:
        assert list(t.data_vars) == ["t"]  # dotted keys as stored, beside cfgrib's


def test_a_grib_fact_stored_both_ways(tmp_path):
    """Agreeing spellings are one ``GRIB_<key>`` attribute; where they differ, ``GRIB_<key>``
    keeps its value and ``grib.<key>`` stays as stored."""
    import tensogram

    desc = {"type": "ntensor", "shape": [2], "dtype": "float32", "byte_order": "little",
            "encoding": "none", "filter": "none", "compression": "none"}
    path = tmp_path / "both.tgm"
    with open(path, "wb") as f:
        for name, grib, own in (("a", {"gridType": "regular_ll", "centre": "ecmf"},
                                 {"GRIB_gridType": "regular_ll", "GRIB_centre": "lfpw"}),
                                ("b", {"centre": "ecmf"}, {"GRIB_centre": "lfpw"})):
            base = {"name": name, **own, "grib": grib}
            f.write(tensogram.encode({"base": [base]}, [(desc, np.zeros(2, "float32"))], hash=None))
    with xr.open_dataset(path, engine=ENGINE) as ds:
        assert ds["a"].attrs == {"GRIB_centre": "lfpw", "GRIB_gridType": "regular_ll", "grib.centre": "ecmf"}
        assert ds["b"].attrs == {"GRIB_centre": "lfpw", "grib.centre": "ecmf"}
    for centre in ("lfpw", "ecmf"):  # a filter matches either stored value
        with xr.open_dataset(path, engine=ENGINE, filter_by_keys={"centre": centre}) as one:
            assert sorted(one.data_vars) == ["a", "b"]


# --------------------------------------------------------------------------------------------
# cfgrib's level coordinate for height levels
# --------------------------------------------------------------------------------------------


def _cfgrib(grib: str, **backend_kwargs) -> xr.Dataset:
    pytest.importorskip("cfgrib")  # no free-threaded wheel of eccodes
    path = require_shared(FIXTURES / "upstream" / "grib" / grib)
    with xr.open_dataset(path, engine="cfgrib", backend_kwargs={"indexpath": "", **backend_kwargs}) as ds:
        return ds.load()


@pytest.mark.parametrize(("name", "grib", "level"), [("2t", "2t.grib2", "heightAboveGround"),
                                                     ("lsm", "lsm.grib2", "surface")])
def test_level_coordinate_is_cfgribs(ifs_file, name, grib, level):
    """The IFS file's 2t (MARS ``sfc``, ecCodes ``heightAboveGround`` at 2 m) is on cfgrib's
    ``heightAboveGround = 2.0`` with cfgrib's attributes, lsm on ``surface``, as cfgrib reads the
    GRIB 2 fields the file was made from."""
    theirs = _cfgrib(grib)
    with xr.open_dataset(require_shared(ifs_file), engine=ENGINE, filter_by_keys={"shortName": name}) as ours:
        levels = [c for c in ours.coords if c in ("heightAboveGround", "surface")]
        assert levels == [level]
        assert ours[level].dims == () and ours[level].values == theirs[level].values
        assert ours[level].attrs == theirs[level].attrs
        if level == "heightAboveGround":
            assert ours[level].dtype == theirs[level].dtype == np.float64
            assert not {"GRIB_typeOfLevel", "GRIB_level", "grib.typeOfLevel", "grib.level"} & set(ours[name].attrs)


@pytest.fixture
def mars_surface_file(tmp_path):
    """2t, 10u and lsm as a producer writes them with MARS keys only (upstream's encoder)."""
    import tensogram

    path = tmp_path / "sfc.tgm"
    field = np.zeros((2, 3), dtype="float32")
    descriptor = {"type": "ntensor", "shape": [2, 3], "dtype": "float32", "byte_order": "little",
                  "encoding": "none", "filter": "none", "compression": "none"}
    with open(path, "wb") as f:
        for i, param in enumerate(("2t", "10u", "lsm")):
            meta = {"base": [{"mars": {"class": "od", "date": "20260404", "time": "0000", "step": 0,
                                       "levtype": "sfc", "param": param}}]}
            f.write(tensogram.encode(meta, [(descriptor, field + i)], hash=None))
    return path


def test_height_of_a_mars_surface_parameter(mars_surface_file, tmp_path):
    """MARS says ``sfc`` only: the height is the parameter's, as ecCodes encodes it in GRIB 2
    (2t at 2 m, 10u at 10 m), for the coordinate and for ``filter_by_keys`` alike; the file
    written back keeps each level."""
    with xr.open_dataset(mars_surface_file, engine=ENGINE) as ds:
        ds = ds.load()
    assert ds["heightAboveGround"].values.tolist() == [2.0, 10.0]  # one dimension, with holes
    assert ds["2t"].dims == ("heightAboveGround", "dim_0", "dim_1")
    assert np.isnan(ds["2t"].sel(heightAboveGround=10.0)).all() and (ds["10u"].sel(heightAboveGround=10.0) == 1).all()
    assert int(ds["surface"]) == 0 and ds["lsm"].dims == ("dim_0", "dim_1")
    for filter_by_keys, names in (({"typeOfLevel": "heightAboveGround", "level": 10}, ["10u"]),
                                  ({"typeOfLevel": "surface"}, ["lsm"]),
                                  ({"cfVarName": "t2m", "level": 2}, ["2t"])):
        with xr.open_dataset(mars_surface_file, engine=ENGINE, filter_by_keys=filter_by_keys) as one:
            assert sorted(one.data_vars) == names
    path = tmp_path / "rewritten.tgm"
    ds.tgm.to_file(path, skip_nan_fields=True)
    with xr.open_dataset(path, engine=ENGINE) as back:
        xr.testing.assert_identical(back.load(), ds)


def test_each_variable_names_its_own_level(ifs_file):
    """One Dataset holds both scalar levels; each variable names its own in CF's ``coordinates``
    (as cfgrib's ``t2m`` names ``heightAboveGround``), which the writer keys it with."""
    with xr.open_dataset(require_shared(ifs_file), engine=ENGINE) as ds:
        assert float(ds["heightAboveGround"]) == 2.0 and int(ds["surface"]) == 0
        named = {name: set(ds[name].encoding["coordinates"].split()) & {"heightAboveGround", "surface"}
                 for name in ds.data_vars}
    assert named == {"2t": {"heightAboveGround"}, "lsm": {"surface"}, "q": set(), "t": set()}


# --------------------------------------------------------------------------------------------
# cfgrib's time_dims (cfgrib's errors: test_cfgrib_errors.py)
# --------------------------------------------------------------------------------------------


def test_time_dims_valid_time_is_cfgribs(ifs_file):
    """The IFS file's 2t on cfgrib's ``valid_time`` alone, as cfgrib reads the GRIB 2 field the
    file was made from: no ``time`` or ``step`` coordinate."""
    theirs = _cfgrib("2t.grib2", time_dims=("valid_time",))
    with xr.open_dataset(require_shared(ifs_file), engine=ENGINE, filter_by_keys={"shortName": "2t"},
                         backend_kwargs={"time_dims": ["valid_time"]}) as ours:
        assert sorted(ours.coords) == sorted(theirs.coords)
        assert ours.valid_time.dims == () and ours.valid_time.values == theirs.valid_time.values
        assert ours.valid_time.attrs == theirs.valid_time.attrs


@pytest.fixture
def two_runs(tmp_path):
    """Runs at 00 and 12 UTC of steps 0, 6 and 12 h, by our writer: the 00 UTC run at 12 h and
    the 12 UTC run at 0 h are valid at the same time."""
    ds = xr.Dataset({"t2m": (("time", "step", "latitude", "longitude"), np.arange(36.0, dtype="f4").reshape(2, 3, 2, 3))},
                    coords={"time": pd.date_range("2026-01-01", periods=2, freq="12h"),
                            "step": pd.to_timedelta([0, 6, 12], "h"), "latitude": [1.0, 0.0], "longitude": [0.0, 1.0, 2.0]})
    path = tmp_path / "runs.tgm"
    tgm_xarray.to_tgm(ds, path)
    return path, ds


def test_time_dims_valid_time_of_one_run(two_runs):
    path, ds = two_runs
    with xr.open_dataset(path, engine=ENGINE, time_dims=("valid_time",), filter_by_keys={"time": "0000"}) as one:
        assert one.t2m.dims == ("valid_time", "latitude", "longitude") and "step" not in one.coords
        np.testing.assert_array_equal(one.valid_time.values, (ds.time[0] + ds.step).values)
        np.testing.assert_array_equal(one.t2m.values, ds.t2m.isel(time=0).values)
        assert one.t2m.attrs["mars.date"] == "20260101"  # the run's keys stay metadata
        assert one.valid_time.attrs == {"standard_name": "time", "long_name": "time"}


def test_time_dims_valid_time_of_runs_that_overlap_keeps_every_field(two_runs):
    """Nothing but the run tells the two fields valid at 12 UTC apart: its key is a dimension."""
    path, ds = two_runs
    with xr.open_dataset(path, engine=ENGINE, time_dims=["valid_time"]) as runs:
        assert runs.t2m.dims == ("valid_time", "mars.time", "latitude", "longitude")
        assert runs.valid_time.size == 5 and runs.t2m.count() == ds.t2m.size
        for run, hhmm in enumerate(["0000", "1200"]):
            for step in ds.step.values:
                np.testing.assert_array_equal(
                    runs.t2m.sel(valid_time=ds.time.values[run] + step, **{"mars.time": hhmm}).values,
                    ds.t2m.sel(step=step).isel(time=run).values)


def test_time_dims_in_their_order(two_runs):
    path, ds = two_runs
    with xr.open_dataset(path, engine=ENGINE, time_dims=("step", "time")) as swapped:
        assert swapped.t2m.dims == ("step", "time", "latitude", "longitude")
        np.testing.assert_array_equal(swapped.t2m.values, ds.t2m.transpose("step", "time", ...).values)
        assert swapped.valid_time.dims == ("time", "step")  # time + step, as by default
    with xr.open_dataset(path, engine=ENGINE, time_dims=("time", "valid_time")) as both:
        assert both.t2m.dims == ("time", "valid_time", "latitude", "longitude") and both.valid_time.size == 5
        assert int(both.t2m.count()) == ds.t2m.size  # holes where a run has no such valid time
    tree = xr.open_datatree(path, engine=ENGINE, time_dims=("valid_time",), filter_by_keys={"time": "1200"})
    assert [node.ds.t2m.dims for node in tree.subtree if "t2m" in node.ds] == [("valid_time", "latitude", "longitude")]


def test_time_dims_valid_time_past_nanoseconds_is_its_keys_with_a_warning(tmp_path):
    """2026-04-04 + 2562047 h is past datetime64[ns] (numpy would wrap it to 1733): no
    ``valid_time``, the fields told apart by their step key, as any dimension that does not
    decode."""
    tensogram = pytest.importorskip("tensogram")
    desc = {"type": "ntensor", "shape": [2], "dtype": "float64", "byte_order": "little",
            "encoding": "none", "filter": "none", "compression": "none"}
    path = tmp_path / "late.tgm"
    with open(path, "wb") as f:
        for step in (0, 2562047):
            meta = {"base": [{"mars": {"param": "t", "date": "20260404", "time": "0000", "step": step}}]}
            f.write(tensogram.encode(meta, [(desc, np.full(2, float(step)))]))
    with pytest.warns(UserWarning, match=rf"{path}: valid_time = 2026-04-04.* is beyond what datetime64\[ns\]"):
        late = xr.open_dataset(path, engine=ENGINE, index=False, time_dims=("valid_time",))
    with late:
        assert late.t.dims == ("mars.step", "dim_0") and "valid_time" not in late.coords
        assert late.t.values[:, 0].tolist() == [0.0, 2562047.0]


@pytest.mark.parametrize("time_dims, error, message", [
    (("forecastMonth",), ValueError, r"cfgrib computes 'forecastMonth' from ecCodes' forecastMonth"),
    (("time", "indexing_time"), ValueError, r"'indexing_time' from ecCodes' indexingDate"),
    (("valid_time", "nope"), ValueError, r"'nope' is not one of \('time', 'step', 'valid_time'\)"),
    ((), ValueError, r"time_dims=\(\): name at least one of"),
    (("time", "time"), ValueError, r"names a dimension twice"),
    ("valid_time", TypeError, r"time_dims must be a sequence of names such as \('valid_time',\)"),
])
def test_time_dims_the_planner_cannot_build_are_refused(two_runs, time_dims, error, message):
    path, _ = two_runs
    with pytest.raises(error, match=message) as err:
        xr.open_dataset(path, engine=ENGINE, time_dims=time_dims)
    assert str(path) in str(err.value)
