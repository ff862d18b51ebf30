"""A file's metadata as columns: one row per object, no Python object per message.

The planner (:mod:`tgm_xarray.hypercube`) reads nothing else. The core builds a table in one
call from mapped files and from remote files whose messages came whole
(``_core.table_of_files``); tests and callers holding metadata as dicts build one with
:meth:`MetadataTable.from_messages`. Both flatten
metadata with the same rules (:func:`tgm_xarray.attrs.flatten`): nested maps become dotted keys,
``_reserved_`` is left out, and the structural keys (``dim_names``, ``coordinate_attrs``) get
columns of their own.

>>> field = {"type": "ntensor", "ndim": 1, "shape": [3], "strides": [1], "dtype": "float32",
...          "byte_order": "little", "encoding": "none", "filter": "none",
...          "compression": "none", "masks": [], "params": {}}
>>> table = MetadataTable.from_messages(
...     [({"base": [{"mars": {"param": "2t", "step": s}}], "_extra_": {}}, [field]) for s in (0, 6)])
>>> table.n_messages, table.msg.tolist(), table.own["mars.step"].decoded()
(2, [0, 1], [0, 6])
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tgm_xarray.attrs import COORDINATE_ATTRS_KEY, flatten, freeze, without_structural

#: Descriptor ``params`` that belong to the codec pipeline (encoding, not attributes).
CODEC_PARAM_PREFIXES = ("sp_", "szip_", "zstd_", "lz4_", "blosc2_", "zfp_", "sz3_", "shuffle_")
#: The szip RSI offset table: an internal index, never a setting or an attribute.
SZIP_OFFSETS = "szip_block_offsets"
#: Descriptor entries kept in :attr:`MetadataTable.descriptors` (``params`` have columns).
DESCRIPTOR_KEYS = ("type", "ndim", "shape", "strides", "dtype", "byte_order", "encoding", "filter",
                   "compression", "masks")


@dataclass(frozen=True)
class Column:
    """One metadata key over the rows: ``values[codes[i]]`` is row ``i``'s value, ``-1`` where
    the row lacks the key. ``values`` holds each distinct value once (by their encoded form, so
    ``1`` and ``1.0`` may both appear: compare with :func:`tgm_xarray.attrs.freeze`)."""

    codes: np.ndarray  # int32
    values: list

    def decoded(self) -> list[Any]:
        """Every row's value (``None`` where absent): for tests and small tables."""
        return [self.values[c] if c >= 0 else None for c in self.codes.tolist()]


