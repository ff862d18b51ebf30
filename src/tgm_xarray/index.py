"""Persistent indexes: a file's metadata table and finished Dataset plans, kept in a small ``.tgm``.

A cold open scans every message's metadata (``MetadataTable``) and plans the Dataset
(``hypercube``). An index keeps both, so a second open reads one small file and never scans the
data file. ``docs/archives.md`` ("The index") describes the format, where indexes live and when
one is ignored; in short:

- an index is a ``.tgm`` file written by our own encoder: message 0 holds the format name and
  version, the data file's identity and the table (columns as objects, distinct values in the
  metadata); every further message holds the plans of one set of planner keywords;
- it is used only when the data file's size, mtime and a fingerprint of its first and last
  64 KiB match what it recorded; otherwise (and when it is corrupt or foreign) a
  :class:`~tgm_xarray.errors.TgmIndexWarning` says why and the file is opened cold;
- it is read beside the data (``<file>.tgmidx``) or from the user's cache directory, and
  written atomically (a temporary file renamed into place) so concurrent writers leave a valid one.

Values are stored in a tagged, JSON-like form (:func:`pack`): every dict in the stored form is a
tag, so metadata values of any shape round-trip with their types (tuple/list, int/float, numpy
dtypes and arrays). Nothing is ever unpickled.
"""

from __future__ import annotations

import dataclasses
import hashlib
import inspect
import json
import os
import tempfile
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np

from tgm_xarray import _core
from tgm_xarray.errors import TgmIndexWarning
from tgm_xarray.handles import FileKey, FileVersion, absolute
from tgm_xarray.hypercube import HypercubePlan, MetadataTable, VariablePlan
from tgm_xarray.hypercube.table import Column
from tgm_xarray.remote import is_url

FORMAT = "tgm-xarray-index"
VERSION = 1
#: What an index beside its data file is called: ``<file name><SUFFIX>``.
SUFFIX = ".tgmidx"
#: Bytes hashed at each end of the data file for its fingerprint.
EDGE = 64 * 2**10
CACHE_DIR_ENV = "TGM_XARRAY_CACHE_DIR"
#: The metadata key (in ``_extra_``) that holds an index message's contents.
KEY = "tgm_xarray_index"
#: The ``index=`` values the engine accepts.
MODES = ("auto", "beside", False)


# -- where indexes live ----------------------------------------------------------------------------

