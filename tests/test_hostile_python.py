"""Hostile input and faults met by the Python layer: chunks of another shape or dtype, concurrent
appends, writers stopped by SIGTERM or SIGKILL, files replaced under a lazy Dataset, relative
paths sent to other processes, named pipes and devices, values packing cannot hold.

Every test runs the real thing: real files, real processes, real signals, a real dask cluster.
"""

from __future__ import annotations

import os
import pickle
import re
import shutil
import signal
import socket
import subprocess
import sys
import textwrap
import threading
import time

import numpy as np
import pytest
import xarray as xr

import tgm_xarray
from tests.helpers.oracle import ENGINE
from tgm_xarray.errors import TgmCodecError, TgmError, TgmStaleFileError
from tgm_xarray.writer import TgmWriter, to_tgm

pytestmark = pytest.mark.thread_unsafe(reason="replaces files, starts processes and sends signals")


def _dataset(value: float, n: int = 6) -> xr.Dataset:
    return xr.Dataset({"t": (("y", "x"), np.full((2, n), value))})


def _read(path) -> np.ndarray:
    with xr.open_dataset(path, engine=ENGINE) as ds:
        return ds.t.values


# --- zarr: a chunk of another shape or dtype ----------------------------------------------------

def _zarr_array(root, name, dtype, shape):
    zarr = pytest.importorskip("zarr")
    from tgm_xarray.zarr_codec import TensogramCodec

    return zarr.create_array(f"{root}/{name}", shape=shape, chunks=shape, dtype=dtype,
                             serializer=TensogramCodec(), compressors=None, fill_value=0)


@pytest.mark.parametrize("other", ["dtype", "shape"])
def test_zarr_chunk_of_another_shape_or_dtype_is_an_error(tmp_path, other):
    """Same element count and item size: the decoder alone would fill the chunk with the other
    message's bytes (int64 7 read as float64 3.5e-323)."""
    target = _zarr_array(tmp_path, "target", "float64", (4, 6))
    target[:] = 1.5
    intruder = _zarr_array(tmp_path, "intruder", "int64" if other == "dtype" else "float64",
                           (4, 6) if other == "dtype" else (6, 4))
    intruder[:] = 7
    shutil.copy(tmp_path / "intruder" / "c" / "0" / "0", tmp_path / "target" / "c" / "0" / "0")
    expected = "int64" if other == "dtype" else r"\(6, 4\)"
    with pytest.raises(TgmCodecError, match=rf"chunk holds shape .*{expected}.*not one object of shape \(4, 6\) float64"):
        target[:]
    with pytest.raises(TgmCodecError, match="not one object of shape"):  # a partial read too
        target[1, 2:4]


# --- bits= on values packing cannot hold -------------------------------------------------------

@pytest.mark.parametrize(("values", "encoding", "step"), [
    ([-1e308, 1e308], {"bits": 16}, "outside float64's range"),   # the range overflows
    ([0.0, 5e-324], {"bits": 16}, "outside float64's range"),     # the step underflows to 0
    ([-1.7e308, 0.0], {"bits": 16}, r"2\*\*1008"),               # beyond upstream's 2**256
    ([0.0, 1e10], {"bits": 16, "sp_decimal_scale_factor": 300}, "outside float64's range"),
])
def test_values_packing_cannot_hold_are_an_encoding_error(tmp_path, values, encoding, step):
    ds = xr.Dataset({"wind": ("x", np.array(values))})
    low, high = (repr(v).replace("e+", "e") for v in values)  # as the core writes floats
    values_range = re.escape(f"values from {low} to {high}")
    with pytest.raises(TgmCodecError, match=rf"variable 'wind'.*cannot hold {values_range}.*step would be {step}"):
        to_tgm(ds, tmp_path / "w.tgm", encoding={"wind": encoding})
    assert os.listdir(tmp_path) == []


