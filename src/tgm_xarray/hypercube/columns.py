"""Group-by on code columns, and the metadata keys the planner sees per object.

Every pass of the planner works on integer code arrays (one entry per object row of the
:class:`~tgm_xarray.table.MetadataTable`) and runs Python only once per *distinct*
combination of codes: :func:`factorize` finds them, in order of first appearance, so that
"first in file order" rules keep their meaning.

>>> inverse, first = factorize(np.array([5, 3, 5, -1]), np.array([0, 0, 0, 0]))
>>> inverse.tolist(), first.tolist()
([0, 1, 0, 2], [0, 1, 3])
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from tgm_xarray.attrs import freeze, is_scalar
from tgm_xarray.table import MetadataTable

_LIMIT = 1 << 62


def factorize(*codes: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Distinct combinations of equal-length integer columns (``-1`` is a value too).

    Returns ``(inverse, first)``: each row's combination number, numbered by first appearance,
    and the first row of each combination.
    """
    n = len(codes[0]) if codes else 0
    key = np.zeros(n, dtype=np.int64)
    if n == 0:
        return key, key
    top = 1
    for column in codes:
        column = np.asarray(column, dtype=np.int64) + 1
        size = int(column.max()) + 1
        if top * size >= _LIMIT:  # keep the mixed-radix key inside int64
            key = np.unique(key, return_inverse=True)[1].reshape(-1)
            top = int(key.max()) + 1
        key = key * size + column
        top *= size
    _, first, inverse = np.unique(key, return_index=True, return_inverse=True)
    order = np.argsort(first, kind="stable")
    rank = np.empty_like(order)
    rank[order] = np.arange(len(order))
    return rank[inverse.reshape(-1)], first[order]


def distinct(values: np.ndarray) -> np.ndarray:
    """The distinct values, sorted: by a sort, which for hundreds of thousands of integers is
    many times faster than :func:`numpy.unique` (hash-based since numpy 2.3)."""
    ordered = np.sort(values)
    return ordered[np.concatenate([[True], ordered[1:] != ordered[:-1]])] if len(ordered) else ordered


def count_distinct(*codes: np.ndarray) -> int:
    """How many distinct combinations the columns hold."""
    return len(factorize(*codes)[1])


@dataclass(frozen=True)
class KeyColumn:
    """One metadata key over every object row: ``values[codes[i]]`` (``-1``: absent).

    ``canon`` numbers values by :func:`~tgm_xarray.attrs.freeze`, so equal canonical codes are
    equal values (``1`` and ``1.0`` too), whatever column they came from.
    """

    codes: np.ndarray
    values: list

    @cached_property
    def canon(self) -> np.ndarray:
        """Each row's canonical value number (``-1``: absent)."""
        index: dict[Any, int] = {}
        of_code = np.array([index.setdefault(freeze(v), len(index)) for v in self.values] + [-1],
                           dtype=np.int64)
        return of_code[self.codes]  # code -1 picks the trailing -1

    @cached_property
    def scalar(self) -> np.ndarray:
        """Whether each row's value can label a dimension (``False`` where absent)."""
        of_code = np.array([is_scalar(v) for v in self.values] + [False], dtype=bool)
        return of_code[self.codes]


