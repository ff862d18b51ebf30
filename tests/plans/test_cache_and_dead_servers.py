"""The index cache keeps a bounded size, least recently used indexes evicted first, and the
``tgm-xarray cache`` command lists and prunes it (docs/archives.md, "The cache's size"); a host
that refuses connections gets one retry cycle, the data's, and no warning about its index
(docs/remote.md, "The index beside a URL"). Real files, real sockets on loopback."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import tgm_xarray
from tgm_xarray.errors import RemoteConnectionError, TgmIndexWarning
from tgm_xarray.plans import index
from tgm_xarray.source import fetcher, handles

# Environment variables and module settings are patched: not for pytest-run-parallel.
pytestmark = pytest.mark.thread_unsafe

CLI = [sys.executable, "-m", "tgm_xarray.cli"]
ENGINE = "tgm"
CACHE_MB_ENV = "TGM_XARRAY_CACHE_MB"  # the setting users know by name


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch) -> Path:
    """Each test its own cache directory and a fresh handle cache."""
    directory = tmp_path / "cache"
    monkeypatch.setenv(index.CACHE_DIR_ENV, str(directory))
    monkeypatch.delenv(CACHE_MB_ENV, raising=False)
    handles.CACHE.clear()
    yield directory
    handles.CACHE.clear()


def write_file(tmp_path, n: int) -> str:
    """A small ``.tgm`` file of our writer's, its values ``n``."""
    ds = xr.Dataset({"t": (("y", "x"), np.full((4, 5), n, "f4"))},
                    coords={"y": np.arange(4.0), "x": np.arange(5.0)})
    path = str(tmp_path / f"f{n}.tgm")
    tgm_xarray.to_tgm(ds, path)
    return path


def open_quietly(path: str) -> None:
    """Opens ``path`` (writing or using its cache index), failing on any index warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", TgmIndexWarning)
        with xr.open_dataset(path, engine=ENGINE) as ds:
            ds.load()


def cache_files(cache: Path) -> set[str]:
    return {p.name for p in cache.iterdir()}


def run_cli(*args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *args], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **(env or {})})


# --------------------------------------------------------------------------------------------
# The cache's size


def test_past_its_limit_the_cache_evicts_the_least_recently_used_index(tmp_path, cache, monkeypatch):
    paths = [write_file(tmp_path, n) for n in range(4)]
    open_quietly(paths[0])
    size = os.path.getsize(index.cached(paths[0]))
    # room for three and a half indexes of this size
    monkeypatch.setenv(CACHE_MB_ENV, str(3.5 * size / 2**20))
    for path in paths[1:3]:
        open_quietly(path)
    for age, path in enumerate(paths[:3]):  # written in this order, long ago (no clock needed)
        os.utime(index.cached(path), (1000 + age, 1000 + age))
    open_quietly(paths[0])  # a warm open: its index becomes the most recently used
    assert os.path.getmtime(index.cached(paths[0])) > 2000
    open_quietly(paths[3])  # a fourth index: the least recently used, f1's, goes
    assert cache_files(cache) == {index.KEY_FILE, *(os.path.basename(index.cached(paths[i])) for i in (0, 2, 3))}


def test_a_limit_of_zero_writes_no_index_into_the_cache(tmp_path, cache, monkeypatch):
    monkeypatch.setenv(CACHE_MB_ENV, "0")
    path = write_file(tmp_path, 0)
    open_quietly(path)
    assert not cache.exists() or not any(cache.glob(f"*{index.SUFFIX}"))
    run = run_cli("index", path)
    assert run.returncode == 1
    assert f"{index.cached(path)}: the index could not be written: the cache is off ({CACHE_MB_ENV}=0)" \
        in run.stderr


def test_a_limit_that_is_not_a_number_warns_and_keeps_the_default(monkeypatch):
    monkeypatch.setenv(CACHE_MB_ENV, "lots")
    with pytest.warns(TgmIndexWarning, match=rf"{CACHE_MB_ENV}='lots' is not a number of megabytes"):
        assert index.cache_limit() == index.CACHE_MB * 2**20


def test_cache_list_and_prune_remove_only_indexes(tmp_path, cache):
    paths = [write_file(tmp_path, n) for n in range(3)]
    for age, path in enumerate(paths):
        open_quietly(path)
        os.utime(index.cached(path), (1000 + age, 1000 + age))
    size = os.path.getsize(index.cached(paths[0]))
    foreign = ["notes.txt", "f0.tgm.tgmidx", "0" * 31 + index.SUFFIX]  # not names the cache gives
    for name in foreign:
        (cache / name).write_text("not ours")
    (cache / ("a" * 32 + index.SUFFIX)).mkdir()  # an index's name, but a directory

    listed = run_cli("cache", "list")
    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.startswith(f"{cache}: 3 indexes, ")

    pruned = run_cli("cache", "prune", "--max-mb", str(1.5 * size / 2**20))
    assert pruned.returncode == 0, pruned.stderr
    assert pruned.stdout.startswith(f"{cache}: removed 2 indexes (")
    assert pruned.stdout.rstrip().endswith("1 index, " + f"{size / 1024:.1f} KiB left")
    assert os.path.exists(index.cached(paths[2]))  # the most recently used stays

    everything = run_cli("cache", "prune", "--all")
    assert everything.returncode == 0, everything.stderr
    assert cache_files(cache) == {index.KEY_FILE, *foreign, "a" * 32 + index.SUFFIX}
    assert run_cli("cache", "list").stdout.startswith(f"{cache}: 0 indexes, 0 bytes")


def test_cache_prune_refuses_a_size_that_is_not_one():
    run = run_cli("cache", "prune", "--max-mb", "-1")
    assert run.returncode == 2
    assert "--max-mb: '-1' is not a number of megabytes" in run.stderr


# --------------------------------------------------------------------------------------------
# A host that refuses connections


class Requests:
    """aiohttp's own request hooks (``trace_configs``), counting the requests made per URL
    path: each try of a fetch is one request, whether or not a connection was made."""

    def __init__(self) -> None:
        import aiohttp

        self.paths: list[str] = []
        self.trace = aiohttp.TraceConfig()

        async def started(session, context, params) -> None:
            self.paths.append(params.url.path)

        self.trace.on_request_start.append(started)

    def options(self) -> dict:
        return {"client_kwargs": {"trace_configs": [self.trace]}}


def closed_port() -> int:
    """A port on loopback that nothing listens on: bound, noted and closed."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("index_mode", ["auto", False])