def test_zarr_values_packing_cannot_hold_are_an_encoding_error(tmp_path):
    zarr = pytest.importorskip("zarr")
    from tgm_xarray.zarr_codec import TensogramCodec

    z = zarr.create_array(tmp_path / "z", shape=(2,), chunks=(2,), dtype="float64", compressors=None,
                          serializer=TensogramCodec(encoding="simple_packing", bits_per_value=16))
    with pytest.raises(TgmCodecError, match=r"cannot hold values from 0.0 to 5e-324"):
        z[:] = [0.0, 5e-324]


# --- named pipes, sockets, devices, directories ------------------------------------------------

def _opens_promptly(call, path):
    """``call(path)``'s exception, failing if it blocks (a reader stuck in open(2) on a named pipe
    is released by opening the pipe for writing)."""
    outcome = []

    def run():
        try:
            call(path)
            outcome.append(None)
        except BaseException as error:
            outcome.append(error)

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(10)
    if thread.is_alive():
        fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
        os.close(fd)
        thread.join(10)
        pytest.fail(f"{call.__name__}({path}) blocked")
    return outcome[0]


def _special_files(tmp_path):
    fifo = tmp_path / "pipe.tgm"
    os.mkfifo(fifo)
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(os.fspath(tmp_path / "sock.tgm"))
    return {"a named pipe (FIFO)": fifo, "a socket": tmp_path / "sock.tgm",
            "a character device": "/dev/zero"}, sock


@pytest.mark.parametrize("opener", ["open_file", "open_dataset"])
def test_non_regular_files_are_rejected_before_opening(tmp_path, opener):
    files, sock = _special_files(tmp_path)
    call = {"open_file": tgm_xarray.open_file,
            "open_dataset": lambda p: xr.open_dataset(p, engine=ENGINE)}[opener]
    try:
        for what, path in files.items():
            error = _opens_promptly(call, path)
            assert isinstance(error, OSError) and not isinstance(error, TgmError), error
            assert f"is {what}, not a regular .tgm file" in str(error) and os.fspath(path) in str(error)
        error = _opens_promptly(call, tmp_path)
        assert isinstance(error, IsADirectoryError) and "is a directory, not a .tgm file" in str(error)
    finally:
        sock.close()


def test_engine_guess_does_not_open_a_named_pipe(tmp_path):
    fifo = tmp_path / "pipe"  # no .tgm suffix: the guess would read the magic bytes
    os.mkfifo(fifo)
    outcome = []
    assert _opens_promptly(lambda p: outcome.append(ENGINE().guess_can_open(p)), fifo) is None
    assert outcome == [False]


def test_append_to_a_named_pipe_is_rejected(tmp_path):
    fifo = tmp_path / "pipe.tgm"
    os.mkfifo(fifo)
    error = _opens_promptly(lambda p: to_tgm(_dataset(1.0), p, mode="a"), fifo)
    assert isinstance(error, OSError) and "is a named pipe (FIFO)" in str(error)
    assert sorted(os.listdir(tmp_path)) == ["pipe.tgm"]


# --- relative paths and replaced files across processes ----------------------------------------

def test_relative_paths_pickle_as_absolute(tmp_path, monkeypatch):
    to_tgm(_dataset(3.0), tmp_path / "rel.tgm")
    monkeypatch.chdir(tmp_path)
    f = tgm_xarray.open_file("rel.tgm")
    with xr.open_dataset("rel.tgm", engine=ENGINE, chunks={}) as ds:
        f_bytes, ds_bytes = pickle.dumps(f), pickle.dumps(ds)
        assert f.path == str(tmp_path / "rel.tgm")
    monkeypatch.chdir(tmp_path.parent)  # another working directory, as a worker's
    np.testing.assert_array_equal(pickle.loads(f_bytes).read(0, 0), np.full((2, 6), 3.0))
    np.testing.assert_array_equal(pickle.loads(ds_bytes).t.values, np.full((2, 6), 3.0))


