"""Upstream tensogram-xarray 0.24's documented keywords and behaviours on our engine.

Each test opens the same file with upstream's engine class and with ours and compares; the
deliberate differences are listed in docs/mapping.md (section 10) and tested here as such. Never
by engine name "tensogram": both packages register it. Upstream's package is not in the test
environment: this module runs in a subprocess that has it (tests/helpers/upstream.py).
"""

from __future__ import annotations

import inspect
import shutil

import numpy as np
import pytest
import xarray as xr

from tests.helpers import upstream
from tests.helpers.shared import require_shared
from tgm_xarray.backend import TensogramBackendEntrypoint as Ours
from tgm_xarray.errors import TgmHashMismatchError, TgmIndexError
from tgm_xarray.source import handles

upstream.only_in_isolation()
tensogram = pytest.importorskip("tensogram")
upstream_backend = pytest.importorskip("tensogram_xarray.backend")
Upstream = upstream_backend.TensogramBackendEntrypoint


def _open_both(path, **kwargs) -> tuple[xr.Dataset, xr.Dataset]:
    return (xr.open_dataset(path, engine=Upstream, **kwargs).load(),
            xr.open_dataset(path, engine=Ours, **kwargs).load())


def _assert_same_data(upstream: xr.Dataset, ours: xr.Dataset, dims: bool = True) -> None:
    assert sorted(upstream.data_vars) == sorted(ours.data_vars)
    for name in upstream.data_vars:
        if dims:
            assert upstream[name].dims == ours[name].dims, name
        np.testing.assert_array_equal(upstream[name].values, ours[name].values, err_msg=name)


def _write_unhashed(path) -> None:
    data = np.arange(12, dtype=np.float32).reshape(3, 4)
    descriptor = {"type": "ntensor", "shape": [3, 4], "dtype": "float32", "byte_order": "little",
                  "encoding": "none", "filter": "none", "compression": "none"}
    with open(path, "wb") as f:
        f.write(tensogram.encode({"base": [{"name": "field"}]}, [(descriptor, data)], hash=None))


def test_every_upstream_keyword_is_accepted():
    upstream = inspect.signature(Upstream.open_dataset).parameters
    ours = inspect.signature(Ours.open_dataset).parameters
    missing = [name for name in upstream if name != "self" and name not in ours]
    assert not missing
    assert set(upstream) - {"self"} <= set(Ours.open_dataset_parameters)


def test_guess_can_open_tgm_paths(shared_dir):
    path = shared_dir / "fixtures" / "upstream" / "golden" / "simple_f32.tgm"
    require_shared(path)
    assert Upstream().guess_can_open(str(path)) and Ours().guess_can_open(str(path))


@pytest.mark.parametrize("name", ["simple_f32.tgm", "hash_xxh3.tgm", "mars_metadata.tgm"])
def test_single_message_files_read_the_same(shared_dir, name):
    path = shared_dir / "fixtures" / "upstream" / "golden" / name
    require_shared(path)
    _assert_same_data(*_open_both(path))


@pytest.mark.parametrize("message_index", [0, 1, 2, 3])
def test_message_index(ifs_file, message_index):
    require_shared(ifs_file)
    upstream, ours = _open_both(ifs_file, message_index=message_index)
    _assert_same_data(upstream, ours)
    np.testing.assert_array_equal(upstream["latitude"].values, ours["latitude"].values)


@pytest.mark.parametrize("message_index", [-1, 4])
def test_message_index_out_of_range_is_a_value_error(ifs_file, message_index):
    require_shared(ifs_file)
    with pytest.raises(ValueError):
        xr.open_dataset(ifs_file, engine=Upstream, message_index=message_index)
    with pytest.raises(TgmIndexError):  # a ValueError (and an IndexError)
        xr.open_dataset(ifs_file, engine=Ours, message_index=message_index)


def test_variable_key(ifs_file):
    require_shared(ifs_file)
    upstream, ours = _open_both(ifs_file, variable_key="grib.shortName", message_index=3)
    assert list(ours.data_vars) == ["t"]
    _assert_same_data(upstream, ours)


def test_dim_names_sequence(shared_dir):
    path = shared_dir / "fixtures" / "upstream" / "golden" / "simple_f32.tgm"
    require_shared(path)
    upstream, ours = _open_both(path, dim_names=["x"])
    assert ours["object_0"].dims == ("x",)
    _assert_same_data(upstream, ours)


def test_drop_variables(shared_dir):
    path = shared_dir / "fixtures" / "upstream" / "golden" / "multi_object.tgm"
    require_shared(path)
    upstream, ours = _open_both(path, drop_variables=["object_1"])
    assert sorted(ours.data_vars) == ["object_0", "object_2"]
    _assert_same_data(upstream, ours)  # generic axis names at two sizes too (obj_<i>_dim_<axis>)


