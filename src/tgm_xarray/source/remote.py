"""Remote ``.tgm`` files (``http(s)://``, ``s3://``, any fsspec URL) read by byte range.

``RemoteHandle`` is the remote twin of the core's mapped ``FileHandle``: the same methods, so
``TgmFile``, the handle cache and the xarray engine use either. Opening scans the file once for
the bytes that carry every message's metadata: small messages are read whole, many per request
(contiguous blocks, a few in flight at once); of large ones only the header or footer frames,
never the payload. Descriptors of large messages are fetched on first use, or for all at once in
concurrent batches (``parse_all``); a read fetches the one data-object frame it needs (or the
byte ranges of its payload) and decodes it in the Rust core with the interpreter released.
Python only moves bytes here: the walks (which bytes to fetch next, what they say, the checks of
index frames against frames) are the core's sans-IO objects (``_core.scan_remote``,
``RemoteMessages.describe``, ``RemoteMessages.payload_read``: ``core-rs/src/source/remote_file.rs``),
run through :mod:`.fetcher`, whose ``Fetcher`` makes every request (checked, retried, bounded).
An index of the file (``tgm_xarray.plans.index``) replaces the scan: the handle is built from its
metadata table and the file's size. See docs/remote.md.
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, TypeGuard

import numpy as np

from tgm_xarray import _core
from tgm_xarray.errors import TgmFormatError
from tgm_xarray.source import fetcher as fetching  # not `fetcher`: RemoteHandle takes a `fetcher=`
from tgm_xarray.source.fetcher import Fetcher, RangeFetcher, drive, drive_async
from tgm_xarray.table import MetadataTable
from tgm_xarray.threads import check_threads

if TYPE_CHECKING:
    from tgm_xarray.table import MetadataTable

#: Opening reads the file from its start in blocks of ``fetching.FIRST_BLOCK`` bytes (the first
#: request's), doubling up to ``MAX_BLOCK`` while the messages are small, ``READ_AHEAD`` blocks in
#: flight at once.
MAX_BLOCK = 8 * 2**20
READ_AHEAD = 4
#: Messages up to this size are read whole while opening (one request holds many of them);
#: of larger ones only the header or footer frames are read.
WHOLE_MESSAGE_MAX = 256 * 2**10
#: First guess of a large message's preamble and header frames; later guesses follow the file.
HEADER_GUESS = 4096
#: Bytes fetched from the end of a data-object frame to find its descriptor in one request.
TAIL_GUESS = 4096


def is_url(path: object) -> TypeGuard[str]:
    """Whether ``path`` names a remote object (``scheme://...`` other than ``file://``)."""
    return isinstance(path, str) and "://" in path and not path.startswith("file://")


def scan_settings() -> dict[str, int]:
    """How much opening reads at once, as ``_core.scan_remote`` takes it (the module's settings and
    the fetcher's first block, read at each open so that they can be changed)."""
    return {"first_block": fetching.FIRST_BLOCK, "max_block": MAX_BLOCK, "read_ahead": READ_AHEAD,
            "whole_message_max": WHOLE_MESSAGE_MAX, "header_guess": HEADER_GUESS, "tail_guess": TAIL_GUESS}


class RemoteHandle:
    """A remote ``.tgm`` object with ``FileHandle``'s methods; thread-safe.

    Opening scans the object (``_core.scan_remote``): every message's place and the bytes that
    carry its metadata. Where every message came whole, their state is the core scan's metadata
    table (frames, descriptors, hashes; nothing parsed per message) and a message's metadata
    and descriptors are fetched again on first use; of larger messages the descriptors are
    fetched on first use. ``parse_all`` fetches all of them in concurrent batches.

    ``table``: the metadata table of the object's index (``tgm_xarray.plans.index``), which replaces
    the scan (nothing is fetched); a message's metadata and descriptors are then fetched on
    first use, the message whole, and checked against the table.
    """

    def __init__(self, url: str, storage_options: dict | None = None, *, fetcher: RangeFetcher | None = None,
                 table: MetadataTable | None = None):
        # `fetcher`: another source of range requests with Fetcher's methods (virtual.py reads
        # through the object store a VirtualiZarr registry gives).
        self.path = url
        self._fetcher = fetcher or Fetcher(url, storage_options)
        if self._fetcher.size == 0:
            raise TgmFormatError(f"{url}: the file is empty")
        #: The messages (``_core.RemoteMessages``): ``_core.table_of_files`` takes them.
        self.messages: _core.RemoteMessages = (
            drive(_core.scan_remote(url, self._fetcher.size, **scan_settings()), self._fetcher.fetch_many)
            if table is None else _core.RemoteMessages.from_index(url, self._fetcher.size, table.core, TAIL_GUESS))
        self._lock = threading.Lock()

    @property
    def file_size(self) -> int:
        return self._fetcher.size

    def __len__(self) -> int:
        return len(self.messages)

    def __repr__(self) -> str:
        return f"<RemoteHandle {self.path!r}: {len(self)} messages>"

    def _ensure(self, wanted) -> None:
        """Fetches what describes the messages of ``wanted`` not described yet."""
        with self._lock:
            drive(self.messages.describe(list(wanted)), self._fetcher.fetch_many)

    def _described(self, msg: int) -> int:
        if not self.messages.is_described(msg):
            self._ensure([msg])
        return msg

    def _readable(self, msg: int) -> int:
        if self.messages.reads_need_description(msg):
            self._ensure([msg])
        return msg

    # -- FileHandle's methods -----------------------------------------------------------------
    def message_span(self, msg: int) -> tuple[int, int]:
        return self.messages.span(msg)

    def frame_spans(self, msg: int) -> list[tuple[int, int]]:
        """``(file offset, length)`` of each data-object frame of message ``msg``, known since
        opening (nothing fetched)."""
        return self.messages.frame_spans(msg)

    def parse_all(self) -> None:
        """Fetches every descriptor that reads need and that is not fetched yet (of messages read
        by their header or footer), in concurrent batches of range requests. Messages in the
        table need none: their metadata and descriptors are fetched on first use."""
        self._ensure([i for i in range(len(self.messages)) if self.messages.reads_need_description(i)])

    def metadata(self, msg: int) -> dict:
        return self.messages.metadata(self._described(msg))

    def descriptors(self, msg: int) -> list[dict]:
        return self.messages.descriptors(self._described(msg))

    def object_layouts(self, msg: int) -> list[tuple[list[int], str]]:
        """``FileHandle.object_layouts``: from the scan's (or the index's) table where it holds
        the message (nothing fetched)."""
        return self.messages.object_layouts(self._readable(msg))

    def fingerprint(self, msg: int, obj: int) -> int:
        """``FileHandle.fingerprint``: from the frame's inline hash where it has one (nothing
        fetched), else from its payload (the frame is fetched)."""
        known = self.messages.fingerprint(self._readable(msg), obj)
        if known is not None:
            return known
        return _core.frame_fingerprint(self._fetcher.fetch(*self.messages.frame_range(msg, obj)))

    def fingerprints(self, table: _core.Table) -> np.ndarray:
        """``FileHandle.fingerprints``: the table's where frames carry their hash (nothing
        fetched), the others one by one (:meth:`fingerprint`)."""
        prints, rows = table.fingerprints(), MetadataTable(table)
        for row in np.flatnonzero(~rows.has_frame_hash).tolist():
            prints[row] = self.fingerprint(int(rows.msg[row]), int(rows.obj[row]))
        return prints

    def check_hash(self, msg: int, obj: int) -> bool:
        """``FileHandle.check_hash``: of the frame, fetched."""
        frame = self._fetcher.fetch(*self.messages.frame_range(self._readable(msg), obj))
        self.messages.check_frame(msg, obj, frame)
        return _core.check_frame_hash(frame, f"{self.path}: message {msg}, object {obj}")

    def _payload_read(self, msg: int, obj: int, index, out: np.ndarray | None, verify_hash: bool | None):
        """The core's read of ``index`` from byte ranges of the object's payload, where it has one
        (``verify_hash=True`` hashes the whole frame: none then)."""
        if verify_hash is True:
            return None
        return self.messages.payload_read(msg, obj, index, out)

    def read(self, msg: int, obj: int, index=None, out: np.ndarray | None = None,
             verify_hash: bool | None = None, threads: int | None = None) -> np.ndarray:
        """``FileHandle.read``. Objects whose values sit at fixed places in their payload (raw,
        or whole-byte packing, uncompressed) fetch just the byte ranges a partial read needs;
        others fetch their frame (and so does ``verify_hash=True``, which hashes it all; the default,
        ``None``, checks the hash of every frame it fetches whole, docs/errors.md)."""
        threads = check_threads(threads, self.path)
        start, stop = self.messages.frame_range(self._readable(msg), obj)
        by_ranges = self._payload_read(msg, obj, index, out, verify_hash)
        if by_ranges is not None:
            return drive(by_ranges, self._fetcher.fetch_many)
        frame = self._fetcher.fetch(start, stop)
        self.messages.check_frame(msg, obj, frame)  # the table's, or its index's, object
        context = f"{self.path}: message {msg}, object {obj}"
        return _core.read_frame(frame, index, out, verify_hash, context, threads)

    async def read_async(self, msg: int, obj: int, index=None, out: np.ndarray | None = None,
                         verify_hash: bool | None = None, threads: int | None = None) -> np.ndarray:
        """``read`` for event loops, without any worker thread: every request (a description the
        message needs first, the frame, or the byte ranges of a partial read) is awaited on the
        fetcher's loop, overlapping with any others in flight. The decode runs in the core on the
        caller's loop, with the interpreter released: the loop is busy for the decode."""
        threads = check_threads(threads, self.path)
        if self.messages.reads_need_description(msg):
            await drive_async(self.messages.describe([msg]), self._fetcher)
        start, stop = self.messages.frame_range(msg, obj)
        by_ranges = self._payload_read(msg, obj, index, out, verify_hash)
        if by_ranges is not None:
            return await drive_async(by_ranges, self._fetcher)
        frame = await self._fetcher.fetch_async(start, stop)
        self.messages.check_frame(msg, obj, frame)
        context = f"{self.path}: message {msg}, object {obj}"
        return _core.read_frame(frame, index, out, verify_hash, context, threads)
