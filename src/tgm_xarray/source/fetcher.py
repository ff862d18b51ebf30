"""The one guarded way to the network: byte ranges of one remote object (``http(s)://``,
``s3://``, any fsspec URL), and the drivers that run the core's sans-IO walks on them.

Every answer is checked against its request (an HTTP ``Content-Range`` that names other bytes is
an error, never data); a server that ignores ranges is read once, whole, up to a bound.
Transient failures (HTTP 408/425/429/5xx, dropped or refused connections, timeouts, short
bodies) are retried with exponential backoff, within an overall deadline per read; the rest
raise at once, naming the URL. A walk of the core asks for byte ranges (``wanted``) and takes
their bytes (``feed``): ``drive`` runs one with ``Fetcher.fetch_many``, ``drive_async`` by
awaiting ``Fetcher.fetch_async`` (no worker thread). See docs/remote.md.
"""

from __future__ import annotations

import asyncio
import errno
import os
import re
import socket
import sys
import time
from typing import Any, Protocol

from tgm_xarray.errors import (
    RemoteConnectionError,
    RemoteError,
    RemoteHTTPError,
    RemoteRangeError,
    RemoteRedirectError,
    RemoteTimeoutError,
)
from tgm_xarray.installation import install_hint

#: Attempts per range request before a transient failure is raised, and the first backoff (s).
RETRIES = 5
#: A stall is retried this often (on a new connection): a server that stalls again usually
#: stays stalled, and is reported after two idle timeouts instead of five.
STALL_RETRIES = 1
BACKOFF = 0.1
#: Seconds one read (one ``fetch`` or ``fetch_many``, retries included) may take at most;
#: the environment variable overrides it for the handles opened after it is set.
DEADLINE = 120.0
DEADLINE_ENV = "TGM_XARRAY_REMOTE_DEADLINE"
#: The largest object read whole from a server that ignores range requests (bytes).
MAX_WHOLE_BODY = 256 * 2**20
MAX_WHOLE_BODY_ENV = "TGM_XARRAY_REMOTE_MAX_BODY"
#: The largest object fetched whole on purpose (``fetch_whole``: an index beside its data file).
MAX_WHOLE_OBJECT = 256 * 2**20
MAX_WHOLE_OBJECT_ENV = "TGM_XARRAY_REMOTE_MAX_WHOLE_OBJECT"
#: Seconds a request may go without receiving a byte (its answer's headers, or the next part of
#: its body) before the try fails as stalled (and is retried): a server that accepted the request
#: and went silent is given up on long before the deadline.
IDLE_TIMEOUT = 20.0
IDLE_TIMEOUT_ENV = "TGM_XARRAY_REMOTE_IDLE_TIMEOUT"
#: The first request asks for the object's first bytes, this many (its answer gives the size too):
#: opening's scan starts with a block of the same size, so its first read is at hand.
FIRST_BLOCK = 64 * 2**10
#: Range requests one batch keeps in flight at once.
CONCURRENCY = 32
_TRANSIENT_STATUS = {408, 425, 429, 500, 502, 503, 504}
_CONTENT_RANGE = re.compile(r"bytes (\d+)-(\d+)/(\d+)$")


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


class StalledError(TimeoutError):
    """No byte came for the idle timeout's seconds (a transient failure: retried)."""


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
    if isinstance(err, (TimeoutError, asyncio.TimeoutError, ConnectionError, ShortReadError)) or unreachable(err):
        return True
    aiohttp = _aiohttp()
    return aiohttp is not None and isinstance(err, (aiohttp.ClientPayloadError, aiohttp.ClientConnectionError))


def _causes(err: BaseException) -> list[BaseException]:
    """``err`` and the errors it was raised from or while handling, outermost first: a client
    library's error wraps the socket's (botocore's ``EndpointConnectionError``, which s3fs
    raises, wraps aiohttp's ``ClientConnectorError``, which wraps ``ConnectionRefusedError``)."""
    chain: list[BaseException] = []
    found: BaseException | None = err
    while found is not None and all(found is not e for e in chain):
        chain.append(found)
        found = found.__cause__ or found.__context__
    return chain


def _refused_here(err: BaseException) -> bool:
    aiohttp = _aiohttp()
    return isinstance(err, ConnectionRefusedError) or (
        aiohttp is not None and isinstance(err, aiohttp.ClientConnectorError)
        and getattr(err.os_error, "errno", None) == errno.ECONNREFUSED)


def _refused(err: BaseException) -> bool:
    return any(_refused_here(e) for e in _causes(err))