@pytest.mark.parametrize("range_threshold", [0.0, 0.5, 1.0])
def test_range_threshold_is_accepted(ifs_file, range_threshold):
    require_shared(ifs_file)
    upstream = xr.open_dataset(ifs_file, engine=Upstream, message_index=1, range_threshold=range_threshold)
    ours = xr.open_dataset(ifs_file, engine=Ours, message_index=1, range_threshold=range_threshold)
    np.testing.assert_array_equal(upstream["lsm"][100:110, 5:9].values, ours["lsm"][100:110, 5:9].values)


def test_verify_hash_on_hashed_objects(shared_dir):
    path = shared_dir / "fixtures" / "upstream" / "golden" / "hash_xxh3.tgm"
    require_shared(path)
    _assert_same_data(*_open_both(path, verify_hash=True))


def test_verify_hash_on_unhashed_objects_raises_at_the_first_read(tmp_path):
    """Both open lazily and raise on the first read; the types are each package's own
    (docs/mapping.md section 10): upstream's ``tensogram.MissingHashError``, our
    ``TgmHashMismatchError`` (a ``ValueError``)."""
    path = tmp_path / "unhashed.tgm"
    _write_unhashed(path)
    upstream = xr.open_dataset(path, engine=Upstream, verify_hash=True)
    ours = xr.open_dataset(path, engine=Ours, verify_hash=True)
    with pytest.raises(tensogram.MissingHashError):
        upstream.load()
    with pytest.raises(TgmHashMismatchError, match="written without a hash") as err:
        ours.load()
    assert str(path) in str(err.value)
    # without verify_hash both read it
    _assert_same_data(*_open_both(path))


def test_storage_options_in_object_store_spelling_over_http(range_server, ifs_file):
    """``allow_http`` (object_store's switch, what upstream's users pass) is accepted."""
    pytest.importorskip("fsspec")
    pytest.importorskip("aiohttp")
    require_shared(ifs_file)
    shutil.copy(ifs_file, range_server.root / "ifs.tgm")
    url = range_server.url("ifs.tgm")
    for options in ({"allow_http": True}, {"allow_http": "true"}):
        upstream = xr.open_dataset(url, engine=Upstream, message_index=2, storage_options=options)
        ours = xr.open_dataset(url, engine=Ours, message_index=2, storage_options=options)
        _assert_same_data(upstream.load(), ours.load())


@pytest.fixture
def s3_bucket(monkeypatch, ifs_file, s3_endpoint):
    """The IFS file in a bucket of a loopback S3 server; yields the server's endpoint."""
    s3fs = pytest.importorskip("s3fs")
    require_shared(ifs_file)
    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.delenv(key, raising=False)
    handles.CACHE.clear()  # a URL of an earlier server (the same bucket and path) is not reused
    fs = s3fs.S3FileSystem(endpoint_url=s3_endpoint, key="testing", secret="testing", skip_instance_cache=True)
    fs.makedirs("compat", exist_ok=True)  # moto's buckets outlive its servers in one process
    fs.put(str(ifs_file), "compat/ifs.tgm")
    yield s3_endpoint
    handles.CACHE.clear()


def test_storage_options_in_object_store_spelling_over_s3(s3_bucket, ifs_file):
    options = {"aws_endpoint": s3_bucket, "allow_http": "true", "aws_access_key_id": "testing",
               "aws_secret_access_key": "testing", "aws_region": "us-east-1"}
    with xr.open_dataset("s3://compat/ifs.tgm", engine=Ours, storage_options=options) as remote, \
            xr.open_dataset(ifs_file, engine=Ours) as local:
        xr.testing.assert_identical(remote.load(), local.load())


def test_fsspec_options_translation():
    from tgm_xarray.source.fetcher import fsspec_options

    assert fsspec_options("https://h/f.tgm", {"allow_http": True, "headers": {"a": "b"}}) == {"headers": {"a": "b"}}
    assert fsspec_options("s3://b/f.tgm", {"aws_endpoint": "http://e", "aws_region": "eu-west-1",
                                           "aws_skip_signature": "true", "client_kwargs": {"x": 1}}) == {
        "endpoint_url": "http://e", "anon": True, "client_kwargs": {"x": 1, "region_name": "eu-west-1"}}
    # fsspec's own spelling wins over object_store's
    assert fsspec_options("s3://b/f.tgm", {"key": "k", "aws_access_key_id": "other"}) == {"key": "k"}
