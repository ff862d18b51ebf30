"""The suite's fixtures and hooks: the shared fixture files, the codec matrix (written once per
session with upstream ``tensogram``, ``tests.helpers.matrix``), servers on loopback and a dask
cluster. Helpers that are not fixtures are in ``tests.helpers``.

Everything here writes and reads real ``.tgm`` files; nothing is mocked.
"""

from __future__ import annotations

import atexit
import importlib
import os
import shutil
import sysconfig
import tempfile
from pathlib import Path

import numpy as np
import pytest

from tests.helpers.shared import FIXTURES, IN_CI, REAL, SHARED, SHARED_MISSING, require_shared

#: Modules (space-separated) a lane installs and whose tests may not skip there: the newest lane
#: sets it (``make test-newest``), so a failed install fails the run instead of skipping tests.
REQUIRE_MODULES_ENV = "TGM_REQUIRE_MODULES"


def _missing(module: str) -> str | None:
    try:
        importlib.import_module(module)
    except ImportError as err:
        return f"{module} ({err})"
    return None


def pytest_sessionstart(session) -> None:
    if IN_CI and not FIXTURES.is_dir():
        raise pytest.UsageError(f"{SHARED_MISSING}; CI is set, so the real-data tests may not skip "
                                "(check out the shared fixtures there, or unset CI to skip them)")
    missing = [m for m in map(_missing, os.environ.get(REQUIRE_MODULES_ENV, "").split()) if m is not None]
    if missing:
        raise pytest.UsageError(f"{REQUIRE_MODULES_ENV} requires modules that do not import: {'; '.join(missing)}. "
                                "The newest lane (make test-newest) installs them (scripts/newest-python.sh, "
                                "log /tmp/tgm-newest-pip.log), so its tests may not skip for want of them")

# Opens write indexes to the cache directory (docs/archives.md): this session's own, never the
# user's, inherited by the processes tests start.
os.environ["TGM_XARRAY_CACHE_DIR"] = tempfile.mkdtemp(prefix="tgm-xarray-test-cache-")
atexit.register(shutil.rmtree, os.environ["TGM_XARRAY_CACHE_DIR"], ignore_errors=True)

# dask.distributed samples every thread's stack (sys._current_frames) in each scheduler, nanny and
# worker process, except on 3.11. On free-threaded CPython that read races the threads it samples
# and can crash the process (CPython gh-152355): the 3.13t suite died once so, in the teardown of a
# LocalCluster. Off for this session and the processes it starts (docs/remote.md).
if sysconfig.get_config_var("Py_GIL_DISABLED"):
    os.environ["DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED"] = "False"


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    """An index cache directory of the test's own and a fresh handle cache (modules that count
    index files or patch how files are stat'ed use it: ``pytest.mark.usefixtures("own_cache")``)."""
    from tgm_xarray.plans import index
    from tgm_xarray.source import handles

    monkeypatch.setenv(index.CACHE_DIR_ENV, str(tmp_path / "cache"))
    handles.CACHE.clear()
    yield
    handles.CACHE.clear()


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    return require_shared(SHARED)


@pytest.fixture(scope="session")
def real_dir() -> Path:
    return require_shared(REAL)


@pytest.fixture(scope="session")
def ifs_file() -> Path:
    """The real 4-message operational-style file (2t, lsm, q, t; packed 24 bit + szip)."""
    return require_shared(REAL / "ifs-0p25-20260404.tgm")


@pytest.fixture(scope="session")
def manifest(real_dir) -> dict:
    import json

    return json.loads((real_dir / "manifest.json").read_text())


# --------------------------------------------------------------------------------------------
# The codec matrix
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def codec_matrix(tmp_path_factory):
    """``id -> MatrixObject`` for every object of the matrix (the files are written once)."""
    from tests.helpers.matrix import write_codec_matrix

    return write_codec_matrix(tmp_path_factory.mktemp("codec-matrix"))


@pytest.fixture(scope="session")
def matrix_list(codec_matrix) -> list[tuple[str, int, int, str]]:
    """The matrix as ``(path, msg, obj, description)`` tuples (hashed files)."""
    return [(o.path, o.msg, o.obj, o.description) for k, o in codec_matrix.items() if o.hashed]


@pytest.fixture(scope="session")
def matrix_paths(codec_matrix) -> list[str]:
    return sorted({o.path for o in codec_matrix.values()})


# --------------------------------------------------------------------------------------------
# A range-capable HTTP server on loopback (remote reads, tutorial downloads)


@pytest.fixture
def s3_endpoint():
    """The endpoint URL of a moto S3 server on loopback (keys "testing"); stopped afterwards.
    moto's buckets outlive its servers in one process: name buckets per test or port."""
    server_mod = pytest.importorskip("moto.server")
    server = server_mod.ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def range_server(tmp_path):
    """A ``RangeServer`` serving ``tmp_path / "served"`` (copy files there); stopped afterwards."""
    from tests.helpers.range_server import RangeServer

    root = tmp_path / "served"
    root.mkdir()
    server = RangeServer(root).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def dask_client():
    """A dask.distributed client of 2 worker processes (one cluster per test module)."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(processes=True, n_workers=2, threads_per_worker=1,
                                  dashboard_address=None) as cluster:
        with distributed.Client(cluster, set_as_default=False) as client:
            yield client


@pytest.fixture
def archive(tmp_path) -> Path:
    """300 messages of upstream ``tensogram``'s writing (field, latitude, longitude each)."""
    from tests.helpers.remote_archive import write_archive

    pytest.importorskip("tensogram")
    return Path(write_archive(tmp_path / "archive.tgm", 300))


@pytest.fixture(scope="module")
def t2m(ifs_file) -> np.ndarray:
    """The 2 m temperature field (721 x 1440 float64, kelvin)."""
    from tgm_xarray import open_file

    return open_file(ifs_file).read(0, 0)