def test_pickled_file_refuses_another_version(tmp_path):
    path = tmp_path / "v.tgm"
    to_tgm(_dataset(1.0), path)
    f = tgm_xarray.open_file(path)
    same = pickle.loads(pickle.dumps(f))
    assert same.version == f.version
    to_tgm(_dataset(2.0), path)  # replaced: same size, another inode
    with pytest.raises(TgmStaleFileError, match=rf"{path}: the file changed after it was opened") as error:
        pickle.loads(pickle.dumps(f))
    assert isinstance(error.value, OSError) and isinstance(error.value, TgmError)
    np.testing.assert_array_equal(tgm_xarray.open_file(path).read(0, 0), np.full((2, 6), 2.0))


def test_closed_dataset_refuses_another_version(tmp_path):
    path = tmp_path / "v.tgm"
    to_tgm(_dataset(1.0), path)
    ds = xr.open_dataset(path, engine=ENGINE, chunks={})
    ds.close()  # drops the file: the next read reopens it
    to_tgm(_dataset(2.0), path)
    with pytest.raises(TgmStaleFileError):
        ds.t.values


def test_distributed_workers_refuse_a_file_replaced_after_open(dask_client, tmp_path):
    """The client holds the old version mapped; workers reopen by path and would read the new
    one. They raise instead: the Dataset's layout and the client's values are the old file's."""
    path = tmp_path / "replaced.tgm"
    to_tgm(_dataset(1.0), path)
    with xr.open_dataset(path, engine=ENGINE, chunks={}) as ds:
        np.testing.assert_array_equal(dask_client.compute(ds.t).result().values, np.full((2, 6), 1.0))
        to_tgm(_dataset(2.0), path)
        np.testing.assert_array_equal(ds.t.values, np.full((2, 6), 1.0))  # the client's version
        with pytest.raises(TgmStaleFileError, match="the file changed after it was opened"):
            dask_client.compute(ds.t).result()
    with xr.open_dataset(path, engine=ENGINE, chunks={}) as ds:  # opened again: the new version
        np.testing.assert_array_equal(dask_client.compute(ds.t).result().values, np.full((2, 6), 2.0))


# --- writers: concurrent appends, SIGTERM, SIGKILL ---------------------------------------------

def _names(path) -> list[str]:
    f = tgm_xarray.open_file(path)
    return sorted(f.metadata(i)["base"][0]["name"] for i in range(len(f)))


def _python(script: str, *args, **popen) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(script), *map(str, args)],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, **popen)


# Generous: children import xarray and dask first, which on a machine whose cores are busy (and
# on free-threaded builds) takes far longer than the work itself; waits end as soon as it is done.
CHILD_TIMEOUT = 600.0


def _wait_for(predicate, what: str, timeout: float = CHILD_TIMEOUT) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.02)


HOLDING_APPEND = """
    import sys, time, numpy as np, xarray as xr
    from tgm_xarray.writer import TgmWriter
    path, ready, name = sys.argv[1:4]
    with TgmWriter(path, "a") as writer:
        writer.write(xr.Dataset({name: (("y", "x"), np.ones((2, 3)))}))
        open(ready, "w").close()
        time.sleep(1.5)  # still writing when the other process appends
    print("committed", time.time())
"""

APPEND = """
    import sys, time, numpy as np, xarray as xr
    from tgm_xarray.writer import to_tgm
    path, name, times = sys.argv[1], sys.argv[2], int(sys.argv[3])
    for i in range(times):
        to_tgm(xr.Dataset({f"{name}{i}": (("y", "x"), np.ones((2, 3)))}), path, mode="a")
    print("appended", time.time())
"""


