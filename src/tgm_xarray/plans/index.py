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

Values are stored in a tagged, JSON-like form (:func:`pack`): every dict in the stored form is a
tag, so metadata values of any shape round-trip with their types (tuple/list, int/float, numpy
dtypes and arrays). Nothing is ever unpickled.
"""

from __future__ import annotations

import dataclasses
import errno
import hashlib
import hmac
import json
import os
import re
import stat
import tempfile
import threading
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from tgm_xarray import _core
from tgm_xarray.atomic import atomic_write_bytes
from tgm_xarray.errors import TgmIndexError, TgmIndexWarning, TgmStaleFileError, not_a_file
from tgm_xarray.hypercube import HypercubePlan, PlanOptions, VariablePlan
from tgm_xarray.source.handles import FileKey, FileVersion, Replaced, absolute, changed, unreplaced
from tgm_xarray.source.remote import is_url, unreachable
from tgm_xarray.table import MetadataTable

FORMAT = "tgm-xarray-index"
#: Raised whenever the plans it keeps would differ (4: cfgrib's ``heightAboveGround``), so that
#: no index keeps a plan this version would not make, or their keys would (5: ``PlanOptions``,
#: ``dim_names`` as a tuple; 6: the writer's records of stacked dimensions and CF packing, and
#: groups named after cfgrib's levels; 7: the table in the core's stored form).
VERSION = 7
#: What an index beside its data file is called: ``<file name><SUFFIX>``.
SUFFIX = ".tgmidx"
#: Bytes hashed at each end of the data file for its fingerprint.
EDGE = 64 * 2**10
CACHE_DIR_ENV = "TGM_XARRAY_CACHE_DIR"
#: The most megabytes of indexes the cache directory keeps: the least recently used (written or
#: opened) are removed past it; 0 writes none there.
CACHE_MB_ENV = "TGM_XARRAY_CACHE_MB"
CACHE_MB = 256
#: A process checks the cache against its limit at its first write there, then once what it wrote
#: since its last check reaches this share of the limit: never a scan of the directory per open.
CHECK_SHARE = 1 / 8
#: The metadata key (in ``_extra_``) that holds an index message's contents.
KEY = "tgm_xarray_index"
#: The ``index=`` values the engine accepts.
MODES = ("auto", "beside", False)
#: The file in the cache directory that holds this user's key, and the key's size in bytes.
KEY_FILE = "index.key"
KEY_SIZE = 32
#: The most bytes an index's header may have: a file with a larger first message is not read.
HEADER_LIMIT = 16 * 2**20


# -- where indexes live ----------------------------------------------------------------------------

def beside(path: str) -> str | None:
    """The index beside ``path`` (a file or a URL): ``forecast.tgm`` -> ``forecast.tgm.tgmidx``;
    ``None`` beside a URL with a query string or a fragment (a presigned URL, an S3 version):
    the suffix would land in the query or the fragment and name the data object itself, and
    the index's own query (its signature) cannot be made from the data's."""
    if is_url(path) and ("?" in path or "#" in path):
        return None
    return beside_file(path)


def beside_file(path: str) -> str:
    """The index beside the local file ``path`` (:func:`beside`, which is never ``None`` there)."""
    return path + SUFFIX


def cache_dir() -> str:
    """``$TGM_XARRAY_CACHE_DIR``, else ``$XDG_CACHE_HOME/tgm-xarray``, else ``~/.cache/tgm-xarray``."""
    explicit = os.environ.get(CACHE_DIR_ENV)
    if explicit:
        return os.path.expanduser(explicit)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "tgm-xarray")


def cached(path: str) -> str:
    """The index of ``path`` (a file or a URL) in the cache directory: named by a hash of the
    absolute path, so any number of files share the directory without clashes."""
    digest = hashlib.sha256(absolute(path).encode("utf-8", "surrogateescape")).hexdigest()[:32]
    return os.path.join(cache_dir(), digest + SUFFIX)


#: The names :func:`cached` gives: the only files in the cache directory that eviction removes.
_CACHED_NAME = re.compile(r"[0-9a-f]{32}" + re.escape(SUFFIX))


def written_at(path: str, to_beside: bool) -> str:
    """Where :func:`save` writes the index of ``path``: beside the local file, or in the cache."""
    return beside_file(path) if to_beside else cached(path)


# -- the cache's size -------------------------------------------------------------------------------

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
            if not _CACHED_NAME.fullmatch(entry.name):
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


def _written_to_cache(path: str, size: int, limit: int) -> None:
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


def _mark_used(path: str) -> None:
    """Makes the cache's index at ``path`` the most recently used (its mtime, which eviction
    orders by: atime is not kept on many mounts). A cache it cannot be set in only evicts less well."""
    try:
        os.utime(path)
    except OSError:
        pass


# -- this user's key ---------------------------------------------------------------------------------

_unusable_keys: set[str] = set()  # key files a warning has been given for (once per process)
_unusable_lock = threading.Lock()


def user_key() -> bytes | None:
    """This user's secret key, which signs the indexes they write: ``index.key`` in the cache
    directory, created on first use. ``None`` (and a warning, once per process) if it cannot be
    created or read: then no index is trusted or written."""
    path = os.path.join(cache_dir(), KEY_FILE)
    try:
        return _read_key(path)
    except FileNotFoundError:
        pass
    except OSError as err:
        _unusable(path, err)
        return None
    try:
        _create_key(path)
        return _read_key(path)
    except OSError as err:
        _unusable(path, err)
        return None


def _create_key(path: str) -> None:
    """Writes a new key to a temporary file (mode 0600), then links it into place: a link never
    replaces a file, so processes creating the key at once all use the one that got there first."""
    directory = os.path.dirname(path)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    fd, partial = tempfile.mkstemp(prefix="." + KEY_FILE + ".", suffix=".partial", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(os.urandom(KEY_SIZE))
        try:
            os.link(partial, path)
        except FileExistsError:
            pass
    finally:
        os.remove(partial)


def _read_key(path: str) -> bytes:
    # O_NONBLOCK: a named pipe there is refused below, not waited on (by every open, for ever).
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with open(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise not_a_file(path, st.st_mode, "key file")
        key = f.read(KEY_SIZE + 1)
    if len(key) != KEY_SIZE:
        raise OSError(f"{path}: {len(key)} bytes, not a key of {KEY_SIZE}")
    if hasattr(os, "getuid") and (st.st_uid != os.getuid() or st.st_mode & 0o077):
        raise OSError(f"{path}: other users may read or replace it (owner {st.st_uid}, "
                      f"mode {st.st_mode & 0o777:o}): not a secret")
    return key


def _unusable(path: str, err: OSError) -> None:
    with _unusable_lock:
        first = path not in _unusable_keys
        _unusable_keys.add(path)
    if first:
        warnings.warn(f"{path}: indexes are neither read nor written: the key that marks this user's indexes "
                      f"could not be created or read ({err}); files are opened without them",
                      TgmIndexWarning, stacklevel=4)


def _mac(key: bytes, signed: str) -> str:
    return hashlib.blake2b(signed.encode(), key=key, digest_size=32, person=b"tgm-xarray-index").hexdigest()


def _digest(message: bytes) -> str:
    return hashlib.blake2b(message, digest_size=32).hexdigest()


# -- the data file's identity ----------------------------------------------------------------------

@dataclass(frozen=True)
class Identity:
    """What an index checks its data file against. ``mtime_ns`` is ``None`` for a remote object
    (its size and fingerprint are compared); ``version`` is the local file's, for ``FileRef``."""

    size: int
    mtime_ns: int | None
    fingerprint: str
    version: FileVersion | None = None

    @classmethod
    def of_file(cls, path: str) -> Identity:
        """Stats ``path`` (the errors ``FileKey.of`` raises) and hashes its ends; stats again
        after, so a file written meanwhile is never taken for the version that was hashed. A
        file replaced between the stat and the open is read once more, the new one
        (``handles.unreplaced``)."""
        def read(key: FileKey) -> Identity:
            with open(key.path, "rb") as f:
                before = os.fstat(f.fileno())
                if (before.st_ino, before.st_size, before.st_mtime_ns) != tuple(key.version):
                    raise Replaced(key.path)
                head = f.read(EDGE)
                tail = b""
                if before.st_size > EDGE:
                    f.seek(max(before.st_size - EDGE, EDGE))
                    tail = f.read(EDGE)
                after = os.fstat(f.fileno())
            if (before.st_size, before.st_mtime_ns) != (after.st_size, after.st_mtime_ns):
                raise OSError(f"{path}: the file changed while its identity was read")
            return cls(before.st_size, before.st_mtime_ns, _fingerprint(before.st_size, head, tail),
                       FileVersion(before.st_ino, before.st_size, before.st_mtime_ns))

        return unreplaced(path, read)

    @classmethod
    def of_url(cls, url: str, storage_options: dict | None) -> Identity:
        """The remote object's size and fingerprint: one range request for an object of at most
        ``remote.FIRST_BLOCK`` bytes, two for a larger one."""
        from tgm_xarray.source.remote import Fetcher

        return cls.of_fetcher(Fetcher(url, storage_options))

    @classmethod
    def of_fetcher(cls, fetcher) -> Identity:
        """The identity of the object a ``remote.Fetcher`` reads (its first block is at hand)."""
        size = fetcher.size
        head_stop = min(EDGE, size)
        tail_start = max(size - EDGE, EDGE) if size > EDGE else size
        head, tail = fetcher.fetch_many([(0, head_stop), (tail_start, size)])
        return cls(size, None, _fingerprint(size, head, tail))

    def stored(self) -> dict:
        return {"size": self.size, "mtime_ns": self.mtime_ns, "fingerprint": self.fingerprint}

    def mismatch(self, stored: Mapping) -> str | None:
        """Why an index that recorded ``stored`` is not this version's; ``None`` if it is."""
        if stored.get("size") != self.size:
            return f"the data file's size is {self.size} bytes, the index's {stored.get('size')}"
        if self.mtime_ns is not None and stored.get("mtime_ns") != self.mtime_ns:
            return f"the data file's mtime_ns is {self.mtime_ns}, the index's {stored.get('mtime_ns')}"
        if stored.get("fingerprint") != self.fingerprint:
            return "the data file's first or last 64 KiB differ from those the index recorded"
        return None