def test_a_refused_connection_is_one_retry_cycle_and_one_error(monkeypatch, index_mode):
    pytest.importorskip("aiohttp")
    monkeypatch.setattr(fetcher, "BACKOFF", 0.01)
    url = f"http://127.0.0.1:{closed_port()}/x.tgm"
    requests = Requests()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(RemoteConnectionError, match=rf"{url}: .*failed after {fetcher.RETRIES} tries: "
                                                        "connection refused"):
            xr.open_dataset(url, engine=ENGINE, index=index_mode, storage_options=requests.options())
    assert [str(w.message) for w in caught if issubclass(w.category, TgmIndexWarning)] == []
    index_tries = 1 if index_mode else 0  # the index beside the URL is tried once, not retried
    assert requests.paths == ["/x.tgm" + index.SUFFIX] * index_tries + ["/x.tgm"] * fetcher.RETRIES


@pytest.mark.parametrize("index_mode", ["auto", False])
def test_a_refused_s3_endpoint_is_one_retry_cycle_and_one_error(monkeypatch, index_mode):
    """As over HTTP, for botocore's ``EndpointConnectionError`` (s3fs over aiobotocore): the index
    tried once, quietly, the data's request retried, one error naming the URL. botocore's own
    retries are off (one attempt per try), so each request botocore sends is one try of ours."""
    pytest.importorskip("s3fs")
    import fsspec
    import fsspec.asyn

    monkeypatch.setattr(fetcher, "BACKOFF", 0.01)
    options = {"endpoint_url": f"http://127.0.0.1:{closed_port()}", "key": "testing", "secret": "testing",
               "config_kwargs": {"retries": {"total_max_attempts": 1, "mode": "standard"}}}
    url = "s3://bucket/x.tgm"
    fs, _ = fsspec.core.url_to_fs(url, **options)  # the instance the open uses (fsspec's cache)
    fsspec.asyn.sync(fs.loop, fs.set_session)
    sent: list[str] = []
    fs.s3.meta.events.register("before-send.s3", lambda request, **_: sent.append(request.url))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pytest.raises(RemoteConnectionError, match=rf"{url}: .*failed after {fetcher.RETRIES} tries: "
                                                        "connection refused"):
            xr.open_dataset(url, engine=ENGINE, index=index_mode, storage_options=options)
    assert [str(w.message) for w in caught if issubclass(w.category, TgmIndexWarning)] == []
    endpoint = options["endpoint_url"] + "/bucket/x.tgm"
    assert sent == [endpoint + index.SUFFIX] * (1 if index_mode else 0) + [endpoint] * fetcher.RETRIES