def unreachable(err: BaseException) -> bool:
    """Whether ``err`` (a try's failure, or the error a :class:`Fetcher` raised for it) says
    that no connection to the host could be made at all: it refused the connection, or its
    name did not resolve; whichever client library's error says so (aiohttp's, botocore's)."""
    aiohttp = _aiohttp()
    return any(_refused_here(e) or isinstance(e, socket.gaierror) or (
        aiohttp is not None and isinstance(e, aiohttp.ClientConnectorError) and isinstance(e.os_error, socket.gaierror))
        for e in _causes(err))


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
    refused = _refused(err)
    if status is not None:
        reason = f"HTTP {status}"
    elif refused:
        reason = "connection refused"
    elif isinstance(err, StalledError):
        reason = str(err)
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
    connection = refused or isinstance(err, ConnectionError) or unreachable(err) or (
        aiohttp is not None and isinstance(err, aiohttp.ClientConnectionError))
    return (RemoteConnectionError if connection else RemoteError)(message, url)


class Fetcher:
    """Byte ranges of one remote object: checked, retried with backoff when the failure is
    transient, within an overall deadline per call.

    Over HTTP(S) the requests are our own (on fsspec's session) so that each answer's status and
    ``Content-Range`` are checked against the request, its body read in bounded parts, each within
    the idle timeout; the first, for the object's first ``FIRST_BLOCK`` bytes, also gives its
    size. Other filesystems go through fsspec's calls.

    ``whole``: the object is to be read whole (``fetch_whole``): the first request asks for all of
    it, and an object larger than ``MAX_WHOLE_OBJECT`` bytes is refused before its body is read.

    ``unreachable_once``: a host that cannot be connected to (:func:`unreachable`) is tried once,
    not retried: the caller's next request goes to the same host and retries it.
    """

    def __init__(self, url: str, storage_options: dict | None, *, whole: bool = False,
                 unreachable_once: bool = False):
        try:
            import fsspec
            import fsspec.asyn
        except ImportError:
            protocol = "s3fs" if url.startswith("s3://") else "aiohttp"  # the remote and s3 extras
            raise ImportError(f"reading {url} needs fsspec: {install_hint('fsspec', protocol)}") from None
        self.url = url
        self._storage_options = storage_options
        self._connect()
        self.deadline = _setting(DEADLINE_ENV, DEADLINE, float)
        self.idle_timeout = _setting(IDLE_TIMEOUT_ENV, IDLE_TIMEOUT, float)
        #: The most bytes read whole, and the setting that says so.
        self.max_whole, self._max_whole_env = (
            (_setting(MAX_WHOLE_OBJECT_ENV, MAX_WHOLE_OBJECT, int), MAX_WHOLE_OBJECT_ENV) if whole
            else (_setting(MAX_WHOLE_BODY_ENV, MAX_WHOLE_BODY, int), MAX_WHOLE_BODY_ENV))
        self._whole = whole
        self._unreachable_once = unreachable_once
        async_fs = getattr(self.fs, "async_impl", False)
        self._sync = fsspec.asyn.sync
        protocols = self.fs.protocol if isinstance(self.fs.protocol, tuple) else (self.fs.protocol,)
        self._http = async_fs and "http" in protocols
        #: Bytes from the object's start already at hand: the first request's answer, or the
        #: whole object from a server that ignores ranges.
        self._known = b""
        #: The object's size in bytes.
        self.size: int
        if self._http:
            stop = self.max_whole + 1 if whole else FIRST_BLOCK  # one byte more: a larger object shows
            what = "reading the object whole" if whole else f"reading bytes 0-{stop - 1}"
            first, self.size = self._run(what, lambda: self._http_get(0, stop, None))
            self._known = max(self._known, first, key=len)  # the whole object, if that came
        else:
            if async_fs:
                size = self._run(f"finding the size of {url}", lambda: self.fs._size(self.path))
            else:
                size = self._run(f"finding the size of {url}", lambda: asyncio.to_thread(self.fs.size, self.path))
            self.size = int(size)
            if whole and self.size > self.max_whole:
                raise self._too_large(self.size)

    def _connect(self) -> None:
        """The filesystem (its session) and the event loop the requests run on, made afresh in a
        forked child: the parent's loop has no thread there, and a request would wait for ever."""
        import fsspec
        import fsspec.asyn

        self.fs, self.path = fsspec.core.url_to_fs(self.url, **fsspec_options(self.url, self._storage_options))
        self._loop = self.fs.loop if getattr(self.fs, "async_impl", False) else fsspec.asyn.get_loop()
        self._pid = os.getpid()  # last: another thread of a child sees either all or none of it

    def _own_loop(self) -> asyncio.AbstractEventLoop:
        """The loop to run requests on, in this process."""
        if self._pid != os.getpid():
            self._connect()
        return self._loop

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

        result, err = self._sync(self._own_loop(), carried)
        if err is not None:
            raise err
        return result

    async def _retrying(self, what: str, attempt, deadline: float):
        stalls = 0
        for tries in range(1, RETRIES + 1):
            try:
                return await asyncio.wait_for(attempt(), max(deadline - time.monotonic(), 0.001))
            except Exception as err:  # noqa: BLE001 - classified below, re-raised with the URL
                left = deadline - time.monotonic()
                if left <= 0 and _transient(err):
                    raise _final_error(self.url, what, err, tries, self.deadline) from err
                stalls += isinstance(err, StalledError)
                if not _transient(err) or tries == RETRIES or stalls > STALL_RETRIES or (
                        self._unreachable_once and unreachable(err)):
                    raise _final_error(self.url, what, err, tries, None) from err
                await asyncio.sleep(min(BACKOFF * 2 ** (tries - 1), left))

    async def _attempt(self, start: int, stop: int) -> bytes:
        if self._http:
            data, self.size = await self._http_get(start, stop, self.size)
            return data
        if getattr(self.fs, "async_impl", False):
            data = await self.fs._cat_file(self.path, start=start, end=stop)
        else:
            data = await asyncio.to_thread(self.fs.cat_file, self.path, start=start, end=stop)
        if len(data) != stop - start:
            raise ShortReadError(f"got {len(data)} of {stop - start} bytes")
        return data

    async def _http_get(self, start: int, stop: int, size: int | None) -> tuple[bytes, int]:
        """Bytes ``[start, stop)`` (clipped to the object's end) by one HTTP range request, and the
        object's size (``size``: as known before, which the answer must agree with; ``None`` for
        the first request); fails as stalled (``StalledError``) where no byte comes for
        ``idle_timeout`` seconds."""
        idle = asyncio.timeout(self.idle_timeout)
        try:
            async with idle:
                return await self._http_get_within(start, stop, size, idle)
        except TimeoutError:
            if idle.expired():
                raise StalledError(f"the server stalled: no byte for {self.idle_timeout:g} s "
                                   f"({IDLE_TIMEOUT_ENV})") from None
            raise

    async def _http_get_within(self, start: int, stop: int, size: int | None,
                               idle: asyncio.Timeout) -> tuple[bytes, int]:
        session = await self.fs.set_session()
        options = dict(self.fs.kwargs)
        headers = {**options.pop("headers", {}), "Range": f"bytes={start}-{stop - 1}", "Accept-Encoding": "identity"}
        async with await session.get(self.fs.encode_url(self.path), headers=headers, **options) as r:
            _rearm(idle, self.idle_timeout)
            if r.status == 200:  # the server ignores ranges: the whole object
                self._known = await self._whole_body(r, idle)
                return self._known[start:stop], len(self._known)
            if r.status == 416 and start == 0:  # nothing satisfies bytes=0-...: an empty object
                return b"", 0
            if r.status != 206:
                raise _HTTPStatus(r.status)
            answered = _CONTENT_RANGE.match(r.headers.get("Content-Range", ""))
            if size is None and answered:
                size = int(answered.group(3))
            expected = (start, min(stop, size or 0) - 1, size)
            # (size is None only where no Content-Range answered)
            if not answered or size is None or tuple(map(int, answered.groups())) != expected:
                got = r.headers.get("Content-Range", "no Content-Range")
                raise RemoteRangeError(f"{self.url}: asked for bytes {start}-{stop - 1}, the server answered "
                                       f"{got!r} (expected 'bytes {expected[0]}-{expected[1]}/{size}')",
                                       self.url)
            if self._whole and size > self.max_whole:
                raise self._too_large(size)
            wanted = expected[1] - start + 1
            data = await _read_body(r, wanted, idle, self.idle_timeout)
            if len(data) > wanted:
                raise RemoteRangeError(f"{self.url}: asked for bytes {start}-{stop - 1}, the server sent more "
                                       f"than the {wanted} bytes its Content-Range says", self.url)
        if len(data) != wanted:
            raise ShortReadError(f"got {len(data)} of {wanted} bytes")
        return data, size

    def _too_large(self, size: int | None, *, no_ranges: bool = False) -> RemoteError:
        """The error for an object of ``size`` bytes (``None``: unknown) over ``max_whole``."""
        what = f"the {size}-byte object" if size is not None else "the object"
        message = f"{what} is larger than {self.max_whole} bytes, the most read whole ({self._max_whole_env})"
        if no_ranges and not self._whole:
            return RemoteRangeError(f"{self.url}: the server does not support range requests (it answered one "
                                    f"with the whole object), and {message}: serve it from a server that "
                                    "supports ranges", self.url)
        return RemoteError(f"{self.url}: {message}", self.url)

    async def _whole_body(self, r, idle: asyncio.Timeout) -> bytes:
        """The whole object a server sent to a range request: read once if it is small enough."""
        length = r.headers.get("Content-Length")
        if length is not None and int(length) > self.max_whole:
            raise self._too_large(int(length), no_ranges=True)
        data = await _read_body(r, self.max_whole, idle, self.idle_timeout)
        if len(data) > self.max_whole:
            raise self._too_large(None if length is None else int(length), no_ranges=True)
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
        return await asyncio.wrap_future(asyncio.run_coroutine_threadsafe(request, self._own_loop()))

    def fetch_many(self, ranges: list[tuple[int, int]]) -> list[bytes]:
        """Several ranges at once: fetched concurrently (``CONCURRENCY`` at most in flight), each
        retried on its own, all within one deadline."""
        known = {i: self._known[a:b] for i, (a, b) in enumerate(ranges) if b <= len(self._known) or a >= b}
        todo = [i for i in range(len(ranges)) if i not in known]
        if todo:
            fetched = self._in_loop(self._gather([ranges[i] for i in todo], time.monotonic() + self.deadline))
            known.update(zip(todo, fetched))
        return [known[i] for i in range(len(ranges))]

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