def _fingerprint(size: int, head: bytes, tail: bytes) -> str:
    h = hashlib.blake2b(digest_size=16)
    h.update(size.to_bytes(8, "little"))
    h.update(head)
    h.update(tail)
    return h.hexdigest()


# -- values in a stored form ------------------------------------------------------------------------

_STORED_DTYPES = frozenset("int8 int16 int32 int64 uint8 uint16 uint32 uint64 float32 float64".split())


class Packer:
    """Turns values into the tagged stored form; numeric arrays become the message's objects."""

    def __init__(self) -> None:
        self.objects: list[tuple[dict, np.ndarray]] = []

    def pack(self, value: Any) -> Any:
        if value is None or isinstance(value, (bool, str)):
            return value
        if isinstance(value, (int, float)) and type(value) in (int, float):
            return value
        if isinstance(value, np.ndarray):
            return self._array(value)
        if isinstance(value, np.generic):
            return {"s": [value.dtype.str, self._array(np.asarray(value))]}
        if isinstance(value, np.dtype):
            return {"dt": value.str}
        if isinstance(value, tuple):
            return {"t": [self.pack(v) for v in value]}
        if isinstance(value, list):
            return {"l": [self.pack(v) for v in value]}
        if isinstance(value, frozenset):
            return {"fs": [self.pack(v) for v in sorted(value, key=repr)]}
        if isinstance(value, Mapping):
            return {"m": [[self.pack(k), self.pack(v)] for k, v in value.items()]}
        if isinstance(value, bytes):
            return {"b": value.hex()}
        if isinstance(value, complex):
            return {"c": [value.real, value.imag]}
        if isinstance(value, (int, float)):  # subclasses (IntEnum, ...): their plain value
            return float(value) if isinstance(value, float) else int(value)
        raise TypeError(f"cannot store a {type(value).__name__} in an index")

    def _array(self, a: np.ndarray) -> dict:
        kind = a.dtype
        flat = np.ascontiguousarray(a).reshape(-1)
        if kind.kind in "mM":  # datetime64/timedelta64: their int64 counts
            flat = flat.view(np.int64)
        elif kind.kind == "c":  # complex: (real, imaginary) pairs of its float type
            flat = flat.view(np.dtype(f"{kind.byteorder}f{kind.itemsize // 2}"))
        elif kind == np.bool_:
            flat = flat.view(np.uint8)
        if flat.dtype.name not in _STORED_DTYPES or flat.size == 0:
            return {"al": [kind.str, list(a.shape), [self.pack(v) for v in a.reshape(-1).tolist()]]}
        flat = flat.astype(flat.dtype.newbyteorder("<"), copy=False)
        descriptor = {"type": "ntensor", "shape": [flat.size], "dtype": flat.dtype.name, "byte_order": "little",
                      "encoding": "none", "filter": "none", "compression": "none"}
        self.objects.append((descriptor, flat))
        return {"a": [len(self.objects) - 1, kind.str, list(a.shape)]}


