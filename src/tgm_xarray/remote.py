"""Remote ``.tgm`` files (``http(s)://``, ``s3://``, any fsspec URL) read by byte range.

``RemoteHandle`` is the remote twin of the core's mapped ``FileHandle``: the same methods, so
``TgmFile``, the handle cache and the xarray engine use either. Opening locates the messages
(one 24-byte preamble or postamble request each, from both ends at once); a message's metadata,
index and descriptors are fetched on first use, or for all messages at once in concurrent
batches (``parse_all``), never a payload; a read fetches the one data-object frame it needs and
decodes it in the Rust core with the interpreter released.
Python only moves bytes here: every format rule is in ``_core`` (``codec-rs/src/frames.rs``).

Transient failures (HTTP 408/425/429/5xx, dropped connections, timeouts, short bodies) are
retried with exponential backoff; the rest raise at once, naming the URL. See docs/remote.md.
"""

from __future__ import annotations

import asyncio
import copy
import errno
import sys
import threading
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

    async def fetch_async(self, start: int, stop: int) -> bytes:
        """``fetch`` without blocking the caller's event loop: on fsspec's async filesystems the
        request runs on fsspec's own loop, so any number of them overlap; a failure (and any
        other filesystem) goes to ``fetch`` in a worker thread, with its retries."""
        if stop > start and getattr(self.fs, "async_impl", False):
            request = self.fs._cat_file(self.path, start=start, end=stop)
            try:
                data = await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(request, self.fs.loop))
                return self._checked(data, start, stop)
            except Exception:  # noqa: BLE001 - retried (and classified) by `fetch`
                pass
        return await asyncio.to_thread(self.fetch, start, stop)

    def fetch_many(self, ranges: list[tuple[int, int]]) -> list[bytes]:
        """Several ranges at once: fetched concurrently, each retried on its own."""
        if not ranges:
            return []
        # Only fsspec's async filesystems (http, s3, gcs, ...) batch; others fetch in turn.
        batching = {"batch_size": CONCURRENCY} if getattr(self.fs, "async_impl", False) else {}
        results = self.fs.cat_ranges([self.path] * len(ranges), [r[0] for r in ranges],
                                     [r[1] for r in ranges], on_error="return", **batching)
        out = []
        for (start, stop), data in zip(ranges, results):
            if isinstance(data, bytes) and len(data) == stop - start:
                out.append(data)
            else:  # that range failed (or came back short) once: retry it alone
                out.append(self.fetch(start, stop))
        return out


def _selects_all(index, shape: list[int]) -> bool:
    """Whether ``index`` is None or whole slices: a read that needs the whole frame."""
    if index is None:
        return True
    items = index if isinstance(index, tuple) else (index,)
    return len(items) <= len(shape) and all(
        isinstance(k, slice) and k.indices(n) == (0, n, 1) for k, n in zip(items, shape))


@dataclass
class _Message:
    offset: int
    length: int
    metadata: dict
    #: ``(offset in the message, length)`` of every data-object frame.
    frames: list[tuple[int, int]]
    descriptors: list[dict] = field(default_factory=list)
    #: Each object's fingerprint where its frame's inline hash gives it without the payload.
    fingerprints: list[str | None] = field(default_factory=list)
    #: ``(descriptor CBOR, payload offset in the file, payload length)`` of each object whose
    #: payload precedes its descriptor (where a read may fetch parts of it), else ``None``.
    payloads: list[tuple[bytes, int, int] | None] = field(default_factory=list)


@dataclass(frozen=True)
class _Span:
    offset: int
    length: int
    #: Where the frames that locate the objects are: "header", "footer" or "whole"; "" until
    #: the preamble is read (for messages found from the back).
    layout: str