def test_concurrent_appends_take_turns(tmp_path):
    """Each append copies the file, appends and replaces it: without a lock the second of two
    overlapping appends replaces the first's result, and one append is lost."""
    path = tmp_path / "shared.tgm"
    to_tgm(xr.Dataset({"first": (("y", "x"), np.ones((2, 3)))}), path)
    holder = _python(HOLDING_APPEND, path, tmp_path / "ready", "held")
    _wait_for(lambda: (tmp_path / "ready").exists(), "the first append to start")
    other = _python(APPEND, path, "other", 1)
    held_out, other_out = holder.communicate(timeout=CHILD_TIMEOUT)[0], other.communicate(timeout=CHILD_TIMEOUT)[0]
    assert holder.returncode == 0 and other.returncode == 0, held_out + other_out
    assert _names(path) == ["first", "held", "other0"]
    # the second append waited for the first to commit
    assert float(other_out.split()[-1]) > float(held_out.split()[-1])
    assert sorted(os.listdir(tmp_path)) == ["ready", "shared.tgm"]  # no lock or temporary file left


def test_many_concurrent_appends_lose_nothing(tmp_path):
    path = tmp_path / "many.tgm"
    to_tgm(xr.Dataset({"first": (("y", "x"), np.ones((2, 3)))}), path)
    writers = [_python(APPEND, path, name, 6) for name in ("a", "b", "c")]
    outputs = [w.communicate(timeout=CHILD_TIMEOUT)[0] for w in writers]
    assert all(w.returncode == 0 for w in writers), outputs
    assert _names(path) == sorted(["first"] + [f"{n}{i}" for n in "abc" for i in range(6)])
    assert os.listdir(tmp_path) == ["many.tgm"]


def test_a_second_writer_of_a_file_in_the_same_thread_fails_instead_of_waiting(tmp_path):
    path = tmp_path / "nested.tgm"
    with TgmWriter(path) as writer:
        writer.write(_dataset(1.0))
        with pytest.raises(RuntimeError, match="this thread is already writing it"):
            to_tgm(_dataset(2.0), path, mode="a")
    np.testing.assert_array_equal(_read(path), np.full((2, 6), 1.0))
    assert os.listdir(tmp_path) == ["nested.tgm"]


# A write of 12 fields that cannot end before the test opens its gate (every field but the first
# waits for the gate file while dask computes it): the signal comes before its end, however busy
# the machine.
SLOW_WRITE = """
    import faulthandler, os, signal, sys, time, numpy as np, xarray as xr, dask.array as da
    from tgm_xarray.writer import to_tgm
    faulthandler.dump_traceback_later(400, exit=True)  # a hang ends with every thread's stack shown
    path, handler, gate = sys.argv[1:4]
    if handler == "exits":
        def stop(signum, frame):
            print("the program's handler ran", flush=True)
            sys.exit(3)
        signal.signal(signal.SIGTERM, stop)
    elif handler == "flags":
        signal.signal(signal.SIGTERM, lambda signum, frame: print("flagged", flush=True))

    def gated(block, block_info=None):
        if block_info is None or block_info[None]["chunk-location"][0] == 0:
            return block  # the first field goes through: the write has begun its temporary file
        deadline = time.monotonic() + 300  # a test that never opens the gate fails, not hangs
        while not os.path.exists(gate) and time.monotonic() < deadline:
            time.sleep(0.02)
        return block

    data = da.full((12, 4, 6), 5.0, chunks=(1, 4, 6)).map_blocks(gated, dtype=float)
    ds = xr.Dataset({"t": (("number", "y", "x"), data)}, coords={"number": np.arange(12)})
    to_tgm(ds, path, threads=2)
    print("written", flush=True)
    if handler != "none":
        assert signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL  # the program's, restored
"""


def _temporaries(directory) -> list[str]:
    return [name for name in os.listdir(directory) if name.endswith(".tmp")]