def beside(path: str) -> str | None:
    """The index beside ``path`` (a file or a URL): ``forecast.tgm`` -> ``forecast.tgm.tgmidx``;
    ``None`` beside a URL with a query string or a fragment (a presigned URL, an S3 version):
    the suffix would land in the query or the fragment and name the data object itself, and
    the index's own query (its signature) cannot be made from the data's."""
    if is_url(path) and ("?" in path or "#" in path):
        return None
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
        after, so a file written meanwhile is never taken for the version that was hashed."""
        key = FileKey.of(path)
        with open(key.path, "rb") as f:
            before = os.fstat(f.fileno())
            if (before.st_ino, before.st_size, before.st_mtime_ns) != tuple(key.version):
                raise OSError(f"{path}: the file changed while its identity was read")
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

    @classmethod
    def of_url(cls, url: str, storage_options: dict | None) -> Identity:
        """The remote object's size and fingerprint: one range request for an object of at most
        ``remote.FIRST_BLOCK`` bytes, two for a larger one."""
        from tgm_xarray.remote import Fetcher

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

    def __init__(self):
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
        if isinstance(value, (int, float)):  # subclasses (IntEnum, ...): their plain value
            return float(value) if isinstance(value, float) else int(value)
        raise TypeError(f"cannot store a {type(value).__name__} in an index")

    def _array(self, a: np.ndarray) -> dict:
        kind = a.dtype
        flat = np.ascontiguousarray(a).reshape(-1)
        if kind.kind in "mM":  # datetime64/timedelta64: their int64 counts
            flat = flat.view(np.int64)
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
        if dtype.kind in "mM" or dtype == np.bool_:
            flat = flat.view(dtype)
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
    raise ValueError(f"unknown tag {tag!r}")


def _planner_defaults() -> dict:
    from tgm_xarray.hypercube import build_hypercube

    return {name: p.default for name, p in inspect.signature(build_hypercube).parameters.items()
            if p.default is not inspect.Parameter.empty}


def plan_key(options: Mapping) -> str:
    """The canonical form of the planner's keywords (those left at their defaults dropped):
    which stored plans an open may use."""
    defaults = _planner_defaults()
    given = {k: v for k, v in sorted(options.items()) if not (k in defaults and _same(v, defaults[k]))}
    return json.dumps(Packer().pack(given), sort_keys=True)


def _same(a, b) -> bool:
    return type(a) is type(b) and a == b


def _pack_table(table: MetadataTable, packer: Packer) -> dict:
    return {f.name: packer.pack(_plain(getattr(table, f.name))) for f in dataclasses.fields(table)}


def _plain(value):
    if isinstance(value, Column):
        return {"codes": value.codes, "values": value.values}
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


def _unpack_table(stored: Mapping, read) -> MetadataTable:
    fields = {name: unpack(v, read) for name, v in stored.items()}
    for name in ("own", "codec_params", "extra"):
        fields[name] = {k: Column(**c) for k, c in fields[name].items()}
    for name in ("own_dim_names", "extra_dim_names", "coordinate_attrs"):
        fields[name] = Column(**fields[name])
    return MetadataTable(**fields)


def _pack_plan(plan: HypercubePlan, packer: Packer) -> dict:
    # A variable's refs (one (message, object) per field) as an array: one object, not a
    # tagged pair per field.
    # (Its fields as they are: dataclasses.asdict would deep-copy every ref first.)
    variables = {name: {**{f.name: getattr(v, f.name) for f in dataclasses.fields(v)},
                        "refs": np.array(v.refs, dtype=np.int64).reshape(-1, 2)}
                 for name, v in plan.variables.items()}
    return packer.pack({"variables": variables, "coord_names": plan.coord_names,
                        "index_coords": plan.index_coords, "attrs": plan.attrs})


def _unpack_plan(stored: Any, read, source: str) -> HypercubePlan:
    """A stored plan, its variables' ``source`` encoding the path opened now (a plan names the
    path it was made for there only: an index copied with its file, or read beside a URL,
    serves the new path)."""
    plan = unpack(stored, read)
    variables = {name: VariablePlan(**{**v, "refs": tuple(zip(v["refs"][:, 0].tolist(), v["refs"][:, 1].tolist())),
                                       "encoding": {**v["encoding"], "source": source}})
                 for name, v in plan["variables"].items()}
    return HypercubePlan(variables, plan["coord_names"], plan["index_coords"], plan["attrs"])


# -- reading and writing ----------------------------------------------------------------------------

class Index:
    """One index file, opened: its recorded identity, its table (read on first use) and the
    plans it holds, keyed by :func:`plan_key` (each a dict of group name -> plan)."""

    def __init__(self, path: str):
        self.path = path
        self.handle = _core.FileHandle(path)
        header = self._contents(0)
        if header.get("format") != FORMAT:
            raise ValueError(f"not a tgm-xarray index (format {header.get('format')!r})")
        if header.get("version") != VERSION:
            raise ValueError(f"index format version {header.get('version')!r}, this tgm-xarray reads {VERSION}")
        self.source: dict = header["source"]
        self.keys: dict[str, int] = dict(header["plans"])
        if len(self.handle) != 2 + len(self.keys) or sorted(self.keys.values()) != list(range(2, len(self.handle))):
            raise ValueError(f"{len(self.handle)} messages for {len(self.keys)} plans")

    def _contents(self, msg: int) -> dict:
        contents = (self.handle.metadata(msg).get("_extra_") or {}).get(KEY)
        if not isinstance(contents, dict):
            raise ValueError(f"message {msg} is not an index message")
        return contents

    def _reader(self, msg: int):
        # Hashes checked: a damaged column must fail here, never become a wrong plan.
        return lambda obj: self.handle.read(msg, obj, None, None, True)

    def table(self) -> MetadataTable:
        return _unpack_table(self._contents(1)["table"], self._reader(1))

    def plans(self, key: str, source: str) -> tuple[dict[str, HypercubePlan], dict[str, dict]] | None:
        """The plans stored for ``key`` (for the file at ``source``) and, per plan, the values
        of its dimension coordinates (see :func:`encode`); ``None`` if there are none."""
        msg = self.keys.get(key)
        if msg is None:
            return None
        contents, read = self._contents(msg), self._reader(msg)
        plans = {name: _unpack_plan(p, read, source) for name, p in contents["plans"].items()}
        return plans, unpack(contents["values"], read)

    def plan_messages(self) -> dict[str, bytes]:
        """Each stored plan message's bytes, by key (kept when the index is rewritten)."""
        with open(self.path, "rb") as f:
            data = f.read()
        out = {}
        for key, msg in self.keys.items():
            offset, length = self.handle.message_span(msg)
            out[key] = data[offset:offset + length]
        return out


def _message(contents: dict, packer: Packer) -> bytes:
    base = [{} for _ in packer.objects]
    return _core.encode_message({"base": base, "_extra_": {KEY: contents}}, packer.objects,
                                allow_nan=True, allow_inf=True)


