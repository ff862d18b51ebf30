"""``threads=``: every entry point that takes it checks it the same way (``tgm_xarray.threads``),
before any read: ``None`` or an integer from 1 to ``MAX_THREADS``, else a ``ValueError`` naming
``threads``, the value and, where there is one, the file."""

from __future__ import annotations

import asyncio
import re
import shutil

import numpy as np
import pytest
import xarray as xr

import tgm_xarray
from tests.helpers.matrix import small_file
from tgm_xarray.threads import MAX_THREADS, check_threads

BAD = [0, -1, MAX_THREADS + 1, 10**6, True, 2.0, "4"]
GOOD = [None, 1, 2, MAX_THREADS, np.int64(2)]


def _message(value) -> str:
    return re.escape(f"threads must be None or an integer from 1 to {MAX_THREADS}; got {value!r}")


@pytest.fixture(scope="module")
def path(tmp_path_factory) -> str:
    return small_file(tmp_path_factory.mktemp("threads") / "small.tgm", messages=2)


@pytest.mark.parametrize("value", GOOD, ids=repr)
def test_allowed_values(value):
    assert check_threads(value) == value and type(check_threads(value)) in (int, type(None))


@pytest.mark.parametrize("value", BAD, ids=repr)
def test_open_dataset(path, value):
    with pytest.raises(ValueError, match=re.escape(path) + ".*" + _message(value)):
        xr.open_dataset(path, engine="tgm", threads=value, index=False)


@pytest.mark.parametrize("value", BAD, ids=repr)
def test_open_groups(path, value):
    with pytest.raises(ValueError, match=re.escape(path) + ".*" + _message(value)):
        xr.open_groups(path, engine="tgm", threads=value, index=False)


@pytest.mark.parametrize("value", BAD, ids=repr)
def test_file_read(path, value):
    f = tgm_xarray.open_file(path)
    with pytest.raises(ValueError, match=re.escape(path) + ".*" + _message(value)):
        f.read(0, 0, threads=value)
    np.testing.assert_array_equal(f.read(0, 0, threads=2), f.read(0, 0))  # the file still reads


@pytest.mark.parametrize("value", BAD, ids=repr)
def test_zarr_codec(value):
    from tgm_xarray.zarr_codec import TensogramCodec, TensogramFrameCodec

    with pytest.raises(ValueError, match=_message(value)):
        TensogramCodec(threads=value)
    with pytest.raises(ValueError, match=_message(value)):
        TensogramFrameCodec(descriptor={"shape": [3]}, threads=value)


def test_allowed_values_read_alike(path):
    f = tgm_xarray.open_file(path)
    whole = f.read(1, 0)
    for value in GOOD:
        np.testing.assert_array_equal(f.read(1, 0, threads=value), whole)
        with xr.open_dataset(path, engine="tgm", threads=value, index=False) as ds:
            assert ds["v"].load().notnull().all()


@pytest.mark.parametrize("value", BAD, ids=repr)
def test_remote_reads(range_server, path, value):
    pytest.importorskip("fsspec")
    pytest.importorskip("aiohttp")
    shutil.copyfile(path, range_server.root / "small.tgm")
    url = range_server.url("small.tgm")
    f = tgm_xarray.open_file(url)
    expected = re.escape(url) + ".*" + _message(value)
    with pytest.raises(ValueError, match=expected):
        f.read(0, 0, threads=value)
    with pytest.raises(ValueError, match=expected):
        f.handle.read(0, 0, threads=value)
    with pytest.raises(ValueError, match=expected):
        asyncio.run(f.handle.read_async(0, 0, threads=value))
    with pytest.raises(ValueError, match=expected):
        xr.open_dataset(url, engine="tgm", threads=value, index=False)
