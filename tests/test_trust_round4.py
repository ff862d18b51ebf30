"""What other users, odd files and forked processes must not do to an open or a write: a file
planted at a temporary name serves no values, a named pipe as the index key blocks no open,
targets of the longest names are written, and a child forked while a write or a remote
Dataset is open neither holds the write's turn nor waits for ever on a read.

Real files, real processes and a real HTTP server on loopback; every step that could hang
runs in a process of its own, under a timeout.
"""

from __future__ import annotations

import asyncio
import hashlib
import importlib.util
import multiprocessing as mp
import os
import signal
import stat
import subprocess
import sys
import tempfile
import textwrap
import warnings

import numpy as np
import pytest
import xarray as xr

import tgm_xarray
from tgm_xarray import atomic
from tgm_xarray.backend import TensogramBackendEntrypoint as ENGINE
from tgm_xarray.errors import TgmIndexWarning
from tgm_xarray.plans import index
from tgm_xarray.source import fetcher
from tgm_xarray.writer import TgmWriter, to_tgm

pytestmark = pytest.mark.thread_unsafe(reason="forks, starts processes, patches the temporary directory")

#: Seconds a step that would hang may take before the test fails instead.
HANG = 60


def _dataset(value: float) -> xr.Dataset:
    return xr.Dataset({"t": (("y", "x"), np.arange(6.0).reshape(2, 3) + value)})


def _python(script: str, *args, env: dict | None = None, timeout: float = HANG) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", textwrap.dedent(script), *map(str, args)],
                          capture_output=True, text=True, timeout=timeout, env=env)


# -- bytes opened through a temporary copy -----------------------------------------------------

@pytest.mark.parametrize("planted", ["symlink", "file"])
def test_a_file_planted_at_a_predictable_temporary_name_serves_no_values(tmp_path, monkeypatch, planted):
    """Bytes were copied to ``<tmp>/tgm-xarray-<pid>-<digest>.tgm``, and a file already there
    was trusted: anyone could plant a link to another file (or a file) under that name."""
    other = tmp_path / "other.tgm"
    to_tgm(_dataset(100.0), other)
    data_path = tmp_path / "data.tgm"
    to_tgm(_dataset(1.0), data_path)
    data = data_path.read_bytes()
    shared_tmp = tmp_path / "tmp"
    shared_tmp.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(shared_tmp))
    predictable = shared_tmp / f"tgm-xarray-{os.getpid()}-{hashlib.sha256(data).hexdigest()[:32]}.tgm"
    if planted == "symlink":
        predictable.symlink_to(other)
    else:
        predictable.write_bytes(other.read_bytes())

    with xr.open_dataset(data, engine=ENGINE) as ds:
        np.testing.assert_array_equal(ds["t"].values, _dataset(1.0)["t"].values)
    assert predictable.read_bytes() == other.read_bytes()  # left as it was, not written through


def test_bytes_are_copied_into_a_private_directory_and_shared_when_opened_again(tmp_path):
    from tgm_xarray.source.inputs import contents_path

    to_tgm(_dataset(2.0), tmp_path / "data.tgm")
    data = (tmp_path / "data.tgm").read_bytes()
    path = contents_path(data)
    assert contents_path(data) == path
    assert open(path, "rb").read() == data
    directory = os.stat(os.path.dirname(path))
    assert stat.S_IMODE(directory.st_mode) == 0o700 and directory.st_uid == os.getuid()
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600


# -- the index key -------------------------------------------------------------------------------

def test_a_named_pipe_as_the_index_key_blocks_no_open(tmp_path):
    """``index.key`` was opened as it is: a named pipe there blocked every open for ever."""
    cache = tmp_path / "cache"
    cache.mkdir(mode=0o700)
    key = cache / index.KEY_FILE
    os.mkfifo(key, 0o600)
    path = tmp_path / "data.tgm"
    to_tgm(_dataset(3.0), path)
    script = """
        import sys, warnings
        import xarray as xr
        from tgm_xarray.backend import TensogramBackendEntrypoint
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with xr.open_dataset(sys.argv[1], engine=TensogramBackendEntrypoint) as ds:
                print(ds["t"].values.tolist())
        for w in caught:
            print(w.category.__name__, w.message)
    """
    env = {**os.environ, index.CACHE_DIR_ENV: str(cache)}
    run = _python(script, path, env=env)
    assert run.returncode == 0, run.stderr[-3000:]
    values, *caught = run.stdout.splitlines()
    assert values == str(_dataset(3.0)["t"].values.tolist())
    assert any(line.startswith(TgmIndexWarning.__name__) and str(key) in line and "named pipe" in line
               for line in caught), run.stdout
    assert stat.S_ISFIFO(os.lstat(key).st_mode)  # not ours to remove


