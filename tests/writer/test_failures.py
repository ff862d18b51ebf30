"""Writes that fail or are killed, and targets behind symlinks: a write that hits a file size limit
(as a full disk) cleans up and lets the next write of the file run, a writer killed by SIGTERM
while it holds the target's turn leaves nothing behind, and writes through a symlink replace the
real file, the link staying a link.

Real files, real child processes, real signals and resource limits; children report through a
pipe once they hold the turn, so nothing depends on timing.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
import xarray as xr

from tests.helpers.oracle import ENGINE
from tgm_xarray.writer import TgmWriter, to_tgm

pytestmark = pytest.mark.thread_unsafe(reason="starts processes, sends signals, sets limits")


def _dataset(name: str, value: float) -> xr.Dataset:
    return xr.Dataset({name: (("y", "x"), np.full((2, 3), value))})


def _python(script: str, *args) -> subprocess.Popen:
    return subprocess.Popen([sys.executable, "-c", textwrap.dedent(script), *map(str, args)],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.STDOUT, text=True)


def _values(path) -> dict[str, np.ndarray]:
    with xr.open_dataset(path, engine=ENGINE) as ds:
        return {str(name): var.values for name, var in ds.data_vars.items()}


# A child appends a Dataset too large for its file size limit (RLIMIT_FSIZE: the write fails
# with EFBIG, as a full disk fails with ENOSPC), then appends a small one, still under the limit.
LIMITED_APPENDS = """
    import errno, os, resource, signal, sys, numpy as np, xarray as xr
    from tgm_xarray.writer import to_tgm
    path, limit = sys.argv[1], int(sys.argv[2])
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # else the kernel kills the process
    resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))
    big = xr.Dataset({"big": (("y", "x"), np.random.default_rng(0).random((100, 100)))})
    try:
        to_tgm(big, path, mode="a", encoding={"big": {"compression": "none"}})
    except OSError as error:
        assert error.errno == errno.EFBIG and error.filename == path, repr(error)
        print("failed:", error)
    assert sorted(os.listdir(os.path.dirname(path))) == ["t.tgm"], os.listdir(os.path.dirname(path))
    resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
    to_tgm(xr.Dataset({"small": (("y", "x"), np.full((2, 3), 2.0))}), path, mode="a")
    print("appended")
"""


@pytest.mark.parametrize("where", ["copy", "append"])
def test_an_append_over_the_file_size_limit_cleans_up_and_the_next_write_runs(tmp_path, where):
    """The limit is hit while copying the existing file or while appending the new messages."""
    path = tmp_path / "t.tgm"
    to_tgm(_dataset("first", 1.0), path)
    size = path.stat().st_size
    limit = size // 2 if where == "copy" else size + 4096
    child = _python(LIMITED_APPENDS, path, limit)
    output = child.communicate(timeout=120)[0]
    assert child.returncode == 0, output
    assert "File too large" in output and str(path) in output and "appended" in output, output
    assert sorted(os.listdir(tmp_path)) == ["t.tgm"]
    values = _values(path)
    assert sorted(values) == ["first", "small"]
    np.testing.assert_array_equal(values["first"], np.full((2, 3), 1.0))
    np.testing.assert_array_equal(values["small"], np.full((2, 3), 2.0))


# A child opens an append, says so on stdout and waits on stdin, which never comes: it holds the
# target's turn until the parent's SIGTERM. "thread": the writer runs in another thread than the
# main one, where no SIGTERM handler of ours can be installed.
HOLDING_WRITER = """
    import sys, threading, numpy as np, xarray as xr
    from tgm_xarray.writer import TgmWriter
    path, where = sys.argv[1:3]

    def hold():
        with TgmWriter(path, "a") as writer:
            writer.write(xr.Dataset({"killed": (("y", "x"), np.ones((2, 3)))}))
            print("holding", flush=True)
            sys.stdin.read()

    if where == "main":
        hold()
    else:
        threading.Thread(target=hold, daemon=True).start()
        threading.Event().wait()