class KeyColumns(Mapping):
    """Many metadata keys over ``n`` rows, kept by entry: row ``rows[e]`` has the value
    ``values[value_starts[key[e]] + code[e]]`` for key ``names[key[e]]`` (entries key by key, rows
    in order; each key's distinct values one run of the flat list ``values``).
    Only the rows that have a key take room, so messages that each bring keys of their own cost
    their entries, not keys x rows. ``self[key]`` is that key's dense :class:`Column`, made
    when first asked for; :meth:`in_every` and :meth:`of_row` answer without one."""

    def __init__(self, names: Sequence[str], values: Sequence, value_starts, rows, key, code, n: int):
        self.names = list(names)
        self.values = list(values)
        self.value_starts = np.asarray(value_starts, dtype=np.int64)
        self.rows = np.asarray(rows, dtype=np.int64)
        self.key = np.asarray(key, dtype=np.int64)
        self.code = np.asarray(code, dtype=np.int64)
        self.n = n
        self._ids = {k: i for i, k in enumerate(self.names)}
        # Entries of key i: starts[i]:starts[i + 1] (entries run key by key).
        self._starts = np.searchsorted(self.key, np.arange(len(self.names) + 1))
        self._dense: dict[str, Column] = {}
        self._by_row: tuple[np.ndarray, np.ndarray] | None = None

    def id_of(self, name: str) -> int:
        """The key's number (its place in :attr:`names`); KeyError for a key no row has."""
        return self._ids[name]

    def __getitem__(self, name: str) -> Column:
        found = self._dense.get(name)
        if found is None:
            i = self._ids[name]  # KeyError for a key no row has
            entries = slice(self._starts[i], self._starts[i + 1])
            codes = np.full(self.n, -1, dtype=np.int32)
            codes[self.rows[entries]] = self.code[entries]
            found = self._dense.setdefault(name, Column(codes, self._values_of(i)))
        return found

    def _values_of(self, i: int) -> list:
        return self.values[self.value_starts[i]:self.value_starts[i + 1]]

    def __iter__(self) -> Iterator[str]:
        return iter(self.names)

    def __len__(self) -> int:
        return len(self.names)

    def __contains__(self, name) -> bool:
        return name in self._ids

    def _row_entries(self) -> tuple[np.ndarray, np.ndarray]:
        """``(first entry of each row, with one past the last; entries in row order)``."""
        if self._by_row is None:
            order = np.argsort(self.rows, kind="stable")
            starts = np.searchsorted(self.rows[order], np.arange(self.n + 1))
            self._by_row = (starts, order)
        return self._by_row

    def key_ids_of(self, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """``(row position in rows, key id)`` of every entry of ``rows``, in row then key order."""
        starts, order = self._row_entries()
        rows = np.asarray(rows, dtype=np.int64)
        counts = starts[rows + 1] - starts[rows]
        firsts = np.repeat(starts[rows] - np.cumsum(counts) + counts, counts)
        entries = order[firsts + np.arange(int(counts.sum()))]
        return np.repeat(np.arange(len(rows)), counts), self.key[entries]

    def in_every(self, rows: np.ndarray) -> list[str]:
        """The keys every one of ``rows`` has."""
        if not len(rows):
            return []
        _, ids = self.key_ids_of(rows)
        counts = np.bincount(ids, minlength=len(self.names))
        return [self.names[i] for i in np.flatnonzero(counts == len(rows)).tolist()]

    def of_row(self, row: int) -> dict[str, Any]:
        """``{key: value}`` of one row, in key order."""
        starts, order = self._row_entries()
        entries = np.sort(order[starts[row]:starts[row + 1]])
        at = self.value_starts[self.key[entries]] + self.code[entries]
        return {self.names[k]: self.values[v] for k, v in zip(self.key[entries].tolist(), at.tolist())}

    def stored(self) -> dict[str, Any]:
        """The fields, as the constructor takes them (for an index)."""
        return {"names": self.names, "values": self.values, "value_starts": self.value_starts, "rows": self.rows,
                "key": self.key, "code": self.code, "n": self.n}

    @classmethod
    def by_row(cls, by_key: Mapping[str, Mapping[int, Any]], n: int) -> KeyColumns:
        """From ``{key: {row: value}}``, values told apart as ``_Interned`` does."""
        names, values, starts, rows, key, code = [], [], [0], [], [], []
        for i, (name, of_row) in enumerate(by_key.items()):
            interned = _Interned()
            for row, value in sorted(of_row.items()):
                rows.append(row)
                key.append(i)
                code.append(interned.code(value))
            names.append(name)
            values += interned.values
            starts.append(len(values))
        return cls(names, values, starts, rows, key, code, n)


@dataclass(frozen=True)
class MetadataTable:
    """Every object of a file (rows, in message then object order) and every message.

    Per object: ``msg``/``obj``, ``shape`` (index into ``shapes``), ``descriptor`` (index into
    ``descriptors``: the descriptor without ``params``), ``own`` (the object's ``base`` entry
    flattened, then the descriptor's non-codec ``params`` where ``base`` lacks the key),
    ``codec_params`` (the codec's ``params`` but the szip offset table), ``own_dim_names``
    (``base[obj]["dim_names"]`` as stored), the inline frame hash where the frame has one, and
    byte ranges in the file. Per message: ``extra`` (``_extra_`` flattened without structural
    keys), ``extra_dim_names`` and ``coordinate_attrs`` (as stored), byte ranges. Byte ranges
    are ``-1`` where unknown (tables built from dicts have only the frame ranges given them).
    """

    n_messages: int
    msg: np.ndarray
    obj: np.ndarray
    shape: np.ndarray
    shapes: list[tuple[int, ...]]
    descriptor: np.ndarray
    descriptors: list[dict]
    own: KeyColumns
    codec_params: KeyColumns
    own_dim_names: Column
    frame_hash: np.ndarray  # uint64
    has_frame_hash: np.ndarray  # bool
    frame_start: np.ndarray  # int64, from the file's start
    frame_end: np.ndarray
    payload_start: np.ndarray
    payload_end: np.ndarray
    extra: KeyColumns
    extra_dim_names: Column
    coordinate_attrs: Column
    message_offset: np.ndarray  # int64
    message_length: np.ndarray

    def __len__(self) -> int:
        return len(self.msg)

    @classmethod
    def from_core(cls, columns: Mapping[str, Any]) -> MetadataTable:
        """The table the core returns as a dict of arrays, ``(codes, values)`` pairs and
        :class:`KeyColumns` fields."""
        def column(pair) -> Column:
            return Column(np.asarray(pair[0], dtype=np.int32), list(pair[1]))

        fields = dict(columns)
        rows, messages = len(fields["msg"]), fields["n_messages"]
        for name, n in (("own", rows), ("codec_params", rows), ("extra", messages)):
            fields[name] = KeyColumns(**fields[name], n=n)
        for name in ("own_dim_names", "extra_dim_names", "coordinate_attrs"):
            fields[name] = column(fields[name])
        fields["shapes"] = [tuple(s) for s in fields["shapes"]]
        return cls(**fields)

    @classmethod
    def from_messages(cls, messages: Sequence[tuple[Mapping, Sequence[Mapping]]],
                      frames: Sequence[Sequence[tuple[int, int]] | None] | None = None) -> MetadataTable:
        """A table from ``(metadata, descriptors)`` per message, as ``FileHandle.metadata`` and
        ``FileHandle.descriptors`` return them. ``frames``: per message, ``(offset, length)`` in
        the file of each object's data-object frame, or ``None`` where unknown (a remote
        handle knows them before any descriptor is fetched: ``RemoteHandle.frame_spans``)."""
        rows = _Builder()
        for msg, (metadata, descriptors) in enumerate(messages):
            spans = frames[msg] if frames is not None else None
            metadata = metadata or {}
            raw_extra = metadata.get("_extra_") or {}
            rows.message(flatten(without_structural(raw_extra)), raw_extra.get("dim_names"),
                         raw_extra.get(COORDINATE_ATTRS_KEY))
            base = metadata.get("base") or []
            for obj, descriptor in enumerate(descriptors):
                raw = base[obj] if obj < len(base) and isinstance(base[obj], Mapping) else {}
                params = descriptor.get("params") or {}
                own = flatten(without_structural(raw))
                for key, value in flatten({k: v for k, v in params.items()
                                           if not str(k).startswith(CODEC_PARAM_PREFIXES)}).items():
                    own.setdefault(key, value)
                codec = {k: v for k, v in params.items()
                         if str(k).startswith(CODEC_PARAM_PREFIXES) and k != SZIP_OFFSETS}
                rows.object(msg, obj, descriptor, own, codec, raw.get("dim_names"),
                            None if spans is None else spans[obj])
        return rows.table(len(messages))


class _Interned:
    """Codes and distinct values of one column while a table is built."""

    def __init__(self):
        self.codes: list[int] = []
        self.values: list[Any] = []
        self._index: dict[Any, int] = {}

    def code(self, value: Any) -> int:
        key = (type(value).__name__, freeze(value))
        if key not in self._index:
            self._index[key] = len(self.values)
            self.values.append(value)
        return self._index[key]


class _Builder:
    def __init__(self):
        self.msg: list[int] = []
        self.obj: list[int] = []
        self.shapes = _Interned()
        self.descriptors = _Interned()
        self.frame_start: list[int] = []
        self.frame_end: list[int] = []
        self.own: dict[str, dict[int, Any]] = {}
        self.codec: dict[str, dict[int, Any]] = {}
        self.own_dims: dict[int, Any] = {}
        self.extra: dict[str, dict[int, Any]] = {}
        self.extra_dims: dict[int, Any] = {}
        self.coord_attrs: dict[int, Any] = {}
        self.n_messages = 0

    def message(self, extra: dict, dim_names: Any, coord_attrs: Any) -> None:
        m = self.n_messages
        for key, value in extra.items():
            self.extra.setdefault(key, {})[m] = value
        if dim_names is not None:
            self.extra_dims[m] = dim_names
        if coord_attrs is not None:
            self.coord_attrs[m] = coord_attrs
        self.n_messages += 1

    def object(self, msg, obj, descriptor, own, codec, dim_names, frame) -> None:
        row = len(self.msg)
        start, end = (frame[0], frame[0] + frame[1]) if frame is not None else (-1, -1)
        self.frame_start.append(start)
        self.frame_end.append(end)
        self.msg.append(msg)
        self.obj.append(obj)
        self.shapes.codes.append(self.shapes.code(tuple(int(n) for n in descriptor.get("shape") or ())))
        summary = {k: descriptor[k] for k in DESCRIPTOR_KEYS if k in descriptor}
        self.descriptors.codes.append(self.descriptors.code(summary))
        for key, value in own.items():
            self.own.setdefault(key, {})[row] = value
        for key, value in codec.items():
            self.codec.setdefault(key, {})[row] = value
        if dim_names is not None:
            self.own_dims[row] = dim_names

    def table(self, n_messages: int) -> MetadataTable:
        n = len(self.msg)
        unknown = np.full(n, -1, dtype=np.int64)
        return MetadataTable(
            n_messages=n_messages,
            msg=np.array(self.msg, dtype=np.int64), obj=np.array(self.obj, dtype=np.int64),
            shape=np.array(self.shapes.codes, dtype=np.int32), shapes=self.shapes.values,
            descriptor=np.array(self.descriptors.codes, dtype=np.int32),
            descriptors=self.descriptors.values,
            own=KeyColumns.by_row(self.own, n),
            codec_params=KeyColumns.by_row(self.codec, n),
            own_dim_names=_column(self.own_dims, n),
            frame_hash=np.zeros(n, dtype=np.uint64), has_frame_hash=np.zeros(n, dtype=bool),
            frame_start=np.array(self.frame_start, dtype=np.int64),
            frame_end=np.array(self.frame_end, dtype=np.int64),
            payload_start=unknown, payload_end=unknown,
            extra=KeyColumns.by_row(self.extra, n_messages),
            extra_dim_names=_column(self.extra_dims, n_messages),
            coordinate_attrs=_column(self.coord_attrs, n_messages),
            message_offset=np.full(n_messages, -1, dtype=np.int64),
            message_length=np.full(n_messages, -1, dtype=np.int64),
        )


def _column(by_row: dict[int, Any], n: int) -> Column:
    interned = _Interned()
    codes = np.full(n, -1, dtype=np.int32)
    for row, value in by_row.items():
        codes[row] = interned.code(value)
    return Column(codes, interned.values)