class _SlowWrite:
    """A child writing ``slow.tgm`` over a previous version, waiting at its gate."""

    def __init__(self, tmp_path, handler: str):
        self.path, self.gate = tmp_path / "slow.tgm", tmp_path / "gate"
        to_tgm(_dataset(1.0), self.path)  # the previous version, which must survive
        self.writer = _python(SLOW_WRITE, self.path, handler, self.gate)
        self.output = ""
        # Its handler is installed before the file is created (atomic._create_temporary).
        _wait_for(lambda: _temporaries(tmp_path) or self.writer.poll() is not None, "the writer's temporary file")
        assert self.writer.poll() is None, self.writer.communicate()[0]

    def _read_until(self, text: str) -> str:
        assert self.writer.stdout is not None
        output = ""
        while text not in output and (line := self.writer.stdout.readline()):
            output += line
        return output

    def signal_then_open(self, after: str | None) -> str:
        """SIGTERM, then (once the child printed ``after``: its handler ran) the gate opened;
        the child's whole output once it ended."""
        self.writer.send_signal(signal.SIGTERM)
        if after is not None:
            self.output += self._read_until(after)
        self.gate.touch()
        return self.output + self.writer.communicate(timeout=CHILD_TIMEOUT)[0]


def test_sigterm_while_writing_removes_the_temporary_file(tmp_path):
    slow = _SlowWrite(tmp_path, "none")
    output = slow.signal_then_open(after=None)
    assert slow.writer.returncode == -signal.SIGTERM, output  # still ended by SIGTERM
    assert _temporaries(tmp_path) == []
    np.testing.assert_array_equal(_read(slow.path), np.full((2, 6), 1.0))  # the target is untouched


def test_sigterm_goes_to_the_programs_own_handler(tmp_path):
    slow = _SlowWrite(tmp_path, "exits")
    output = slow.signal_then_open(after="the program's handler ran")
    assert slow.writer.returncode == 3 and "the program's handler ran" in output, output
    assert _temporaries(tmp_path) == []  # sys.exit aborted the write, as Ctrl-C does
    np.testing.assert_array_equal(_read(slow.path), np.full((2, 6), 1.0))


def test_sigterm_handled_by_the_program_lets_the_write_finish(tmp_path):
    slow = _SlowWrite(tmp_path, "flags")
    output = slow.signal_then_open(after="flagged")
    assert slow.writer.returncode == 0 and "flagged" in output and "written" in output, output
    assert _temporaries(tmp_path) == []
    with xr.open_dataset(slow.path, engine=ENGINE) as ds:
        np.testing.assert_array_equal(ds.t.values, np.full((12, 4, 6), 5.0))


def test_temporary_files_of_killed_writers_are_swept_by_the_next_write(tmp_path):
    slow = _SlowWrite(tmp_path, "none")
    writer, path = slow.writer, slow.path
    writer.kill()  # SIGKILL: nothing runs, the temporary file stays
    writer.communicate(timeout=CHILD_TIMEOUT)
    (left,) = _temporaries(tmp_path)
    # Another target's temporary file, though nobody holds it, and a file of another program
    # named like a temporary file are not this write's to sweep.
    other, foreign = ".other.tgm.tgm-write.tmp", f".slow.tgm.{writer.pid}-0123456789ab.tmp"
    for name in (other, foreign):
        (tmp_path / name).write_bytes(b"partial")
    to_tgm(_dataset(2.0), path, mode="a", encoding={"t": {"compression": "zstd"}})
    assert left not in os.listdir(tmp_path)
    assert sorted(os.listdir(tmp_path)) == sorted(["slow.tgm", other, foreign])  # no lock file either
    assert len(tgm_xarray.open_file(path)) == 2


def test_a_link_in_the_way_of_the_temporary_file_is_an_error_naming_it(tmp_path):
    path = tmp_path / "t.tgm"
    to_tgm(_dataset(1.0), path)
    elsewhere = tmp_path / "elsewhere"
    (tmp_path / ".t.tgm.tgm-write.tmp").symlink_to(elsewhere)
    with pytest.raises(FileExistsError, match=r"in the way of the write of .*t\.tgm.*remove it") as caught:
        to_tgm(_dataset(2.0), path)
    assert caught.value.filename == str(tmp_path / ".t.tgm.tgm-write.tmp")
    assert not elsewhere.exists()
    np.testing.assert_array_equal(_read(path), np.full((2, 6), 1.0))  # the target is untouched
