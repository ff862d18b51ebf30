"""cfgrib's habits on the IFS file: its variable names (``cfVarName``) and CF names (``cfName``)
as filters, and its ``backend_kwargs``."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

from conftest import ENGINE
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
    with pytest.warns(UserWarning, match=r"errors='raise', values_dtype=.* mean nothing to engine='tgm'"):
        xr.open_dataset(ifs_file, engine=ENGINE,
                        backend_kwargs={**kwargs, "errors": "raise", "values_dtype": np.float32}).close()
