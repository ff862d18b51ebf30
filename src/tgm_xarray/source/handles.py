"""The per-process cache of open file handles, shared by every thread.

Opening a handle maps the file and indexes its messages; every later read through it costs no
system call. The cache is keyed by what identifies a file's *contents* (real path, device, inode,
size, modification time), so a file rewritten in place is opened afresh and never read through
a stale index. A pickled ``TgmFile`` carries the version it was opened on, and reopening it
where the file is another version raises ``TgmStaleFileError``. Only regular files are opened.
It is a bounded LRU; a handle evicted while a reader still holds it stays valid until that
reader lets go (handles are reference counted, never closed under a reader).

Remote objects (``http(s)://``, ``s3://``: ``remote.RemoteHandle``) join the same cache, keyed by
URL and storage options: they are indexed once per process, whatever number of datasets and
tasks use them. A remote object replaced in place is seen after ``CACHE.release(url)``.

A file may be opened ``complete_only`` (cfgrib's ``errors="warn"``: a file cut short keeps its
complete messages, ``FileHandle.cut`` says why the rest is none): such a handle is a cache entry
of its own, never handed to a strict open, which must raise for the same file. URLs have no
such open (the core's remote scan reads a file whole or refuses it).

An open that meets an atomic replace (``os.replace`` of a new file over the path, as writers
publish one) between its stat and its mapping is done once more, with the new file
(:func:`unreplaced`): a handle is never cached under another version's key.

Forked children start with an empty cache: a mapping made before ``fork`` is shared with the
parent, and the lock may have been held by another thread at the time of the fork.
"""

from __future__ import annotations

import functools
import os
import stat
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import NamedTuple, TypeVar

from tgm_xarray._core import FileHandle
from tgm_xarray.errors import TgmStaleFileError, not_a_file
from tgm_xarray.source.protocol import Handle
from tgm_xarray.source.remote import RemoteHandle, is_url

#: How many handles the cache keeps open at most.
DEFAULT_MAX_OPEN = 128


class FileKey(NamedTuple):
    """What identifies one version of a file's contents."""

    path: str
    device: int
    inode: int
    size: int
    mtime_ns: int

    @classmethod
    def of(cls, path: str | os.PathLike) -> FileKey:
        """Stats ``path``: ``FileNotFoundError`` if it is missing, ``IsADirectoryError`` for a
        directory, and ``OSError`` for any other file that is not a regular file (opening a named
        pipe would block until a writer comes, a device could be endless)."""
        real = os.path.realpath(os.fspath(path))
        st = os.stat(real)
        if not stat.S_ISREG(st.st_mode):
            raise not_a_file(real, st.st_mode)
        return cls(real, st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)

    @property
    def version(self) -> FileVersion:
        """The version of the contents, comparable across the hosts that mount one file system
        (where device numbers and real paths may differ)."""
        return FileVersion(self.inode, self.size, self.mtime_ns)


class FileVersion(NamedTuple):
    """One version of a file's contents: what a pickled ``TgmFile`` is bound to."""

    inode: int
    size: int
    mtime_ns: int


def changed(path: str, then: FileVersion | None, now: FileVersion | None) -> str:
    """What a ``TgmStaleFileError`` says first of ``path``, opened at version ``then`` and found
    at ``now`` (``None``: a URL's, which has none)."""
    return (f"{path}: the file changed after it was opened (inode, size, mtime_ns {then and tuple(then)} then, "
            f"{now and tuple(now)} now)")


class Replaced(Exception):
    """What an opener of :func:`unreplaced` raises where the file it opened is not (or no longer)
    the version of the key it was given."""


_Opened = TypeVar("_Opened")


def unreplaced(path: str | os.PathLike, open_version: Callable[[FileKey], _Opened]) -> _Opened:
    """``open_version(key)`` of the version of ``path`` there now. Where it raises
    :class:`Replaced` (the file was replaced between the stat and the open), once more with the
    new version's key; ``TgmStaleFileError`` if the file is replaced again meanwhile."""
    for _ in range(2):
        key = FileKey.of(path)
        try:
            return open_version(key)
        except Replaced:
            continue
    raise TgmStaleFileError(f"{key.path}: the file was replaced twice while it was being opened: "
                            "open it again once its writer is done")


def _mapped(key: FileKey, complete_only: bool) -> FileHandle:
    """The handle of version ``key``: the path is stat'ed again once it is mapped, since the
    mapping opens the path by name (``Replaced`` if it is another version by then)."""
    handle = FileHandle(key.path, complete_only)
    if FileKey.of(key.path) != key:
        raise Replaced(key.path)
    return handle


def absolute(path: str | os.PathLike) -> str:
    """``path`` made absolute (URLs are returned as they are), so that it names the same file
    in any process it is pickled to, whatever that process's working directory."""
    path = os.fspath(path)
    return path if is_url(path) else os.path.abspath(path)


