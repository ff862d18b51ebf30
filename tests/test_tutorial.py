"""``tgm_xarray.tutorial``: the registry against the shared fixtures, and real pooch downloads from
a loopback HTTP server (``TGM_XARRAY_TUTORIAL_URL``): hash checks, the cache, offline reuse."""

from __future__ import annotations

import hashlib
import shutil
import socket
import subprocess
import sys

import pytest
import xarray as xr

from tests.helpers.oracle import ENGINE
from tests.helpers.shared import GOLDEN, REAL, REMOTE_PARITY, require_shared

pytest.importorskip("pooch")
requests = pytest.importorskip("requests")

from tests.helpers.range_server import Fault  # noqa: E402
from tgm_xarray import tutorial  # noqa: E402

pytestmark = pytest.mark.thread_unsafe(reason="sets environment variables and serves files per test")

IFS = "ifs-0p25-20260404"


def local_copy(name: str):
    """The shared fixture file holding the bytes of registry entry ``name``."""
    file = tutorial.REGISTRY[name].file
    for directory in (REAL, GOLDEN, REMOTE_PARITY):
        if (directory / file).is_file():
            return directory / file
    return require_shared(REAL / file)  # skips: the fixture is missing


def serve(server, name: str, source: str | None = None) -> str:
    """Puts the bytes of ``source`` (default: ``name`` itself) on the server as ``name``'s file."""
    file = tutorial.REGISTRY[name].file
    shutil.copyfile(local_copy(source or name), server.root / file)
    return f"/{file}"


@pytest.fixture
def tutorial_server(range_server, monkeypatch):
    """The loopback server as the tutorial's base URL."""
    monkeypatch.setenv(tutorial.URL_ENV, range_server.url(""))
    return range_server


@pytest.fixture
def cache(tmp_path):
    """An empty cache directory (``tmp_path`` itself holds the server's files)."""
    return tmp_path / "cache"


