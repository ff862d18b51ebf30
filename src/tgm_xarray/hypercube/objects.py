"""The objects of a file: which are coordinates and which are data, and which are planned.

Each rule here is written once for one object or one message (:func:`_classify`,
:func:`_hint`, :func:`_matches`, ...) and evaluated once per *distinct* combination of the
codes it depends on, never once per object.

Which ``_extra_`` keys identify fields is decided over the whole file (:func:`identity_keys`),
so that a filter or ``message_index`` never changes what a key means.
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import numpy as np

from tgm_xarray import _core, vocabulary
from tgm_xarray.attrs import freeze, is_scalar
from tgm_xarray.errors import TgmCodecError, TgmIndexError
from tgm_xarray.hypercube.columns import KeyColumn, Keys, factorize
from tgm_xarray.hypercube.options import PlanOptions
from tgm_xarray.table import MetadataTable

Fingerprint = Callable[[int, int], int]
#: ``locate(message)``: the file and the message's number in it, for a table of several files.
Locate = Callable[[int], tuple[str, int]]

#: Default chain of metadata keys naming a variable (after ``variable_key``).
NAME_KEYS = ("name", "mars.param", "mars.shortName", "shortName", "param")
#: Horizontal coordinate names (case-insensitive), and the name an object without ``dim_names``
#: gets: such objects are coordinates of the fields of their message (rules in
#: :func:`_classify`).
HORIZONTAL_NAMES: dict[str, str] = {
    "lat": "latitude",
    "latitude": "latitude",
    "lon": "longitude",
    "longitude": "longitude",
}
#: Names (case-insensitive) that make a 1-D object *without* ``dim_names`` a coordinate, as in
#: upstream's guide; with hints, a name alone never makes a coordinate.
COORDINATE_NAMES: dict[str, str] = {
    **HORIZONTAL_NAMES,
    **{name: name for name in ("x", "y", "time", "level", "pressure", "height", "depth",
                               "frequency", "step")},
}


@dataclass(frozen=True)
class Selection:
    """What one Dataset is planned from: rows of data and coordinate objects, and the messages
    they come from (sorted)."""

    data: np.ndarray
    coords: np.ndarray
    messages: np.ndarray


@dataclass(frozen=True)
class Row:
    """One object, for error messages and the few per-variable/per-coordinate rules."""

    index: int  # its row in the table
    msg: int
    obj: int
    shape: tuple[int, ...]
    dtype: np.dtype
    descriptor: Mapping[str, Any]
    hint: tuple[str | None, ...] | None  # axis names hinted by metadata (None: no hint)
    size_names: tuple[str | None, ...] | None  # without a hint: the message's {axis size: name}
    coordinate: str | None  # coordinate name, None for data objects
    name_key: str | None  # the key of `own` that named a coordinate object
    own: dict[str, Any]  # flattened base[obj] (+ non-codec descriptor params)
    where: str  # "message 3 object 0" (of which file, for a table of several)

    @property
    def ref(self) -> tuple[int, int]:
        return self.msg, self.obj


class Objects:
    """Every object of a file, classified: per row its hint, dtype and coordinate name."""

    def __init__(self, table: MetadataTable, options: PlanOptions, *, source: str, fingerprint: Fingerprint,
                 locate: Locate | None = None):
        self.table = table
        self.options = options
        self.source = source  # the file's path, for encodings and error messages
        self.fingerprint = fingerprint
        self.locate = locate
        self.keys = Keys(table, identity_keys(table))
        self.dtypes = [_readable_dtype(d.get("dtype")) for d in table.descriptors]
        self.hint, self.hints, self.size_hint, self.size_hints = self._hints()
        self._own_name, self._own_names = self._names()
        self.coordinate, self.coordinate_names = self._classify(self._own_name)

    # -- per row ---------------------------------------------------------------------------

    def row(self, i: int) -> Row:
        t = self.table
        c = int(self.coordinate[i])
        own = t.own.of_row(i)
        return Row(i, int(t.msg[i]), int(t.obj[i]), t.shapes[t.shape[i]],
                   self.dtypes[t.descriptor[i]], t.descriptors[t.descriptor[i]],
                   self.hints[self.hint[i]], self.size_hints[self.size_hint[i]],
                   self.coordinate_names[c] if c >= 0 else None,
                   self._own_names[self._own_name[i]][0] if c >= 0 else None, own,
                   self.where(int(t.msg[i]), int(t.obj[i])))

    def where(self, msg: int, obj: int) -> str:
        """An object's place for messages: its message number in its own file, and that file
        when the table is of several."""
        if self.locate is None:
            return f"message {msg} object {obj}"
        path, local = self.locate(msg)
        return f"message {local} object {obj} of {path}"

    @cached_property
    def codec_params(self) -> dict[str, KeyColumn]:
        return {k: KeyColumn(c.codes, c.values) for k, c in self.table.codec_params.items()}

    def view(self, i: int) -> dict[str, Any]:
        """All of ``_extra_`` overlaid by the object's own keys: what filters see."""
        t, m = self.table, self.table.msg[i]
        view = t.extra.of_row(int(m))
        view.update(self.row(i).own)
        return view

    @cached_property
    def family(self) -> np.ndarray:
        """Each row's dtype family number (``bool``, ``int``, ``float``, ...)."""
        index: dict[str, int] = {}
        of_descriptor = np.array([index.setdefault(dtype_family(d), len(index)) if d is not None
                                  else -1 for d in self.dtypes], dtype=np.int64)
        return of_descriptor[self.table.descriptor]

    @cached_property
    def dtype_id(self) -> np.ndarray:
        """Each row's dtype number (equal numbers, equal dtypes)."""
        index: dict[Any, int] = {}
        of_descriptor = np.array([index.setdefault(d, len(index)) for d in self.dtypes],
                                 dtype=np.int64)
        return of_descriptor[self.table.descriptor]

    def _hints(self) -> tuple[np.ndarray, list, np.ndarray, list]:
        """Per row, numbered: the axis names its metadata declares (:func:`_hint`), and where it
        declares none, those the message's ``{axis size: name}`` gives (:func:`_size_names`)."""
        t = self.table
        if not len(t):
            return np.zeros(0, dtype=np.int64), [None], np.zeros(0, dtype=np.int64), [None]
        message_hint = t.extra_dim_names.codes[t.msg]
        inverse, first = factorize(t.shape, t.own_dim_names.codes, message_hint)
        declared: dict[Any, int] = {}
        by_size: dict[Any, int] = {}
        of_declared, of_size = [], []
        for row in first.tolist():
            own_code, msg_code = t.own_dim_names.codes[row], message_hint[row]
            shape = t.shapes[t.shape[row]]
            message = t.extra_dim_names.values[msg_code] if msg_code >= 0 else None
            hint = _hint(shape, t.own_dim_names.values[own_code] if own_code >= 0 else None, message)
            names = _size_names(shape, message) if hint is None else None
            of_declared.append(declared.setdefault(hint, len(declared)))
            of_size.append(by_size.setdefault(names, len(by_size)))
        return (np.array(of_declared, dtype=np.int64)[inverse], list(declared),
                np.array(of_size, dtype=np.int64)[inverse], list(by_size))

    def _names(self) -> tuple[np.ndarray, list]:
        """Each row's ``(key, name)`` from its own metadata (:func:`_own_name`), numbered."""
        t = self.table
        columns = [t.own[k] for k in NAME_KEYS if k in t.own]
        if not columns or not len(t):
            return np.zeros(len(t), dtype=np.int64), [(None, None)]
        inverse, first = factorize(*(c.codes for c in columns))
        keys = [k for k in NAME_KEYS if k in t.own]
        names = [_own_name({k: c.values[c.codes[r]] for k, c in zip(keys, columns)
                            if c.codes[r] >= 0}) for r in first.tolist()]
        return inverse, names

    def _classify(self, own_name: np.ndarray) -> tuple[np.ndarray, list[str]]:
        """Coordinate names (:func:`_classify`), decided once per distinct message layout."""
        t = self.table
        n = len(t)
        coordinate = np.full(n, -1, dtype=np.int64)
        index: dict[str, int] = {}
        if n:
            signature, _ = factorize(own_name, t.shape, self.hint)
            counts = np.bincount(t.msg, minlength=t.n_messages)
            starts = np.concatenate([[0], np.cumsum(counts)[:-1]])
            for count in np.unique(counts[counts > 0]).tolist():
                rows = starts[counts == count][:, None] + np.arange(count)
                layout, first = factorize(*(signature[rows[:, j]] for j in range(count)))
                result = np.full((len(first), count), -1, dtype=np.int64)
                for k, sample in enumerate(rows[first].tolist()):
                    found = _classify([self._own_names[own_name[r]][1] for r in sample],
                                      [t.shapes[t.shape[r]] for r in sample],
                                      [self.hints[self.hint[r]] for r in sample])
                    result[k] = [index.setdefault(c, len(index)) if c is not None else -1
                                 for c in found]
                coordinate[rows] = result[layout]
        return coordinate, list(index)

    # -- the objects to plan -------------------------------------------------------------

    def select(self) -> Selection:
        """The objects to plan, with data objects filtered by ``filter_by_keys``.

        A message whose data objects are all filtered out is dropped with its coordinates; a
        message without data objects (e.g. a grid message) is kept.
        """
        t, options = self.table, self.options
        key = options.variable_key
        if key is not None and len(t) and key not in self.keys:
            close = vocabulary.close_matches(key, self.keys.names)
            # upstream's fallback (a file without the key opens), told: it may be a typo
            warnings.warn(f"{self.source}: variable_key={key!r} is a key of no object"
                          + vocabulary.did_you_mean(close)
                          + "; variables are named by " + ", ".join(NAME_KEYS) + ", else object_<i>",
                          UserWarning, stacklevel=2)
        message_index = options.message_index
        if message_index is None and not options.merge_objects:
            message_index = 0
        wanted = np.ones(t.n_messages, dtype=bool)
        if message_index is not None:
            if message_index >= t.n_messages:
                raise TgmIndexError(
                    f"{self.source}: message_index {message_index} is out of range "
                    f"(the file has {t.n_messages} messages)")
            wanted[:] = False
            wanted[message_index] = True
        rows = np.flatnonzero(wanted[t.msg])
        is_data = self.coordinate[rows] < 0
        data, coords = rows[is_data], rows[~is_data]
        passed = data[self._matching(data, options.filter_by_keys)] if options.filter_by_keys else data
        # kept: messages with a data object passing the filter, or with no data object at all
        has_data = np.zeros(t.n_messages, dtype=bool)
        has_data[t.msg[data]] = True
        kept = wanted & ~has_data
        kept[t.msg[passed]] = True
        selection = Selection(passed, coords[kept[t.msg[coords]]], np.flatnonzero(kept))
        self._check_readable(np.concatenate([selection.data, selection.coords]))
        return selection

    def _check_readable(self, rows: np.ndarray) -> None:
        """Raises for the first of ``rows`` whose dtype has no numpy form (a bitmask, ...): the
        Dataset fails at open, as reading it would, and a filter that leaves it out opens."""
        unreadable = np.array([d is None for d in self.dtypes] + [False])[self.table.descriptor[rows]]
        if unreadable.any():
            t, r = self.table, int(rows[np.argmax(unreadable)])
            try:
                _core.numpy_dtype(t.descriptors[t.descriptor[r]].get("dtype"))
            except TgmCodecError as err:
                raise TgmCodecError(f"{self.source}: {self.where(int(t.msg[r]), int(t.obj[r]))}: {err}") from None

    def _matching(self, rows: np.ndarray, filter_by_keys: Mapping) -> np.ndarray:
        """Which ``rows`` match the filter (:func:`_matches` once per distinct view); a filter
        that matches none of them warns, naming the items that matched nothing."""
        keys = sorted({k for key in filter_by_keys for k in vocabulary.stored_keys(key)})
        keys = [k for k in keys if k in self.table.own or k in self.table.extra]
        inverse, maps, _ = self.keys.dicts(keys, rows, view=True)
        if not len(rows):
            return np.zeros(0, dtype=bool)
        matched = np.array([_matches(m, filter_by_keys) for m in maps], dtype=bool)
        if not matched.any():
            warnings.warn(self._no_match(filter_by_keys, maps), UserWarning, stacklevel=2)
        return matched[inverse]

    def _no_match(self, filter_by_keys: Mapping, maps: Sequence[Mapping]) -> str:
        """Why a filter matched no data object: each item that matches nothing by itself, with
        the keys or values of the file spelled like it."""
        known = set(self.table.own) | set(self.table.extra) | set(vocabulary.CFGRIB_KEYS)
        reasons = []
        for key, wanted in filter_by_keys.items():
            if any(_item_matches(m, key, wanted) for m in maps):
                continue
            present = [v for m in maps for v in vocabulary.values(m, key)]
            if not present:
                close = vocabulary.close_matches(key, known | {k.split(".", 1)[-1] for k in known})
                reasons.append(f"no data object has a key {key!r}"
                               + vocabulary.did_you_mean(close))
                continue
            close = sorted({c for w in _accepted(wanted) for c in vocabulary.close_matches(w, present)})
            shown = sorted({str(v) for v in present})
            reasons.append(f"{key!r} is {wanted!r} in no data object; its values are "
                           f"{', '.join(map(repr, shown[:10]))}{', ...' if len(shown) > 10 else ''}"
                           + vocabulary.did_you_mean(close))
        if not reasons:
            reasons.append("each item matches some data object, but no data object matches them all")
        return (f"{self.source}: filter_by_keys={dict(filter_by_keys)!r} matches no data "
                f"object, so the Dataset is empty: " + "; ".join(reasons))


