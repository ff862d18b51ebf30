"""Remote ``.tgm`` files (``http(s)://``, ``s3://``, any fsspec URL) read by byte range.

``RemoteHandle`` is the remote twin of the core's mapped ``FileHandle``: the same methods, so
``TgmFile``, the handle cache and the xarray engine use either. Opening scans the file once for
the bytes that carry every message's metadata (``scan_messages``): small messages are read whole,
many per request (contiguous blocks, a few in flight at once); of large ones only the header or
footer frames, never the payload. Descriptors of large messages are fetched on first use, or for
all at once in concurrent batches (``parse_all``); a read fetches the one data-object frame it
needs and decodes it in the Rust core with the interpreter released.
Python only moves bytes here: every format rule is in ``_core`` (``codec-rs/src/frames.rs``).

Every answer is checked against its request (an HTTP ``Content-Range`` that names other bytes is
an error, never data); a server that ignores ranges is read once, whole, up to a bound.
Transient failures (HTTP 408/425/429/5xx, dropped or refused connections, timeouts, short
bodies) are retried with exponential backoff, within an overall deadline per read; the rest
raise at once, naming the URL. See docs/remote.md.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import errno
import os
import re
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tgm_xarray import _core
from tgm_xarray.errors import (
    RemoteConnectionError, RemoteError, RemoteHTTPError, RemoteRangeError, RemoteRedirectError, RemoteTimeoutError,
    TgmFormatError, TgmIndexError,
)

#: Attempts per range request before a transient failure is raised, and the first backoff (s).
RETRIES = 5
BACKOFF = 0.1
#: Seconds one read (one ``fetch`` or ``fetch_many``, retries included) may take at most;
#: the environment variable overrides it for the handles opened after it is set.
DEADLINE = 120.0
DEADLINE_ENV = "TGM_XARRAY_REMOTE_DEADLINE"
#: The largest object read whole from a server that ignores range requests (bytes).
MAX_WHOLE_BODY = 256 * 2**20
MAX_WHOLE_BODY_ENV = "TGM_XARRAY_REMOTE_MAX_BODY"
#: Opening reads the file from its start in blocks of this size, doubling up to ``MAX_BLOCK``
#: while the messages are small, ``READ_AHEAD`` blocks in flight at once.
FIRST_BLOCK = 64 * 2**10
MAX_BLOCK = 8 * 2**20
READ_AHEAD = 4
#: Messages up to this size are read whole while opening (one request holds many of them);
#: of larger ones only the header or footer frames are read.
WHOLE_MESSAGE_MAX = 256 * 2**10
#: First guess of a large message's preamble and header frames; later guesses follow the file.
HEADER_GUESS = 4096
#: Bytes fetched from the end of a data-object frame to find its descriptor in one request.
TAIL_GUESS = 4096
#: Range requests one batch keeps in flight at once.
CONCURRENCY = 32
_TRANSIENT_STATUS = {408, 425, 429, 500, 502, 503, 504}
_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+)$")


def is_url(path: Any) -> bool:
    """Whether ``path`` names a remote object (``scheme://...`` other than ``file://``)."""
    return isinstance(path, str) and "://" in path and not path.startswith("file://")


#: object_store's option names (what upstream tensogram-xarray takes) -> fsspec/s3fs's.
_OBJECT_STORE_S3 = {
    "aws_access_key_id": "key", "access_key_id": "key",
    "aws_secret_access_key": "secret", "secret_access_key": "secret",
    "aws_session_token": "token", "session_token": "token",
    "aws_endpoint": "endpoint_url", "aws_endpoint_url": "endpoint_url", "endpoint": "endpoint_url",
    "aws_skip_signature": "anon", "skip_signature": "anon",
}
_OBJECT_STORE_REGION = ("aws_region", "region")
#: object_store switches with no fsspec counterpart: fsspec reads ``http://`` (and an ``http://``
#: endpoint) as given, so ``allow_http`` is already the case.
_OBJECT_STORE_IGNORED = ("allow_http",)


def fsspec_options(url: str, storage_options: dict | None) -> dict:
    """``storage_options`` for fsspec: upstream's object_store spellings (``allow_http``,
    ``aws_access_key_id``, ``aws_endpoint``, ``aws_region``, ...) read as fsspec's (``key``,
    ``endpoint_url``, ``client_kwargs.region_name``); fsspec's own pass as they are and win."""
    options = dict(storage_options or {})
    for key in _OBJECT_STORE_IGNORED:
        options.pop(key, None)
    if url.startswith(("s3://", "s3a://")):
        for key, name in _OBJECT_STORE_S3.items():
            if key in options:
                value = options.pop(key)
                options.setdefault(name, _flag(value) if name == "anon" else value)
        for key in _OBJECT_STORE_REGION:
            if key in options:
                client_kwargs = dict(options.get("client_kwargs") or {})
                client_kwargs.setdefault("region_name", options.pop(key))
                options["client_kwargs"] = client_kwargs
    return options


def _flag(value: Any) -> bool:
    # object_store takes its switches as strings too ("true").
    return value.strip().lower() in ("1", "true", "yes") if isinstance(value, str) else bool(value)


class ShortReadError(OSError):
    """The server sent fewer bytes than the range asked for."""


class _HTTPStatus(Exception):
    """An HTTP answer other than the one asked for (``status``)."""

    def __init__(self, status: int):
        super().__init__(f"HTTP {status}")
        self.status = status


def _setting(env: str, default, kind):
    value = os.environ.get(env)
    if not value:
        return default
    try:
        return kind(value)
    except ValueError:
        raise ValueError(f"{env}={value!r} is not a number") from None


def _status(err: BaseException | None) -> int | None:
    """The HTTP status behind ``err``, also where fsspec re-raised it as another error."""
    while err is not None:
        status = getattr(err, "status", None)
        if isinstance(status, int):
            return status
        err = err.__cause__ or err.__context__
    return None


def _aiohttp():
    return sys.modules.get("aiohttp")


def _redirect_loop(err: BaseException) -> bool:
    aiohttp = _aiohttp()
    return aiohttp is not None and isinstance(err, aiohttp.TooManyRedirects)


def _transient(err: BaseException) -> bool:
    if _redirect_loop(err) or isinstance(err, RemoteRangeError):
        return False
    status = _status(err)
    if status is not None:
        return status in _TRANSIENT_STATUS
    if isinstance(err, (FileNotFoundError, PermissionError)):
        return False
    if isinstance(err, (TimeoutError, asyncio.TimeoutError, ConnectionError, ShortReadError)):
        return True
    aiohttp = _aiohttp()
    return aiohttp is not None and isinstance(err, (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError))


def _final_error(url: str, what: str, err: BaseException, tries: int, deadline: float | None) -> OSError:
    """The exception a caller sees: the URL, the bytes asked for and what went wrong.
    ``deadline``: the seconds of the read's deadline, when that is what ended it."""
    if isinstance(err, RemoteError):
        return err
    status = _status(err)
    if isinstance(err, PermissionError) or status in (401, 403):
        return PermissionError(errno.EACCES, f"{url}: access denied (HTTP {status or 403}, {what})", url)
    if isinstance(err, FileNotFoundError) or status in (404, 410):
        return FileNotFoundError(errno.ENOENT, f"{url}: not found ({what})", url)
    if _redirect_loop(err):
        return RemoteRedirectError(f"{url}: {what} failed: too many redirects (a redirect loop)", url)
    aiohttp = _aiohttp()
    refused = isinstance(err, ConnectionRefusedError) or (
        aiohttp is not None and isinstance(err, aiohttp.ClientConnectorError)
        and getattr(err.os_error, "errno", None) == errno.ECONNREFUSED)
    if status is not None:
        reason = f"HTTP {status}"
    elif refused:
        reason = "connection refused"
    elif isinstance(err, (TimeoutError, asyncio.TimeoutError)):
        reason = "no answer in time (timeout)"
    else:
        reason = f"{type(err).__name__}: {err}"
    after = f" after {tries} tries" if tries > 1 else ""
    message = f"{url}: {what} failed{after}: {reason}"
    if deadline is not None:
        return RemoteTimeoutError(f"{message}; gave up at the read's {deadline:g} s deadline ({DEADLINE_ENV})", url)
    if status is not None:
        return RemoteHTTPError(message, url, status)
    if isinstance(err, (TimeoutError, asyncio.TimeoutError)):
        return RemoteTimeoutError(message, url)
    connection = refused or isinstance(err, ConnectionError) or (
        aiohttp is not None and isinstance(err, aiohttp.ClientConnectionError))
    return (RemoteConnectionError if connection else RemoteError)(message, url)


class Fetcher:
    """Byte ranges of one remote object: checked, retried with backoff when the failure is
    transient, within an overall deadline per call.

    Over HTTP(S) the requests are our own (on fsspec's session) so that each answer's status and
    ``Content-Range`` are checked against the request; the first, for the object's first
    ``FIRST_BLOCK`` bytes, also gives its size. Other filesystems go through fsspec's calls.
    """

    def __init__(self, url: str, storage_options: dict | None):
        try:
            import fsspec
            import fsspec.asyn
        except ImportError:
            raise ImportError(f"reading {url} needs fsspec: pip install 'tgm-xarray[remote]'") from None
        self.url = url
        self.fs, self.path = fsspec.core.url_to_fs(url, **fsspec_options(url, storage_options))
        self.deadline = _setting(DEADLINE_ENV, DEADLINE, float)
        self.max_whole_body = _setting(MAX_WHOLE_BODY_ENV, MAX_WHOLE_BODY, int)
        async_fs = getattr(self.fs, "async_impl", False)
        self._loop = self.fs.loop if async_fs else fsspec.asyn.get_loop()
        self._sync = fsspec.asyn.sync
        protocols = self.fs.protocol if isinstance(self.fs.protocol, tuple) else (self.fs.protocol,)
        self._http = async_fs and "http" in protocols
        #: Bytes from the object's start already at hand: the first request's answer, or the
        #: whole object from a server that ignores ranges.
        self._known = b""
        self.size: int | None = None
        if self._http:
            first = self._run(f"reading bytes 0-{FIRST_BLOCK - 1}", lambda: self._http_get(0, FIRST_BLOCK))
            self._known = max(self._known, first, key=len)  # the whole object, if that came
        elif async_fs:
            self.size = int(self._run(f"finding the size of {url}", lambda: self.fs._size(self.path)))
        else:
            self.size = int(self._run(f"finding the size of {url}", lambda: asyncio.to_thread(self.fs.size, self.path)))

    # -- one request, and its tries -----------------------------------------------------------
    def _run(self, what: str, attempt):
        """``attempt()`` (a coroutine) with its retries, within the deadline."""
        return self._in_loop(self._retrying(what, attempt, time.monotonic() + self.deadline))

    def _in_loop(self, coroutine):
        """Runs ``coroutine`` in fsspec's event loop. Its exceptions come back as they are:
        fsspec's ``sync`` would turn a ``TimeoutError`` into its own, without the message."""
        async def carried():
            try:
                return await coroutine, None
            except Exception as err:  # noqa: BLE001 - raised again below, outside the loop
                return None, err

        result, err = self._sync(self._loop, carried)
        if err is not None:
            raise err
        return result

    async def _retrying(self, what: str, attempt, deadline: float):
        for tries in range(1, RETRIES + 1):
            try:
                return await asyncio.wait_for(attempt(), max(deadline - time.monotonic(), 0.001))
            except Exception as err:  # noqa: BLE001 - classified below, re-raised with the URL
                left = deadline - time.monotonic()
                if left <= 0 and _transient(err):
                    raise _final_error(self.url, what, err, tries, self.deadline) from err
                if not _transient(err) or tries == RETRIES:
                    raise _final_error(self.url, what, err, tries, None) from err
                await asyncio.sleep(min(BACKOFF * 2 ** (tries - 1), left))

    async def _attempt(self, start: int, stop: int) -> bytes:
        if self._http:
            return await self._http_get(start, stop)
        if getattr(self.fs, "async_impl", False):
            data = await self.fs._cat_file(self.path, start=start, end=stop)
        else:
            data = await asyncio.to_thread(self.fs.cat_file, self.path, start=start, end=stop)
        if len(data) != stop - start:
            raise ShortReadError(f"got {len(data)} of {stop - start} bytes")
        return data

    async def _http_get(self, start: int, stop: int) -> bytes:
        """Bytes ``[start, stop)`` (clipped to the object's end) by one HTTP range request."""
        session = await self.fs.set_session()
        options = dict(self.fs.kwargs)
        headers = {**options.pop("headers", {}), "Range": f"bytes={start}-{stop - 1}", "Accept-Encoding": "identity"}
        async with session.get(self.fs.encode_url(self.path), headers=headers, **options) as r:
            if r.status == 200:  # the server ignores ranges: the whole object
                self._known = await self._whole_body(r)
                self.size = len(self._known)
                return self._known[start:stop]
            if r.status == 416 and start == 0:  # nothing satisfies bytes=0-...: an empty object
                self.size = 0
                return b""
            if r.status != 206:
                raise _HTTPStatus(r.status)
            answered = _CONTENT_RANGE.match(r.headers.get("Content-Range", ""))
            size = self.size if self.size is not None else int(answered.group(3)) if answered else None
            expected = (start, min(stop, size or 0) - 1, size)
            if not answered or tuple(map(int, answered.groups())) != expected:
                got = r.headers.get("Content-Range", "no Content-Range")
                raise RemoteRangeError(f"{self.url}: asked for bytes {start}-{stop - 1}, the server answered "
                                       f"{got!r} (expected 'bytes {expected[0]}-{expected[1]}/{size}')",
                                       self.url)
            data = await r.read()
            self.size = size
        if len(data) != expected[1] - start + 1:
            raise ShortReadError(f"got {len(data)} of {expected[1] - start + 1} bytes")
        return data

    async def _whole_body(self, r) -> bytes:
        """The whole object a server sent to a range request: read once if it is small enough."""
        limit = self.max_whole_body
        length = r.headers.get("Content-Length")

        def too_large():
            size = f"the {length}-byte object" if length else "an object"
            return RemoteRangeError(
                f"{self.url}: the server does not support range requests (it answered one with the whole "
                f"object), and {size} is larger than {limit} bytes, the most read whole ({MAX_WHOLE_BODY_ENV}): "
                "serve it from a server that supports ranges", self.url)

        if length is not None and int(length) > limit:
            raise too_large()
        chunks, received = [], 0
        while received <= limit:  # stops one byte past the limit at most
            chunk = await r.content.read(limit + 1 - received)
            if not chunk:
                break
            chunks.append(chunk)
            received += len(chunk)
        data = b"".join(chunks)
        if len(data) > limit:
            raise too_large()
        if length is not None and len(data) != int(length):
            raise ShortReadError(f"got {len(data)} of {length} bytes")
        return data

    # -- what callers ask for -----------------------------------------------------------------
    def fetch(self, start: int, stop: int) -> bytes:
        """Bytes ``[start, stop)`` of the object."""
        return self.fetch_many([(start, stop)])[0]

    async def fetch_async(self, start: int, stop: int) -> bytes:
        """``fetch`` without blocking the caller's event loop: the request (checked, retried,
        within the deadline, as ``fetch``'s) runs on the fetcher's own loop, so any number of
        them overlap and no worker thread waits on the network."""
        if stop <= len(self._known) or start >= stop:
            return self._known[start:stop]
        request = self._retrying(f"reading bytes {start}-{stop - 1}", lambda: self._attempt(start, stop),
                                 time.monotonic() + self.deadline)
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(request, self._loop))

    def fetch_many(self, ranges: list[tuple[int, int]]) -> list[bytes]:
        """Several ranges at once: fetched concurrently (``CONCURRENCY`` at most in flight), each
        retried on its own, all within one deadline."""
        out = [self._known[a:b] if b <= len(self._known) or a >= b else None for a, b in ranges]
        todo = [i for i, data in enumerate(out) if data is None]
        if todo:
            fetched = self._in_loop(self._gather([ranges[i] for i in todo], time.monotonic() + self.deadline))
            for i, data in zip(todo, fetched):
                out[i] = data
        return out

    async def _gather(self, ranges: list[tuple[int, int]], deadline: float) -> list[bytes]:
        slots = asyncio.Semaphore(CONCURRENCY)

        async def one(start: int, stop: int) -> bytes:
            async with slots:
                if stop <= len(self._known):  # the object came whole meanwhile
                    return self._known[start:stop]
                return await self._retrying(f"reading bytes {start}-{stop - 1}",
                                            lambda: self._attempt(start, stop), deadline)

        tasks = [asyncio.ensure_future(one(start, stop)) for start, stop in ranges]
        try:
            return await asyncio.gather(*tasks)
        finally:
            for task in tasks:
                task.cancel()


