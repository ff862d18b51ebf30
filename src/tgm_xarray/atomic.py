"""Atomic file writes: the one home of how tgm-xarray replaces a file on disk.

A write goes to a temporary file ``.<name>.tgm-write.tmp`` (a name too long for that is
shortened, :func:`turn_name`) in the directory of the *real* target (symlinks are followed:
the real file gets the data and a link stays a link). Once complete it is renamed onto the
target. Any failure, Ctrl-C or SIGTERM removes the temporary
file and leaves the target as it was, or absent: readers, and a process that dies, never see a
half-written target. ``durable=True`` also survives a power cut: the file is fsynced before the
rename and the directory after it (as xarray's, zarr's and ecCodes' writes, not by default: it
costs a disk flush per file, often longer than encoding the file's field).

Writes of one target take turns, in threads and processes: a write in progress is the
temporary file of its target (one name per target, :func:`turn_name`) that its writer holds an
exclusive ``flock`` on, and a new write, after a brief ``flock`` of the directory, waits until
that file is gone before creating its own. The lock therefore lives on files that exist anyway:
nothing is left behind when a writer is killed (the kernel drops its locks; its temporary file
is removed by the SIGTERM handler, or by the next writer of the target, which finds it
unlocked), and writes of different files in one directory never wait for each other beyond that
brief directory lock. A child forked meanwhile lets go of the locks it inherits (``_Turns``).

>>> import os, tempfile
>>> path = os.path.join(tempfile.mkdtemp(), "data.bin")
>>> atomic_write_bytes(path, b"first ")
>>> with AtomicFile(path, "a") as out:
...     out.write(b"second")
>>> open(path, "rb").read()
b'first second'
"""

from __future__ import annotations

import errno
import fcntl
import hashlib
import os
import queue
import shutil
import signal
import stat
import threading
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, BinaryIO, Literal, Self, get_args

from tgm_xarray.errors import not_a_file

WriteMode = Literal["w", "w-", "a"]
MODES = get_args(WriteMode)


def atomic_write_bytes(path: str | os.PathLike, data: bytes, *, durable: bool = False) -> None:
    """Replaces ``path`` by ``data``, atomically (readers see the old contents or the new)."""
    with AtomicFile(path, durable=durable) as out:
        out.write(data)


class CommitsOnSuccess:
    """A ``with`` block that commits when it ends normally and aborts when it raises."""

    def commit(self) -> None:
        raise NotImplementedError

    def abort(self) -> None:
        raise NotImplementedError

    def __enter__(self) -> Self:
        return self

    def __exit__(self, kind, value, traceback) -> None:
        if kind is None:
            self.commit()
        else:
            self.abort()