def identity_keys(table: MetadataTable) -> frozenset[str]:
    """The flattened ``_extra_`` keys that take part in naming, dimensions and attributes of
    fields: the ``mars`` namespace (the MARS request, which upstream writes at message level),
    and keys whose value is not the same in every message of the file (missing counts as a
    value). The other ``_extra_`` keys are constant: they describe the file and only become
    Dataset attributes.
    """
    extra = table.extra
    # A key some message lacks is not the same in every message; the others are compared.
    everywhere = set(extra.in_every(np.arange(table.n_messages)))
    identity = {key for key in extra.names if key.startswith("mars.") or key not in everywhere}
    for key in everywhere - identity:
        column = extra[key]
        index: dict[Any, int] = {}
        canon = np.array([index.setdefault(freeze(v), len(index)) for v in column.values] + [-1],
                         dtype=np.int64)[column.codes]
        if len(canon) and (canon != canon[0]).any():
            identity.add(key)
    return frozenset(identity)


def _hint(shape: tuple[int, ...], own_hint, message_hint) -> tuple[str, ...] | None:
    """Axis names from the object's ``dim_names``, else the message's ``_extra_.dim_names`` list;
    malformed hints are ignored, as upstream."""
    ndim = len(shape)
    for hint in (own_hint, message_hint):
        if isinstance(hint, (list, tuple)) and len(hint) == ndim and \
                all(isinstance(n, str) and n for n in hint) and len(set(hint)) == ndim:
            return tuple(hint)
    return None