def dead_url() -> str:
    """A loopback URL nothing listens on (the port was free a moment ago)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    return f"http://127.0.0.1:{port}/"


def kept(cache) -> list:
    """What is in the cache directory (nothing if it was never made)."""
    return sorted(cache.iterdir()) if cache.exists() else []


def sha256(path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# --------------------------------------------------------------------------------------------
# The registry


@pytest.mark.parametrize("name", tutorial.available())
def test_registry_entry_matches_its_shared_fixture(name):
    entry = tutorial.REGISTRY[name]
    path = local_copy(name)
    assert entry.file == f"{name}.tgm"
    assert path.stat().st_size == entry.size
    assert sha256(path) == entry.sha256


def test_upstream_urls_are_pinned_to_a_commit_and_real_data_has_none():
    commit_prefix = f"https://raw.githubusercontent.com/ecmwf/tensogram/{tutorial.UPSTREAM_COMMIT}/"
    assert len(tutorial.UPSTREAM_COMMIT) == 40
    for entry in tutorial.REGISTRY.values():
        if entry.licence == "Apache-2.0":
            assert entry.url.startswith(commit_prefix) and entry.url.endswith("/" + entry.file)
        else:
            assert entry.url is None and "CC BY 4.0" in entry.licence


def test_available_lists_every_name_sorted():
    names = tutorial.available()
    assert names == sorted(tutorial.REGISTRY)
    assert {IFS, "2t-codecs", "lsm-seamask-nan", "multi_message", "thousand-msg"} <= set(names)


def test_unknown_name_lists_the_available_ones(cache):
    with pytest.raises(ValueError, match="no tutorial file named 'nope'") as info:
        tutorial.fetch("nope", cache_dir=cache)
    assert all(name in str(info.value) for name in tutorial.available())
    assert kept(cache) == []


def test_import_needs_no_pooch():
    code = "import sys, tgm_xarray, tgm_xarray.tutorial; print('pooch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


# --------------------------------------------------------------------------------------------
# Downloads through pooch


@pytest.mark.parametrize("name", ["multi_message", "thousand-msg-footer", "lsm-seamask-nan"])
def test_fetch_downloads_once_and_verifies(tutorial_server, cache, name):
    path = serve(tutorial_server, name)
    got = tutorial.fetch(name, cache_dir=cache)
    assert got == cache / f"{name}.tgm"
    assert got.read_bytes() == local_copy(name).read_bytes()
    assert tutorial_server.count(path, "GET") == 1
    assert tutorial_server.sent_bytes(path) == tutorial.REGISTRY[name].size


def test_filled_cache_makes_no_request(tutorial_server, cache, monkeypatch):
    serve(tutorial_server, "ten-msg")
    first = tutorial.fetch("ten-msg", cache_dir=cache)
    tutorial_server.reset()
    assert tutorial.fetch("ten-msg", cache_dir=cache) == first
    assert tutorial_server.count() == 0
    # Nothing listening at all: still served from the cache.
    monkeypatch.setenv(tutorial.URL_ENV, dead_url())
    assert tutorial.fetch("ten-msg", cache_dir=cache) == first


def test_dead_server_and_empty_cache_fails_and_keeps_nothing(cache, monkeypatch):
    monkeypatch.setenv(tutorial.URL_ENV, dead_url())
    with pytest.raises(requests.ConnectionError):
        tutorial.fetch("two-msg", cache_dir=cache)
    assert kept(cache) == []


def test_wrong_bytes_are_rejected_and_not_kept(tutorial_server, cache):
    path = serve(tutorial_server, "multi_message", source="multi_object")
    with pytest.raises(ValueError, match=r"'multi_message'.*sha256 did not match"):
        tutorial.fetch("multi_message", cache_dir=cache)
    assert kept(cache) == []  # neither the file nor pooch's temporary
    # Served right, the next call downloads again rather than trusting anything left behind.
    serve(tutorial_server, "multi_message")
    got = tutorial.fetch("multi_message", cache_dir=cache)
    assert sha256(got) == tutorial.REGISTRY["multi_message"].sha256
    assert tutorial_server.count(path, "GET") == 2


def test_corrupted_cache_file_is_downloaded_again(tutorial_server, cache):
    path = serve(tutorial_server, "hundred-msg")
    cached = tutorial.fetch("hundred-msg", cache_dir=cache)
    cached.write_bytes(cached.read_bytes()[:-1] + b"\0")
    assert tutorial.fetch("hundred-msg", cache_dir=cache) == cached
    assert sha256(cached) == tutorial.REGISTRY["hundred-msg"].sha256
    assert tutorial_server.count(path, "GET") == 2


# A short body is caught by the client's Content-Length check, or failing that by the hash check.
@pytest.mark.parametrize("fault, error", [
    (Fault(status=503, times=1), requests.HTTPError),
    (Fault(truncate=1000, times=1), (requests.RequestException, ValueError)),
], ids=["503", "truncated"])
def test_failed_download_keeps_nothing_and_the_next_call_succeeds(tutorial_server, cache, fault, error):
    path = serve(tutorial_server, "hundred-msg-footer")
    tutorial_server.faults[path] = fault
    with pytest.raises(error):
        tutorial.fetch("hundred-msg-footer", cache_dir=cache)
    assert kept(cache) == []
    got = tutorial.fetch("hundred-msg-footer", cache_dir=cache)
    assert sha256(got) == tutorial.REGISTRY["hundred-msg-footer"].sha256


# --------------------------------------------------------------------------------------------
# Real data without a public URL


def test_real_file_without_override_names_the_way_out(cache, monkeypatch):
    monkeypatch.delenv(tutorial.URL_ENV, raising=False)
    with pytest.raises(ValueError, match=rf"no public download URL.*{tutorial.URL_ENV}") as info:
        tutorial.fetch(IFS, cache_dir=cache)
    assert f"{IFS}.tgm" in str(info.value) and str(cache) in str(info.value)


def test_real_file_copied_into_the_cache_is_used_and_checked(tmp_path, monkeypatch):
    monkeypatch.delenv(tutorial.URL_ENV, raising=False)
    target = tmp_path / "lsm-seamask-nan.tgm"
    shutil.copyfile(local_copy("2t-codecs"), target)  # the wrong bytes
    with pytest.raises(ValueError, match="sha256 does not match"):
        tutorial.fetch("lsm-seamask-nan", cache_dir=tmp_path)
    shutil.copyfile(local_copy("lsm-seamask-nan"), target)
    assert tutorial.fetch("lsm-seamask-nan", cache_dir=tmp_path) == target


def test_real_file_fetched_once_then_works_without_override(tutorial_server, cache, monkeypatch):
    serve(tutorial_server, "lsm-seamask-nan")
    first = tutorial.fetch("lsm-seamask-nan", cache_dir=cache)
    monkeypatch.delenv(tutorial.URL_ENV)
    assert tutorial.fetch("lsm-seamask-nan", cache_dir=cache) == first


def test_open_dataset_equals_the_local_file(tutorial_server, cache):
    serve(tutorial_server, IFS)
    ds = tutorial.open_dataset(IFS, cache_dir=cache, chunks={})
    expected = xr.open_dataset(local_copy(IFS), engine=ENGINE)
    assert set(ds.data_vars) == {"2t", "lsm", "q", "t"}
    assert all(v.chunks is not None for v in ds.data_vars.values())  # chunks={} reached xarray
    xr.testing.assert_identical(ds.load(), expected.load())


# --------------------------------------------------------------------------------------------
# Configuration


def test_cache_dir_from_env_and_argument(tutorial_server, tmp_path, monkeypatch):
    serve(tutorial_server, "two-msg")
    monkeypatch.setenv(tutorial.DATA_DIR_ENV, str(tmp_path / "env"))
    assert tutorial.fetch("two-msg") == tmp_path / "env" / "two-msg.tgm"
    assert tutorial.fetch("two-msg", cache_dir=tmp_path / "arg") == tmp_path / "arg" / "two-msg.tgm"
    assert tutorial_server.count("/two-msg.tgm", "GET") == 2


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="XDG_CACHE_HOME is the Linux cache root")
def test_default_cache_dir_is_pooch_os_cache(tutorial_server, tmp_path, monkeypatch):
    serve(tutorial_server, "two-msg")
    monkeypatch.delenv(tutorial.DATA_DIR_ENV, raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    assert tutorial.fetch("two-msg") == tmp_path / "xdg" / "tgm-xarray" / "two-msg.tgm"


def test_override_url_with_and_without_trailing_slash(range_server, tmp_path, monkeypatch):
    serve(range_server, "single-msg")
    for i, base in enumerate([range_server.url(""), range_server.url("").rstrip("/")]):
        monkeypatch.setenv(tutorial.URL_ENV, base)
        tutorial.fetch("single-msg", cache_dir=tmp_path / str(i))
    assert range_server.count("/single-msg.tgm", "GET") == 2


def test_override_must_be_a_url(cache, monkeypatch):
    monkeypatch.setenv(tutorial.URL_ENV, str(GOLDEN))
    with pytest.raises(ValueError, match=f"{tutorial.URL_ENV} must be an http"):
        tutorial.fetch("simple_f32", cache_dir=cache)


# --------------------------------------------------------------------------------------------
# The README's example, and offline use


def readme_tutorial_names() -> list[str]:
    import re

    from tests.helpers.shared import REPO

    return re.findall(r'tutorial\.open_dataset\("([^"]+)"', (REPO / "README.md").read_text())


def test_readme_example_uses_a_public_pinned_dataset(tutorial_server, cache):
    """Anyone can run the README's example: its dataset has a commit-pinned public URL and a
    sha256 that the file at that path (served here from a copy) matches."""
    names = readme_tutorial_names()
    assert names
    for name in names:
        entry = tutorial.REGISTRY[name]
        assert entry.url == f"{tutorial._RAW}/{entry.source.split(' ', 1)[1]}"
        path = serve(tutorial_server, name)
        ds = tutorial.open_dataset(name, cache_dir=cache)
        assert ds.data_vars and tutorial_server.count(path, "GET") == 1
        assert sha256(cache / entry.file) == entry.sha256


def test_offline_error_names_the_variables_for_local_copies(cache, monkeypatch):
    monkeypatch.setenv(tutorial.URL_ENV, dead_url())
    with pytest.raises(requests.ConnectionError) as info:
        tutorial.fetch("metadata_parity", cache_dir=cache)
    message = str(info.value)
    for part in (tutorial.DATA_DIR_ENV, tutorial.URL_ENV, "metadata_parity.tgm", str(cache),
                 tutorial.REGISTRY["metadata_parity"].sha256):
        assert part in message
    assert kept(cache) == []
    # The way out it names works: a copy in a directory given by the environment variable.
    monkeypatch.setenv(tutorial.DATA_DIR_ENV, str(cache))
    cache.mkdir(exist_ok=True)
    shutil.copyfile(local_copy("metadata_parity"), cache / "metadata_parity.tgm")
    assert tutorial.fetch("metadata_parity") == cache / "metadata_parity.tgm"


def test_a_local_failure_keeps_its_error_type(tmp_path, monkeypatch):
    # pooch fails to make the cache directory (it would be under a regular file): the error is
    # still a NotADirectoryError, not a bare OSError, and names the ways out.
    monkeypatch.setenv(tutorial.URL_ENV, dead_url())
    (tmp_path / "a-file").write_bytes(b"")
    cache = tmp_path / "a-file" / "cache"
    with pytest.raises(NotADirectoryError) as info:
        tutorial.fetch("metadata_parity", cache_dir=cache)
    assert tutorial.DATA_DIR_ENV in str(info.value) and str(cache) in str(info.value)