# -- the longest file names ------------------------------------------------------------------------

@pytest.mark.filterwarnings("error::tgm_xarray.errors.TgmIndexWarning")  # no index can be beside them
@pytest.mark.parametrize("name", ["a" * 246 + ".tgm", "b" * 251 + ".tgm", "é" * 125 + "a.tgm"],
                         ids=["250-bytes", "255-bytes", "255-bytes-utf8"])
def test_targets_of_the_longest_names_are_written_and_read_back(tmp_path, name):
    """The temporary name added 15 bytes to the target's: past 255 (NAME_MAX), every write of a
    target named 241 bytes or more failed."""
    path = tmp_path / name
    to_tgm(_dataset(4.0), path)
    with TgmWriter(path, "a") as writer:
        writer.write(xr.Dataset({"u": (("y", "x"), np.ones((2, 3)))}))
    with xr.open_dataset(path, engine=ENGINE) as ds:
        np.testing.assert_array_equal(ds["t"].values, _dataset(4.0)["t"].values)
        np.testing.assert_array_equal(ds["u"].values, np.ones((2, 3)))
    assert sorted(os.listdir(tmp_path)) == [name]  # no temporary file left


@pytest.mark.filterwarnings("error::tgm_xarray.errors.TgmIndexWarning")
def test_long_names_that_share_their_start_take_turns_of_their_own(tmp_path):
    first, second = (str(tmp_path / ("c" * 250 + end + ".tgm")) for end in ("x", "y"))
    turns = {atomic.turn_name(first), atomic.turn_name(second)}
    assert len(turns) == 2 and atomic.turn_name(first) in turns  # one name per target, as ever
    assert all(len(os.fsencode(os.path.basename(t))) <= atomic.NAME_MAX for t in turns)
    with TgmWriter(first) as a, TgmWriter(second) as b:  # neither waits for the other
        a.write(_dataset(5.0))
        b.write(_dataset(6.0))


# -- a write's turn in a forked child ---------------------------------------------------------------

KILLED_WRITER = """
    import multiprocessing as mp, os, signal, sys, time
    import numpy as np, xarray as xr
    from tgm_xarray.writer import TgmWriter
    def sleep():  # without the test's pipes, which would wait for the child's end
        null = os.open(os.devnull, os.O_WRONLY)
        os.dup2(null, 1)
        os.dup2(null, 2)
        time.sleep(600)
    path, fork = sys.argv[1], sys.argv[2]
    writer = TgmWriter(path)
    writer.write(xr.Dataset({"t": ("x", np.zeros(3))}))
    if fork == "os.fork":
        child = os.fork()
        if child == 0:
            sleep()
            os._exit(0)
    else:
        process = mp.get_context("fork").Process(target=sleep)
        process.start()
        child = process.pid
    print(child, flush=True)
    os.kill(os.getpid(), signal.SIGKILL)  # while the write holds the turn
"""


@pytest.mark.parametrize("fork", ["os.fork", "multiprocessing"])
def test_a_child_forked_during_a_write_does_not_hold_its_turn_after_the_writer_is_killed(tmp_path, fork):
    """The turn is a flock of the write's temporary file, which a forked child shared: killed,
    the writer left the child holding it, and every later write of the file waited for the
    child, without a word."""
    path = tmp_path / "out.tgm"
    run = _python(KILLED_WRITER, path, fork)
    assert run.returncode == -signal.SIGKILL, run.stderr[-3000:]
    child = int(run.stdout)
    try:
        os.kill(child, 0)  # the child still lives
        write_again = """
            import sys
            import numpy as np, xarray as xr
            from tgm_xarray.writer import to_tgm
            to_tgm(xr.Dataset({"t": ("x", np.full(3, 7.0))}), sys.argv[1])
        """
        try:
            again = _python(write_again, path)
        except subprocess.TimeoutExpired:
            pytest.fail(f"a new write of {path} waited {HANG} s for the child forked from a killed writer")
        assert again.returncode == 0, again.stderr[-3000:]
    finally:
        os.kill(child, signal.SIGKILL)
    with xr.open_dataset(path, engine=ENGINE) as ds:
        np.testing.assert_array_equal(ds["t"].values, np.full(3, 7.0))