def unpack(value: Any, read: Callable[[int], np.ndarray]) -> Any:
    """A value from its stored form; ``read(i)`` gives the message's object ``i``."""
    if not isinstance(value, dict):
        return value
    (tag, body), = value.items()
    if tag == "a":
        index, dtype, shape = body
        dtype = np.dtype(dtype)
        flat = read(index)
        if dtype.kind in "mMc" or dtype == np.bool_:
            flat = flat.astype(flat.dtype.newbyteorder(dtype.byteorder), copy=False).view(dtype)
        return flat.astype(dtype, copy=False).reshape(shape)
    if tag == "al":
        dtype, shape, items = body
        out = np.empty(len(items), dtype=np.dtype(dtype))
        out[...] = [unpack(v, read) for v in items] if items else []
        return out.reshape(shape)
    if tag == "t":
        return tuple(unpack(v, read) for v in body)
    if tag == "l":
        return [unpack(v, read) for v in body]
    if tag == "m":
        return {unpack(k, read): unpack(v, read) for k, v in body}
    if tag == "fs":
        return frozenset(unpack(v, read) for v in body)
    if tag == "s":
        return unpack(body[1], read)[()].astype(np.dtype(body[0]))
    if tag == "dt":
        return np.dtype(body)
    if tag == "b":
        return bytes.fromhex(body)
    if tag == "c":
        return complex(*body)
    raise ValueError(f"unknown tag {tag!r}")