"""


@pytest.mark.parametrize("where", ["main", "thread"])
def test_a_writer_killed_by_sigterm_leaves_no_lock_and_the_next_writer_runs(tmp_path, where):
    path = tmp_path / "t.tgm"
    to_tgm(_dataset("first", 1.0), path)
    child = _python(HOLDING_WRITER, path, where)
    watchdog = threading.Timer(120, child.kill)  # a child that never says it holds the turn
    watchdog.start()
    try:
        assert child.stdout.readline() == "holding\n"
        child.send_signal(signal.SIGTERM)
        child.wait(timeout=60)  # stdin stays open: the child's read ends by the signal alone
        output = child.stdout.read()
    finally:
        watchdog.cancel()
        if child.poll() is None:
            child.kill()
            child.wait()
        child.stdin.close()
        child.stdout.close()
    assert child.returncode == -signal.SIGTERM, output
    # Only the writer's temporary file can stay, when no handler could remove it (a thread).
    left = [name for name in os.listdir(tmp_path) if name != "t.tgm"]
    assert len(left) == (0 if where == "main" else 1) and all(n.endswith(".tmp") for n in left), left
    to_tgm(_dataset("next", 2.0), path, mode="a")  # its turn comes: the kernel dropped the lock
    assert os.listdir(tmp_path) == ["t.tgm"]  # and the killed writer's temporary file is swept
    values = _values(path)
    assert sorted(values) == ["first", "next"]
    np.testing.assert_array_equal(values["next"], np.full((2, 3), 2.0))


def test_writers_in_threads_take_turns(tmp_path):
    path = tmp_path / "t.tgm"
    to_tgm(_dataset("first", 1.0), path)
    start = threading.Barrier(4, timeout=60)
    errors = []

    def append(i):
        try:
            start.wait()
            for k in range(3):
                to_tgm(_dataset(f"v{i}{k}", float(i)), path, mode="a", threads=1)
        except BaseException as error:  # reported below: a thread's exception would be lost
            errors.append(error)

    threads = [threading.Thread(target=append, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not errors and not any(t.is_alive() for t in threads), errors
    assert sorted(_values(path)) == sorted(["first"] + [f"v{i}{k}" for i in range(4) for k in range(3)])
    assert os.listdir(tmp_path) == ["t.tgm"]


@pytest.mark.parametrize("mode", ["a", "w"])
def test_writes_through_a_symlink_replace_the_real_file(tmp_path, mode):
    real, links = tmp_path / "real", tmp_path / "links"
    real.mkdir()
    links.mkdir()
    target, link = real / "t.tgm", links / "t.tgm"
    to_tgm(_dataset("first", 1.0), target)
    link.symlink_to(os.path.relpath(target, links))
    to_tgm(_dataset("second", 2.0), link, mode=mode)
    assert link.is_symlink() and os.readlink(link) == os.path.relpath(target, links)
    assert os.listdir(real) == ["t.tgm"] and os.listdir(links) == ["t.tgm"]
    values = _values(target)
    assert sorted(values) == (["first", "second"] if mode == "a" else ["second"])
    np.testing.assert_array_equal(values["second"], np.full((2, 3), 2.0))
    if mode == "a":
        np.testing.assert_array_equal(values["first"], np.full((2, 3), 1.0))


def test_a_symlink_and_its_target_share_one_turn(tmp_path):
    """The turn is the real file's: a second writer through the other name would wait for the
    first (in the same thread, forever, so it raises)."""
    target, link = tmp_path / "t.tgm", tmp_path / "link.tgm"
    to_tgm(_dataset("first", 1.0), target)
    link.symlink_to(target.name)
    with TgmWriter(link, "a") as writer:
        writer.write(_dataset("second", 2.0))
        with pytest.raises(RuntimeError, match="this thread is already writing it"):
            TgmWriter(target, "a")
    assert sorted(_values(link)) == ["first", "second"]
    assert sorted(os.listdir(tmp_path)) == ["link.tgm", "t.tgm"]


# What a write syncs, seen by strace in a child (the system calls themselves, not a stand-in).
SYNCING_CHILD = textwrap.dedent("""
    import sys
    import numpy as np, xarray as xr
    from tgm_xarray import to_tgm
    to_tgm(xr.Dataset({"t": ("x", np.arange(4.0))}), sys.argv[1], durable=sys.argv[2] == "1")
