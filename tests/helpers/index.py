"""Opening files with and without their persistent index (``tgm_xarray.plans.index``)."""

from __future__ import annotations

import os
import warnings

import xarray as xr

from tests.helpers.oracle import ENGINE
from tgm_xarray.errors import TgmIndexWarning
from tgm_xarray.plans import index
from tgm_xarray.source import handles


def open_cold(path, **kwargs) -> xr.Dataset:
    with xr.open_dataset(path, engine=ENGINE, index=False, **kwargs) as ds:
        return ds.load()


def open_quietly(path, **kwargs) -> xr.Dataset:
    """Opens ``path``, failing on any index warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", TgmIndexWarning)
        return xr.open_dataset(path, engine=ENGINE, **kwargs)


def cache_files(tmp_path) -> list[str]:
    """The cache directory's files but this user's key."""
    return sorted(name for name in os.listdir(tmp_path / "cache") if name != index.KEY_FILE)


def assert_warm(path, **kwargs) -> xr.Dataset:
    """Opens ``path`` from its index: the data file is not opened until a value is read."""
    opens = handles.CACHE.opens
    ds = open_quietly(path, **kwargs)
    assert handles.CACHE.opens == opens, "the warm open opened the data file"
    return ds