def plan_key(options: PlanOptions, groups: bool) -> str:
    """The canonical form of the planner's keywords (:meth:`PlanOptions.as_dict`: those left at
    their defaults dropped) and of ``groups`` (``split_groups``' plans, or one Dataset's): which
    stored plans an open may use."""
    return json.dumps(Packer().pack(dict(sorted({**options.as_dict(), "groups": groups}.items()))), sort_keys=True)


def _pack_table(table: MetadataTable, packer: Packer) -> Any:
    # The core's stored form, as one object of bytes (the core names the columns and checks
    # what it reads back).
    return packer.pack(np.frombuffer(table.core.to_bytes(), dtype=np.uint8))


def _unpack_table(stored: Any, read) -> MetadataTable:
    return MetadataTable(_core.Table.from_bytes(unpack(stored, read).tobytes()))


def _pack_plan(plan: HypercubePlan, packer: Packer, prints: Callable[[np.ndarray], np.ndarray]) -> dict:
    # A variable's refs (one (message, object) per field) as an array: one object, not a
    # tagged pair per field; their fingerprints (``prints(refs)``) another.
    # (Its fields as they are: dataclasses.asdict would deep-copy every ref first.)
    variables = {}
    for name, v in plan.variables.items():
        refs = np.array(v.refs, dtype=np.int64).reshape(-1, 2)
        variables[name] = {**{f.name: getattr(v, f.name) for f in dataclasses.fields(v)},
                           "refs": refs, "prints": prints(refs)}
    return packer.pack({"variables": variables, "coord_names": plan.coord_names,
                        "index_coords": plan.index_coords, "attrs": plan.attrs})


def _unpack_plan(stored: Any, read, source: str, version: FileVersion | None
                 ) -> tuple[HypercubePlan, dict[str, Recorded]]:
    """A stored plan, its variables' ``source`` encoding the path opened now (a plan names the
    path it was made for there only: an index copied with its file, or read beside a URL,
    serves the new path), and what the index recorded of each variable's objects in ``version``
    of the file."""
    plan = unpack(stored, read)
    variables, recorded = {}, {}
    for name, v in plan["variables"].items():
        refs, prints = v.pop("refs"), v.pop("prints")
        if refs.shape != (len(prints), 2):
            raise ValueError(f"variable {name!r}: {len(refs)} fields, {len(prints)} fingerprints")
        variables[name] = VariablePlan(**{**v, "refs": tuple(zip(refs[:, 0].tolist(), refs[:, 1].tolist())),
                                          "encoding": {**v["encoding"], "source": source}})
        recorded[name] = Recorded(source, prints, version)
    return HypercubePlan(variables, plan["coord_names"], plan["index_coords"], plan["attrs"]), recorded


