"""Virtual Zarr references over ``.tgm`` files (``tgm_xarray.virtual``): the parser's store, read
through zarr alone, equals the engine bit for bit on every shared fixture and on files upstream
and our writer produce; references point at each object's own bytes; Icechunk commits, appends
and reopens; stale or tampered bytes fail instead of decoding. Real files, real Icechunk
repositories on disk, a real HTTP server on loopback."""

from __future__ import annotations

import asyncio
import importlib
import json
import os
import shutil
import sys
from importlib.metadata import version
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

for _package in ("virtualizarr", "icechunk", "obstore"):
    try:
        importlib.import_module(_package)
    except ImportError as _err:  # no free-threaded wheels of these (pyproject.toml: test-gil)
        free_threaded = not getattr(sys, "_is_gil_enabled", lambda: True)()
        pytest.skip(f"{_package} is not installed ({'no free-threaded wheel; ' if free_threaded else ''}"
                    f"pip install 'tgm-xarray[virtual]'): {_err}", allow_module_level=True)

import icechunk  # noqa: E402
from obspec_utils.registry import ObjectStoreRegistry  # noqa: E402
from obstore.store import HTTPStore  # noqa: E402
from virtualizarr import open_virtual_dataset, open_virtual_mfdataset  # noqa: E402
from virtualizarr.manifests import ManifestArray, ManifestGroup, ManifestStore  # noqa: E402

import tgm_xarray  # noqa: E402
from tests.helpers.matrix import Spec, write_message_file  # noqa: E402
from tests.helpers.oracle import ENGINE  # noqa: E402
from tests.helpers.shared import FIXTURES, require_shared, shared_files  # noqa: E402
from tests.helpers.virtual import LOCAL, assert_identical_bits, commit, engine, forecast_file, frame_spans, parse  # noqa: E402
from tgm_xarray import _core  # noqa: E402
from tgm_xarray.errors import TgmError  # noqa: E402
from tgm_xarray.hypercube import PlanOptions  # noqa: E402
from tgm_xarray.source import handles  # noqa: E402
from tgm_xarray.source.remote import RemoteHandle  # noqa: E402
from tgm_xarray.virtual import TensogramParser, _StoreFetcher, local_repository, no_credentials  # noqa: E402
from tgm_xarray.zarr_codec import TensogramCodec, TensogramFrameCodec  # noqa: E402

# Files rewritten in place and Icechunk repositories: not for pytest-run-parallel.
pytestmark = pytest.mark.thread_unsafe


def engine_steps(paths, **options) -> xr.Dataset:
    """The engine's files, one step each, concatenated along ``step``. ``coords`` and ``compat``
    as the tests always had them: xarray's defaults until they change (with a FutureWarning)."""
    return xr.open_mfdataset(paths, engine=ENGINE, combine="nested", concat_dim="step", coords="different",
                             compat="no_conflicts", **options)


def assert_parity(path, **options) -> None:
    """The parser's store read through ``xr.open_zarr`` equals the engine's Dataset."""
    try:
        expected = engine(path, **options)
    except TgmError as err:  # a file the engine refuses must fail the same way
        with pytest.raises(type(err)):
            parse(path, **options)
        return
    with expected, xr.open_zarr(parse(path, **options), consolidated=False, zarr_format=3,
                                chunks=None) as actual:
        assert_identical_bits(actual, expected, str(path))


def test_no_credentials_is_the_value_of_the_installed_icechunk():
    """``None`` on Icechunk 1 (Python 3.11); Icechunk 2's explicit values, as ``None`` is
    deprecated there (the newest lane fails on our deprecation warnings)."""
    if int(version("icechunk").split(".")[0]) < 2:
        assert no_credentials("file:///data/") is None and no_credentials("http://host/") is None
        return
    assert no_credentials("file:///data/") is icechunk.credentials.LocalFileSystemAccess
    assert no_credentials("https://host/fc/") is icechunk.credentials.HttpAccess
    with pytest.raises(ValueError, match="s3://bucket/"):
        no_credentials("s3://bucket/")


def reopen(repo: icechunk.Repository) -> xr.Dataset:
    return xr.open_zarr(repo.readonly_session("main").store, consolidated=False, zarr_format=3, chunks=None)


