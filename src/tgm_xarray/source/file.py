"""``open_file``: the low-level API over one ``.tgm`` file or URL, and the ``Source`` of one file."""

from __future__ import annotations

import asyncio
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from tgm_xarray import _core
from tgm_xarray._core import FileHandle, numpy_dtype
from tgm_xarray.errors import TgmCodecError, TgmError, TgmFormatError, TgmIndexError
from tgm_xarray.source import handles
from tgm_xarray.source.protocol import Handle
from tgm_xarray.source.remote import RemoteHandle
from tgm_xarray.table import MetadataTable, check_size
from tgm_xarray.threads import check_threads

#: An object's ``(shape, numpy dtype)``, or why its dtype cannot be read.
_Layout = tuple[tuple[int, ...], np.dtype] | TgmCodecError


class TgmFile:
    """One ``.tgm`` file: its messages' metadata and descriptors, and hyperslab reads.

    >>> f = open_file("forecast.tgm")                      # doctest: +SKIP
    >>> f.read(0, 0, (slice(0, 10), slice(None))).shape   # doctest: +SKIP
    (10, 1440)

    ``path`` may also be a URL (``https://...``, ``s3://...``; ``storage_options`` go to fsspec):
    then reads fetch only the frames they need (docs/remote.md).

    Instances share the process's cached handle of the file, are safe to use from any number
    of threads at once, and pickle as their absolute path and the version of the file they
    opened: a worker reopens through its own cache, and raises ``TgmStaleFileError`` if the file
    has been replaced or rewritten since (rather than read other values than the client's).
    ``version`` is that check: ``None`` opens whatever version is there. ``complete_only``: a
    local file cut short (truncated, or followed by bytes that are no message) opens with the
    messages before the cut, :attr:`cut` saying why the rest is none, instead of raising
    ``TgmFormatError`` (a ``ValueError`` for a URL). ``handle``: a ``remote.RemoteHandle`` of
    one's own (over another fetcher) instead of the cache's.

    ``read(msg, obj, index=None, out=None, verify_hash=None, threads=None)`` reads an object, or
    the part ``index`` selects (outer indexing), into ``out``. ``index`` is a slice, an int, a
    1-D integer or boolean array, or a tuple of those (one per axis, ``...`` allowed, missing
    trailing axes are whole); only what it selects is decoded where the codec allows. ``out``,
    when given, must be C-contiguous and of the result's shape and dtype. The whole read, index
    included, runs in the Rust core. ``threads``: at most this many threads decode one large
    read (szip, blosc2: whole objects and bands of rows); None lets a process-wide budget of one
    thread per core decide (docs/architecture.md). ``verify_hash``: ``None`` (the default) checks
    the stored xxh3 hash of every object that has one, once per object and file version, hashing
    the object's whole frame whatever part a read decodes; ``True`` also refuses objects written
    without a hash; ``False`` checks none (docs/errors.md, "Integrity").
    """

    def __init__(self, path: str | os.PathLike, storage_options: dict | None = None,
                 version: handles.FileVersion | None = None, complete_only: bool = False, *,
                 handle: RemoteHandle | None = None):
        self.path = handles.absolute(path)
        self.storage_options = storage_options
        self.complete_only = complete_only
        self._handle: Handle | _ClosedHandle
        if handle is None:
            self._handle, self.version = handles.acquire_version(self.path, storage_options, version, complete_only)
        else:  # a remote object read through a fetcher of its own, not the cache's
            self._handle, self.version = handle, None
        #: Why the end of a file opened ``complete_only`` is no message (the core's words: the
        #: file, the bytes and the complete messages before them), ``None`` where none is cut.
        self.cut = self._handle.cut if complete_only and isinstance(self._handle, FileHandle) else None
        # Where the two kinds of handle differ, once: a remote one also reads asynchronously, and
        # gives the core's table builder its `messages` rather than itself.
        self._remote = self._handle if isinstance(self._handle, RemoteHandle) else None
        self.remote = self._remote is not None
        # Per message, its objects' layouts. Lists, not a dict keyed by (msg, obj): on free-
        # threaded CPython a dict lookup with an equal-but-not-identical tuple key from another
        # thread than the writer's can take ~50 us (the lock-free lookup's retry path).
        self._layouts: list[list[_Layout] | None] = [None] * len(self._handle)

    def read(self, msg: int, obj: int, index: Any = None, out: np.ndarray | None = None,
             verify_hash: bool | None = None, threads: int | None = None) -> np.ndarray:
        """See the class docstring. ``threads`` is checked here: the core takes any count."""
        if threads is not None:
            threads = check_threads(threads, self.path)
        try:
            return self._handle.read(msg, obj, index, out, verify_hash, threads)
        except ValueError as err:
            self._refuse_declared_size(msg, obj, err)
            raise

    async def read_async(self, msg: int, obj: int, index: Any = None, out: np.ndarray | None = None,
                         verify_hash: bool | None = None, threads: int | None = None) -> np.ndarray:
        """``read`` for event loops: a URL's request overlaps with any others in flight
        (``RemoteHandle.read_async``); a local file's read runs in a worker thread."""
        if self._remote is None:
            return await asyncio.to_thread(self.read, msg, obj, index, out, verify_hash, threads)
        if threads is not None:
            threads = check_threads(threads, self.path)
        try:
            return await self._remote.read_async(msg, obj, index, out, verify_hash, threads)
        except ValueError as err:
            self._refuse_declared_size(msg, obj, err)
            raise

    def _refuse_declared_size(self, msg: int, obj: int, err: ValueError) -> None:
        """A whole read makes its array from the object's shape before the core checks it: a
        shape whose bytes no array holds was numpy's bare ``ValueError`` (``err``), said here
        as the ``TgmFormatError`` the planner raises for it."""
        if isinstance(err, TgmError):
            return
        try:
            shape, dtype = self.layout(msg, obj)
            check_size(shape, dtype.itemsize, f"message {msg}, object {obj}", self.path)
        except TgmFormatError as refused:
            raise refused from err
        except TgmError:  # no layout to blame: the read's own error stands
            return

    def table(self) -> MetadataTable:
        """Every message's metadata as columns (``table_of``)."""
        return table_of([self])

    def fingerprint(self, msg: int, obj: int) -> int:
        """What identifies an object's stored payload: its frame's inline hash where it has one,
        else a hash of the payload (read, or fetched for a URL)."""
        return self._handle.fingerprint(msg, obj)

    def fingerprints(self, table: MetadataTable) -> np.ndarray:
        """Every object's :meth:`fingerprint` (uint64), in ``table``'s rows (this file's table),
        in one call: from the table where frames carry their hash, the others hashed."""
        return self._handle.fingerprints(table.core)

    def check_hash(self, msg: int, obj: int) -> bool:
        """Checks the object's stored hash against its bytes, decoding nothing (whatever its
        dtype, bitmasks included): ``True`` when it holds, ``False`` when the object was written
        without one; ``TgmHashMismatchError`` when it does not hold."""
        return self._handle.check_hash(msg, obj)

    def locate(self, msg: int) -> tuple[str, int]:
        """``(path, msg)``: one file holds every message."""
        return self.path, msg

    def cut_short(self) -> list[TgmFile]:
        """``[self]`` where the file was opened ``complete_only`` and is cut short, else ``[]``."""
        return [self] if self.cut is not None else []

    def __reduce__(self):
        return (type(self), (self.path, self.storage_options, self.version, self.complete_only))

    def __len__(self) -> int:
        return len(self._handle)

    def __repr__(self) -> str:
        return f"<TgmFile {self.path!r}: {len(self)} messages>"

    @property
    def handle(self):
        """The shared handle (``tgm_xarray._core.FileHandle``, or ``remote.RemoteHandle``)."""
        return self._handle

    def metadata(self, msg: int) -> dict:
        """Message ``msg``'s metadata: ``{"base": [...], "_extra_": {...}, "_reserved_": {...}}``."""
        return self._handle.metadata(msg)

    def descriptors(self, msg: int) -> list[dict]:
        """The descriptors of message ``msg``'s objects."""
        return self._handle.descriptors(msg)

    def layout(self, msg: int, obj: int) -> tuple[tuple[int, ...], np.dtype]:
        """``(shape, numpy dtype)`` of an object."""
        layouts = self._layouts[msg] if 0 <= msg < len(self._layouts) else None
        if layouts is None:
            layouts = []
            for shape, dtype in self._handle.object_layouts(msg):  # raises TgmIndexError for a bad msg
                try:
                    layouts.append((tuple(shape), numpy_dtype(dtype)))
                except TgmCodecError as err:  # only this object is unreadable
                    layouts.append(err)
            self._layouts[msg] = layouts
        if not 0 <= obj < len(layouts):
            raise TgmIndexError(f"{self.path}: message {msg}: object {obj} is out of range ({len(layouts)} objects)")
        layout = layouts[obj]
        if isinstance(layout, TgmCodecError):
            raise TgmCodecError(f"{self.path}: message {msg}, object {obj}: {layout}")
        return layout

    def close(self) -> None:
        """Lets go of the file: later reads and metadata raise ``ValueError`` (and ``len`` is 0).

        The handle itself is the process cache's, shared with every other reader of the file,
        so it stays mapped for them (``handles.CACHE.release(path)`` drops it from the cache).

        >>> with open_file("forecast.tgm") as f:            # doctest: +SKIP
        ...     first = f.read(0, 0)
        """
        self._handle = _ClosedHandle(self.path)
        self._remote = None

    def _table_input(self) -> FileHandle | _core.RemoteMessages:
        """What ``_core.table_of_files`` takes for this file, a remote one's descriptors fetched
        first (``RemoteHandle.parse_all``, in concurrent batches)."""
        if self._remote is None:
            return self._handle  # type: ignore[return-value]  # a FileHandle (closed: the core refuses it)
        self._remote.parse_all()
        return self._remote.messages

    def __enter__(self) -> TgmFile:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def table_of(files: Sequence[TgmFile]) -> MetadataTable:
    """The messages of ``files``, one after the other, as one metadata table, built by the core
    in one call (interpreter released for local files, no payload read). URLs have the
    descriptors of their messages read by their header fetched first, in concurrent batches
    (``RemoteHandle.parse_all``)."""
    return MetadataTable(_core.table_of_files([f._table_input() for f in files]))


class _ClosedHandle:
    """What a closed :class:`TgmFile` holds in place of its handle: any use says it is closed."""

    def __init__(self, path: str):
        self.path = path

    def __len__(self) -> int:
        return 0

    def __call__(self, *args: object, **kwargs: object):
        raise ValueError(f"{self.path}: the file is closed")

    def __getattr__(self, name: str):
        return self


def open_file(path: str | os.PathLike, storage_options: dict | None = None) -> TgmFile:
    """Opens a ``.tgm`` file or URL through the process's handle cache."""
    return TgmFile(path, storage_options)
