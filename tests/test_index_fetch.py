"""Getting an index goes through the data's guarded fetch path (docs/remote.md, docs/archives.md):
a missing, forbidden, failing, cut-short, endless, oversized or stalled index beside a URL, a URL
whose index cannot be named, and a local index path that is not a regular file all open the data
file cold (a ``TgmIndexWarning`` where something is wrong), with the values of a cold open; a
stalled data server fails early, saying so. Every request goes to a server on loopback."""

from __future__ import annotations

import os
import shutil
import threading
import warnings
from pathlib import Path

import pytest
import xarray as xr
from conftest import ENGINE

pytest.importorskip("fsspec")
pytest.importorskip("aiohttp")

import tgm_xarray  # noqa: E402
from range_server import Fault  # noqa: E402
from tgm_xarray import handles, index, remote  # noqa: E402
from tgm_xarray.errors import RemoteTimeoutError, TgmIndexWarning  # noqa: E402

# Environment variables and module settings are patched: not for pytest-run-parallel.
pytestmark = pytest.mark.thread_unsafe

NAME = "archive.tgm"
INDEX_PATH = f"/{NAME}{index.SUFFIX}"  # the index beside the data, as the server sees its path


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> tuple[Path, xr.Dataset]:
    """100 messages of upstream ``tensogram``'s writing with their index beside them, and their
    values opened cold."""
    from remote_archive import write_archive

    pytest.importorskip("tensogram")
    path = Path(write_archive(tmp_path_factory.mktemp("built") / NAME, 100))
    with xr.open_dataset(path, engine=ENGINE, index=False) as ds:
        cold = ds.load()
    with xr.open_dataset(path, engine=ENGINE, index="beside"):
        pass
    assert Path(f"{path}{index.SUFFIX}").is_file()
    return path, cold


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch):
    """Each test its own cache directory and a fresh handle cache; quick retries."""
    monkeypatch.setenv(index.CACHE_DIR_ENV, str(tmp_path / "cache"))
    monkeypatch.setattr(remote, "BACKOFF", 0.01)
    handles.CACHE.clear()
    yield
    handles.CACHE.clear()


@pytest.fixture
def served(range_server, built) -> str:
    """The archive and its index on the loopback server; the data's URL."""
    path, _ = built
    shutil.copyfile(path, range_server.root / NAME)
    shutil.copyfile(f"{path}{index.SUFFIX}", range_server.root / f"{NAME}{index.SUFFIX}")
    return range_server.url(NAME)


def test_a_stalled_data_server_is_reported_early_as_stalled(range_server, served, monkeypatch):
    monkeypatch.setenv(remote.IDLE_TIMEOUT_ENV, "0.2")  # the deadline stays at its default 120 s
    range_server.faults[f"/{NAME}"] = Fault(hang=True)
    with pytest.raises(RemoteTimeoutError, match=rf"{served}: reading bytes 0-\d+ failed after {remote.RETRIES} "
                                                 r"tries: the server stalled: no byte for 0.2 s") as err:
        tgm_xarray.open_file(served)
    assert "deadline" not in str(err.value)
    assert range_server.count(f"/{NAME}") == remote.RETRIES


def test_a_stalled_read_after_opening_is_reported_as_stalled(range_server, served, monkeypatch):
    monkeypatch.setenv(remote.IDLE_TIMEOUT_ENV, "0.2")
    f = tgm_xarray.open_file(served)
    range_server.faults[f"/{NAME}"] = Fault(hang=True)
    with pytest.raises(RemoteTimeoutError, match=rf"{served}: reading bytes .* the server stalled"):
        f.read(len(f) - 1, 0)