@dataclass(frozen=True)
class MessageBytes:
    """The bytes of one message that carry its metadata, as ``scan_messages`` found them."""

    offset: int
    length: int
    #: "whole": ``data`` is the message; "header": its preamble and header frames (metadata,
    #: index); "footer": its footer frames and postamble (``data`` ends the message).
    part: str
    data: bytes
    #: The last 24 bytes of a "header" message (to check against its preamble).
    postamble: bytes = b""


class _Window:
    """Contiguous bytes of the object at hand while scanning it: ``data`` starts at ``start``."""

    def __init__(self, fetcher: Fetcher):
        self.fetcher = fetcher
        self.start, self.data = 0, b""
        self.block = FIRST_BLOCK

    @property
    def stop(self) -> int:
        return self.start + len(self.data)

    def take(self, a: int, b: int) -> bytes:
        return self.data[a - self.start : b - self.start]

    def ensure(self, a: int, b: int, blocks: int) -> bytes:
        """Bytes ``[a, b)`` (clipped to the object's end), fetched where not at hand. ``blocks``:
        how many whole blocks to fetch at once (growing to ``MAX_BLOCK``), for small messages;
        0: just what is missing."""
        size = self.fetcher.size
        b = min(b, size)
        if not self.start <= a <= self.stop:  # a gap: start afresh at a
            self.start, self.data = a, b""
        if self.stop < b:
            if blocks:
                count = max(blocks, -(-(b - self.stop) // self.block))
                ranges = [(p, min(p + self.block, size))
                          for p in range(self.stop, min(size, self.stop + count * self.block), self.block)]
                self.block = min(2 * self.block, MAX_BLOCK)
            else:
                ranges = [(self.stop, b)]
            # Bytes before `a` are done with: dropped while the new ones are joined anyway.
            self.data = b"".join([self.data[a - self.start :], *self.fetcher.fetch_many(ranges)])
            self.start = a
        return self.take(a, b)


def scan_messages(fetcher: Fetcher) -> list[MessageBytes]:
    """Every message of the object, with the bytes that carry its metadata, in few requests.

    The object is read from its start, hopping from preamble to preamble. Messages up to
    ``WHOLE_MESSAGE_MAX`` bytes are read whole, in contiguous blocks that hold many of them;
    of larger ones only the preamble and header frames (or the footer frames and postamble, for
    streaming writers), never the payload. Messages in streaming mode (no length in their
    preamble) are read whole, with the rest of the object after the first of them.
    """
    size, head_size, tail_size = fetcher.size, _core.PREAMBLE_SIZE, _core.POSTAMBLE_SIZE
    window = _Window(fetcher)
    found: list[MessageBytes] = []
    header_guess, footer_guess = HEADER_GUESS, TAIL_GUESS
    #: Postambles of messages read in part, by where they end (checked at the end).
    postambles: dict[int, bytes] = {}
    # Blocks fetched at once: one until the first message says whether the messages are small.
    small, ahead, pos = True, 1, 0
    while pos < size:
        where = f"bytes {pos}..{size} (after {len(found)} complete message(s))"
        if small:
            window.ensure(pos, pos + head_size, ahead)
        else:  # the preamble and a header's worth, with the postamble before them
            window.ensure(pos - tail_size, pos + header_guess, 0)
        if found and found[-1].part == "header" and window.start <= pos - tail_size:
            postambles[pos] = window.take(pos - tail_size, pos)
        head = window.take(pos, pos + head_size)
        try:
            total, layout = _core.parse_preamble(head)
        except TgmFormatError:
            if not found and not head.startswith(b"TENSOGRM"):
                raise TgmFormatError("not a Tensogram file (it does not start with TENSOGRM)") from None
            raise TgmFormatError(f"{where} are not a message: trailing garbage, or a corrupt or "
                                 "truncated file") from None
        if total == 0:
            rest = window.ensure(pos, size, ahead)
            found += [MessageBytes(pos + offset, length, "whole", rest[offset : offset + length])
                      for offset, length in _core.message_spans(rest)]
            break
        if pos + total > size:
            raise TgmFormatError(f"{where} are a truncated message ({total} bytes announced)")
        end = pos + total
        small = total <= WHOLE_MESSAGE_MAX
        ahead = READ_AHEAD if small else 0
        if small or layout == "whole":
            found.append(MessageBytes(pos, total, "whole", window.ensure(pos, end, ahead)))
        elif layout == "header":
            frames = _core.parse_frames(window.take(pos + head_size, end), head_size)
            # A header longer than the guess: its tail (a frame that runs past the message end is
            # left for the message's parse to report).
            while frames["next"] == "more" and head_size + frames["need"] <= total:
                frames = _core.parse_frames(window.ensure(pos, pos + head_size + frames["need"], 0)[head_size:],
                                            head_size)
            header_end = end if frames["next"] == "more" else pos + head_size + frames["end"]
            found.append(MessageBytes(pos, total, "header", window.take(pos, header_end)))
            header_guess = max(HEADER_GUESS, 2 * (head_size + frames["end"]))  # room for a longer one
        else:  # "footer": the frames before the postamble (which the message's parse checks)
            tail = window.ensure(max(pos, end - footer_guess), end, 0)
            try:
                first_footer, _ = _core.parse_postamble(tail)
            except TgmFormatError:
                first_footer = -1
            if head_size <= first_footer <= total - tail_size:
                footer_guess = total - first_footer
                tail = window.ensure(pos + first_footer, end, 0)
            found.append(MessageBytes(pos, total, "footer", tail))
        pos = end
    # The postambles of messages read by their header, to check them as a local read does: most
    # came with the next message's preamble, the others come in one batch.
    missing = [m.offset + m.length for m in found if m.part == "header" and m.offset + m.length not in postambles]
    postambles.update(zip(missing, fetcher.fetch_many([(end - tail_size, end) for end in missing])))
    return [dataclasses.replace(m, postamble=postambles[m.offset + m.length]) if m.part == "header" else m
            for m in found]


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
    #: Each object's fingerprint where it is known without fetching the payload (the frame's
    #: inline hash, or a frame read with its message).
    fingerprints: list[str | None] = field(default_factory=list)
    #: ``(descriptor CBOR, payload offset in the file, payload length)`` of each object whose
    #: payload precedes its descriptor (where a read may fetch parts of it), else ``None``.
    payloads: list[tuple[bytes, int, int] | None] = field(default_factory=list)
    #: Why the message cannot be read (it is corrupt), else ``None``: the others still can.
    error: str | None = None

    def describe(self, start: int, length: int, head: bytes, tail: bytes, cbor_region=None) -> None:
        """Adds the object whose frame starts at file offset ``start`` (``length`` bytes, as the
        index says), from the frame's first bytes ``head`` and last bytes ``tail`` (the same
        bytes when the frame is at hand whole). ``cbor_region(cbor, end)``: the descriptor's
        bytes where they start before ``tail``."""
        stop = start + length
        cbor_offset, inline_hash = _core.frame_footer(head, tail, length)
        cbor, end = start + cbor_offset, stop - _core.DATA_OBJECT_FOOTER_SIZE
        region = cbor_region(cbor, end) if cbor < stop - len(tail) else tail[cbor - (stop - len(tail)) : end - (stop - len(tail))]
        self.descriptors.append(_core.parse_descriptor(region))
        if inline_hash is not None:
            self.fingerprints.append(_core.hashed_fingerprint(region, inline_hash))
        else:
            self.fingerprints.append(_core.frame_fingerprint(tail) if len(tail) == length else None)
        payload = start + _core.FRAME_HEADER_SIZE
        self.payloads.append((region, payload, cbor - payload) if cbor > payload else None)


class RemoteHandle:
    """A remote ``.tgm`` object with ``FileHandle``'s methods; thread-safe.

    Opening scans the object (``scan_messages``): every message's metadata and place, and the
    objects of the messages read whole. The descriptors of larger messages are fetched on
    first use; ``parse_all`` (what the xarray engine calls) fetches all of them in concurrent
    batches of range requests.
    """

    def __init__(self, url: str, storage_options: dict | None = None, *, fetcher: Fetcher | None = None):
        # `fetcher`: another source of range requests with Fetcher's methods (virtual.py reads
        # through the object store a VirtualiZarr registry gives).
        self.path = url
        self._fetcher = fetcher or Fetcher(url, storage_options)
        if self._fetcher.size == 0:
            raise TgmFormatError(f"{url}: the file is empty")
        try:
            found = scan_messages(self._fetcher)
        except TgmFormatError as err:
            raise TgmFormatError(f"{url}: {err}") from None
        self._messages = [self._parse(m) for m in found]
        self._table = self._scan_table(url, found)
        self._lock = threading.Lock()

    @staticmethod
    def _scan_table(url: str, found: list[MessageBytes]) -> dict | None:
        """The metadata table (``_core.scan_files``'s) when every message came whole, as those of
        small-message archives do; ``None`` otherwise (or when one is corrupt: its own reads
        report it), and the table is built from the messages' dicts."""
        if not all(m.part == "whole" for m in found):
            return None
        try:
            return _core.scan_table(url, [(m.offset, m.data) for m in found])
        except TgmFormatError:
            return None

    def table(self) -> dict | None:
        """The metadata table of the messages, if the scan could build it (see ``_scan_table``)."""
        return self._table

    @property
    def file_size(self) -> int:
        return self._fetcher.size

    def __len__(self) -> int:
        return len(self._messages)

    def __repr__(self) -> str:
        return f"<RemoteHandle {self.path!r}: {len(self)} messages>"

    # -- parsing what the scan found ----------------------------------------------------------
    @staticmethod
    def _parse(found: MessageBytes) -> _Message:
        """A message's metadata and frames; its objects too when it was read whole. A corrupt
        message is kept with its error, which its first use raises, as for a local file."""
        try:
            return RemoteHandle._parse_bytes(found)
        except TgmFormatError as err:
            return _Message(found.offset, found.length, {}, [], error=f"message at byte {found.offset}: {err}")

    @staticmethod
    def _parse_bytes(found: MessageBytes) -> _Message:
        if found.part == "whole":  # walked frame by frame, as locally: the index is not needed
            metadata, objects = _core.parse_message(found.data)
            message = _Message(found.offset, found.length, metadata, [(start, size) for _, start, size in objects])
            for start, size in message.frames:
                frame = found.data[start : start + size]
                message.describe(found.offset + start, size, frame, frame)
            return message
        head_size = _core.PREAMBLE_SIZE
        if found.part == "header":
            try:
                _, length = _core.parse_postamble(found.postamble)
            except TgmFormatError:
                length = -1
            if length != found.length:
                raise TgmFormatError("its postamble does not match its preamble")
            frames = _core.parse_frames(found.data[head_size:], head_size)
            if frames["next"] == "more":
                raise TgmFormatError("a header frame runs past the message end")
        else:
            first_footer, length = _core.parse_postamble(found.data)
            if length != found.length or first_footer != found.length - len(found.data):
                raise TgmFormatError("its postamble does not match its preamble")
            frames = _core.parse_frames(found.data[: -_core.POSTAMBLE_SIZE], first_footer)
        if frames["metadata"] is None or frames["index"] is None:
            raise TgmFormatError("its metadata or index frame is missing")
        offsets, lengths = frames["index"]
        for offset, length in zip(offsets, lengths):
            if offset < head_size or offset + length > found.length:
                raise TgmFormatError("its index points outside the message")
        return _Message(found.offset, found.length, frames["metadata"], list(zip(offsets, lengths)))

    def _ensure(self, wanted) -> None:
        """Fetches the descriptors of the messages of ``wanted`` not described yet."""
        with self._lock:
            todo = [self._messages[i] for i in wanted
                    if self._messages[i].error is None and len(self._messages[i].descriptors) < len(self._messages[i].frames)]
            try:
                self._describe(todo)
            except TgmFormatError as err:
                raise TgmFormatError(f"{self.path}: {err}") from None

    def _describe(self, messages: list[_Message]) -> None:
        """Fetches the objects' descriptors from the end of their frames, all concurrently."""
        # Described into fresh records, handed over whole at the end: a failure leaves none half done.
        fresh = {id(m): _Message(m.offset, m.length, m.metadata, m.frames) for m in messages}
        todo = [(m, m.offset + start, length) for m in messages for start, length in m.frames]
        ranges = []
        for _, start, length in todo:
            if length <= TAIL_GUESS:
                ranges.append((start, start + length))
            else:
                ranges += [(start, start + _core.FRAME_HEADER_SIZE), (start + length - TAIL_GUESS, start + length)]
        parts = iter(self._fetcher.fetch_many(ranges))
        pieces = []
        for m, start, length in todo:
            head = next(parts)
            pieces.append((m, start, length, head, head if length <= TAIL_GUESS else next(parts)))
        # Descriptors that begin before the tail (long ones, or stored before the payload): one
        # more batch. The descriptor is the first CBOR item of its region.
        missing = []
        for m, start, length, head, tail in pieces:
            try:
                cbor_offset, _ = _core.frame_footer(head, tail, length)
            except TgmFormatError as err:
                obj = m.frames.index((start - m.offset, length))
                raise TgmFormatError(f"message at byte {m.offset}, object {obj}: {err}") from None
            if cbor_offset < length - len(tail):
                missing.append((start + cbor_offset, start + length - _core.DATA_OBJECT_FOOTER_SIZE))
        extra = dict(zip(missing, self._fetcher.fetch_many(missing)))
        for m, start, length, head, tail in pieces:
            record = fresh[id(m)]
            try:
                record.describe(start, length, head, tail, lambda cbor, end: extra[(cbor, end)])
            except TgmFormatError as err:
                raise TgmFormatError(f"message at byte {m.offset}, object {len(record.descriptors)}: {err}") from None
        for m in messages:  # the descriptors last: they say the message is described
            record = fresh[id(m)]
            m.fingerprints, m.payloads, m.descriptors = record.fingerprints, record.payloads, record.descriptors

    # -- FileHandle's methods -----------------------------------------------------------------
    def _check(self, msg: int) -> int:
        if not 0 <= msg < len(self._messages):
            raise TgmIndexError(f"{self.path}: message {msg} is out of range ({len(self._messages)} messages)")
        return msg

    def _message(self, msg: int) -> _Message:
        message = self._messages[self._check(msg)]
        if message.error is not None:
            raise TgmFormatError(f"{self.path}: {message.error}")
        if len(message.descriptors) < len(message.frames):
            self._ensure([msg])
        return message

    def _frame_range(self, msg: int, obj: int) -> tuple[int, int]:
        m = self._message(msg)
        if not 0 <= obj < len(m.frames):
            raise TgmIndexError(f"{self.path}: message {msg}: object {obj} is out of range "
                                f"({len(m.frames)} objects)")
        start, length = m.frames[obj]
        return m.offset + start, m.offset + start + length

    def message_span(self, msg: int) -> tuple[int, int]:
        m = self._messages[self._check(msg)]
        return m.offset, m.length

    def frame_spans(self, msg: int) -> list[tuple[int, int]]:
        m = self._message(msg)
        return [(m.offset + start, length) for start, length in m.frames]

    def parse_all(self) -> None:
        """Fetches every descriptor not fetched yet (in concurrent batches of range requests)."""
        self._ensure(range(len(self._messages)))

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