def _size_names(shape: tuple[int, ...], message_hint) -> tuple[str | None, ...] | None:
    """Axis names from the message's ``_extra_.dim_names`` mapping from axis size to name, each
    name for the first axis of its size, as upstream; ``None`` where it names no axis."""
    if not isinstance(message_hint, Mapping):
        return None
    by_size = {}
    for size, name in message_hint.items():
        try:
            by_size[int(size)] = str(name)
        except (TypeError, ValueError):
            continue
    names: list[str | None] = []
    for size in shape:
        name = by_size.get(size)
        names.append(name if name and name not in names else None)
    return tuple(names) if any(names) else None


def _own_name(own: Mapping[str, Any]) -> tuple[str | None, str | None]:
    """``(key, name)`` from an object's own metadata (:data:`NAME_KEYS`), ``(None, None)``."""
    for key in NAME_KEYS:
        if is_scalar(own.get(key)):
            return key, str(own[key])
    return None, None


def _classify(names: list[str | None], shapes: list[tuple[int, ...]],
              hints: list[tuple[str | None, ...] | None]) -> list[str | None]:
    """The coordinate name of each object of one message, ``None`` for data objects.

    An object named ``N`` (by its own metadata) is a coordinate when

    1. it labels its own dimension: it is 1-D and its ``dim_names`` hint is ``[N]``, or it has
       no hint and another object of the message names a dimension ``N``;
    2. it is a known coordinate without hint (upstream's guide): it is 1-D, has no hint, and
       ``N`` is ``lat``/``latitude``/``lon``/``longitude``, or one of the other
       :data:`COORDINATE_NAMES` while another object of the message has an axis of its length;
    3. it is the latitude or longitude of a field next to it: ``N`` is a horizontal name and a
       data object of the message (neither a coordinate by 1-2 nor horizontal) has all its
       dimensions: by name when both have hints, else by size (its shape ends the field's).

    Anything else is data, whatever its name (a 2-D ``level``, a 0-d ``height``, ``x`` over
    ``points``). Objects without hints take the canonical name (``lat`` -> ``latitude``).
    """
    n = len(names)
    result: list[str | None] = [None] * n
    # What the objects of the message offer, each counted once per object (so that one object
    # can leave itself out without a pass over the others): hinted names and axis sizes.
    hinted = Counter(d for hint in hints for d in set(hint or ()))
    sized = Counter(size for shape in shapes for size in set(shape))
    for i, (name, shape, hint) in enumerate(zip(names, shapes, hints)):
        if name is None or len(shape) != 1:
            continue
        known = COORDINATE_NAMES.get(name.lower())
        if hint == (name,) or (hint is None and hinted[name] > 0):  # no hint: none of its own
            result[i] = name
        elif hint is None and known and (name.lower() in HORIZONTAL_NAMES or sized[shape[0]] > 1):
            result[i] = known
    fields = {(shape, hint) for name, shape, hint, found in zip(names, shapes, hints, result) if found is None
              and (name is None or name.lower() not in HORIZONTAL_NAMES)}
    for i, (name, shape, hint) in enumerate(zip(names, shapes, hints)):
        if result[i] is None and name is not None and name.lower() in HORIZONTAL_NAMES and \
                shape and any(_spans(shape, hint, *field) for field in fields):
            result[i] = name if hint else HORIZONTAL_NAMES[name.lower()]
    return result


