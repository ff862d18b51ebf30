"""What ``open_dataset(..., engine="tgm")`` accepts besides a path string, as xarray's own
engines do: ``pathlib`` paths, ``~``, ``file://`` URLs, bytes and binary file objects."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import textwrap

import pytest
import xarray as xr

from tests.helpers.oracle import ENGINE
from tests.helpers.shared import require_shared

pytestmark = pytest.mark.thread_unsafe  # HOME is patched


@pytest.fixture
def local(ifs_file):
    require_shared(ifs_file)
    with xr.open_dataset(ifs_file, engine=ENGINE) as ds:
        yield ds.load()


def assert_opens_as_local(source, local, **kwargs):
    with xr.open_dataset(source, engine=ENGINE, **kwargs) as ds:
        xr.testing.assert_identical(ds.load(), local)


def test_pathlib_paths(ifs_file, local):
    assert_opens_as_local(ifs_file, local)


def test_file_urls(ifs_file, local):
    assert_opens_as_local(ifs_file.resolve().as_uri(), local)


def test_home_is_expanded(ifs_file, local, tmp_path, monkeypatch):
    monkeypatch.setenv("HOME", os.fspath(tmp_path))
    os.symlink(ifs_file.resolve(), tmp_path / "ifs.tgm")
    assert_opens_as_local("~/ifs.tgm", local)


def test_bytes(ifs_file, local):
    data = ifs_file.read_bytes()
    assert_opens_as_local(data, local)
    assert_opens_as_local(memoryview(data), local)


def test_binary_file_objects(ifs_file, local):
    with open(ifs_file, "rb") as f:
        assert_opens_as_local(f, local)
    assert_opens_as_local(io.BytesIO(ifs_file.read_bytes()), local)


def test_the_engine_is_guessed_for_file_objects_and_bytes(ifs_file):
    from tgm_xarray.backend import TensogramBackendEntrypoint

    entry = TensogramBackendEntrypoint()
    data = ifs_file.read_bytes()
    stream = io.BytesIO(data)
    stream.seek(0)
    assert entry.guess_can_open(stream) and stream.tell() == 0
    assert entry.guess_can_open(data)
    assert entry.guess_can_open(ifs_file.resolve().as_uri())
    assert not entry.guess_can_open(io.BytesIO(b"CDF\x01"))


def test_text_file_objects_are_refused(tmp_path):
    (tmp_path / "x.txt").write_text("TENSOGRM")
    with open(tmp_path / "x.txt") as f, pytest.raises(TypeError, match="binary file objects.*'rb'"):
        xr.open_dataset(f, engine=ENGINE)


def test_bytes_that_cannot_be_written_leave_no_temporary_file(ifs_file, tmp_path):
    """Bytes are opened through a temporary copy: a copy that fails (here the file size limit)
    raises and leaves nothing in the temporary directory, as every write of ours."""
    require_shared(ifs_file)
    script = textwrap.dedent(f"""
        import resource, signal
        import xarray as xr
        data = open({str(ifs_file)!r}, "rb").read()
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # an OSError instead of the signal
        resource.setrlimit(resource.RLIMIT_FSIZE, (len(data) // 2, resource.RLIM_INFINITY))
        try:
            xr.open_dataset(data, engine="tgm")
        except OSError as e:
            print("refused:", e.errno)
    """)
    run = subprocess.run([sys.executable, "-c", script], env={**os.environ, "TMPDIR": str(tmp_path)},
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.startswith("refused:"), run.stdout
    assert os.listdir(tmp_path) == []