class AtomicFile(CommitsOnSuccess):
    """A new version of ``path``, written to a temporary file: :meth:`commit` puts it in place,
    :meth:`abort` drops it; as a context manager, leaving normally commits and an exception aborts.

    ``mode``: ``"w"`` replaces, ``"w-"`` raises ``FileExistsError`` if ``path`` exists, ``"a"``
    starts with a copy of the existing file. With ``by_name=True`` no file is opened (``file`` is
    None): a library creates ``tmp`` by its name (a file, or a directory such as a Zarr store),
    inside a temporary directory of ours; that directory holds the turn, as the library may lock
    or replace what it creates. The write holds the target's turn until its commit or abort.
    ``durable``: the commit fsyncs the file before the rename and the directory after it.
    """

    def __init__(self, path: str | os.PathLike, mode: WriteMode = "w", *, by_name: bool = False,
                 durable: bool = False):
        if mode not in MODES or (by_name and mode == "a"):
            raise ValueError(f"mode must be one of {MODES} ('a' only for files), got {mode!r}")
        #: The real target (symlinks followed), the file that gets replaced.
        self.path = os.path.realpath(os.fspath(path))
        self.durable = bool(durable)
        self._thread = threading.get_ident()
        #: Whether this process was forked from the one that opened the write (``_let_go_in_child``).
        self._inherited = False
        held = _TURNS.writes.get(self.path)
        if held is not None and held._thread == self._thread:  # waiting would never end
            raise RuntimeError(f"{self.path}: this thread is already writing it (a writer of it is "
                               "open); close that writer first")
        self._holder, self._fd = _claim_turn(self.path, by_name)  # our temporary file or directory
        _TURNS.hold(self)
        #: What is written and renamed onto the target.
        self.tmp = os.path.join(self._holder, os.path.basename(self.path)) if by_name else self._holder
        self.file = None if by_name else os.fdopen(self._fd, "wb")
        self.closed = False
        try:
            #: Whether the target existed when this write got its turn.
            self.existed = os.path.exists(self.path)
            if mode == "w-" and self.existed:
                raise FileExistsError(errno.EEXIST, "exists (mode='w-')", self.path)
            if self.existed and not by_name:
                shutil.copymode(self.path, self.tmp)  # a replaced file keeps its permissions
            if mode == "a" and self.existed:
                self._copy_target()
        except BaseException:
            self.abort()
            raise

    def write(self, data: bytes | memoryview) -> None:
        self.check_owned()
        with self._naming_target():
            self._opened().write(data)

    def commit(self) -> None:
        """Moves the written file onto the target (``durable``: file and directory fsynced)."""
        if self.closed:
            raise ValueError(f"{self.path}: the write is already committed or aborted")
        self.check_owned()
        try:
            with self._naming_target():
                if self.file is not None:
                    self.file.flush()
                if self.durable:
                    _fsync_tree(self.tmp)
                _replace(self.tmp, self.path)
        except BaseException:
            self.abort()
            raise
        if self.durable:
            _sync_directory(os.path.dirname(self.path))
        if self.tmp != self._holder:
            _remove(self._holder)
        self._end()

    def abort(self) -> None:
        """Drops everything written; the target stays as it was. In a forked child it only lets
        go of the write: the temporary file is the parent's."""
        if self.closed:
            return
        try:
            if not self._inherited:
                _remove(self._holder)
        finally:
            self._end()

    def check_owned(self) -> None:
        """Raises ``RuntimeError`` in a process forked while this write was open: the write, and
        its turn, are the parent's."""
        if self._inherited:
            raise RuntimeError(f"{self.path}: this write was opened before this process was forked from "
                               "the one writing it: a forked child cannot write or commit it (open a "
                               "writer of its own)")

    def _end(self) -> None:
        """Closes the temporary file, which gives up the turn (its flock) to the next write."""
        self.closed = True
        if not self._inherited:
            _TEMPORARIES.discard(self._holder)
        with _TURNS.ending(self):
            try:
                if self.file is not None:
                    self.file.close()  # flushes: after a full disk it fails again, but closes the fd
                else:
                    os.close(self._fd)
            except OSError:
                pass

    def _let_go_in_child(self) -> None:
        """In a child forked while this write was open: its descriptor of the temporary file
        becomes one of ``/dev/null``. The turn's flock belongs to the open file, which the child
        shares: its copy would hold the turn after the parent dies, and every later write of the
        target would wait for the child. Whatever the child flushes goes nowhere."""
        self._inherited = True
        null = os.open(os.devnull, os.O_RDWR | os.O_CLOEXEC)
        try:
            os.dup2(null, self._fd, inheritable=False)
        finally:
            os.close(null)

    def _copy_target(self) -> None:
        fd = os.open(self.path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)  # a FIFO: no wait
        with open(fd, "rb") as source, self._naming_target():
            mode = os.fstat(fd).st_mode
            if not stat.S_ISREG(mode):
                raise not_a_file(self.path, mode)
            shutil.copyfileobj(source, self._opened(), 16 << 20)

    def _opened(self) -> BinaryIO:
        """The temporary file; a write by name has none (its library writes ``tmp`` itself)."""
        if self.file is None:
            raise ValueError(f"{self.path}: this write is by name: write to {self.tmp}, not through write()")
        return self.file

    @contextmanager
    def _naming_target(self) -> Iterator[None]:
        """A write error (a full disk, a file size limit) names the target, not a bare errno."""
        try:
            yield
        except OSError as error:
            if error.filename is not None or error.errno is None:
                raise
            raise OSError(error.errno, f"{error.strerror} (writing it)", self.path) from error


def temporary_name(path: str) -> str:
    """``.<name>.<pid>-<random>.tmp`` beside ``path``: a name no other write uses."""
    return _beside(path, f".{os.getpid()}-{uuid.uuid4().hex[:12]}.tmp")


def turn_name(path: str) -> str:
    """``.<name>.tgm-write.tmp`` beside ``path``: the temporary file (or directory) of the write
    of ``path`` in progress. One name per target, so a write finds another one by opening it,
    not by listing a directory that may hold thousands of outputs."""
    return _beside(path, ".tgm-write.tmp")


#: The longest file name (bytes) Linux and macOS file systems take.
NAME_MAX = 255
#: Hex digits of the hash that stands for the end of a name too long to keep whole.
_NAME_HASH = 16


def _beside(path: str, suffix: str) -> str:
    """``.<name><suffix>`` beside ``path``. A name too long for that to fit ``NAME_MAX`` keeps
    its start and a hash of the whole name instead: the same target, the same name."""
    directory, name = os.path.split(path)
    encoded = os.fsencode(name)
    room = NAME_MAX - 1 - len(os.fsencode(suffix))
    if len(encoded) > room:
        digest = hashlib.sha256(encoded).hexdigest()[:_NAME_HASH]
        name = os.fsdecode(encoded[: room - 1 - _NAME_HASH]) + "~" + digest
    return os.path.join(directory, f".{name}{suffix}")


