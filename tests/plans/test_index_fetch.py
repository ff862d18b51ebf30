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

from tests.helpers.oracle import ENGINE

pytest.importorskip("fsspec")
pytest.importorskip("aiohttp")

import tgm_xarray  # noqa: E402
from tests.helpers.range_server import Fault  # noqa: E402
from tgm_xarray.errors import RemoteTimeoutError, TgmIndexWarning  # noqa: E402
from tgm_xarray.plans import index  # noqa: E402
from tgm_xarray.source import fetcher, handles  # noqa: E402
from tgm_xarray.table import MetadataTable  # noqa: E402

# Environment variables and module settings are patched: not for pytest-run-parallel.
pytestmark = pytest.mark.thread_unsafe

NAME = "archive.tgm"
INDEX_PATH = f"/{NAME}{index.SUFFIX}"  # the index beside the data, as the server sees its path


@pytest.fixture(scope="module")
def user_cache(tmp_path_factory) -> Path:
    """The cache directory whose key signs the index beside the archive: each test's own cache
    holds a copy of that key, so the index is this user's (docs/archives.md)."""
    return tmp_path_factory.mktemp("user-cache")


@pytest.fixture(scope="module")
def built(tmp_path_factory, user_cache) -> tuple[Path, xr.Dataset]:
    """100 messages of upstream ``tensogram``'s writing with their index beside them, and their
    values opened cold."""
    from tests.helpers.remote_archive import write_archive

    pytest.importorskip("tensogram")
    path = Path(write_archive(tmp_path_factory.mktemp("built") / NAME, 100))
    with xr.open_dataset(path, engine=ENGINE, index=False) as ds:
        cold = ds.load()
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv(index.CACHE_DIR_ENV, str(user_cache))
        with xr.open_dataset(path, engine=ENGINE, index="beside"):
            pass
    assert Path(f"{path}{index.SUFFIX}").is_file()
    return path, cold


@pytest.fixture(autouse=True)
def own_cache(tmp_path, monkeypatch, built, user_cache):
    """Each test its own cache directory (with the user's key) and a fresh handle cache; quick
    retries."""
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    shutil.copy2(user_cache / index.KEY_FILE, cache / index.KEY_FILE)
    monkeypatch.setenv(index.CACHE_DIR_ENV, str(cache))
    monkeypatch.setattr(fetcher, "BACKOFF", 0.01)
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


def open_quietly(path) -> xr.Dataset:
    """Opens ``path`` and loads it, failing on any index warning."""
    with warnings.catch_warnings():
        warnings.simplefilter("error", TgmIndexWarning)
        with xr.open_dataset(path, engine=ENGINE) as ds:
            return ds.load()


def open_warning(path, match: str) -> xr.Dataset:
    """Opens ``path`` and loads it, expecting an index warning that matches ``match``."""
    with pytest.warns(TgmIndexWarning, match=match):
        with xr.open_dataset(path, engine=ENGINE) as ds:
            return ds.load()


def test_the_index_beside_a_url_is_fetched_once_and_used(range_server, served, built):
    opens = handles.CACHE.opens
    with warnings.catch_warnings():
        warnings.simplefilter("error", TgmIndexWarning)
        with xr.open_dataset(served, engine=ENGINE) as ds:
            assert handles.CACHE.opens == opens  # planned from the index: the data file not opened
            xr.testing.assert_identical(ds.load(), built[1])
    assert range_server.count(INDEX_PATH) == 1


def test_a_url_opened_from_its_index_reads_no_metadata_again(range_server, served, built):
    """The remote handle of an indexed open is built from the index's table and the object's
    size: besides the index, the data object gives only what its identity check reads (its first
    and last 64 KiB) and the data-object frames that the load reads, never a message's header,
    metadata or descriptors, and the values are those of a cold open."""
    path, cold = built
    table = MetadataTable.of_bytes(path.read_bytes())
    frames = set(zip(table.frame_start.tolist(), table.frame_end.tolist()))
    size = path.stat().st_size
    identity = {(0, fetcher.FIRST_BLOCK), (max(size - index.EDGE, index.EDGE), size)}
    values = open_quietly(served)
    xr.testing.assert_identical(values, cold)
    fetched = range_server.ranges(f"/{NAME}")
    assert identity <= set(fetched)
    others = [r for r in fetched if r not in identity and r not in frames]
    assert others == [], f"bytes other than the identity's and the frames' fetched: {others[:5]}"
    assert range_server.count(INDEX_PATH) == 1


@pytest.mark.parametrize("status", [404, 403])
def test_a_missing_or_forbidden_index_is_no_index(range_server, served, built, status):
    # S3 answers 403 for a missing key to a client that may not list the bucket: as absent as 404.
    range_server.faults[INDEX_PATH] = Fault(status=status)
    xr.testing.assert_identical(open_quietly(served), built[1])
    assert range_server.count(INDEX_PATH) == 1  # not retried
    assert not list(Path(os.environ[index.CACHE_DIR_ENV]).glob(f"*{index.SUFFIX}"))  # nothing copied into the cache


@pytest.mark.parametrize("fault", [Fault(status=500, times=1), Fault(truncate=100, times=1)],
                         ids=["500 once", "cut short once"])
def test_a_transient_failure_of_the_index_is_retried(range_server, served, built, fault):
    range_server.faults[INDEX_PATH] = fault
    xr.testing.assert_identical(open_quietly(served), built[1])
    assert range_server.count(INDEX_PATH) == 2  # the failure, then the index


