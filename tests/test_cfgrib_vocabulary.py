"""cfgrib's habits on the IFS file: its variable names (``cfVarName``) and CF names (``cfName``)
as filters, its ``backend_kwargs``, and its level coordinate for height levels."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from conftest import ENGINE, FIXTURES, require_shared
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
    with pytest.warns(UserWarning, match=r"errors='raise' mean nothing to engine='tgm'"):
        xr.open_dataset(ifs_file, engine=ENGINE, backend_kwargs={**kwargs, "errors": "raise"}).close()
    with xr.open_dataset(ifs_file, engine=ENGINE, backend_kwargs={**kwargs, "values_dtype": np.float32}) as ds:
        assert ds["2t"].dtype == np.float32  # honoured, as cfgrib does


# --------------------------------------------------------------------------------------------
# cfgrib's level coordinate for height levels
# --------------------------------------------------------------------------------------------


def _cfgrib(grib: str) -> xr.Dataset:
    pytest.importorskip("cfgrib")  # no free-threaded wheel of eccodes
    path = require_shared(FIXTURES / "upstream" / "grib" / grib)
    with xr.open_dataset(path, engine="cfgrib", backend_kwargs={"indexpath": ""}) as ds:
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
            assert "grib.typeOfLevel" not in ours[name].attrs and "grib.level" not in ours[name].attrs


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