class RemoteHandle:
    """A remote ``.tgm`` object with ``FileHandle``'s methods; thread-safe.

    Like a mapped file, it is indexed when opened (the messages' places: one preamble each) and
    each message is parsed on first use. ``parse_all`` (what the xarray engine calls) parses
    them all: the first alone, the others in concurrent batches of range requests.
    """

    def __init__(self, url: str, storage_options: dict | None = None):
        self.path = url
        self._fetcher = Fetcher(url, storage_options)
        if self._fetcher.size == 0:
            raise TgmFormatError(f"{url}: the file is empty")
        self._lock = threading.Lock()
        # The first request of a message's header (or footer), learnt from the last one read.
        self._header_guess = self._footer_guess = HEADER_GUESS
        #: Postambles fetched while locating the messages, by the offset where they end.
        self._postambles: dict[int, bytes] = {}
        try:
            self._spans, self._messages = self._walk()
        except TgmFormatError as err:
            raise TgmFormatError(f"{url}: {err}") from None

    @property
    def file_size(self) -> int:
        return self._fetcher.size

    def __len__(self) -> int:
        return len(self._spans)

    def __repr__(self) -> str:
        return f"<RemoteHandle {self.path!r}: {len(self)} messages>"

    # -- opening: where the messages are ------------------------------------------------------
    def _walk(self) -> tuple[list[_Span], list[_Message | None]]:
        """Hops from preamble to preamble from the front and, in the same round trips, from
        postamble to postamble from the back, until the two meet: half the round trips of a
        walk from the front alone. The walk from the back is only a shortcut: should the walks
        cross instead of meeting, what it found is dropped and the front walk goes on alone.
        Messages written in streaming mode record no length in their preamble: from the first
        of them the rest of the file is read and parsed."""
        size, head_size, tail_size = self._fetcher.size, _core.PREAMBLE_SIZE, _core.POSTAMBLE_SIZE
        front: list[_Span] = []
        back: list[_Span] = []  # the last message first; layouts read when first parsed
        lo, hi, backward = 0, size, True
        while lo < hi:
            where = f"bytes {lo}..{size} (after {len(front)} complete message(s))"
            # Each preamble comes with the postamble before it, checked when its message is parsed.
            ranges = [(lo - tail_size if front else lo, min(lo + head_size, size))]
            if backward and hi - lo >= 2 * (head_size + tail_size):  # another message fits
                ranges.append((hi - tail_size, hi))
            parts = self._fetcher.fetch_many(ranges)
            head = parts[0]
            if front:
                self._postambles[lo], head = head[:tail_size], head[tail_size:]
            try:
                total, layout = _core.parse_preamble(head)
            except TgmFormatError:
                if not front and not head.startswith(b"TENSOGRM"):
                    raise TgmFormatError("not a Tensogram file (it does not start with TENSOGRM)") from None
                raise TgmFormatError(f"{where} are not a message: trailing garbage, or a corrupt or "
                                     "truncated file") from None
            if total == 0:
                messages = self._whole_messages(lo, self._fetcher.fetch(lo, size))
                spans = front + [_Span(m.offset, m.length, "whole") for m in messages]
                return spans, [None] * len(front) + messages
            if lo + total > size:
                raise TgmFormatError(f"{where} are a truncated message ({total} bytes announced)")
            front.append(_Span(lo, total, layout))
            lo += total
            if len(parts) > 1:
                self._postambles[hi] = parts[1]
                try:
                    _, length = _core.parse_postamble(parts[1])
                except TgmFormatError:
                    length = 0
                if head_size + tail_size <= length <= hi - lo:
                    hi -= length
                    back.append(_Span(hi, length, ""))
                else:  # not a postamble, or one that overlaps the front walk's messages
                    backward = False
            if lo > hi:  # the walks crossed: trust the front one only
                back, hi, backward = [], size, False
        spans = front + back[::-1]
        return spans, [None] * len(spans)

    # -- parsing messages on first use -------------------------------------------------------
    def _ensure(self, wanted) -> None:
        """Reads the metadata, index and descriptors of the messages of ``wanted`` not read yet."""
        with self._lock:
            todo = [i for i in wanted if self._messages[i] is None]
            try:
                # The first alone: its header's size is the guess for the batch of the others.
                for batch in (todo[:1], todo[1:]):
                    if batch:
                        self._read(batch)
            except TgmFormatError as err:
                raise TgmFormatError(f"{self.path}: {err}") from None

    def _read(self, batch: list[int]) -> None:
        self._check_ends(batch)
        parsed = {}
        for layout, read in (("header", self._headers), ("footer", self._footers), ("whole", self._wholes)):
            spans = {i: self._spans[i] for i in batch if self._spans[i].layout == layout}
            if spans:
                parsed.update(read(spans))
        self._describe(list(parsed.values()))
        for i, message in parsed.items():
            self._messages[i] = message

    def _check_ends(self, batch: list[int]) -> None:
        """Checks that each message's preamble and postamble agree, as a local read does, and
        reads the layouts of messages found from the back. The walk that located the messages
        fetched most of these ends; the others come in one batch."""
        head_size, tail_size = _core.PREAMBLE_SIZE, _core.POSTAMBLE_SIZE
        heads = [i for i in batch if not self._spans[i].layout]  # found from the back
        tails = [i for i in batch if self._spans[i].layout in ("header", "footer")
                 and self._end(i) not in self._postambles]
        parts = iter(self._fetcher.fetch_many(
            [(self._spans[i].offset, self._spans[i].offset + head_size) for i in heads] +
            [(self._end(i) - tail_size, self._end(i)) for i in tails]))
        for i in heads:
            span = self._spans[i]
            try:
                total, layout = _core.parse_preamble(next(parts))
            except TgmFormatError:
                total, layout = -1, ""
            if total not in (0, span.length):  # streaming mode (0) leaves the length to the end
                raise TgmFormatError(f"message at byte {span.offset}: its preamble does not match the "
                                     "postamble that ends it")
            self._spans[i] = _Span(span.offset, span.length, "whole" if total == 0 else layout)
        for i in tails:
            self._postambles[self._end(i)] = next(parts)
        for i in batch:
            span = self._spans[i]
            if span.layout == "whole":  # parsed whole, postamble included
                continue
            try:
                _, length = _core.parse_postamble(self._postambles[self._end(i)])
            except TgmFormatError:
                length = -1
            if length != span.length:
                raise TgmFormatError(f"message at byte {span.offset}: its postamble does not match its "
                                     "preamble")

    def _end(self, i: int) -> int:
        return self._spans[i].offset + self._spans[i].length

    def _headers(self, spans: dict[int, _Span]) -> dict[int, _Message]:
        """Header-indexed messages: their metadata and index frames, after the preamble."""
        size = _core.PREAMBLE_SIZE
        bufs = {i: b"" for i in spans}
        want = {i: min(s.length, self._header_guess) for i, s in spans.items()}
        parsed = {}
        while bufs:  # a header longer than the guess costs one more request, for its tail
            ranges = [(spans[i].offset + len(bufs[i]), spans[i].offset + want[i]) for i in bufs]
            for i, more in zip(list(bufs), self._fetcher.fetch_many(ranges)):
                s, buf = spans[i], bufs.pop(i) + more
                frames = _core.parse_frames(buf[size:], size)
                if frames["next"] == "more":
                    if len(buf) >= s.length:
                        raise TgmFormatError(f"message at byte {s.offset}: a header frame runs past the message end")
                    bufs[i], want[i] = buf, min(s.length, size + frames["need"])
                    continue
                parsed[i] = self._indexed(s, frames)
                self._header_guess = size + frames["end"]
        return parsed

    def _footers(self, spans: dict[int, _Span]) -> dict[int, _Message]:
        """Footer-indexed messages (streaming writers): their footer frames and postamble."""
        ends = {i: s.offset + s.length for i, s in spans.items()}
        starts = {i: max(s.offset, ends[i] - self._footer_guess) for i, s in spans.items()}
        tails = dict(zip(spans, self._fetcher.fetch_many([(starts[i], ends[i]) for i in spans])))
        footers = {}
        for i, s in spans.items():
            first_footer, length = _core.parse_postamble(tails[i])
            if length != s.length or not _core.PREAMBLE_SIZE <= first_footer <= s.length - _core.POSTAMBLE_SIZE:
                raise TgmFormatError(f"message at byte {s.offset}: its postamble does not match its preamble")
            footers[i] = s.offset + first_footer
        short = [i for i in spans if footers[i] < starts[i]]
        for i, more in zip(short, self._fetcher.fetch_many([(footers[i], starts[i]) for i in short])):
            tails[i], starts[i] = more + tails[i], footers[i]
        parsed = {}
        for i, s in spans.items():
            footer = tails[i][footers[i] - starts[i] : len(tails[i]) - _core.POSTAMBLE_SIZE]
            parsed[i] = self._indexed(s, _core.parse_frames(footer, footers[i] - s.offset))
            self._footer_guess = ends[i] - footers[i]
        return parsed

    def _wholes(self, spans: dict[int, _Span]) -> dict[int, _Message]:
        """Messages read whole (per-object preceder frames, or no index)."""
        ranges = [(s.offset, s.offset + s.length) for s in spans.values()]
        return {i: self._whole_messages(spans[i].offset, data)[0]
                for i, data in zip(spans, self._fetcher.fetch_many(ranges))}

    def _indexed(self, span: _Span, frames: dict) -> _Message:
        if frames["metadata"] is None or frames["index"] is None:
            raise TgmFormatError(f"message at byte {span.offset}: its metadata or index frame is missing")
        offsets, lengths = frames["index"]
        for offset, length in zip(offsets, lengths):
            if offset + length > span.length:
                raise TgmFormatError(f"message at byte {span.offset}: its index points past the message end")
        return _Message(span.offset, span.length, frames["metadata"], list(zip(offsets, lengths)))

    def _whole_messages(self, pos: int, data: bytes) -> list[_Message]:
        """Messages read whole (streaming mode, preceder frames or no index)."""
        messages = []
        for offset, length in _core.message_spans(data):
            metadata, objects = _core.parse_message(data[offset : offset + length])
            messages.append(_Message(pos + offset, length, metadata,
                                     [(start, size) for _, start, size in objects],
                                     [d for d, _, _ in objects], [None] * len(objects), [None] * len(objects)))
        return messages

    def _describe(self, messages: list[_Message]) -> None:
        """Fetches the objects' descriptors from the end of their frames, all concurrently."""
        todo = [(m, i, m.offset + start, m.offset + start + length)
                for m in messages if not m.descriptors for i, (start, length) in enumerate(m.frames)]
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
            found.append((m, start, start + cbor_offset, stop - _core.DATA_OBJECT_FOOTER_SIZE, tail, stop,
                          inline_hash))
        # Descriptors that begin before the tail (long ones, or stored before the payload): one
        # more batch. The descriptor is the first CBOR item of its region.
        missing = [(cbor, end) for _, _, cbor, end, tail, stop, _ in found if cbor < stop - len(tail)]
        extra = dict(zip(missing, self._fetcher.fetch_many(missing)))
        for m, start, cbor, end, tail, stop, inline_hash in found:
            region = extra.get((cbor, end))
            if region is None:
                region = tail[cbor - (stop - len(tail)) : end - (stop - len(tail))]
            m.descriptors.append(_core.parse_descriptor(region))
            m.fingerprints.append(None if inline_hash is None else _core.hashed_fingerprint(region, inline_hash))
            payload = start + _core.FRAME_HEADER_SIZE
            m.payloads.append((region, payload, cbor - payload) if cbor > payload else None)

    # -- FileHandle's methods -----------------------------------------------------------------
    def _check(self, msg: int) -> int:
        if not 0 <= msg < len(self._spans):
            raise TgmIndexError(f"{self.path}: message {msg} is out of range ({len(self._spans)} messages)")
        return msg

    def _message(self, msg: int) -> _Message:
        message = self._messages[self._check(msg)]
        if message is None:
            self._ensure([msg])
            message = self._messages[msg]
        return message

    def _frame_range(self, msg: int, obj: int) -> tuple[int, int]:
        m = self._message(msg)
        if not 0 <= obj < len(m.frames):
            raise TgmIndexError(f"{self.path}: message {msg}: object {obj} is out of range "
                                f"({len(m.frames)} objects)")
        start, length = m.frames[obj]
        return m.offset + start, m.offset + start + length

    def message_span(self, msg: int) -> tuple[int, int]:
        span = self._spans[self._check(msg)]
        return span.offset, span.length

    def parse_all(self) -> None:
        """Parses every message not parsed yet (in concurrent batches of range requests)."""
        self._ensure(range(len(self._spans)))

    def metadata(self, msg: int) -> dict:
        return copy.deepcopy(self._message(msg).metadata)

    def descriptors(self, msg: int) -> list[dict]:
        return copy.deepcopy(self._message(msg).descriptors)

    def fingerprint(self, msg: int, obj: int) -> str:
        """``FileHandle.fingerprint``: from the frame's inline hash where it has one (nothing
        fetched), else from its payload (the frame is fetched)."""
        m = self._message(msg)
        start, stop = self._frame_range(msg, obj)
        if m.fingerprints[obj] is not None:
            return m.fingerprints[obj]
        return _core.frame_fingerprint(self._fetcher.fetch(start, stop))

    def read(self, msg: int, obj: int, index=None, out: np.ndarray | None = None,
             verify_hash: bool = False, threads: int | None = None) -> np.ndarray:
        """``FileHandle.read``. Objects whose values sit at fixed places in their payload (raw,
        or whole-byte packing, uncompressed) fetch just the byte ranges a partial read needs;
        others fetch their frame (and so does ``verify_hash``, which hashes it all)."""
        start, stop = self._frame_range(msg, obj)
        context = f"{self.path}: message {msg}, object {obj}"
        payload = self._message(msg).payloads[obj]
        if payload is not None and not verify_hash:
            cbor, offset, length = payload

            def fetch(ranges):
                return self._fetcher.fetch_many([(offset + s, offset + s + n) for s, n in ranges])

            result = _core.read_payload_ranges(cbor, length, fetch, index, out, context)
            if result is not None:
                return result
        return _core.read_frame(self._fetcher.fetch(start, stop), index, out, verify_hash, context, threads)

    async def read_async(self, msg: int, obj: int, index=None, out: np.ndarray | None = None,
                         verify_hash: bool = False, threads: int | None = None) -> np.ndarray:
        """``read`` for event loops: the frame's request overlaps with any others in flight and
        the decode runs in a worker thread. Partial reads that fetch byte ranges of a payload
        (and messages not parsed yet) run ``read`` in a worker thread."""
        message = self._messages[self._check(msg)]
        if message is None or not message.descriptors:  # not parsed yet: that fetches too
            return await asyncio.to_thread(self.read, msg, obj, index, out, verify_hash, threads)
        start, stop = self._frame_range(msg, obj)
        if message.payloads[obj] is not None and not verify_hash and not _selects_all(index, message.descriptors[obj]["shape"]):
            return await asyncio.to_thread(self.read, msg, obj, index, out, verify_hash, threads)
        frame = await self._fetcher.fetch_async(start, stop)
        context = f"{self.path}: message {msg}, object {obj}"
        return await asyncio.to_thread(_core.read_frame, frame, index, out, verify_hash, context, threads)