def test_a_forked_child_cannot_write_or_commit_the_parents_write(tmp_path):
    """The child's writes went into the parent's temporary file, and its abort removed it."""
    path = tmp_path / "out.tgm"
    with TgmWriter(path) as writer:
        writer.write(_dataset(8.0))
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # fork() of a threaded process
            child = os.fork()
        if child == 0:
            code = 1
            try:
                for attempt in (lambda: writer.write(_dataset(9.0)), writer.commit):
                    try:
                        attempt()
                    except RuntimeError as err:
                        code += "forked" in str(err) and str(path) in str(err)
                writer.abort()
                code = 0 if code == 3 else 1
            finally:
                os._exit(code)
        _, status = os.waitpid(child, 0)
        assert os.waitstatus_to_exitcode(status) == 0
        writer.write(xr.Dataset({"u": (("y", "x"), np.ones((2, 3)))}))
    with xr.open_dataset(path, engine=ENGINE) as ds:
        assert set(ds.data_vars) == {"t", "u"}
        np.testing.assert_array_equal(ds["t"].values, _dataset(8.0)["t"].values)


# -- a remote Dataset in a forked child -------------------------------------------------------------

needs_remote = pytest.mark.skipif(not all(importlib.util.find_spec(m) for m in ("fsspec", "aiohttp")),
                                  reason="remote reads need fsspec and aiohttp")


def _large_dataset(value: float) -> xr.Dataset:
    """Past the first request's block (``fetcher.FIRST_BLOCK``): reads of it go to the server."""
    return xr.Dataset({"t": (("y", "x"), np.random.default_rng(int(value)).random((200, 200)))})


def _in_child(read, fork: str):
    """``read()`` in a forked child: ``("ok", its result)`` or ``("error", its error's repr)``;
    fails after ``HANG`` s. The result comes back through a pipe, read before the child is
    waited for (a large one fills the pipe until it is read)."""
    receive, send = mp.Pipe(duplex=False)

    def report():
        try:
            send.send(("ok", read()))
        except BaseException as err:
            send.send(("error", repr(err)))

    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)  # fork() of a threaded process
        if fork == "multiprocessing":
            process = mp.get_context("fork").Process(target=report)
            process.start()
            child = process.pid
        else:
            child = os.fork()
            if child == 0:
                try:
                    report()
                finally:
                    os._exit(0)
    send.close()
    try:
        if not receive.poll(HANG):
            os.kill(child, signal.SIGKILL)
            pytest.fail(f"the forked child's read took more than {HANG} s")
        return receive.recv()
    finally:
        if fork == "multiprocessing":
            process.join()
        else:
            os.waitpid(child, 0)


@needs_remote
@pytest.mark.parametrize("fork", ["os.fork", "multiprocessing"])
def test_a_remote_dataset_reads_in_a_child_forked_after_it_was_opened(range_server, fork):
    """The fetcher kept the parent's event loop, which has no thread in a child: its first read
    waited for ever."""
    to_tgm(_large_dataset(10.0), range_server.root / "remote.tgm")
    url = range_server.url("remote.tgm")
    with xr.open_dataset(url, engine=ENGINE, cache=False) as ds:
        expected = ds["t"].values
        np.testing.assert_array_equal(expected, _large_dataset(10.0)["t"].values)
        kind, values = _in_child(lambda: ds["t"].values, fork)
        assert kind == "ok", values
        np.testing.assert_array_equal(values, expected)
        np.testing.assert_array_equal(ds["t"].values, expected)  # and the parent's reads go on


@needs_remote
def test_a_remote_file_reads_asynchronously_in_a_forked_child(range_server):
    to_tgm(_large_dataset(11.0), range_server.root / "remote.tgm")
    f = tgm_xarray.open_file(range_server.url("remote.tgm"))
    expected = f.read(0, 0)
    assert f.handle.file_size > fetcher.FIRST_BLOCK
    kind, values = _in_child(lambda: asyncio.run(f.read_async(0, 0)), "os.fork")
    assert kind == "ok", values
    np.testing.assert_array_equal(values, expected)