def _rearm(idle: asyncio.Timeout, seconds: float) -> None:
    """Bytes came: the idle timeout counts from now."""
    idle.reschedule(asyncio.get_running_loop().time() + seconds)


async def _read_body(r, limit: int, idle: asyncio.Timeout, seconds: float) -> bytes:
    """The body of response ``r``, ``limit`` bytes and one more at most (so that a longer one
    shows without being read on): an endless body costs bounded memory and time."""
    chunks, received = [], 0
    while received <= limit:
        chunk = await r.content.read(limit + 1 - received)
        if not chunk:
            break
        _rearm(idle, seconds)
        chunks.append(chunk)
        received += len(chunk)
    return b"".join(chunks)


def fetch_whole(url: str, storage_options: dict | None, *, unreachable_once: bool = False) -> bytes:
    """The whole object at ``url`` (over HTTP one request), read as the data is: checked,
    retried, within the deadline and the idle timeout; an object larger than ``MAX_WHOLE_OBJECT``
    bytes is refused before its body is read. ``unreachable_once``: as :class:`Fetcher`'s."""
    fetcher = Fetcher(url, storage_options, whole=True, unreachable_once=unreachable_once)
    return fetcher.fetch(0, fetcher.size)


def drive(walk, fetch_many):
    """Runs a walk of the core (``wanted``/``feed``/``finish``) to its end, fetching what it asks
    for with ``fetch_many``; returns what ``finish`` gives."""
    while (ranges := walk.wanted()) is not None:
        walk.feed(fetch_many(ranges))
    return walk.finish()


async def drive_async(walk, fetcher):
    """``drive`` for event loops: the ranges of a batch requested with ``fetcher.fetch_async`` (on
    the fetcher's loop), ``CONCURRENCY`` at most in flight as ``fetch_many``'s, the walk's own steps
    on the caller's loop."""
    slots = asyncio.Semaphore(CONCURRENCY)

    async def one(start: int, stop: int) -> bytes:
        async with slots:
            return await fetcher.fetch_async(start, stop)

    while (ranges := walk.wanted()) is not None:
        walk.feed(list(await asyncio.gather(*(one(a, b) for a, b in ranges))))
    return walk.finish()


class RangeFetcher(Protocol):
    """What a ``remote.RemoteHandle`` reads its object through: :class:`Fetcher`, or virtual.py's
    fetcher over a VirtualiZarr registry's object store."""

    @property
    def size(self) -> int: ...

    def fetch(self, start: int, stop: int) -> bytes: ...

    def fetch_many(self, ranges: list[tuple[int, int]]) -> list[bytes]: ...

    async def fetch_async(self, start: int, stop: int) -> bytes: ...