# --------------------------------------------------------------------------------------------
# Parity with the engine
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", shared_files("upstream/golden/*.tgm", "upstream/remote-parity/*.tgm",
                                              "real/*.tgm"))
def test_shared_fixtures_read_back_identical_to_the_engine(path):
    assert_parity(path)


def test_the_codec_matrix_reads_back_identical(matrix_paths):
    """Every encoding, filter and compression upstream writes, NaN/Inf masks, big-endian objects,
    integers, complex, float16, unhashed frames."""
    for path in matrix_paths:
        assert_parity(path)


def test_our_writer_reads_back_identical(tmp_path, ifs_file):
    with engine(ifs_file) as ds:
        source = ds.load()
    out = tmp_path / "ours.tgm"
    tgm_xarray.to_tgm(source, out, encoding={"2t": {"bits": 16}})
    assert_parity(out)


@pytest.mark.parametrize("compression", ["blosc2", "szip"])
def test_packed_float32_reads_back_float32_as_the_engine_does(tmp_path, compression):
    """A float32 variable packed to 16 bits is a float32 array of references, read straight into
    float32 (the frame codec's decode), the values the engine gives."""
    values = (250 + 30 * np.random.default_rng(5).random((3, 20, 30))).astype(np.float32)
    ds = xr.Dataset({"t": (("step", "y", "x"), values)}, coords={"step": np.array([0, 6, 12], "m8[h]")})
    out = tmp_path / "f32.tgm"
    tgm_xarray.to_tgm(ds, out, encoding={"t": {"bits": 16, "compression": compression}})
    with xr.open_zarr(parse(out), consolidated=False, zarr_format=3, chunks=None) as actual:
        assert actual["t"].dtype == np.float32
    assert_parity(out)


@pytest.mark.parametrize("options", [{"filter_by_keys": {"param": "2t"}}, {"message_index": 2},
                                     {"variable_key": "mars.param"}])
def test_engine_options_apply_to_the_references(ifs_file, options):
    assert_parity(ifs_file, **options)


def test_the_parser_takes_the_planners_keywords_and_names_a_wrong_one():
    """The parser passes the engine's planner keywords on to ``PlanOptions``, which checks them."""
    assert TensogramParser(variable_key="mars.param", squeeze=False).options == \
        PlanOptions(variable_key="mars.param", squeeze=False)
    with pytest.raises(TypeError, match=r"TensogramParser takes no keyword 'variable_keys'"):
        TensogramParser(variable_keys="mars.param")
    with pytest.raises(ValueError, match="duplicates"):
        TensogramParser(duplicates="any")


def test_a_group_of_the_datatree(ifs_file):
    with xr.open_datatree(ifs_file, engine=ENGINE) as tree:
        groups = [g for g in tree.groups if g != "/"]
        for group in groups:
            want = tree[group].to_dataset()
            with xr.open_zarr(parse(ifs_file, group=group), consolidated=False, zarr_format=3,
                              chunks=None) as got:
                assert_identical_bits(got, want, group)
    with pytest.raises(KeyError, match="no group"):
        parse(ifs_file, group="nope")


def test_open_virtual_datatree_has_the_engines_groups(tmp_path, ifs_file):
    from virtualizarr import open_virtual_datatree

    data = tmp_path / "data"
    data.mkdir()
    path = data / "ifs.tgm"
    shutil.copyfile(ifs_file, path)
    vdt = open_virtual_datatree(path.as_uri(), registry=LOCAL, parser=TensogramParser(groups=True))
    repo = local_repository(tmp_path / "repo", data)
    session = repo.writable_session("main")
    vdt.vz.to_icechunk(session.store)
    session.commit("every group")
    with xr.open_datatree(path, engine=ENGINE) as want, \
            xr.open_datatree(repo.readonly_session("main").store, engine="zarr", consolidated=False,
                             zarr_format=3, chunks=None) as got:
        groups = [g for g in want.groups if g != "/"]
        assert len(groups) > 1 and set(vdt.groups) == set(got.groups) == set(want.groups)
        for group in groups:
            assert_identical_bits(got[group].to_dataset(), want[group].to_dataset(), group)
    with pytest.raises(ValueError, match="one of them"):
        TensogramParser(group=groups[0], groups=True)


def test_one_chunk_per_object_referencing_its_frame(ifs_file):
    store = parse(ifs_file)
    spans = set(frame_spans(ifs_file).values())
    vds = store.to_virtual_dataset(loadable_variables=[])
    for name, variable in vds.variables.items():
        array = variable.data
        if not isinstance(array, ManifestArray):  # built from metadata: kept in memory, loaded
            assert name in store.inline_variables, name
            continue
        plan_refs = {}
        manifest = array.manifest
        for key, entry in manifest.dict().items():
            plan_refs[key] = (entry["offset"], entry["length"])
        assert set(plan_refs.values()) <= spans, name
        assert array.metadata.codecs[0].to_dict()["configuration"]["chunk"] == "frame"
        # Each range is a whole frame on its own: it decodes, its stored hash checked.
        data = Path(ifs_file).read_bytes()
        for offset, length in plan_refs.values():
            values = _core.read_frame(data[offset:offset + length], None, None, True, name)
            assert values.shape == array.metadata.chunks[-values.ndim:], name


# --------------------------------------------------------------------------------------------
# Icechunk and kerchunk
# --------------------------------------------------------------------------------------------


def test_icechunk_commit_reopens_identical(tmp_path, ifs_file):
    data = tmp_path / "data"
    data.mkdir()
    path = data / "ifs.tgm"
    shutil.copyfile(ifs_file, path)
    vds = open_virtual_dataset(path.as_uri(), registry=LOCAL, parser=TensogramParser())
    repo = local_repository(tmp_path / "repo", data)
    commit(repo, vds, "ifs sample")
    with engine(path) as want, reopen(local_repository(tmp_path / "repo", data)) as got:
        assert_identical_bits(got, want, "icechunk")


def test_appending_a_forecast_step_is_a_commit(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    # One level: each array of a file is one field, packed with its own range; the codec's
    # configuration must still be the same in every file.
    paths = [forecast_file(data / f"fc-{step:03d}.tgm", step, seed=step, levels=(500,)) for step in (0, 6, 12)]
    repo = local_repository(tmp_path / "repo", data)
    for i, path in enumerate(paths):
        vds = open_virtual_dataset(Path(path).as_uri(), registry=LOCAL, parser=TensogramParser(),
                                   drop_variables=["valid_time"])
        # One step per file is a scalar coordinate (as cfgrib has it): make it the dimension.
        commit(repo, vds.expand_dims("step"), f"step {i}", **({"append_dim": "step"} if i else {}))
    assert len(list(repo.ancestry(branch="main"))) == 4  # the repository's first commit, then ours
    with engine_steps(paths, drop_variables=["valid_time"]) as want, reopen(repo) as got:
        assert got.sizes["step"] == 3
        assert_identical_bits(got, want.load(), "appended")


def test_open_virtual_mfdataset_concatenates_steps(tmp_path):
    paths = [forecast_file(tmp_path / f"fc-{step:03d}.tgm", step, seed=step) for step in (0, 6)]
    vds = open_virtual_mfdataset([Path(p).as_uri() for p in paths], registry=LOCAL, parser=TensogramParser(),
                                 combine="nested", concat_dim="step")
    assert vds.sizes["step"] == 2
    repo = local_repository(tmp_path / "repo", tmp_path)
    commit(repo, vds, "two steps")
    with engine_steps(paths) as want, \
            reopen(repo) as got:
        assert_identical_bits(got, want.load(), "mfdataset")


def test_kerchunk_references_point_at_the_frames(ifs_file):
    vds = open_virtual_dataset(Path(ifs_file).resolve().as_uri(), registry=LOCAL, parser=TensogramParser())
    refs = vds.vz.to_kerchunk(format="dict")["refs"]
    spans = set(frame_spans(ifs_file).values())
    chunk_refs = [v for k, v in refs.items() if not k.endswith((".zarray", ".zattrs", ".zgroup"))
                  and isinstance(v, list)]
    assert chunk_refs and all((offset, length) in spans for _, offset, length in chunk_refs)
    # What docs/virtual.md warns of: kerchunk's Zarr v2 metadata has no place for the v3 codec.
    import json

    zarray = json.loads(refs["2t/.zarray"])
    assert zarray["compressor"] is None and not zarray["filters"]


# --------------------------------------------------------------------------------------------
# Wrong bytes never decode silently
# --------------------------------------------------------------------------------------------


def test_tampering_one_object_fails_only_its_chunk(tmp_path, ifs_file):
    path = tmp_path / "ifs.tgm"
    shutil.copyfile(ifs_file, path)
    store = parse(path)
    with engine(path) as want:
        want = want.load()
    offset, length = frame_spans(path)[2, 0]  # message 2: q at 150 hPa
    handles.CACHE.clear()
    with open(path, "r+b") as f:
        f.seek(offset + length // 2)
        byte = f.read(1)
        f.seek(offset + length // 2)
        f.write(bytes([byte[0] ^ 0xFF]))
    with xr.open_zarr(store, consolidated=False, zarr_format=3, chunks=None) as got:
        for name in want.data_vars:
            if name == "q":
                with pytest.raises(TgmError, match="hash"):
                    got[name].values
            else:
                assert_identical_bits(got[[name]], want[[name]], name)


def test_unhashed_frames_decode_what_the_bytes_say(tmp_path):
    spec = Spec("f", "float32", (4, 5), {"compression": "zstd"})
    path = write_message_file(tmp_path / "plain.tgm", [[spec]], hashed=False)
    assert_parity(path)


def test_a_rewritten_file_fails_through_icechunk(tmp_path):
    data = tmp_path / "data"
    data.mkdir()
    path = data / "fc.tgm"
    forecast_file(path, 0, seed=1)
    repo = local_repository(tmp_path / "repo", data)
    commit(repo, open_virtual_dataset(path.as_uri(), registry=LOCAL, parser=TensogramParser()), "fc")
    import os
    import time

    time.sleep(1.1)  # Icechunk keeps the commit time with one-second precision
    forecast_file(path, 0, seed=2)
    os.utime(path)
    with reopen(repo) as ds, pytest.raises(Exception, match="(?i)modified|changed|etag|last.modified"):
        ds["t"].values


def test_a_stale_reference_to_moved_bytes_is_a_clear_error(tmp_path):
    path = tmp_path / "fc.tgm"
    forecast_file(path, 0, seed=1)
    store = parse(path)
    with open(path, "r+b") as f:  # the frames now start elsewhere
        data = f.read()
        f.seek(0)
        f.write(data[64:] + data[:64])
    with xr.open_zarr(store, consolidated=False, zarr_format=3, chunks=None) as ds, pytest.raises(TgmError):
        ds["t"].values


# --------------------------------------------------------------------------------------------
# Remote files and the codec configuration
# --------------------------------------------------------------------------------------------


def test_http_references_read_back_identical(range_server, ifs_file):
    shutil.copyfile(ifs_file, range_server.root / "ifs.tgm")
    url = range_server.url("ifs.tgm")
    base = url.rsplit("/", 1)[0]
    registry = ObjectStoreRegistry({base: HTTPStore.from_url(base, client_options={"allow_http": True})})
    vds = open_virtual_dataset(url, registry=registry, parser=TensogramParser())
    assert {"2t", "lsm", "q", "t"} <= set(vds.data_vars)
    store = TensogramParser()(url, registry)
    with engine(ifs_file) as want, xr.open_zarr(store, consolidated=False, zarr_format=3, chunks=None) as got:
        assert_identical_bits(got, want, url)


def test_a_remote_handle_over_a_registrys_store_reads_async(range_server, ifs_file):
    """The parser's remote handle fetches through the registry's object store, from an event
    loop too (``_StoreFetcher.fetch_async``): objects equal the local file's."""
    shutil.copyfile(ifs_file, range_server.root / "ifs.tgm")
    url = range_server.url("ifs.tgm")
    base = url.rsplit("/", 1)[0]
    registry = ObjectStoreRegistry({base: HTTPStore.from_url(base, client_options={"allow_http": True})})
    store, path = registry.resolve(url)
    handle = RemoteHandle(url, fetcher=_StoreFetcher(url, store, str(path)))
    handle.parse_all()  # every message described: reads fetch their frame, nothing else

    async def first_objects(count: int) -> list[np.ndarray]:
        return await asyncio.gather(*(handle.read_async(msg, 0) for msg in range(count)))

    with tgm_xarray.open_file(ifs_file) as local:
        count = min(len(local), 4)
        for msg, got in enumerate(asyncio.run(first_objects(count))):
            np.testing.assert_array_equal(got, local.read(msg, 0))


def test_icechunk_reads_http_references_back_identical(tmp_path, ifs_file):
    """Committed to Icechunk with an http virtual chunk container and read back through zarr
    alone. Icechunk 1.x (what Python 3.11 gets) drops the port of an http location, so the
    loopback server must listen on port 80 (docs/virtual.md)."""
    from tests.helpers.range_server import RangeServer

    served = tmp_path / "served"
    served.mkdir()
    shutil.copyfile(ifs_file, served / "ifs.tgm")
    try:
        server = RangeServer(served, port=80).start()
    except OSError as err:  # not root, or port 80 taken
        pytest.skip(f"cannot serve on 127.0.0.1:80 ({err})")
    try:
        base = "http://127.0.0.1"
        registry = ObjectStoreRegistry({base: HTTPStore.from_url(base, client_options={"allow_http": True})})
        vds = open_virtual_dataset(f"{base}/ifs.tgm", registry=registry, parser=TensogramParser())
        config = icechunk.RepositoryConfig.default()
        config.set_virtual_chunk_container(
            icechunk.VirtualChunkContainer(f"{base}/", icechunk.http_store({"allow_http": "true"})))
        credentials = icechunk.containers_credentials({f"{base}/": no_credentials(f"{base}/")})
        repo = icechunk.Repository.create(icechunk.local_filesystem_storage(str(tmp_path / "repo")), config,
                                          authorize_virtual_chunk_access=credentials)
        commit(repo, vds, "over http")
        server.reset()
        with engine(ifs_file) as want, reopen(repo) as got:
            assert_identical_bits(got, want, "http references through Icechunk")
        assert server.count("/ifs.tgm", "GET") > 0  # the values came from the server
    finally:
        server.stop()


def test_open_virtual_mfdataset_over_local_paths(tmp_path):
    """Plain paths become absolute ``file://`` references, which Icechunk's containers match."""
    paths = [forecast_file(tmp_path / f"fc-{step:03d}.tgm", step, seed=step) for step in (0, 6)]
    relative = [os.path.relpath(p) for p in paths]
    vds = open_virtual_mfdataset(relative, registry=LOCAL, parser=TensogramParser(), combine="nested",
                                 concat_dim="step")
    refs = vds["t"].data.manifest.dict()
    assert {entry["path"] for entry in refs.values()} == {Path(p).resolve().as_uri() for p in paths}
    repo = local_repository(tmp_path / "repo", tmp_path)
    commit(repo, vds, "two steps")
    with engine_steps(paths) as want, \
            reopen(repo) as got:
        assert_identical_bits(got, want.load(), "local paths")


def test_open_virtual_mfdataset_over_http(range_server, tmp_path):
    paths = [forecast_file(range_server.root / f"fc-{step:03d}.tgm", step, seed=step) for step in (0, 6)]
    urls = [range_server.url(Path(p).name) for p in paths]
    base = urls[0].rsplit("/", 1)[0]
    registry = ObjectStoreRegistry({base: HTTPStore.from_url(base, client_options={"allow_http": True})})
    vds = open_virtual_mfdataset(urls, registry=registry, parser=TensogramParser(), combine="nested",
                                 concat_dim="step")
    assert {entry["path"] for entry in vds["q"].data.manifest.dict().values()} == set(urls)
    # Read back through the registry (Icechunk 1.x drops the port of an http location: docs/virtual.md).
    arrays = {name: var.data for name, var in vds.variables.items() if isinstance(var.data, ManifestArray)}
    assert {"t", "q"} <= set(arrays)
    store = ManifestStore(ManifestGroup(arrays=arrays, attributes={}), registry=registry)
    import zarr

    group = zarr.open_group(store, mode="r", zarr_format=3)
    with engine_steps(paths) as want:
        for name in arrays:
            expected = want[name].values
            assert group[name][...].tobytes() == expected.tobytes(), name


# S3, against moto's S3 server on loopback: obstore's S3Store through VirtualiZarr's registry.
S3_KEYS = {"access_key_id": "testing", "secret_access_key": "testing"}


@pytest.fixture
def s3_bucket(s3_endpoint):
    """``(S3Store, endpoint)`` of a fresh bucket on a moto server on loopback."""
    import boto3
    from obstore.store import S3Store

    endpoint = s3_endpoint
    bucket = f"forecasts-{endpoint.rsplit(':', 1)[1]}"  # moto's buckets outlive its servers in one process
    boto3.client("s3", endpoint_url=endpoint, region_name="us-east-1", aws_access_key_id="testing",
                 aws_secret_access_key="testing").create_bucket(Bucket=bucket)
    store = S3Store(bucket, endpoint=endpoint, region="us-east-1", client_options={"allow_http": True},
                    **S3_KEYS)
    return store, endpoint


def test_s3_references_read_back_identical(s3_bucket, ifs_file):
    import obstore

    store, _ = s3_bucket
    obstore.put(store, "ifs.tgm", Path(ifs_file).read_bytes())
    url = f"s3://{store.config['bucket']}/ifs.tgm"
    registry = ObjectStoreRegistry({f"s3://{store.config['bucket']}": store})
    vds = open_virtual_dataset(url, registry=registry, parser=TensogramParser())
    assert {"2t", "lsm", "q", "t"} <= set(vds.data_vars)
    assert {entry["path"] for entry in vds["t"].data.manifest.dict().values()} == {url}
    with engine(ifs_file) as want, xr.open_zarr(TensogramParser()(url, registry), consolidated=False,
                                                zarr_format=3, chunks=None) as got:
        assert_identical_bits(got, want, url)
    with pytest.raises(FileNotFoundError, match="missing.tgm"):
        TensogramParser()(url.replace("ifs.tgm", "missing.tgm"), registry)


def test_open_virtual_mfdataset_over_s3_into_icechunk(s3_bucket, tmp_path):
    import obstore

    store, endpoint = s3_bucket
    bucket = store.config["bucket"]
    paths = [forecast_file(tmp_path / f"fc-{step:03d}.tgm", step, seed=step) for step in (0, 6)]
    for p in paths:
        obstore.put(store, Path(p).name, Path(p).read_bytes())
    urls = [f"s3://{bucket}/{Path(p).name}" for p in paths]
    vds = open_virtual_mfdataset(urls, registry=ObjectStoreRegistry({f"s3://{bucket}": store}),
                                 parser=TensogramParser(), combine="nested", concat_dim="step")
    prefix = f"s3://{bucket}/"
    config = icechunk.RepositoryConfig.default()
    config.set_virtual_chunk_container(icechunk.VirtualChunkContainer(prefix, icechunk.s3_store(
        region="us-east-1", endpoint_url=endpoint, allow_http=True, s3_compatible=True, force_path_style=True)))
    credentials = icechunk.containers_credentials({prefix: icechunk.s3_credentials(**S3_KEYS)})
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(str(tmp_path / "repo")), config,
                                      authorize_virtual_chunk_access=credentials)
    commit(repo, vds, "two steps on s3")
    with engine_steps(paths) as want, \
            reopen(repo) as got:
        assert_identical_bits(got, want.load(), "s3")


def test_frame_configuration_round_trips():
    codec = TensogramFrameCodec(descriptor={"shape": [3, 4], "encoding": "none"})
    assert TensogramCodec.from_dict(codec.to_dict()) == codec  # zarr resolves "tensogram" to TensogramCodec
    assert TensogramFrameCodec.from_dict(codec.to_dict()) == codec
    assert codec.to_dict()["configuration"] == {"chunk": "frame", "descriptor": {"encoding": "none",
                                                                                 "shape": [3, 4]}, "hash": True}
    assert "chunk" not in TensogramCodec().to_dict()["configuration"]  # stored arrays unchanged
    with pytest.raises(ValueError, match="shape"):
        TensogramFrameCodec(descriptor={})
    with pytest.raises(ValueError, match="chunk"):
        TensogramCodec.from_dict({"name": "tensogram", "configuration": {"chunk": "object"}})
    with pytest.raises(ValueError, match="frame"):
        TensogramFrameCodec.from_dict(TensogramCodec().to_dict())
    with pytest.raises(TgmError, match="descriptor"):  # not a pipeline option
        TensogramCodec(descriptor={"shape": [1]})


#: The metadata of a variable of the parser's stores (the IFS file's 2 m temperature, attributes
#: left out) as tgm-xarray wrote it before the frame codec was a class of its own: stores and
#: references written then keep opening, with the same codec JSON.
FRAME_ARRAY_WRITTEN_BEFORE = """{
  "shape": [1, 721, 1440], "data_type": "float64",
  "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": [1, 721, 1440]}},
  "chunk_key_encoding": {"name": "default", "configuration": {"separator": "/"}},
  "fill_value": "NaN",
  "codecs": [{"name": "tensogram", "configuration": {"chunk": "frame", "descriptor": {
    "byte_order": "little", "compression": "szip", "dtype": "float64", "encoding": "simple_packing",
    "filter": "none", "params": {"sp_bits_per_value": 24, "sp_decimal_scale_factor": 0, "szip_block_size": 32,
    "szip_flags": 8, "szip_rsi": 128}, "shape": [721, 1440]}, "hash": true}}],
  "attributes": {}, "dimension_names": ["step", "latitude", "longitude"],
  "zarr_format": 3, "node_type": "array", "storage_transformers": []
}"""


def frame_array(path: Path, frame: bytes, codec: dict | None = None):
    """A zarr array on disk of ``FRAME_ARRAY_WRITTEN_BEFORE``'s metadata (its codec replaced by
    ``codec``) whose one chunk is ``frame``, opened by zarr."""
    import zarr

    metadata = json.loads(FRAME_ARRAY_WRITTEN_BEFORE)
    if codec is not None:
        metadata["codecs"] = [codec]
    path.mkdir()
    (path / "zarr.json").write_text(json.dumps(metadata))
    (path / "c" / "0" / "0").mkdir(parents=True)
    (path / "c" / "0" / "0" / "0").write_bytes(frame)
    return zarr.open_array(str(path), mode="r")


def the_2t_frame(ifs_file) -> bytes:
    offset, length = frame_spans(ifs_file)[0, 0]
    return Path(ifs_file).read_bytes()[offset:offset + length]


def test_frame_arrays_written_before_open_as_the_frame_codec(ifs_file, tmp_path):
    z = frame_array(tmp_path / "a", the_2t_frame(ifs_file))
    assert isinstance(z.serializer, TensogramFrameCodec)
    assert json.dumps(z.metadata.to_dict()["codecs"]) == json.dumps(json.loads(FRAME_ARRAY_WRITTEN_BEFORE)["codecs"])
    with engine(ifs_file) as want:
        np.testing.assert_array_equal(z[0], want["2t"].values, strict=True)
        np.testing.assert_array_equal(z[0, 100:110, 200:230], want["2t"].values[100:110, 200:230], strict=True)


def test_hash_false_skips_the_check_of_the_frames_stored_hash(ifs_file, tmp_path):
    """A frame whose stored hash is wrong (its last 12 bytes: the hash, then the end marker) but
    whose descriptor and payload are intact: refused by default, read with ``hash: false``."""
    frame = bytearray(the_2t_frame(ifs_file))
    frame[-12] ^= 0xFF
    codec = json.loads(FRAME_ARRAY_WRITTEN_BEFORE)["codecs"][0]
    with pytest.raises(TgmError, match="hash"):
        frame_array(tmp_path / "checked", bytes(frame), codec)[...]
    codec["configuration"]["hash"] = False
    with engine(ifs_file) as want:
        np.testing.assert_array_equal(frame_array(tmp_path / "unchecked", bytes(frame), codec)[0], want["2t"].values,
                                      strict=True)


def test_frame_arrays_are_read_only(tmp_path):
    import zarr

    codec = TensogramFrameCodec(descriptor={"shape": [2, 2]})
    z = zarr.create_array(str(tmp_path / "z.zarr"), shape=(1, 2, 2), chunks=(1, 2, 2), dtype="float64",
                          serializer=codec, compressors=None)
    with pytest.raises(TgmError, match="read-only"):
        z[:] = 1.0


def test_fixtures_exist():
    require_shared(FIXTURES)