# -- what the index recorded of each object -------------------------------------------------------

def _print(fingerprint: str) -> int:
    """A fingerprint (``FileHandle.fingerprint``) as the 64-bit number an index stores."""
    return int.from_bytes(hashlib.blake2b(fingerprint.encode(), digest_size=8).digest(), "little")


def fingerprints(table: MetadataTable, handle) -> np.ndarray:
    """Each of the table's objects' fingerprint (as stored: :func:`_print`), from ``handle``
    (a ``FileHandle`` or ``RemoteHandle``; cheap where the frame carries its hash)."""
    return np.array([_print(handle.fingerprint(m, o)) for m, o in zip(table.msg.tolist(), table.obj.tolist())],
                    dtype=np.uint64)


def ref_prints(table: MetadataTable, prints: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """``refs`` (an ``(n, 2)`` array of (message, object)) -> their fingerprints in ``prints``
    (the table's, one per row: rows are in message, then object order)."""
    width = int(table.obj.max()) + 1 if len(table) else 1
    keys = table.msg.astype(np.int64) * width + table.obj

    def of(refs: np.ndarray) -> np.ndarray:
        return prints[np.searchsorted(keys, refs[:, 0] * width + refs[:, 1])]
    return of


def record(plans: Mapping[str, HypercubePlan], table: MetadataTable, prints: np.ndarray, source: str,
           version: FileVersion | None) -> dict[str, dict[str, Recorded]]:
    """Per plan, per variable, what ``prints`` (the table's fingerprints) say of its objects in
    ``version`` of the file."""
    of_refs = ref_prints(table, prints)
    return {name: {v.name: Recorded(source, of_refs(np.array(v.refs, dtype=np.int64).reshape(-1, 2)), version)
                   for v in plan.variables.values()}
            for name, plan in plans.items()}


class Recorded:
    """The fingerprints an index recorded of one variable's objects (one per ref), which the
    open found the file at ``version`` of (``None``: a URL, which has none). Each object is
    checked at its first read from each version of the file: a file changed where the index's
    identity does not look (its middle, with size and mtime kept) raises ``TgmStaleFileError``
    rather than give another object's values. A file replaced since the open (``os.replace``,
    as writers publish one) is read where it holds the same objects: each one's fingerprint
    must be the one recorded and stand for a frame hash that holds, so its stored bytes
    (descriptor, payload, masks) are proven the same. An object without a hash is refused
    there: its fingerprint hashes the payload but not all of its descriptor's parameters."""

    def __init__(self, path: str, prints: np.ndarray, version: FileVersion | None):
        self.path = path
        self.prints = prints
        self.version = version
        # The version of the file these flags are for, and per ref whether it was checked there
        # (0 -> 1 only, under the lock; a read without it at worst checks again). One tuple, so
        # that a reader never pairs one version with another version's flags.
        self._checked: tuple[FileVersion | None, bytearray] = (version, bytearray(len(prints)))
        self._lock = threading.Lock()

    def checked(self, source) -> bytearray:
        """Per ref, whether it was checked in the version of the file ``source`` (a ``TgmFile``)
        reads: none for another version than the last checked. Read only: :meth:`check` sets them."""
        version, flags = self._checked
        return flags if version == source.version else bytearray(len(self.prints))

    def check(self, source, which: int, msg: int, obj: int) -> None:
        """Checks ref ``which`` (message ``msg``, object ``obj``) in ``source``, the data file as a
        read reads it (a ``TgmFile``)."""
        if source.version == self.version:
            if _print(source.fingerprint(msg, obj)) != int(self.prints[which]):
                raise TgmStaleFileError(
                    f"{self.path}: message {msg}, object {obj} is not the object its index recorded: the index is "
                    "stale (the file changed where its identity check does not look, keeping its size, mtime and "
                    "first and last 64 KiB); open it with index=False, or delete its index")
        else:
            self._check_replaced(source, which, msg, obj)
        with self._lock:
            if self._checked[0] != source.version:
                self._checked = (source.version, bytearray(len(self.prints)))
            self._checked[1][which] = 1

    def _check_replaced(self, source, which: int, msg: int, obj: int) -> None:
        """The check in a file that replaced the one the open found: the same stored bytes, proven."""
        why = changed(self.path, self.version, source.version)
        try:
            same = _print(source.fingerprint(msg, obj)) == int(self.prints[which])
        except TgmIndexError:  # the file holds no such object now
            same = False
        if not same:
            raise TgmStaleFileError(f"{why}: message {msg}, object {obj} is not the object its index recorded; "
                                    "open it again")
        if not source.check_hash(msg, obj):  # TgmHashMismatchError where the hash does not hold
            raise TgmStaleFileError(f"{why}: message {msg}, object {obj} carries no hash that proves it the "
                                    "object its index recorded; open it again")

    def __reduce__(self):  # pickled with the array that holds it: checked again where it is read
        return (Recorded, (self.path, self.prints, self.version))


# -- reading and writing ----------------------------------------------------------------------------

class Untrusted(ValueError):
    """An index that does not carry this user's signature."""


class OtherVersion(ValueError):
    """An index in another version of the format (another tgm-xarray wrote it): replaced
    without a word, as any cache after an upgrade."""


class Index:
    """One index file, opened: its recorded identity, its table (read on first use) and the
    plans it holds, keyed by :func:`plan_key` (each a dict of group name -> plan).

    Everything comes from one read of one version of the file (a writer may rename another into
    place meanwhile): the header's signature is checked with ``key``, and every other message
    against the digest the header holds when it is used."""

    def __init__(self, path: str, key: bytes):
        self.path = path
        with open(path, "rb") as f:
            spans = _spans(path, f)
            offset, length = spans[0]
            if offset != 0 or length > HEADER_LIMIT:
                raise ValueError(f"a first message of {length} bytes at {offset}")
            f.seek(0)
            header = _contents(f.read(length), 0)
            if header.get("format") != FORMAT:
                raise ValueError(f"not a tgm-xarray index (format {header.get('format')!r})")
            if header.get("version") != VERSION:
                raise OtherVersion(f"index format version {header.get('version')!r}, this tgm-xarray reads {VERSION}")
            signed, mac = header.get("signed"), header.get("mac")
            if not (isinstance(signed, str) and isinstance(mac, str) and hmac.compare_digest(_mac(key, signed), mac)):
                raise Untrusted("it was not written by this user: not trusted")
            body = json.loads(signed)
            self.source: dict = body["source"]
            self.keys: dict[str, int] = dict(body["plans"])
            self._digests: list[str] = body["digests"]
            if len(spans) < 2 or len(spans) != 1 + len(self._digests) or sorted(self.keys.values()) != list(range(2, len(spans))):
                raise ValueError(f"{len(spans)} messages for {len(self.keys)} plans")
            if any(a + n != b for (a, n), (b, _) in zip(spans, spans[1:])) or sum(n for _, n in spans) != \
                    os.fstat(f.fileno()).st_size:
                raise ValueError("bytes between or after its messages")
            self._spans = spans
            self._data = f.read()  # the rest: a file this user wrote, of the size its header implies

    def _message(self, msg: int) -> tuple[dict, Callable[[int], np.ndarray]]:
        """Message ``msg``'s contents and a reader of its objects, if it is the message the header signed."""
        offset, length = self._spans[msg]
        start = offset - self._spans[1][0]
        data = self._data[start:start + length]
        if not hmac.compare_digest(_digest(data), self._digests[msg - 1]):
            raise ValueError(f"message {msg} is not the one its header signed")
        contents = _contents(data, msg)
        frames = _core.parse_message(data)[1]

        def read(obj: int) -> np.ndarray:
            _, at, size = frames[obj]
            return _core.read_frame(data[at:at + size], context=f"{self.path}: message {msg}, object {obj}")
        return contents, read

    def table(self) -> tuple[MetadataTable, np.ndarray]:
        """The table and its objects' fingerprints (:func:`fingerprints`)."""
        contents, read = self._message(1)
        prints = unpack(contents["prints"], read)
        table = _unpack_table(contents["table"], read)
        if prints.shape != (len(table),):
            raise ValueError(f"{len(table)} objects, {len(prints)} fingerprints")
        return table, prints

    def plans(self, key: str, source: str, version: FileVersion | None
              ) -> tuple[dict[str, HypercubePlan], dict[str, dict], dict[str, dict[str, Recorded]]] | None:
        """The plans stored for ``key`` (for the file at ``source``, found at ``version``), per
        plan the values of its dimension coordinates (see :func:`encode`) and what the index
        recorded of its objects; ``None`` if there are none."""
        msg = self.keys.get(key)
        if msg is None:
            return None
        contents, read = self._message(msg)
        plans, recorded = {}, {}
        for name, p in contents["plans"].items():
            plans[name], recorded[name] = _unpack_plan(p, read, source, version)
        return plans, unpack(contents["values"], read), recorded

    def plan_messages(self) -> dict[str, bytes]:
        """Each stored plan message's bytes, by key (kept when the index is rewritten): those
        the header signed (a damaged one is dropped: its plan is made again)."""
        out = {}
        for key, msg in self.keys.items():
            offset, length = self._spans[msg]
            start = offset - self._spans[1][0]
            data = self._data[start:start + length]
            if hmac.compare_digest(_digest(data), self._digests[msg - 1]):
                out[key] = data
        return out


def _spans(path: str, opened) -> list[tuple[int, int]]:
    """The messages' spans in the file ``opened`` (open, by ``path``): the core finds them by
    path, so the path must still name the file opened after (``opened`` keeps its inode, which
    no other file can then take; writers rename new files into place, never an old one back)."""
    for _ in range(3):
        handle = _core.FileHandle(path)
        spans = [handle.message_span(i) for i in range(len(handle))]
        del handle
        now, then = os.stat(path), os.fstat(opened.fileno())
        if (now.st_dev, now.st_ino) == (then.st_dev, then.st_ino):
            if not spans:
                raise ValueError("no messages")
            return spans
    raise OSError(f"{path}: replaced while it was read")


def _contents(message: bytes, msg: int) -> dict:
    contents = (_core.parse_message(message)[0].get("_extra_") or {}).get(KEY)
    if not isinstance(contents, dict):
        raise ValueError(f"message {msg} is not an index message")
    return contents


def _message(contents: dict, packer: Packer) -> bytes:
    base: list[dict[str, Any]] = [{} for _ in packer.objects]
    return _core.encode_message({"base": base, "_extra_": {KEY: contents}}, packer.objects,
                                allow_nan=True, allow_inf=True)


def encode(key: bytes, identity: Identity, table: MetadataTable, prints: np.ndarray,
           plans: Mapping[str, Mapping[str, HypercubePlan]],
           values: Mapping[str, Mapping[str, Mapping[str, np.ndarray]]],
           kept: Mapping[str, bytes] | None = None) -> bytes:
    """An index's bytes, signed with ``key``: the header, the table with its objects'
    fingerprints ``prints``, then one message per plan key, with ``values`` (per key, per plan:
    the values of its dimension coordinates, which xarray reads at every open to build indexes;
    kept so that a warm open reads nothing from the data file). ``kept``: already encoded plan
    messages, by key, that ``plans`` does not replace."""
    packer = Packer()
    messages = [_message({"table": _pack_table(table, packer), "prints": packer.pack(prints)}, packer)]
    of_refs = ref_prints(table, prints)
    for plan_key_, group in plans.items():
        packer = Packer()
        messages.append(_message({"plan": plan_key_,
                                  "plans": {name: _pack_plan(p, packer, of_refs) for name, p in group.items()},
                                  "values": packer.pack(values[plan_key_])}, packer))
    kept = {k: data for k, data in (kept or {}).items() if k not in plans}
    keys = [*plans, *kept]
    messages.extend(kept.values())
    signed = json.dumps({"source": identity.stored(), "plans": [[k, 2 + i] for i, k in enumerate(keys)],
                         "digests": [_digest(m) for m in messages]}, sort_keys=True)
    header = {"format": FORMAT, "version": VERSION, "signed": signed, "mac": _mac(key, signed)}
    return b"".join([_message(header, Packer()), *messages])


def write(path: str, data: bytes) -> None:
    """Writes ``path`` atomically (``atomic.atomic_write_bytes``: a reader or a concurrent writer
    sees the old index or the new one, never a mix), making its directory first."""
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    atomic_write_bytes(path, data)


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
    from tgm_xarray.source.remote import fetch_whole

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
    #: The ``remote.Fetcher`` that identified a remote object (an open from the index reads on).
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
        from tgm_xarray.source.remote import Fetcher

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
                _mark_used(candidate)
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
        _written_to_cache(target, len(data), limit)