def encode(identity: Identity, table: MetadataTable, plans: Mapping[str, Mapping[str, HypercubePlan]],
           values: Mapping[str, Mapping[str, Mapping[str, np.ndarray]]],
           kept: Mapping[str, bytes] | None = None) -> bytes:
    """An index's bytes: the header and table, then one message per plan key, with ``values``
    (per key, per plan: the values of its dimension coordinates, which xarray reads at every
    open to build indexes; kept so that a warm open reads nothing from the data file). ``kept``:
    already encoded plan messages, by key, that ``plans`` does not replace."""
    packer = Packer()
    messages = [_message({"table": _pack_table(table, packer)}, packer)]
    for key, group in plans.items():
        packer = Packer()
        messages.append(_message({"plan": key, "plans": {name: _pack_plan(p, packer) for name, p in group.items()},
                                  "values": packer.pack(values[key])}, packer))
    kept = {key: data for key, data in (kept or {}).items() if key not in plans}
    keys = [*plans, *kept]
    messages.extend(kept.values())
    header = {"format": FORMAT, "version": VERSION, "source": identity.stored(),
              "plans": [[key, 2 + i] for i, key in enumerate(keys)]}
    return b"".join([_message(header, Packer()), *messages])


def write(path: str, data: bytes) -> None:
    """Writes ``path`` atomically: a temporary file in its directory, renamed into place, so a
    reader (or a concurrent writer) sees the old index or the new one, never a mix."""
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    fd, partial = tempfile.mkstemp(prefix="." + os.path.basename(path) + ".", suffix=".partial", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(partial, path)
    except BaseException:
        try:
            os.remove(partial)
        except OSError:
            pass
        raise


def warn(index_path: str, why: str) -> None:
    warnings.warn(f"{index_path}: index not used: {why}; opening the data file without it",
                  TgmIndexWarning, stacklevel=4)


def load(index_path: str, identity: Identity) -> Index | None:
    """The index at ``index_path`` if it exists and describes ``identity``'s version; a warning
    (and ``None``) if it is stale, corrupt, not an index or not a regular file."""
    try:
        FileKey.of(index_path)  # regular files only: opening a FIFO would block, a device may not end
    except FileNotFoundError:
        return None
    except OSError as err:
        warn(index_path, f"it cannot be read ({err.strerror})")
        return None
    try:
        index = Index(index_path)
    except Exception as err:  # noqa: BLE001 - any failure to read it means: do not use it
        warn(index_path, f"it is corrupt or not an index ({err})")
        return None
    why = identity.mismatch(index.source)
    if why is not None:
        warn(index_path, f"it is stale: {why}")
        return None
    return index


def fetch_beside(url: str, storage_options: dict | None, into: str) -> bool:
    """Copies the index beside a remote object (over HTTP one request, as the data is read:
    checked, retried, bounded) to ``into``; ``False`` if there is none: none beside the URL
    (:func:`beside`), or the server answers that it is missing or forbidden (S3 answers 403
    for a missing key to whoever may not list the bucket). Other failures raise."""
    from tgm_xarray.remote import fetch_whole

    where = beside(url)
    if where is None:
        return False
    try:
        data = fetch_whole(where, storage_options)
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
        copy = cached(path)
        try:
            present = os.path.exists(copy) or fetch_beside(path, storage_options, copy)
        except Exception as err:  # noqa: BLE001 - any failure to get an index means: open without it
            warn(beside(path), f"it could not be read ({err})")
            present = False
        if not present:
            return Found(Identity.of_url(path, storage_options) if identify else None, None)
        identity = Identity.of_url(path, storage_options)
        return Found(identity, load(copy, identity))
    identity = Identity.of_file(path)
    for candidate in (beside(path), cached(path)):
        index = load(candidate, identity)
        if index is not None:
            return Found(identity, index)
    return Found(identity, None)


def save(path: str, found: Found, table: MetadataTable, key: str, plans: Mapping[str, HypercubePlan],
         values: Mapping[str, Mapping[str, np.ndarray]], *, to_beside: bool = False) -> None:
    """Adds ``plans`` (and the table) to the index of ``path``: in the cache, or beside a local
    file with ``to_beside``, for the identity :func:`find` checked. Plans already in that index
    are kept. A failure to write is a warning: the open itself succeeded."""
    identity = found.identity
    target = beside(path) if to_beside else cached(path)
    try:
        kept = {}
        if found.index is not None and os.path.abspath(found.index.path) == os.path.abspath(target):
            kept = found.index.plan_messages()
        write(target, encode(identity, table, {key: plans}, {key: values}, kept))
    except OSError as err:
        warnings.warn(f"{target}: the index could not be written ({err})", TgmIndexWarning, stacklevel=3)
