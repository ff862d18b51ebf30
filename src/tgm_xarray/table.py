"""A file's metadata as columns: one row per object, no Python object per message.

What the bytes say, below both the byte layer (:mod:`tgm_xarray.source`, which asks the core for
a source's table) and the planner (:mod:`tgm_xarray.hypercube`, which reads nothing else). Only the core builds a table
(``core-rs/src/table/``), from messages' bytes: of files (``_core.table_of_files``: mapped
ones, and remote ones from the bytes their open fetched) or of messages in memory
(:meth:`MetadataTable.of_bytes`). It flattens metadata as :func:`tgm_xarray.attrs.flatten`
does: nested maps become dotted keys, ``_reserved_`` is left out, and the structural keys
(``dim_names``, ``coordinate_attrs``) get columns of their own.

>>> import numpy as np
>>> from tgm_xarray._core import encode_message
>>> field = {"type": "ntensor", "shape": [3], "dtype": "float32", "encoding": "none",
...          "filter": "none", "compression": "none"}
>>> data = b"".join(encode_message({"base": [{"mars": {"param": "2t", "step": s}}]},
...                                [(field, np.zeros(3, "float32"))]) for s in (0, 6))
>>> table = MetadataTable.of_bytes(data)
>>> table.n_messages, table.msg.tolist(), table.own["mars.step"].decoded()
(2, [0, 1], [0, 6])
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from tgm_xarray import _core
from tgm_xarray.errors import TgmFormatError


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
        # Not `values`: that is Mapping's method (the keys' columns).
        self.flat_values = list(values)
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
        return self.flat_values[self.value_starts[i]:self.value_starts[i + 1]]

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
        return {self.names[k]: self.flat_values[v] for k, v in zip(self.key[entries].tolist(), at.tolist())}


class MetadataTable:
    """Every object of a file (rows, in message then object order) and every message: the view
    of the core's table (``_core.Table``, ``core-rs/src/table``), which names its columns. Each
    column is an attribute, made from the core's on first use and read-only.

    Per object: ``msg``/``obj``, ``shape`` (index into ``shapes``), ``descriptor`` (index into
    ``descriptors``: the descriptor without ``params``), ``own`` (the object's ``base`` entry
    flattened, then the descriptor's non-codec ``params`` where ``base`` lacks the key),
    ``codec_params`` (the codec's ``params`` but the szip offset table), ``own_dim_names``
    (``base[obj]["dim_names"]`` as stored), the inline frame hash where the frame has one, and
    byte ranges in the file. Per message: ``extra`` (``_extra_`` flattened without structural
    keys), ``extra_dim_names`` and ``coordinate_attrs`` (as stored), byte ranges.
    """

    def __init__(self, core: _core.Table):
        self.core = core

    @property
    def n_messages(self) -> int:
        return self.core.n_messages

    def __len__(self) -> int:
        return len(self.core)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name == "core":  # not a column (and no recursion while unpickling)
            raise AttributeError(name)
        try:
            kind, value = self.core.column(name)
        except KeyError:
            raise AttributeError(f"a metadata table has no column {name!r}") from None
        view = _VIEWS.get(kind, _read_only)(value)
        self.__dict__[name] = view
        return view

    def __reduce__(self):
        return (MetadataTable, (self.core,))

    @classmethod
    def of_bytes(cls, data: bytes) -> MetadataTable:
        """The table of the messages in ``data`` (whole messages one after the other, as a file
        holds them; none when empty), built by the core as for a file: for tests and examples."""
        return cls(_core.table_of_bytes(data))


def _read_only(value: Any) -> Any:
    if isinstance(value, np.ndarray):
        value.flags.writeable = False
    return value


#: The core's kinds of column (``_core.Table.column``) that have a view of their own here.
_VIEWS: dict[str, Any] = {
    "codes": lambda pair: Column(_read_only(np.asarray(pair[0], dtype=np.int32)), list(pair[1])),
    "keys": lambda fields: KeyColumns(**fields),
}


#: The most bytes one numpy array holds; an array past it fails with a bare ``ValueError``.
_MAX_BYTES = int(np.iinfo(np.intp).max)


def check_size(shape: tuple[int, ...], itemsize: int, what: str, source: str) -> None:
    """A shape numpy cannot hold comes from a declared shape no file can store: said at open
    (and by ``TgmFile.read``), naming what declares it, rather than by numpy's bare
    ``ValueError``."""
    if math.prod(shape) * itemsize > _MAX_BYTES:
        raise TgmFormatError(
            f"{source}: {what} has shape {list(shape)} of {itemsize}-byte elements: "
            f"{math.prod(shape) * itemsize} bytes, more than any array holds ({_MAX_BYTES})")