def _claim_turn(path: str, as_directory: bool) -> tuple[str, int]:
    """Waits until no other write of ``path`` is in progress, then creates this write's temporary
    file (or directory) and flocks it; returns its name and descriptor. Checking and creating
    happen under a flock of the directory, so two writes cannot both find the way free."""
    tmp = turn_name(path)
    dir_fd = _TURNS.open(os.path.dirname(path), os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        while True:
            fcntl.flock(dir_fd, fcntl.LOCK_EX)
            try:
                busy = _write_in_progress(tmp, path)
                if busy is None:
                    return tmp, _create_temporary(tmp, as_directory)
            finally:
                fcntl.flock(dir_fd, fcntl.LOCK_UN)
            try:
                fcntl.flock(busy, fcntl.LOCK_EX)  # until that write commits or aborts
            finally:
                _TURNS.close(busy)
    finally:
        _TURNS.close(dir_fd)


def _write_in_progress(tmp: str, path: str) -> int | None:
    """A descriptor of ``tmp`` if another write holds it, or None once it is free: a temporary
    file that nobody holds was left by a writer killed by SIGKILL (or a crash, a power cut), and
    is removed (the kernel dropped that writer's lock)."""
    try:  # O_NONBLOCK, O_NOFOLLOW: a FIFO or a link planted under that name is not waited on
        fd = _TURNS.open(tmp, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except FileNotFoundError:
        return None
    except OSError as error:
        raise FileExistsError(errno.EEXIST, f"in the way of the write of {path} ({error.strerror}): "
                              "remove it", tmp) from error
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        return fd
    except BaseException:
        _TURNS.close(fd)
        raise
    _TURNS.close(fd)
    _remove(tmp)
    if os.path.lexists(tmp):
        raise FileExistsError(errno.EEXIST, f"left by a write of {path} that was killed, and cannot be "
                              "removed: remove it", tmp)
    return None


def _create_temporary(tmp: str, as_directory: bool) -> int:
    _TEMPORARIES.add(tmp)  # first: a SIGTERM right after the creation removes it too
    try:
        # O_EXCL: never clobber; mode 0o666 lets the umask decide, as for any new file.
        fd = None if as_directory else _TURNS.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o666)
        if as_directory:
            os.mkdir(tmp, 0o777)
    except BaseException:
        _TEMPORARIES.discard(tmp)  # not created: whatever holds the name is not ours to remove
        raise
    try:
        if fd is None:
            fd = _TURNS.open(tmp, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # new: nobody else has it open
    except BaseException:
        if fd is not None:
            _TURNS.close(fd)
        _remove(tmp)
        _TEMPORARIES.discard(tmp)
        raise
    return fd


def _remove(path: str) -> None:
    try:
        if os.path.isdir(path) and not os.path.islink(path):
            shutil.rmtree(path, ignore_errors=True)
        else:
            os.unlink(path)
    except OSError:
        pass


def _replace(tmp: str, path: str) -> None:
    """``tmp`` becomes ``path``: one rename, except over a directory (a Zarr store), which is
    moved aside first and removed after, so ``path`` is never half old, half new."""
    if not (os.path.isdir(tmp) and os.path.isdir(path)):
        replaced = _open_regular_file(path)
        os.replace(tmp, path)
        if replaced is not None:
            _RELEASER.close(replaced)
        return
    aside = temporary_name(path)
    os.rename(path, aside)
    try:
        os.rename(tmp, path)
    except BaseException:
        os.rename(aside, path)
        raise
    shutil.rmtree(aside, ignore_errors=True)


def _open_regular_file(path: str) -> int | None:
    """A descriptor of ``path`` if it is a regular file we can open, else None."""
    try:  # O_NONBLOCK: a FIFO is not waited on (and is not kept)
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError:
        return None
    if stat.S_ISREG(os.fstat(fd).st_mode):
        return fd
    os.close(fd)
    return None


class _Turns:
    """The descriptors this process holds a ``flock`` on or waits for one on, and the writes
    whose turns they hold: what a forked child must let go of.

    A flock belongs to the open file, which a forked child shares: the child's copy keeps it
    while the child lives, also after the parent is killed (SIGKILL), and every later write of
    the target (or of its directory) would wait for the child without a word. In the child those
    of ``_claim_turn`` (their thread is not there) are closed, and the writes' are made
    ``/dev/null`` (``AtomicFile._let_go_in_child``). Descriptors are opened and closed under a
    lock that the fork also takes, so that a child finds each one either open and listed or
    neither.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._claiming: set[int] = set()  # the directory's, another write's, a new turn's
        #: The real targets this process is writing, and the write holding each one's turn.
        self.writes: dict[str, AtomicFile] = {}

    def open(self, path: str, flags: int, mode: int = 0o777) -> int:
        with self._lock:
            fd = os.open(path, flags, mode)
            self._claiming.add(fd)
        return fd

    def close(self, fd: int) -> None:
        with self._lock:
            self._claiming.discard(fd)
            os.close(fd)

    def hold(self, write: AtomicFile) -> None:
        """The new turn's descriptor is now ``write``'s, until its ``_end``."""
        with self._lock:
            self._claiming.discard(write._fd)
            self.writes[write.path] = write

    @contextmanager
    def ending(self, write: AtomicFile) -> Iterator[None]:
        """Around the closing of ``write``'s descriptor."""
        with self._lock:
            try:
                yield
            finally:
                if self.writes.get(write.path) is write:
                    del self.writes[write.path]

    def _before_fork(self) -> None:
        self._lock.acquire()

    def _after_fork_in_parent(self) -> None:
        self._lock.release()

    def _after_fork_in_child(self) -> None:
        for fd in self._claiming:
            os.close(fd)
        for write in self.writes.values():
            write._let_go_in_child()
        self._lock, self._claiming, self.writes = threading.Lock(), set(), {}


_TURNS = _Turns()
os.register_at_fork(before=_TURNS._before_fork, after_in_parent=_TURNS._after_fork_in_parent,
                    after_in_child=_TURNS._after_fork_in_child)


class _Releaser:
    """Closes the last descriptors of replaced files on a thread of its own.

    Freeing a replaced file's blocks waits until the disk has written those still being written
    back (ext4: 11 ms for a file of 8 fields just written), so a rename over it would wait there,
    before the writer may go on. ``_replace`` holds the file open across the rename and hands the
    descriptor here: the wait happens on this thread, and the space is freed all the same.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._queue: queue.SimpleQueue[int] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None

    def close(self, fd: int) -> None:
        with self._lock:
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name="tgm-release-replaced", daemon=True)
                self._thread.start()
        self._queue.put(fd)

    def _run(self) -> None:
        while True:
            os.close(self._queue.get())

    def _after_fork_in_child(self) -> None:
        """The thread is not in the child: close what it had left, at once."""
        pending, self._queue = self._queue, queue.SimpleQueue()
        self._lock, self._thread = threading.Lock(), None
        while not pending.empty():
            os.close(pending.get_nowait())


_RELEASER = _Releaser()
os.register_at_fork(after_in_child=_RELEASER._after_fork_in_child)


def _fsync_tree(path: str) -> None:
    """fsyncs the file ``path``, or every file and directory under the directory ``path``."""
    if not os.path.isdir(path):
        fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        return
    for root, _, files in os.walk(path):
        for name in files:
            _fsync_tree(os.path.join(root, name))
        _sync_directory(root)


def _sync_directory(directory: str) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_CLOEXEC)
    except OSError:  # some platforms cannot open directories
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class _Temporaries:
    """The temporary files of this process's writes, removed if SIGTERM ends the process.

    SIGTERM (what dask, Kubernetes and systemd send) ends a process at once by default, skipping
    every ``finally``. While a write started from the main thread is open, a handler of ours
    replaces the default: it removes the files and ends the process by SIGTERM all the same. A
    handler the program installed is chained to instead, untouched: if it raises (``sys.exit``),
    the write aborts and removes its file as for Ctrl-C. Files left anyway (SIGKILL, a write in
    another thread than the main one) are removed by the next write of their target.
    """

    def __init__(self) -> None:
        self._paths: set[str] = set()
        self._previous: Any = None  # the handler ours replaced, while ours is installed

    def __contains__(self, path: str) -> bool:
        return path in self._paths

    def add(self, path: str) -> None:
        self._paths.add(path)
        if self._previous is None and threading.current_thread() is threading.main_thread():
            previous = signal.getsignal(signal.SIGTERM)
            # None: a handler installed outside Python, which cannot be chained to.
            if previous is not None and previous != signal.SIG_IGN:
                signal.signal(signal.SIGTERM, self._on_sigterm)
                self._previous = previous

    def discard(self, path: str) -> None:
        self._paths.discard(path)
        if not self._paths and self._previous is not None and \
                threading.current_thread() is threading.main_thread():
            if signal.getsignal(signal.SIGTERM) == self._on_sigterm:
                signal.signal(signal.SIGTERM, self._previous)
            self._previous = None

    def _on_sigterm(self, signum: int, frame) -> None:
        if callable(self._previous):
            self._previous(signum, frame)
            return
        for path in list(self._paths):
            _remove(path)
        signal.signal(signum, signal.SIG_DFL)
        os.kill(os.getpid(), signum)

    def _forget_after_fork(self) -> None:
        self._paths = set()  # the parent's files: a child's SIGTERM must not remove them


_TEMPORARIES = _Temporaries()
os.register_at_fork(after_in_child=_TEMPORARIES._forget_after_fork)
