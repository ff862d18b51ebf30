"""Persistent indexes: a file's metadata table and finished Dataset plans, kept in a small ``.tgm``.

A cold open scans every message's metadata (``MetadataTable``) and plans the Dataset
(``hypercube``). An index keeps both, so a second open reads one small file and never scans the
data file. ``docs/archives.md`` ("The index") describes the format, where indexes live and when
one is ignored; in short:

- an index is a ``.tgm`` file written by our own encoder: message 0 (the header) holds the
  format name and version, the data file's identity, where each plan is and a digest of every
  other message, signed with this user's key (:func:`user_key`); message 1 holds the table
  (columns as objects, distinct values in the metadata); every further message holds the plans
  of one set of planner keywords;
- it is trusted only if this user wrote it (its signature checks with the key); it is used only
  when the data file's size, mtime and a fingerprint of its first and last 64 KiB match what it
  recorded; otherwise (and when it is corrupt) a :class:`~tgm_xarray.errors.TgmIndexWarning`
  says why and the file is opened cold;
- it records every object's fingerprint: each object a plan from it reads is checked at its
  first read (:class:`Recorded`), so a file changed where its identity does not look raises
  ``TgmStaleFileError`` rather than read other values;
- it is read beside the data (``<file>.tgmidx``) or from the user's cache directory, and
  written atomically (a temporary file renamed into place) so concurrent writers leave a valid one;
- the cache keeps ``$TGM_XARRAY_CACHE_MB`` of indexes at most, the least recently written or
  opened evicted first (:func:`prune_cache`; ``tgm-xarray cache list|prune``).

Values are stored in a tagged, JSON-like form (:mod:`.stored`): every dict in the stored form is a
tag, so metadata values of any shape round-trip with their types (tuple/list, int/float, numpy
dtypes and arrays). Nothing is ever unpickled.

The package's modules, in order: each imports only those before it, and none imports this
``__init__``, which finds, loads and saves the index of a data file and re-exports what the
rest of tgm-xarray uses:

- :mod:`.places`: where indexes live, beside the data or in the cache directory;
- :mod:`.cache`: the cache's size: its limit, its indexes listed, the least recently used evicted;
- :mod:`.trust`: this user's key, which signs the indexes they write;
- :mod:`.identity`: the data file's identity, which an index must match to be used;
- :mod:`.recorded`: what an index recorded of each object, checked at its first read;
- :mod:`.stored`: values, the table and plans in the stored form, and the keys plans are stored under;
- :mod:`.file`: an index file, encoded and signed, and read back.
"""

from __future__ import annotations

import dataclasses
import errno
import os
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from tgm_xarray.errors import TgmIndexWarning
from tgm_xarray.hypercube import HypercubePlan
from tgm_xarray.plans.index.cache import (
    CACHE_MB,
    CACHE_MB_ENV,
    cache_limit,
    cached_indexes,
    mark_used,
    megabytes,
    prune_cache,
    written_to_cache,
)
from tgm_xarray.plans.index.file import Index, OtherVersion, Untrusted, encode, write
from tgm_xarray.plans.index.identity import EDGE, Identity
from tgm_xarray.plans.index.places import CACHE_DIR_ENV, SUFFIX, beside, beside_file, cache_dir, cached, written_at
from tgm_xarray.plans.index.recorded import Recorded, record
from tgm_xarray.plans.index.stored import Packer, plan_key, unpack
from tgm_xarray.plans.index.trust import KEY_FILE, KEY_SIZE, user_key
from tgm_xarray.source.fetcher import unreachable
from tgm_xarray.source.handles import FileKey
from tgm_xarray.source.remote import is_url
from tgm_xarray.table import MetadataTable

__all__ = ["CACHE_DIR_ENV", "CACHE_MB", "CACHE_MB_ENV", "EDGE", "KEY_FILE", "KEY_SIZE", "MODES", "SUFFIX", "Found",
           "Identity", "Index", "Packer", "Recorded", "beside", "beside_file", "cache_dir", "cache_limit", "cached",
           "cached_indexes", "encode", "fetch_beside", "find", "load", "megabytes", "none_there",
           "plan_key", "prune_cache", "record", "save", "unpack", "user_key", "warn", "written_at"]

#: The ``index=`` values the engine accepts.
MODES = ("auto", "beside", False)


def none_there(err: OSError) -> bool:
    """Whether ``err``, of a look at an index's path, says that no index can be there: none, a
    file where a directory of its path would be, or a name too long for any file (beside a data
    file whose name is near the longest)."""
    return isinstance(err, (FileNotFoundError, NotADirectoryError)) or err.errno == errno.ENAMETOOLONG


def warn(index_path: str, why: str) -> None:
    warnings.warn(f"{index_path}: index not used: {why}; opening the data file without it",
                  TgmIndexWarning, stacklevel=4)


def load(index_path: str, identity: Identity) -> tuple[Index | None, str | None]:
    """The index at ``index_path`` if it exists, this user wrote it and it describes
    ``identity``'s version; else ``None`` and why it is not used (``None`` where there is none,
    or no key to check it with: :func:`user_key` has said so)."""
    try:
        FileKey.of(index_path)  # regular files only: opening a FIFO would block, a device may not end
    except OSError as err:
        return None, (None if none_there(err) else f"it cannot be read ({err.strerror})")
    secret = user_key()
    if secret is None:
        return None, None
    try:
        index = Index(index_path, secret)
    except Untrusted as err:
        return None, str(err)
    except OtherVersion:
        return None, None
    except Exception as err:  # noqa: BLE001 - any failure to read it means: do not use it
        if isinstance(err, OSError) and not os.path.lexists(index_path):  # removed (evicted) meanwhile
            return None, None
        return None, f"it is corrupt or not an index ({err})"
    why = identity.mismatch(index.source)
    if why is not None:
        return None, f"it is stale: {why}"
    return index, None


