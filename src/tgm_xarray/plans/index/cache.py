"""The cache directory's size: its limit (``$TGM_XARRAY_CACHE_MB``), its indexes listed, the least
recently used (written or opened) evicted first (``tgm-xarray cache list|prune``)."""

from __future__ import annotations

import os
import stat
import threading
import warnings
from dataclasses import dataclass

from tgm_xarray.errors import TgmIndexWarning
from tgm_xarray.plans.index.places import CACHED_NAME

#: The most megabytes of indexes the cache directory keeps: the least recently used (written or
#: opened) are removed past it; 0 writes none there.
CACHE_MB_ENV = "TGM_XARRAY_CACHE_MB"
CACHE_MB = 256
#: A process checks the cache against its limit at its first write there, then once what it wrote
#: since its last check reaches this share of the limit: never a scan of the directory per open.
CHECK_SHARE = 1 / 8


def megabytes(text: str) -> int:
    """Bytes from a number of megabytes (``"256"``, ``"0.5"``); ``ValueError`` for anything else."""
    mb = float(text)
    if not (mb >= 0 and mb != float("inf")):
        raise ValueError(f"{text!r} is not a number of megabytes (0 or more)")
    return int(mb * 2**20)


def cache_limit() -> int:
    """The bytes of indexes the cache keeps: ``$TGM_XARRAY_CACHE_MB`` megabytes, else
    ``CACHE_MB``; a value that is not a number of megabytes warns and leaves the default."""
    value = os.environ.get(CACHE_MB_ENV, "").strip()
    if value:
        try:
            return megabytes(value)
        except ValueError:
            warnings.warn(f"{CACHE_MB_ENV}={value!r} is not a number of megabytes: the index cache keeps "
                          f"its default limit of {CACHE_MB} MB", TgmIndexWarning, stacklevel=2)
    return CACHE_MB * 2**20


@dataclass(frozen=True)
class CachedIndex:
    """One index in the cache directory: its path, size and when it was last written or used."""

    path: str
    size: int
    used: float


def cached_indexes(directory: str) -> list[CachedIndex]:
    """The indexes in the cache ``directory`` (none if it does not exist), least recently used
    first: only the files :func:`cached` names, never the key or anything else put there."""
    try:
        entries = os.scandir(directory)
    except FileNotFoundError:
        return []
    found = []
    with entries:
        for entry in entries:
            if not CACHED_NAME.fullmatch(entry.name):
                continue
            try:
                st = entry.stat(follow_symlinks=False)
            except FileNotFoundError:  # removed meanwhile by another process
                continue
            if stat.S_ISREG(st.st_mode):
                found.append(CachedIndex(entry.path, st.st_size, st.st_mtime))
    return sorted(found, key=lambda c: c.used)


def prune_cache(directory: str, limit: int, keep: str | None = None) -> list[CachedIndex]:
    """Removes the least recently used indexes of the cache ``directory`` until the rest take
    ``limit`` bytes at most, never ``keep`` (the index just written); returns those removed.
    One that cannot be removed raises the ``OSError``, which names it."""
    indexes = cached_indexes(directory)
    total = sum(c.size for c in indexes)
    removed = []
    for c in indexes:
        if total <= limit:
            break
        if c.path == keep:
            continue
        try:
            os.remove(c.path)
        except FileNotFoundError:  # another process evicted it first
            pass
        total -= c.size
        removed.append(c)
    return removed


_written_since_check: dict[str, int] = {}  # cache directory -> bytes this process wrote there since it checked
_check_lock = threading.Lock()


def written_to_cache(path: str, size: int, limit: int) -> None:
    """Keeps the cache within ``limit`` bytes after this process wrote ``size`` bytes at ``path``
    in it (checked as ``CHECK_SHARE`` says); a failure to remove an index is a warning."""
    directory = os.path.dirname(path)
    with _check_lock:
        since = _written_since_check.get(directory)  # None: not checked yet by this process
        written = size if since is None else since + size
        due = since is None or written >= limit * CHECK_SHARE
        _written_since_check[directory] = 0 if due else written
    if due:
        try:
            prune_cache(directory, limit, keep=path)
        except OSError as err:
            warnings.warn(f"{err.filename}: the index cache could not be pruned to its {CACHE_MB_ENV} limit "
                          f"({err.strerror})", TgmIndexWarning, stacklevel=4)


def mark_used(path: str) -> None:
    """Makes the cache's index at ``path`` the most recently used (its mtime, which eviction
    orders by: atime is not kept on many mounts). A cache it cannot be set in only evicts less well."""
    try:
        os.utime(path)
    except OSError:
        pass