class RemoteKey(NamedTuple):
    """What identifies a remote object: its URL and how it is reached."""

    path: str
    options: str

    @classmethod
    def of(cls, url: str, storage_options: dict | None) -> RemoteKey:
        return cls(url, repr(sorted((storage_options or {}).items())))


#: A cached handle's key: the file's (or URL's), and whether it was opened ``complete_only``.
CacheKey = tuple[FileKey | RemoteKey, bool]


class HandleCache:
    """A thread-safe LRU of ``FileHandle`` (``RemoteHandle`` for URLs) keyed by ``FileKey``
    (``RemoteKey``) and how it was opened."""

    def __init__(self, max_open: int = DEFAULT_MAX_OPEN):
        if max_open < 1:
            raise ValueError(f"max_open must be at least 1, got {max_open}")
        self.max_open = max_open
        self._handles: OrderedDict[CacheKey, Handle] = OrderedDict()
        self._lock = threading.Lock()
        # One lock per key being opened, so concurrent first opens of one file open it once
        # while opens of other files go ahead.
        self._opening: dict[CacheKey, threading.Lock] = {}
        self.opens = 0  # handles opened so far (tests count them)

    def acquire(self, path: str | os.PathLike, storage_options: dict | None = None) -> Handle:
        """The handle of the current contents of ``path`` (a file or a URL), opening it if needed."""
        return self.acquire_version(path, storage_options)[0]

    def acquire_version(self, path: str | os.PathLike, storage_options: dict | None = None,
                        expected: FileVersion | None = None, complete_only: bool = False,
                        ) -> tuple[Handle, FileVersion | None]:
        """The handle of ``path`` and the version of the file it maps (``None`` for a URL).

        With ``expected``, the file must still be that version: ``TgmStaleFileError`` otherwise.
        ``complete_only``: a file cut short keeps its complete messages (a ``ValueError`` for a
        URL, which has no such open).
        """
        if is_url(path):
            if complete_only:
                raise ValueError(f"{path}: only a local file cut short can be read up to its last complete "
                                 "message (errors='warn' or 'ignore'): a URL is read whole or refused")
            remote = functools.partial(RemoteHandle, path, storage_options)
            return self._acquire((RemoteKey.of(path, storage_options), False), remote), None

        def acquire(key: FileKey) -> tuple[Handle, FileVersion]:
            if expected is not None and key.version != expected:
                raise TgmStaleFileError(f"{changed(key.path, expected, key.version)}; reading it would mix two "
                                        "versions: open it again")
            return self._acquire((key, complete_only), functools.partial(_mapped, key, complete_only)), key.version

        return unreplaced(path, acquire)

    def _acquire(self, key: CacheKey, opener: Callable[[], Handle]) -> Handle:
        with self._lock:
            handle = self._hit(key)
            if handle is not None:
                return handle
            opening = self._opening.setdefault(key, threading.Lock())
        with opening:
            try:
                with self._lock:
                    handle = self._hit(key)
                if handle is None:
                    handle = opener()
                    with self._lock:
                        self.opens += 1
                        self._handles[key] = handle
                        self._evict()
            finally:  # also when the opener raises
                with self._lock:
                    self._opening.pop(key, None)
        return handle

    def _hit(self, key: CacheKey) -> Handle | None:
        handle = self._handles.get(key)
        if handle is not None:
            self._handles.move_to_end(key)
        return handle

    def _evict(self) -> None:
        while len(self._handles) > self.max_open:
            self._handles.popitem(last=False)

    def release(self, path: str | os.PathLike) -> None:
        """Drops the cache's references to every version of ``path`` (a file or a URL)."""
        real = path if is_url(path) else os.path.realpath(os.fspath(path))
        with self._lock:
            for key in [k for k in self._handles if k[0].path == real]:
                del self._handles[key]

    def clear(self) -> None:
        with self._lock:
            self._handles.clear()

    def __len__(self) -> int:
        return len(self._handles)

    def _reset_after_fork(self) -> None:
        self._handles = OrderedDict()
        self._lock = threading.Lock()
        self._opening = {}


#: The process-wide cache.
CACHE = HandleCache()

if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=CACHE._reset_after_fork)


def acquire(path: str | os.PathLike, storage_options: dict | None = None) -> Handle:
    """The shared handle of ``path`` (see ``HandleCache.acquire``)."""
    return CACHE.acquire(path, storage_options)


def acquire_version(path: str | os.PathLike, storage_options: dict | None = None,
                    expected: FileVersion | None = None, complete_only: bool = False,
                    ) -> tuple[Handle, FileVersion | None]:
    """The shared handle of ``path`` and its file's version (see ``HandleCache.acquire_version``)."""
    return CACHE.acquire_version(path, storage_options, expected, complete_only)