def fetch_beside(url: str, storage_options: dict | None, into: str) -> bool:
    """Copies the index at ``url``, the one :func:`beside` a remote object (over HTTP one
    request, as the data is read: checked, retried, bounded), to ``into``; ``False`` if there
    is none: the server answers that it is missing or forbidden (S3 answers 403 for a missing
    key to whoever may not list the bucket). Other failures raise; a host that cannot be
    connected to is tried once (the data's own request, next, retries it and reports it)."""
    from tgm_xarray.source.fetcher import fetch_whole

    try:
        data = fetch_whole(url, storage_options, unreachable_once=True)
    except (FileNotFoundError, PermissionError):
        return False
    write(into, data)
    return True


@dataclass(frozen=True)
class Found:
    """What :func:`find` found for a data file: its identity (``None`` for a remote object
    without any index: not fetched) and a fresh index, if any."""

    identity: Identity | None
    index: Index | None
    #: The ``fetcher.Fetcher`` that identified a remote object (an open from the index reads on).
    fetcher: Any = None


def find(path: str, storage_options: dict | None, *, to_beside: bool = False, identify: bool = False) -> Found:
    """A fresh index of ``path``: beside a local file, else in the cache; for a URL, in the
    cache, else beside the URL (one request, copied into the cache). ``to_beside``: the open
    will write beside the file (refused for a URL, before anything is read). A URL without an
    index gets no identity (and so no index written), unless ``identify``: it costs a request
    and 64 KiB that a cold open does not otherwise pay."""
    if is_url(path):
        if to_beside:
            raise ValueError(f"{path}: index='beside' writes beside local files only; use index='auto' "
                             "(the cache), or `tgm-xarray index --beside` where the file is")
        copy, remote = cached(path), beside(path)
        present = os.path.exists(copy)
        # the index beside a URL is read through its copy in the cache: none with the cache off
        if not present and remote is not None and cache_limit() > 0:
            try:
                present = fetch_beside(remote, storage_options, copy)
            except Exception as err:  # noqa: BLE001 - any failure to get an index means: open without it
                if not unreachable(err):  # else the data's request, to the same host, says why
                    warn(remote, f"it could not be read ({err})")
        if not present:
            return Found(Identity.of_url(path, storage_options) if identify else None, None)
        from tgm_xarray.source.fetcher import Fetcher

        fetcher = Fetcher(path, storage_options)
        return dataclasses.replace(_found(Identity.of_fetcher(fetcher), [copy], copy), fetcher=fetcher)
    return _found(Identity.of_file(path), [beside_file(path), cached(path)], cached(path))


def _found(identity: Identity, candidates: list[str], in_cache: str) -> Found:
    """The first of ``candidates`` that :func:`load` accepts (marked used if it is ``in_cache``,
    the one of them in the cache); a warning for each refused one only when none is accepted (a
    foreign index beside the data costs nothing once the user's cache holds a trusted one)."""
    refused = []
    for candidate in candidates:
        index, why = load(candidate, identity)
        if index is not None:
            if candidate == in_cache:
                mark_used(candidate)
            return Found(identity, index)
        if why is not None:
            refused.append((candidate, why))
    for candidate, why in refused:
        warn(candidate, why)
    return Found(identity, None)


def save(path: str, found: Found, table: MetadataTable, prints: Callable[[], np.ndarray], key: str,
         plans: Mapping[str, HypercubePlan], values: Mapping[str, Mapping[str, np.ndarray]], *,
         to_beside: bool = False, must_write: bool = False) -> None:
    """Adds ``plans`` (and the table, with its objects' fingerprints ``prints()``) to the index of
    ``path``: in the cache, or beside a local file with ``to_beside``, for the identity
    :func:`find` checked, signed with this user's key. Plans already in that index are kept. A
    failure to write (or to store a value) is a warning: the open itself succeeded; with
    ``must_write`` (``tgm-xarray index``) it is an ``OSError``. The cache is then kept within its
    limit (:func:`cache_limit`; 0: nothing is written there). A remote object that :func:`find`
    did not identify (``found.identity`` is ``None``) gets no index: ``ValueError``."""
    identity = found.identity
    if identity is None:
        raise ValueError(f"{path}: no index is written without the object's identity (find(..., identify=True))")
    target = written_at(path, to_beside)
    limit = None if to_beside else cache_limit()
    if limit == 0:
        if must_write:
            raise OSError(f"{target}: the index could not be written: the cache is off ({CACHE_MB_ENV}=0); "
                          "write it beside the file (--beside), or set a limit")
        return
    secret = user_key()  # None: user_key has warned
    if secret is None:
        if must_write:
            raise OSError(f"{target}: the index could not be written: no key to sign it with "
                          f"({os.path.join(cache_dir(), KEY_FILE)} could not be created or read)")
        return
    try:
        kept = {}
        if found.index is not None and os.path.abspath(found.index.path) == os.path.abspath(target):
            kept = found.index.plan_messages()
        data = encode(secret, identity, table, prints(), {key: plans}, {key: values}, kept)
        write(target, data)
    # TypeError, ValueError: a value Packer cannot store, an object that cannot be fingerprinted
    except (OSError, TypeError, ValueError) as err:
        if must_write:
            raise OSError(f"{target}: the index could not be written ({err})") from err
        warnings.warn(f"{target}: the index could not be written ({err})", TgmIndexWarning, stacklevel=3)
        return
    if limit is not None:
        written_to_cache(target, len(data), limit)