class Keys:
    """The metadata keys of every object: its own (``base`` entry and descriptor params) over
    its message's ``_extra_``.

    ``column(key)`` is what names and dimensions see (the ``_extra_`` keys in ``identity``
    only); ``column(key, view=True)`` what filters see (all of ``_extra_``). Keys are numbered
    own keys first (the table's order), then the ``identity`` keys only ``_extra_`` has: a file
    may hold hundreds of thousands of own keys, so nothing here sorts or copies them.
    """

    def __init__(self, table: MetadataTable, identity: frozenset[str]):
        self.table = table
        self.identity = identity
        own = table.own
        self._extra_only: list[str] = []
        of_extra = []
        for key in table.extra.names:
            if key in own:
                of_extra.append(own.id_of(key))
            elif key in identity:
                of_extra.append(len(own) + len(self._extra_only))
                self._extra_only.append(key)
            else:
                of_extra.append(-1)
        #: each ``_extra_`` key's number (``-1``: outside ``identity``)
        self._of_extra = np.array(of_extra, dtype=np.int64)
        self._columns: dict[tuple[str, bool], KeyColumn] = {}

    def __contains__(self, key: object) -> bool:
        return key in self.table.own or (key in self.identity and key in self.table.extra)

    def _name(self, number: int) -> str:
        own = self.table.own.names
        return own[number] if number < len(own) else self._extra_only[number - len(own)]

    @property
    def names(self) -> list[str]:
        """Every key, in name order (for messages: a file may have very many)."""
        return sorted([*self.table.own.names, *self._extra_only])

    def in_every(self, rows: np.ndarray) -> list[str]:
        """The keys every one of ``rows`` has, own or from its message's ``_extra_``, in name
        order: found from the rows' entries, not from a column per key (a file may hold many
        keys that few rows have)."""
        if not len(rows):
            return []
        table = self.table
        n_keys = len(table.own) + len(self._extra_only)
        own_at, own_ids = table.own.key_ids_of(rows)
        extra_at, extra_ids = table.extra.key_ids_of(table.msg[rows])
        at = np.concatenate([own_at, extra_at])
        numbers = np.concatenate([own_ids, self._of_extra[extra_ids]])
        kept = numbers >= 0
        # A key both own and inherited by a row counts once for it.
        had = distinct(at[kept] * n_keys + numbers[kept]) % n_keys
        every = np.flatnonzero(np.bincount(had, minlength=n_keys) == len(rows))
        return sorted(self._name(i) for i in every.tolist())

    def column(self, key: str, view: bool = False) -> KeyColumn:
        found = self._columns.get((key, view))
        if found is None:
            found = self._columns[(key, view)] = self._merge(key, view)
        return found

    def _merge(self, key: str, view: bool) -> KeyColumn:
        table = self.table
        own = table.own.get(key)
        extra = table.extra.get(key) if view or key in self.identity else None
        codes = own.codes.astype(np.int64) if own else np.full(len(table), -1, dtype=np.int64)
        values = list(own.values) if own else []
        if extra is not None and len(table):
            inherited = extra.codes[table.msg].astype(np.int64)
            fill = (codes < 0) & (inherited >= 0)
            codes[fill] = inherited[fill] + len(values)
            values += extra.values
        return KeyColumn(codes, values)

    def dicts(self, keys: Sequence[str], rows: np.ndarray, view: bool = False,
              extra_columns: Iterable[np.ndarray] = ()) -> tuple[np.ndarray, list[dict], np.ndarray]:
        """The distinct ``{key: value}`` maps (present keys only) of ``rows`` over ``keys`` and
        ``extra_columns``: each row's map number, the maps in order of first appearance, and
        the first row (of the table) of each."""
        columns = [self.column(k, view) for k in keys]
        extra_columns = list(extra_columns)
        if not columns and not extra_columns:
            return np.zeros(len(rows), dtype=np.int64), [{}] if len(rows) else [], rows[:1]
        inverse, first = factorize(*(c.codes[rows] for c in columns), *extra_columns)
        maps = []
        for row in rows[first].tolist():
            maps.append({k: c.values[c.codes[row]] for k, c in zip(keys, columns)
                         if c.codes[row] >= 0})
        return inverse, maps, rows[first]


def common(maps: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
    """Entries present with the same value in every map (the first map's value)."""
    frozen = {k: freeze(v) for k, v in maps[0].items()}
    for m in maps[1:]:
        frozen = {k: v for k, v in frozen.items() if k in m and freeze(m[k]) == v}
    return {k: maps[0][k] for k in frozen}


def common_values(column: KeyColumn, rows: np.ndarray) -> tuple[bool, Any]:
    """Whether every row has the key with one value, and that value (the first row's)."""
    if not len(rows):
        return False, None
    canon = column.canon[rows]
    if canon[0] < 0 or (canon != canon[0]).any():
        return False, None
    return True, column.values[column.codes[rows[0]]]