""")


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")
@pytest.mark.parametrize("durable", [False, True])
def test_only_a_durable_write_fsyncs_the_file_and_its_directory(tmp_path, durable):
    target = tmp_path / "t.tgm"
    trace = tmp_path / "trace"
    subprocess.run(["strace", "-f", "-qq", "-e", "trace=fsync,fdatasync,rename,renameat,renameat2", "-o", str(trace),
                    sys.executable, "-c", SYNCING_CHILD, str(target), "1" if durable else "0"], check=True, timeout=600)
    calls = [line.split(None, 1)[1] for line in trace.read_text().splitlines() if "(" in line]
    renames = [i for i, c in enumerate(calls) if c.startswith("rename") and str(target) in c]
    syncs = [i for i, c in enumerate(calls) if c.startswith(("fsync", "fdatasync"))]
    assert len(renames) == 1, calls
    if durable:  # the file before the rename, the directory after
        assert any(i < renames[0] for i in syncs) and any(i > renames[0] for i in syncs), calls
    else:
        assert syncs == [], calls
    with xr.open_dataset(target, engine=ENGINE) as ds:
        assert ds["t"].values.tolist() == [0.0, 1.0, 2.0, 3.0]


def _descriptors_of(path) -> list[str]:
    """This process's open descriptors of ``path``, or of a file that had its name and is deleted."""
    fds = f"/proc/{os.getpid()}/fd"
    names = []
    for fd in os.listdir(fds):
        try:
            names.append(os.readlink(os.path.join(fds, fd)))
        except OSError:  # closed meanwhile (the listing's own descriptor)
            pass
    return [n for n in names if n in (str(path), f"{path} (deleted)")]


@pytest.mark.skipif(not os.path.isdir("/proc/self/fd"), reason="needs /proc")
def test_a_replaced_file_is_released_and_its_replacement_reads(tmp_path):
    # The replaced file is closed on a thread of its own (its blocks are freed there): it must
    # be closed all the same, and nothing else left open or behind.
    target = tmp_path / "t.tgm"
    for value in range(5):
        to_tgm(_dataset("t", float(value)), target)
    for _ in range(600):  # the releasing thread has work queued: give it up to a minute
        if not _descriptors_of(target):
            break
        threading.Event().wait(0.1)
    assert _descriptors_of(target) == []
    assert sorted(os.listdir(tmp_path)) == ["t.tgm"]
    assert _values(target)["t"].tolist() == np.full((2, 3), 4.0).tolist()


@pytest.mark.skipif(shutil.which("strace") is None, reason="needs strace")
def test_a_write_does_not_list_its_directory(tmp_path):
    # Converting thousands of inputs into one directory: a write that listed it to find other
    # writes of its target would cost more with every file written before it.
    for i in range(50):
        (tmp_path / f"earlier{i}.tgm").write_bytes(b"")
    target, trace = tmp_path / "t.tgm", tmp_path.parent / f"{tmp_path.name}.trace"
    # -y: each descriptor argument with the path it is open on
    subprocess.run(["strace", "-f", "-qq", "-y", "-e", "trace=getdents,getdents64,flock", "-o", str(trace),
                    sys.executable, "-c", SYNCING_CHILD, str(target), "0"], check=True, timeout=600)
    calls = trace.read_text().splitlines()
    on_directory = [line for line in calls if f"<{tmp_path}>" in line]
    # The directory is locked, briefly, never read.
    assert any("flock(" in line for line in on_directory), calls
    assert not [line for line in on_directory if "getdents" in line], on_directory
    with xr.open_dataset(target, engine=ENGINE) as ds:
        assert ds["t"].values.tolist() == [0.0, 1.0, 2.0, 3.0]
