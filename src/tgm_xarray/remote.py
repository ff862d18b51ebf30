"""Remote ``.tgm`` files (``http(s)://``, ``s3://``, any fsspec URL) read by byte range.

``RemoteHandle`` is the remote twin of the core's mapped ``FileHandle``: the same methods, so
``TgmFile``, the handle cache and the xarray engine use either. Opening walks the messages with
a bounded number of range requests (about one per message, plus one batch of concurrent
requests for the object descriptors) and never fetches a payload; a read fetches the one
data-object frame it needs and decodes it in the Rust core with the interpreter released.
Python only moves bytes here: every format rule is in ``_core`` (``codec-rs/src/frames.rs``).

Transient failures (HTTP 408/425/429/5xx, dropped connections, timeouts, short bodies) are
retried with exponential backoff; the rest raise at once, naming the URL. See docs/remote.md.
"""

from __future__ import annotations

import copy
import errno
import sys
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tgm_xarray import _core
from tgm_xarray.errors import TgmFormatError, TgmIndexError

#: Attempts per range request before a transient failure is raised, and the first backoff (s).
RETRIES = 5
BACKOFF = 0.1
#: First guess of a message's header frames (metadata and index); later guesses follow the file.
HEADER_GUESS = 4096
#: Bytes fetched from the end of a data-object frame to find its descriptor in one request.
TAIL_GUESS = 4096
#: Range requests one batch keeps in flight at once.
CONCURRENCY = 32
_TRANSIENT_STATUS = {408, 425, 429, 500, 502, 503, 504}


def is_url(path: Any) -> bool:
    """Whether ``path`` names a remote object (``scheme://...`` other than ``file://``)."""
    return isinstance(path, str) and "://" in path and not path.startswith("file://")


class ShortReadError(OSError):
    """The server sent fewer bytes than the range asked for."""


def _status(err: BaseException | None) -> int | None:
    """The HTTP status behind ``err``, also where fsspec re-raised it as another error."""
    while err is not None:
        status = getattr(err, "status", None)
        if isinstance(status, int):
            return status
        err = err.__cause__ or err.__context__
    return None


def _transient(err: BaseException) -> bool:
    status = _status(err)
    if status is not None:
        return status in _TRANSIENT_STATUS
    if isinstance(err, (FileNotFoundError, PermissionError)):
        return False
    if isinstance(err, (TimeoutError, ConnectionError, ShortReadError)):
        return True
    aiohttp = sys.modules.get("aiohttp")
    return aiohttp is not None and isinstance(err, (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError))


def _final_error(url: str, what: str, err: BaseException, tries: int) -> OSError:
    """The exception a caller sees: the URL, the bytes asked for and what went wrong."""
    status = _status(err)
    if isinstance(err, PermissionError) or status in (401, 403):
        return PermissionError(errno.EACCES, f"{url}: access denied (HTTP {status or 403}, {what})", url)
    if isinstance(err, FileNotFoundError) or status in (404, 410):
        return FileNotFoundError(errno.ENOENT, f"{url}: not found ({what})", url)
    reason = f"HTTP {status}" if status is not None else f"{type(err).__name__}: {err}"
    after = f" after {tries} tries" if tries > 1 else ""
    error = TimeoutError if isinstance(err, TimeoutError) else OSError
    return error(f"{url}: {what} failed{after}: {reason}")


class Fetcher:
    """Range requests on one remote object, retried with backoff when the failure is transient."""

    def __init__(self, url: str, storage_options: dict | None):
        try:
            import fsspec
        except ImportError:
            raise ImportError(f"reading {url} needs fsspec: pip install 'tgm-xarray[remote]'") from None
        self.url = url
        self.fs, self.path = fsspec.core.url_to_fs(url, **(storage_options or {}))
        self.size = self._retry(f"finding the size of {url}", lambda: int(self.fs.size(self.path)))

    def _retry(self, what: str, call):
        for attempt in range(1, RETRIES + 1):
            try:
                return call()
            except Exception as err:  # noqa: BLE001 - classified below, re-raised with the URL
                if not _transient(err) or attempt == RETRIES:
                    raise _final_error(self.url, what, err, attempt) from err
                time.sleep(BACKOFF * 2 ** (attempt - 1))

    def _checked(self, data: bytes, start: int, stop: int) -> bytes:
        if len(data) != stop - start:
            raise ShortReadError(f"got {len(data)} of {stop - start} bytes")
        return data

    def fetch(self, start: int, stop: int) -> bytes:
        """Bytes ``[start, stop)`` of the object."""
        if stop <= start:
            return b""
        return self._retry(f"reading bytes {start}-{stop - 1}",
                           lambda: self._checked(self.fs.cat_file(self.path, start=start, end=stop), start, stop))

    def fetch_many(self, ranges: list[tuple[int, int]]) -> list[bytes]:
        """Several ranges at once: fetched concurrently, each retried on its own."""
        if not ranges:
            return []
        results = self.fs.cat_ranges([self.path] * len(ranges), [r[0] for r in ranges],
                                     [r[1] for r in ranges], batch_size=CONCURRENCY, on_error="return")
        out = []
        for (start, stop), data in zip(ranges, results):
            if isinstance(data, bytes) and len(data) == stop - start:
                out.append(data)
            else:  # that range failed (or came back short) once: retry it alone
                out.append(self.fetch(start, stop))
        return out