@pytest.mark.parametrize("fault, why", [
    (Fault(status=500), rf"failed after {fetcher.RETRIES} tries: HTTP 500"),
    (Fault(truncate=100), rf"failed after {fetcher.RETRIES} tries: .*100 of \d+ bytes"),
    (Fault(status=418), "HTTP 418"),
], ids=["500 always", "cut short always", "418"])
def test_an_index_that_cannot_be_fetched_is_a_warning_and_a_cold_open(range_server, served, built, fault, why):
    range_server.faults[INDEX_PATH] = fault
    xr.testing.assert_identical(open_warning(served, rf"{INDEX_PATH}: index not used: .*{why}"), built[1])


def test_an_endless_index_is_read_in_bounded_memory(range_server, served, built, monkeypatch):
    monkeypatch.setenv(fetcher.MAX_WHOLE_OBJECT_ENV, str(2**20))
    range_server.faults[INDEX_PATH] = Fault(endless=True)
    why = rf"larger than {2**20} bytes, the most read whole \({fetcher.MAX_WHOLE_OBJECT_ENV}\)"
    xr.testing.assert_identical(open_warning(served, why), built[1])
    assert range_server.count(INDEX_PATH) == 1  # too large is not retried


def test_an_index_larger_than_the_cap_is_refused_before_its_body(range_server, served, built, monkeypatch):
    size = (range_server.root / f"{NAME}{index.SUFFIX}").stat().st_size
    monkeypatch.setenv(fetcher.MAX_WHOLE_OBJECT_ENV, str(size - 1))
    why = rf"the {size}-byte object is larger than {size - 1} bytes"
    xr.testing.assert_identical(open_warning(served, why), built[1])
    assert range_server.count(INDEX_PATH) == 1


# The idle timeout of the stall tests: far below the 120 s deadline, and long enough that the
# loopback server's real answers never pause that long on a machine whose cores are busy
# (0.2 s failed there: a stall costs these tests 2 x IDLE).
IDLE = "5"


def test_a_stalled_index_answer_is_a_warning_within_the_idle_timeout(range_server, served, built, monkeypatch):
    monkeypatch.setenv(fetcher.IDLE_TIMEOUT_ENV, IDLE)  # the deadline stays at its default 120 s
    range_server.faults[INDEX_PATH] = Fault(hang=True)
    why = rf"failed after {fetcher.STALL_RETRIES + 1} tries: the server stalled: no byte for {IDLE} s"
    xr.testing.assert_identical(open_warning(served, why), built[1])
    assert range_server.count(INDEX_PATH) == fetcher.STALL_RETRIES + 1  # a stall is retried once


@pytest.mark.parametrize("tail", ["?X-Amz-Signature=abc", "?", "#part"])
def test_no_index_is_looked_for_beside_a_url_with_a_query(range_server, served, built, tail):
    # The suffix would land in the query: the data itself would come back as "the index".
    assert index.beside(served + tail) is None
    xr.testing.assert_identical(open_quietly(served + tail), built[1])
    assert range_server.count(INDEX_PATH) == 0


def test_local_index_paths_keep_their_query_like_names(tmp_path):
    assert index.beside(str(tmp_path / "a?b.tgm")) == str(tmp_path / "a?b.tgm") + index.SUFFIX


@pytest.fixture
def unblocked_fifo():
    """Makes a FIFO at a path the test gives; should a reader block on it (the failure under
    test), a writer comes after 60 s and closes it, so the test fails instead of hanging."""
    done = threading.Event()

    def make(path: Path) -> Path:
        os.mkfifo(path)
        threading.Thread(target=rescue, args=(path,), daemon=True).start()
        return path

    def rescue(path: Path) -> None:
        if not done.wait(60):
            try:
                os.close(os.open(path, os.O_WRONLY | os.O_NONBLOCK))
            except OSError:
                pass

    yield make
    done.set()


@pytest.mark.parametrize("kind", ["fifo", "directory"])
def test_a_local_index_path_that_is_not_a_regular_file(tmp_path, built, unblocked_fifo, kind):
    path = tmp_path / NAME
    shutil.copyfile(built[0], path)
    at = Path(f"{path}{index.SUFFIX}")
    if kind == "fifo":
        unblocked_fifo(at)
        why = r"a named pipe \(FIFO\)"
    else:
        at.mkdir()
        why = "is a directory"
    xr.testing.assert_identical(open_warning(path, rf"{at.name}: index not used: it cannot be read .*{why}"),
                                built[1])


def test_a_stalled_data_server_is_reported_early_as_stalled(range_server, served, monkeypatch):
    monkeypatch.setenv(fetcher.IDLE_TIMEOUT_ENV, IDLE)  # the deadline stays at its default 120 s
    range_server.faults[f"/{NAME}"] = Fault(hang=True)
    with pytest.raises(RemoteTimeoutError, match=rf"{served}: reading bytes 0-\d+ failed after "
                                                 rf"{fetcher.STALL_RETRIES + 1} tries: the server stalled: "
                                                 rf"no byte for {IDLE} s") as err:
        tgm_xarray.open_file(served)
    assert "deadline" not in str(err.value)
    assert range_server.count(f"/{NAME}") == fetcher.STALL_RETRIES + 1  # a stall is retried once


def test_a_stalled_read_after_opening_is_reported_as_stalled(range_server, served, monkeypatch):
    monkeypatch.setenv(fetcher.IDLE_TIMEOUT_ENV, IDLE)
    f = tgm_xarray.open_file(served)
    range_server.faults[f"/{NAME}"] = Fault(hang=True)
    with pytest.raises(RemoteTimeoutError, match=rf"{served}: reading bytes .* the server stalled"):
        f.read(len(f) - 1, 0)