def _spans(shape, hint, field_shape, field_hint) -> bool:
    """Whether an object's dimensions are all dimensions of a field: by name when both have
    complete hints, else by size (the object's shape ends the field's)."""
    if hint and field_hint and None not in hint and None not in field_hint:
        return set(hint) <= set(field_hint)
    return len(field_shape) >= len(shape) and field_shape[len(field_shape) - len(shape):] == shape


def _readable_dtype(name: Any) -> np.dtype | None:
    """The numpy dtype a descriptor's objects are read as, ``None`` where they cannot be read
    (:func:`tgm_xarray._core.numpy_dtype` says why)."""
    try:
        return _core.numpy_dtype(str(name))
    except TgmCodecError:
        return None


_FAMILIES = {"b": "bool", "i": "int", "u": "int", "f": "float", "c": "complex"}


def dtype_family(dtype: np.dtype) -> str:
    return _FAMILIES.get(dtype.kind, dtype.str)


def _matches(keys: Mapping[str, Any], filter_by_keys: Mapping | None) -> bool:
    """cfgrib-style filter: every item must match; plain keys are also looked up as ``mars.<key>``
    and ``grib.<key>``, and cfgrib's own keys through the MARS keys (:mod:`tgm_xarray.vocabulary`)."""
    return all(_item_matches(keys, key, wanted) for key, wanted in (filter_by_keys or {}).items())


def _item_matches(keys: Mapping[str, Any], key: str, wanted: Any) -> bool:
    return any(_same(value, want) for value in vocabulary.values(keys, key) for want in _accepted(wanted))


def _accepted(wanted: Any) -> list | tuple | set | frozenset:
    """The values a filter item accepts: any of a list/tuple/set, else the one value."""
    return wanted if isinstance(wanted, (list, tuple, set, frozenset)) else [wanted]


def _same(value: Any, wanted: Any) -> bool:
    # Metadata writes numbers as text or numbers alike ("500" / 500): compare both ways.
    return value == wanted or str(value) == str(wanted)