class _Window:
    """The last block fetched while walking the messages, so small messages cost no refetch."""

    def __init__(self, fetcher: Fetcher):
        self.fetcher = fetcher
        self.start, self.data = 0, b""

    def read(self, start: int, stop: int) -> bytes:
        stop = min(stop, self.fetcher.size)
        end = self.start + len(self.data)
        if not self.start <= start <= end:
            self.start, self.data = start, self.fetcher.fetch(start, stop)
        elif stop > end:  # only the missing tail
            self.data += self.fetcher.fetch(end, stop)
        return self.data[start - self.start : stop - self.start]


@dataclass
class _Message:
    offset: int
    length: int
    metadata: dict
    #: ``(offset in the message, length)`` of every data-object frame.
    frames: list[tuple[int, int]]
    descriptors: list[dict] = field(default_factory=list)
    #: Each frame's inline xxh3 hash (``None`` where the frame has none).
    hashes: list[int | None] = field(default_factory=list)


class RemoteHandle:
    """A remote ``.tgm`` object indexed once, with ``FileHandle``'s methods; thread-safe."""

    def __init__(self, url: str, storage_options: dict | None = None):
        self.path = url
        self._fetcher = Fetcher(url, storage_options)
        if self._fetcher.size == 0:
            raise TgmFormatError(f"{url}: the file is empty")
        try:
            self._messages = self._walk()
            self._describe()
        except TgmFormatError as err:
            raise TgmFormatError(f"{url}: {err}") from None

    @property
    def file_size(self) -> int:
        return self._fetcher.size

    def __len__(self) -> int:
        return len(self._messages)

    def __repr__(self) -> str:
        return f"<RemoteHandle {self.path!r}: {len(self)} messages>"

    # -- opening ------------------------------------------------------------------------------
    def _walk(self) -> list[_Message]:
        """Locates every message and reads its metadata and index frames."""
        size, window = self._fetcher.size, _Window(self._fetcher)
        messages: list[_Message] = []
        pos, guess, footer_guess = 0, HEADER_GUESS, HEADER_GUESS
        while pos < size:
            where = f"bytes {pos}..{size} (after {len(messages)} complete message(s))"
            head = window.read(pos, pos + max(guess, _core.PREAMBLE_SIZE))
            try:
                total, layout = _core.parse_preamble(head)
            except TgmFormatError:
                if not messages and not head.startswith(b"TENSOGRM"):
                    raise TgmFormatError("not a Tensogram file (it does not start with TENSOGRM)") from None
                raise TgmFormatError(f"{where} are not a message: trailing garbage, or a corrupt or "
                                     "truncated file") from None
            if layout == "whole" and total == 0:
                # Streaming mode leaves no length to hop by: the rest of the file is read once.
                messages += self._whole_messages(pos, self._fetcher.fetch(pos, size))
                break
            if pos + total > size:
                raise TgmFormatError(f"{where} are a truncated message ({total} bytes announced)")
            if layout == "header":
                message, header_size = self._header_indexed(window, head[:total], pos, total)
                guess = header_size  # a longer header costs one more request, for its tail
            elif layout == "footer":
                message, footer_guess = self._footer_indexed(pos, total, footer_guess)
                guess = _core.PREAMBLE_SIZE
            else:  # read ahead: the next messages are likely alike
                message = self._whole_messages(pos, window.read(pos, pos + max(total, HEADER_GUESS))[:total])[0]
            messages.append(message)
            pos += total
        return messages

    def _header_indexed(self, window: _Window, buf: bytes, pos: int, total: int) -> tuple[_Message, int]:
        while True:
            frames = _core.parse_frames(buf[_core.PREAMBLE_SIZE :], _core.PREAMBLE_SIZE)
            if frames["next"] != "more":
                break
            if len(buf) >= total:  # a frame claims to run past the message
                raise TgmFormatError(f"message at byte {pos}: a header frame runs past the message end")
            buf = window.read(pos, pos + min(total, _core.PREAMBLE_SIZE + frames["need"]))
        return self._indexed(pos, total, frames), _core.PREAMBLE_SIZE + frames["end"]

    def _footer_indexed(self, pos: int, total: int, guess: int) -> tuple[_Message, int]:
        """The message and the size of its footer frames and postamble (the next guess)."""
        end = pos + total
        tail = self._fetcher.fetch(max(pos, end - guess), end)
        first_footer, length = _core.parse_postamble(tail)
        if length != total or not _core.PREAMBLE_SIZE <= first_footer <= total - _core.POSTAMBLE_SIZE:
            raise TgmFormatError(f"message at byte {pos}: its postamble does not match its preamble")
        footer_start = pos + first_footer
        if footer_start < end - len(tail):
            tail = self._fetcher.fetch(footer_start, end)
        footer = tail[footer_start - (end - len(tail)) : len(tail) - _core.POSTAMBLE_SIZE]
        return self._indexed(pos, total, _core.parse_frames(footer, first_footer)), end - footer_start

    def _indexed(self, pos: int, total: int, frames: dict) -> _Message:
        if frames["metadata"] is None or frames["index"] is None:
            raise TgmFormatError(f"message at byte {pos}: its metadata or index frame is missing")
        offsets, lengths = frames["index"]
        for offset, length in zip(offsets, lengths):
            if offset + length > total:
                raise TgmFormatError(f"message at byte {pos}: its index points past the message end")
        return _Message(pos, total, frames["metadata"], list(zip(offsets, lengths)))

    def _whole_messages(self, pos: int, data: bytes) -> list[_Message]:
        """Messages read whole (streaming mode, preceder frames or no index)."""
        messages = []
        for offset, length in _core.message_spans(data):
            metadata, objects = _core.parse_message(data[offset : offset + length])
            messages.append(_Message(pos + offset, length, metadata,
                                     [(start, size) for _, start, size in objects],
                                     [d for d, _, _ in objects], [None] * len(objects)))
        return messages

    def _describe(self) -> None:
        """Fetches every object's descriptor from the end of its frame, all concurrently."""
        todo = [(m, i, m.offset + start, m.offset + start + length)
                for m in self._messages if not m.descriptors for i, (start, length) in enumerate(m.frames)]
        ranges = []
        for _, _, start, stop in todo:
            if stop - start <= TAIL_GUESS:
                ranges.append((start, stop))
            else:
                ranges += [(start, start + _core.FRAME_HEADER_SIZE), (stop - TAIL_GUESS, stop)]
        parts = iter(self._fetcher.fetch_many(ranges))
        found = []
        for m, i, start, stop in todo:
            if stop - start <= TAIL_GUESS:
                head = tail = next(parts)
            else:
                head, tail = next(parts), next(parts)
            cbor_offset, inline_hash = _core.frame_footer(head, tail)
            found.append((m, start + cbor_offset, stop - _core.DATA_OBJECT_FOOTER_SIZE, tail, stop, inline_hash))
        # Descriptors that begin before the tail (long ones, or stored before the payload): one
        # more batch. The descriptor is the first CBOR item of its region.
        missing = [(cbor, end) for _, cbor, end, tail, stop, _ in found if cbor < stop - len(tail)]
        extra = dict(zip(missing, self._fetcher.fetch_many(missing)))
        for m, cbor, end, tail, stop, inline_hash in found:
            region = extra.get((cbor, end))
            if region is None:
                region = tail[cbor - (stop - len(tail)) : end - (stop - len(tail))]
            m.descriptors.append(_core.parse_descriptor(region))
            m.hashes.append(inline_hash)

    # -- FileHandle's methods -----------------------------------------------------------------
    def _message(self, msg: int) -> _Message:
        if not 0 <= msg < len(self._messages):
            raise TgmIndexError(f"{self.path}: message {msg} is out of range ({len(self._messages)} messages)")
        return self._messages[msg]

    def _frame_range(self, msg: int, obj: int) -> tuple[int, int]:
        m = self._message(msg)
        if not 0 <= obj < len(m.frames):
            raise TgmIndexError(f"{self.path}: message {msg}: object {obj} is out of range "
                                f"({len(m.frames)} objects)")
        start, length = m.frames[obj]
        return m.offset + start, m.offset + start + length

    def message_span(self, msg: int) -> tuple[int, int]:
        m = self._message(msg)
        return m.offset, m.length

    def parse_all(self) -> None:
        """Everything is parsed while opening."""

    def metadata(self, msg: int) -> dict:
        return copy.deepcopy(self._message(msg).metadata)

    def descriptors(self, msg: int) -> list[dict]:
        return copy.deepcopy(self._message(msg).descriptors)

    def fingerprint(self, msg: int, obj: int) -> str:
        """An identity of the object's stored bytes: the frame's inline hash where it has one
        (nothing fetched), else the local handles' payload hash (the frame is fetched)."""
        m = self._message(msg)
        start, stop = self._frame_range(msg, obj)
        if m.hashes[obj] is not None:
            d = m.descriptors[obj]
            return (f"{d['dtype']}:{d['shape']}:{d['encoding']}:{d['filter']}:{d['compression']}:"
                    f"frame-xxh3:{m.hashes[obj]:016x}")
        return _core.frame_fingerprint(self._fetcher.fetch(start, stop))

    def read(self, msg: int, obj: int, index=None, out: np.ndarray | None = None,
             verify_hash: bool = False) -> np.ndarray:
        """``FileHandle.read``: fetches the object's frame and reads ``index`` of it."""
        start, stop = self._frame_range(msg, obj)
        return _core.read_frame(self._fetcher.fetch(start, stop), index, out, verify_hash,
                                f"{self.path}: message {msg}, object {obj}")
