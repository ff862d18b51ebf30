"""Hypercube planning: per-message metadata -> the layout of one CF-style Dataset.

Operational ``.tgm`` files look like GRIB files: many messages, each holding a field (plus
perhaps its latitude/longitude), told apart only by metadata. :func:`build_hypercube` reads that
metadata (never a payload) and decides, the way cfgrib does for GRIB:

- which objects are coordinates (1-D objects labelling their own dimension, and
  ``latitude``/``longitude`` of the fields next to them) and which are data; coordinates
  identical in every message are shared once;
- which data objects form one variable (same name: ``variable_key``, ``name``,
  ``mars.param``, ``mars.shortName``, ``shortName``, ``param``, else ``object_<i>``);
- along which dimensions each variable's fields stack: cfgrib's ``number``, ``time``, ``step``
  and level (see :mod:`tgm_xarray.mars`), then any other metadata key needed to tell the fields
  apart, named by its dotted key;
- where every field lands in that grid (``VariablePlan.fields``; ``-1`` marks a hole).

:func:`split_groups` cuts a heterogeneous file into groups that each form one such Dataset.
``docs/mapping.md`` describes every rule and each difference from upstream tensogram-xarray.

>>> import numpy as np
>>> field = {"type": "ntensor", "ndim": 1, "shape": [3], "strides": [1], "dtype": "float32",
...          "byte_order": "little", "encoding": "none", "filter": "none",
...          "compression": "none", "masks": [], "params": {}}
>>> messages = [MessageInfo(i, {"base": [{"mars": {"param": "2t", "step": step}}], "_extra_": {}},
...                         [field]) for i, step in enumerate([12, 0])]
>>> plan = build_hypercube(messages, source="demo.tgm", fingerprint=lambda msg, obj: b"")
>>> plan.variables["2t"].dims, plan.variables["2t"].refs
(('step', 'dim_0'), ((1, 0), (0, 0)))
"""

from __future__ import annotations

import itertools
import math
import re
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import Any

import numpy as np

from tgm_xarray import mars
from tgm_xarray.attrs import (
    COORDINATE_ATTRS_KEY,
    flatten,
    freeze,
    is_scalar,
    to_attrs,
    without_structural,
)
from tgm_xarray.errors import TgmCodecError, TgmConflictError, TgmDuplicateError, TgmIndexError

Fingerprint = Callable[[int, int], "bytes | str"]

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
#: Descriptor ``params`` that belong to the codec pipeline (encoding, not attributes).
CODEC_PARAM_PREFIXES = ("sp_", "szip_", "zstd_", "lz4_", "blosc2_", "zfp_", "sz3_", "shuffle_")
DUPLICATES = ("error", "first", "last")

# Exhaustive search of the best extra dimensions is 2**n subsets; past this, a greedy pick.
_MAX_EXHAUSTIVE_KEYS = 10


@dataclass(frozen=True)
class MessageInfo:
    """One message's metadata and object descriptors, as ``FileHandle.metadata``/``descriptors``
    return them."""

    index: int
    metadata: dict
    descriptors: list[dict]


@dataclass(frozen=True)
class VariablePlan:
    """One Dataset variable: stored fields laid out on a grid of stacked (outer) dimensions.

    ``fields`` has the outer shape; each entry indexes ``refs`` (the ``(message, object)`` of a
    stored field), or is ``-1`` for a hole, read as NaN.
    """

    name: str
    dims: tuple[str, ...]
    shape: tuple[int, ...]
    dtype: np.dtype
    fields: np.ndarray
    refs: tuple[tuple[int, int], ...]
    attrs: dict
    encoding: dict


@dataclass(frozen=True)
class DatasetPlan:
    """The layout of one Dataset.

    ``variables`` holds data variables and object-backed coordinates (``coord_names``);
    ``index_coords`` the coordinates built from metadata keys, ``name -> (dims, values, attrs)``,
    scalar ones with dims ``()``.
    """

    variables: dict[str, VariablePlan]
    coord_names: frozenset[str]
    index_coords: dict[str, tuple[tuple[str, ...], np.ndarray, dict]]
    attrs: dict


def build_hypercube(
    messages: Sequence[MessageInfo],
    *,
    source: str,
    fingerprint: Fingerprint,
    variable_key: str | None = None,
    dim_names: Sequence[str] | Mapping | None = None,
    filter_by_keys: Mapping | None = None,
    duplicates: str = "error",
    merge_objects: bool = True,
    message_index: int | None = None,
) -> DatasetPlan:
    """Plan one Dataset from every message's metadata, without reading any payload.

    Parameters
    ----------
    messages
        One :class:`MessageInfo` per message of the file.
    source
        The file's path, for encodings and error messages.
    fingerprint
        ``fingerprint(message, object)`` identifies an object's stored payload; coordinate
        objects are shared when their fingerprints are equal in every message.
    variable_key
        Dotted metadata key naming variables (``"mars.param"``); objects without it fall back
        to :data:`NAME_KEYS`, then ``object_<i>``.
    dim_names
        Names of the data objects' own axes: a sequence for every data variable, or a mapping
        from variable name to sequence and/or from axis size to name. Overrides metadata hints.
    filter_by_keys
        Keep only data objects whose metadata matches every item (cfgrib's keyword). Keys are
        dotted (``"mars.levtype"``) or plain (``"levtype"``, which also matches ``mars.levtype``);
        a value may be a list of accepted values.
    duplicates
        ``"error"`` (raise :class:`TgmDuplicateError`), ``"first"`` or ``"last"``: what to do
        with fields of one variable that have the same coordinates (by message order).
    merge_objects
        ``False`` opens a single message (``message_index``, default 0) like upstream's default.
    message_index
        Open only this message.

    Raises
    ------
    TgmConflictError
        When fields of one variable differ in shape, dtype kind or dimensions, or coordinates
        with one name differ; the message suggests ``filter_by_keys`` or ``xr.open_datatree``.
    TgmDuplicateError
        When two fields of one variable land in the same place and ``duplicates="error"``.

    >>> plan = build_hypercube([], source="empty.tgm", fingerprint=lambda m, o: b"")
    >>> plan.variables, plan.index_coords
    ({}, {})
    """
    options = _Options.make(source, fingerprint, variable_key, dim_names, duplicates)
    return _plan(_select(messages, options, filter_by_keys, merge_objects, message_index), options)


def split_groups(
    messages: Sequence[MessageInfo],
    *,
    source: str,
    fingerprint: Fingerprint,
    variable_key: str | None = None,
    dim_names: Sequence[str] | Mapping | None = None,
    filter_by_keys: Mapping | None = None,
    duplicates: str = "error",
    merge_objects: bool = True,
    message_index: int | None = None,
) -> dict[str, DatasetPlan]:
    """Split a heterogeneous file into groups that each form one Dataset (for ``open_datatree``).

    Data objects are grouped by level type and grid shape, named ``"<levtype>_<shape>"``
    (``"pl_721x1440"``; just ``"<shape>"`` without a level type, ``"scalar"`` for 0-d objects).
    Objects that would still conflict inside a group (another dtype kind, other dimension
    hints, other cfgrib dimensions present, different coordinate values) get a group of their
    own, named with a suffix ``_2``, ``_3``, ... in file order. Coordinates go with the groups
    of their messages, and join any other group that lacks that name and whose grid has their
    sizes (a grid message's latitude/longitude join every group on that grid); coordinates
    that join no group form a ``"coordinates"`` group. Keywords are those of
    :func:`build_hypercube`.

    >>> split_groups([], source="empty.tgm", fingerprint=lambda m, o: b"")
    {}
    """
    options = _Options.make(source, fingerprint, variable_key, dim_names, duplicates)
    selected = _select(messages, options, filter_by_keys, merge_objects, message_index)
    return {name: _plan(group, options) for name, group in _groups(selected, options).items()}


# --------------------------------------------------------------------------------------------
# Objects and messages
# --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class _Options:
    source: str
    fingerprint: Fingerprint
    variable_key: str | None
    dim_names: tuple[str, ...] | Mapping | None
    duplicates: str

    @classmethod
    def make(cls, source, fingerprint, variable_key, dim_names, duplicates) -> _Options:
        if duplicates not in DUPLICATES:
            raise ValueError(f"duplicates must be one of {DUPLICATES}, got {duplicates!r}")
        if isinstance(dim_names, str):
            raise TypeError(
                f"dim_names must be a sequence of names or a mapping, got {dim_names!r}")
        if dim_names is not None and not isinstance(dim_names, Mapping):
            dim_names = tuple(dim_names)
        return cls(source, fingerprint, variable_key, dim_names, duplicates)


@dataclass(frozen=True)
class _Object:
    msg: int
    obj: int
    own: dict[str, Any]  # flattened base[obj] (+ non-codec descriptor params): the object's own
    # What names and dimensions see: the identity keys of `_extra_` (see `_identity_keys`)
    # overlaid by `own`.
    keys: dict[str, Any]
    shape: tuple[int, ...]
    dtype: np.dtype
    descriptor: Mapping[str, Any]
    hint: tuple[str | None, ...] | None  # axis names hinted by metadata (None: no hint)
    coordinate: str | None  # coordinate name, None for data objects
    view: dict[str, Any] | None = None  # all of `_extra_` overlaid by `own`: what filters see
    name_key: str | None = None  # the key of `own` that named a coordinate object

    @property
    def all_keys(self) -> dict[str, Any]:
        return self.keys if self.view is None else self.view

    @property
    def where(self) -> str:
        return f"message {self.msg} object {self.obj}"

    @property
    def ref(self) -> tuple[int, int]:
        return self.msg, self.obj


@dataclass(frozen=True)
class _Message:
    index: int
    extra: dict[str, Any]  # flattened _extra_ (without structural keys)
    data: tuple[_Object, ...]
    coords: tuple[_Object, ...]
    # `_extra_["coordinate_attrs"]`: coordinate name -> flattened attributes
    coord_attrs: dict[str, dict[str, Any]] = field(default_factory=dict)


def _select(messages, options, filter_by_keys, merge_objects, message_index) -> list[_Message]:
    """The messages to plan, with data objects filtered by ``filter_by_keys``.

    A message whose data objects are all filtered out is dropped with its coordinates; a
    message without data objects (e.g. a grid message) is kept.
    """
    if message_index is None and not merge_objects:
        message_index = 0
    # Which `_extra_` keys identify fields is decided over the whole file, so that a filter or
    # message_index never changes what a key means.
    extras = {info.index: flatten(without_structural((info.metadata or {}).get("_extra_") or {}))
              for info in messages}
    identity = _identity_keys(list(extras.values()))
    if message_index is not None:
        chosen = [m for m in messages if m.index == message_index]
        if not chosen:
            raise TgmIndexError(f"{options.source}: message_index {message_index} is out of range "
                                f"(the file has {len(messages)} messages)")
        messages = chosen
    selected = []
    for info in messages:
        message = _read_message(info, options, extras[info.index], identity)
        data = tuple(o for o in message.data if _matches(o.all_keys, filter_by_keys))
        if len(data) == len(message.data):
            selected.append(message)
        elif data:
            selected.append(replace(message, data=data))
    return selected


_MISSING = object()


def _identity_keys(extras: list[dict[str, Any]]) -> frozenset[str]:
    """The flattened ``_extra_`` keys that take part in naming, dimensions and attributes of
    fields: the ``mars`` namespace (the MARS request, which upstream writes at message level),
    and keys whose value is not the same in every message of the file (missing counts as a
    value). The other ``_extra_`` keys are constant: they describe the file and only become
    Dataset attributes.
    """
    every = set().union(*extras) if extras else set()
    identity = {key for key in every if key.startswith("mars.")}
    for key in every - identity:
        first = freeze(extras[0].get(key, _MISSING))
        if any(freeze(extra.get(key, _MISSING)) != first for extra in extras[1:]):
            identity.add(key)
    return frozenset(identity)


def _read_message(info: MessageInfo, options: _Options, extra: dict[str, Any],
                  identity: frozenset[str]) -> _Message:
    metadata = info.metadata or {}
    raw_extra = metadata.get("_extra_") or {}
    identifying = {k: v for k, v in extra.items() if k in identity}
    base = metadata.get("base") or []
    owns, shapes, hints = [], [], []
    for obj, descriptor in enumerate(info.descriptors):
        raw = base[obj] if obj < len(base) and isinstance(base[obj], Mapping) else {}
        own = flatten(without_structural(raw))
        # Older converters put per-field keys in the descriptor's params (upstream reads them too).
        params = {k: v for k, v in (descriptor.get("params") or {}).items()
                  if not str(k).startswith(CODEC_PARAM_PREFIXES)}
        for key, value in flatten(params).items():
            own.setdefault(key, value)
        shape = tuple(int(n) for n in descriptor.get("shape") or ())
        owns.append(own)
        shapes.append(shape)
        hints.append(_hint(shape, raw.get("dim_names"), raw_extra.get("dim_names")))
    names = [_own_name(own) for own in owns]
    coordinates = _classify([n for _, n in names], shapes, hints)
    data, coords = [], []
    for obj, descriptor in enumerate(info.descriptors):
        dtype = _numpy_dtype(descriptor.get("dtype"))
        if dtype is None:
            raise TgmCodecError(f"{options.source}: message {info.index} object {obj}: "
                                f"unsupported dtype {descriptor.get('dtype')!r}")
        item = _Object(info.index, obj, owns[obj], {**identifying, **owns[obj]}, shapes[obj],
                       dtype, descriptor, hints[obj],
                       coordinates[obj], view={**extra, **owns[obj]},
                       name_key=names[obj][0] if coordinates[obj] else None)
        (coords if coordinates[obj] else data).append(item)
    return _Message(info.index, extra, tuple(data), tuple(coords),
                    _coordinate_attrs(raw_extra.get(COORDINATE_ATTRS_KEY)))


def _coordinate_attrs(value: Any) -> dict[str, dict[str, Any]]:
    """``_extra_["coordinate_attrs"]``: ``{coordinate: {attribute: value}}``, flattened; anything
    malformed is ignored."""
    if not isinstance(value, Mapping):
        return {}
    return {str(name): flatten(attrs) for name, attrs in value.items()
            if isinstance(attrs, Mapping)}


def _hint(shape: tuple[int, ...], own_hint, message_hint) -> tuple[str | None, ...] | None:
    """Axis names from the object's ``dim_names``, else the message's ``_extra_.dim_names``
    (a list, or a mapping from axis size to name); malformed hints are ignored, as upstream."""
    ndim = len(shape)
    for hint in (own_hint, message_hint):
        if isinstance(hint, (list, tuple)) and len(hint) == ndim and \
                all(isinstance(n, str) and n for n in hint) and len(set(hint)) == ndim:
            return tuple(hint)
    if isinstance(message_hint, Mapping):
        by_size = {}
        for size, name in message_hint.items():
            try:
                by_size[int(size)] = str(name)
            except (TypeError, ValueError):
                continue
        names = [by_size.get(n) for n in shape]
        named = [n for n in names if n]
        if named and len(set(named)) == len(named):
            return tuple(names)
    return None


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
    for i, (name, shape, hint) in enumerate(zip(names, shapes, hints)):
        if name is None or len(shape) != 1:
            continue
        known = COORDINATE_NAMES.get(name.lower())
        others = [j for j in range(n) if j != i]
        if hint == (name,) or (hint is None and any(name in (hints[j] or ()) for j in others)):
            result[i] = name
        elif hint is None and known and (name.lower() in HORIZONTAL_NAMES
                                         or any(shape[0] in shapes[j] for j in others)):
            result[i] = known
    fields = [j for j in range(n) if result[j] is None
              and (names[j] is None or names[j].lower() not in HORIZONTAL_NAMES)]
    for i, (name, shape, hint) in enumerate(zip(names, shapes, hints)):
        if result[i] is None and name is not None and name.lower() in HORIZONTAL_NAMES and \
                shape and any(_spans(shape, hint, shapes[j], hints[j]) for j in fields):
            result[i] = name if hint else HORIZONTAL_NAMES[name.lower()]
    return result


def _spans(shape, hint, field_shape, field_hint) -> bool:
    """Whether an object's dimensions are all dimensions of a field: by name when both have
    complete hints, else by size (the object's shape ends the field's)."""
    if hint and field_hint and None not in hint and None not in field_hint:
        return set(hint) <= set(field_hint)
    return len(field_shape) >= len(shape) and field_shape[len(field_shape) - len(shape):] == shape


def _numpy_dtype(name: Any) -> np.dtype | None:
    """The numpy dtype of a descriptor's dtype name, ``None`` when numpy has none."""
    key = str(name)
    if key not in _DTYPES:  # a handful of names, looked up once per object of every message
        try:
            # packed bits are read as raw bytes (as upstream)
            _DTYPES[key] = np.dtype("uint8" if key == "bitmask" else key)
        except TypeError:
            return None
    return _DTYPES[key]


_DTYPES: dict[str, np.dtype] = {}


def _matches(keys: Mapping[str, Any], filter_by_keys: Mapping | None) -> bool:
    """cfgrib-style filter: every item must match; a plain key also matches ``mars.<key>``."""
    for key, wanted in (filter_by_keys or {}).items():
        accepted = wanted if isinstance(wanted, (list, tuple, set, frozenset)) else [wanted]
        candidates = [key] if "." in key else [key, f"mars.{key}"]
        values = [keys[k] for k in candidates if k in keys]
        if not any(_same(value, want) for value in values for want in accepted):
            return False
    return True


def _same(value: Any, wanted: Any) -> bool:
    # Metadata writes numbers as text or numbers alike ("500" / 500): compare both ways.
    return value == wanted or str(value) == str(wanted)


# --------------------------------------------------------------------------------------------
# Planning one Dataset
# --------------------------------------------------------------------------------------------


@dataclass
class _Field:
    """A data object with its decoded cfgrib dimensions."""

    object: _Object
    axes: dict[str, mars.Axis]
    name_key: str | None = None  # the metadata key that named its variable

    @cached_property
    def consumed(self) -> frozenset[str]:
        """The metadata keys the cfgrib dimensions were read from."""
        return frozenset(key for axis in self.axes.values() for key in axis.keys)


@dataclass
class _Variable:
    name: str
    fields: list[_Field]
    outer: list[str] = field(default_factory=list)  # stacked dims
    generic: list[str] = field(default_factory=list)  # stacked dims named by metadata keys
    inner: list[tuple[str, bool]] = field(default_factory=list)  # (own dim, is generic fallback)

    @property
    def first(self) -> _Object:
        return self.fields[0].object


def _plan(messages: list[_Message], options: _Options) -> DatasetPlan:
    coords = _coordinates(messages, options)
    objects = [o for m in messages for o in m.data]
    decoded = mars.decode_axes([mars.find_axes(o.keys) for o in objects])
    variables = _variables([_Field(o, axes) for o, axes in zip(objects, decoded)], options)

    index_coords: dict[str, tuple[tuple[str, ...], np.ndarray, dict]] = {}
    lookups: dict[str, dict[Any, int]] = {}  # dim -> frozen metadata value -> position
    _axis_coords(variables, options, index_coords, lookups)
    for var in variables.values():
        var.generic = _extra_dims(var)
        if _stack_indistinct_fields(var, options):
            var.generic.append(MESSAGE_DIM)
    _generic_coords(variables, index_coords, lookups, options,
                    {m.index: m.coord_attrs for m in messages})
    _add_valid_time(index_coords)
    _resolve_inner_dims(variables, coords, index_coords, options)

    common_extra = _common([m.extra for m in messages]) if messages else {}
    dataset_attrs = _dataset_attrs(common_extra, variables)
    data = {var.name: _variable_plan(var, index_coords, lookups, common_extra, options)
            for var in variables.values()}
    coord_plans = {name: _coordinate_plan(c, options) for name, c in coords.items()}
    _check_names(data, coord_plans, index_coords, options)
    return DatasetPlan(
        variables={**data, **coord_plans},
        coord_names=frozenset(coord_plans),
        index_coords=index_coords,
        attrs=dataset_attrs,
    )


def _variables(fields: list[_Field], options: _Options) -> dict[str, _Variable]:
    """Group data objects into variables (in file order) and check each is consistent."""
    variables: dict[str, _Variable] = {}
    for f in fields:
        f.name_key = _naming_key(f.object, options.variable_key)
        name = _variable_name(f.object, options.variable_key)
        variables.setdefault(name, _Variable(name, [])).fields.append(f)
    for var in variables.values():
        _check_structure(var, options)
    return variables


def _naming_key(o: _Object, variable_key: str | None) -> str | None:
    """The key naming a data object's variable: ``variable_key``, else the first of
    :data:`NAME_KEYS` with a scalar value; ``None`` when it has none."""
    for key in ((variable_key,) if variable_key else ()) + NAME_KEYS:
        if is_scalar(o.keys.get(key)):
            return key
    return None


def _variable_name(o: _Object, variable_key: str | None) -> str:
    key = _naming_key(o, variable_key)
    return str(o.keys[key]) if key else f"object_{o.obj}"


def _check_structure(var: _Variable, options: _Options) -> None:
    """Fields of one variable must share shape, dtype kind, axis hints and cfgrib dims."""
    first = var.fields[0]
    for f in var.fields[1:]:
        for label, key, show in _STRUCTURE:
            if key(f) != key(first):
                raise TgmConflictError(
                    f"{options.source}: variable {var.name!r} cannot be stacked: "
                    f"{first.object.where} has {show(first)} but {f.object.where} has "
                    f"{show(f)} (different {label}). " + _advice(first.object, f.object))


def _levtype(f: _Field) -> str | None:
    return next((a.levtype for d, a in f.axes.items() if mars.is_level(d)), None)


# What must agree between the fields of a variable: (what differs, key compared, how it shows).
_STRUCTURE = (
    ("shape", lambda f: f.object.shape, lambda f: f"shape {f.object.shape}"),
    ("dtype kind", lambda f: _dtype_family(f.object.dtype), lambda f: f"dtype {f.object.dtype}"),
    ("dimension names", lambda f: f.object.hint,
     lambda f: f"dim_names {list(f.object.hint) if f.object.hint else None}"),
    ("level type", _levtype, lambda f: f"levtype {_levtype(f)!r}"),
    ("dimensions", lambda f: sorted(f.axes), lambda f: f"dimensions {sorted(f.axes)}"),
)


_FAMILIES = {"b": "bool", "i": "int", "u": "int", "f": "float", "c": "complex"}


def _dtype_family(dtype: np.dtype) -> str:
    return _FAMILIES.get(dtype.kind, dtype.str)


def _advice(a: _Object, b: _Object) -> str:
    """How to open conflicting objects: a filter telling them apart, or one group each."""
    hint = ""
    a_keys, b_keys = a.all_keys, b.all_keys  # what filter_by_keys sees
    differing = sorted((k for k, v in a_keys.items()
                        if is_scalar(v) and freeze(v) != freeze(b_keys.get(k))),
                       key=lambda k: (not k.startswith("mars."), k))
    if differing:
        hint = f"filter_by_keys={{{differing[0]!r}: {a_keys[differing[0]]!r}}} or "
    return (f"Open a consistent subset with {hint}filter_by_keys=..., or every group with "
            f"xr.open_datatree(path, engine='tensogram').")


# --------------------------------------------------------------------------------------------
# Coordinates from objects
# --------------------------------------------------------------------------------------------


@dataclass
class _Coordinate:
    object: _Object  # the first occurrence, which the plan reads
    dims: tuple[str, ...] | None  # None until resolved (multi-dimensional, without hints)


def _coordinates(messages: list[_Message], options: _Options) -> dict[str, _Coordinate]:
    """One shared coordinate per name; the same name with different payloads is a conflict."""
    found: dict[str, list[_Object]] = {}
    for m in messages:
        for o in m.coords:
            found.setdefault(o.coordinate, []).append(o)
    coords = {}
    for name, objects in found.items():
        first = objects[0]
        if len(objects) > 1:
            reference = options.fingerprint(*first.ref)
            for o in objects[1:]:
                if (o.shape, o.dtype, o.hint) != (first.shape, first.dtype, first.hint) or \
                        options.fingerprint(*o.ref) != reference:
                    raise TgmConflictError(
                        f"{options.source}: coordinate {name!r} differs between {first.where} "
                        f"and {o.where}, so it cannot be shared. Open the messages separately "
                        f"with filter_by_keys=... or message_index=..., or every group with "
                        f"xr.open_datatree(path, engine='tensogram').")
        if first.hint and None not in first.hint:
            dims = first.hint
        else:
            dims = (name,) if len(first.shape) == 1 else None
        coords[name] = _Coordinate(first, dims)
    return coords


def _coordinate_plan(coord: _Coordinate, options: _Options) -> VariablePlan:
    o = coord.object
    attrs = to_attrs({k: v for k, v in o.own.items() if k != o.name_key})
    return VariablePlan(
        name=o.coordinate, dims=coord.dims, shape=o.shape, dtype=o.dtype,
        fields=np.array(0, dtype=np.int64), refs=(o.ref,), attrs=attrs,
        encoding=_encoding(options.source, [o], coord.dims, o.shape, 0),
    )


# --------------------------------------------------------------------------------------------
# Coordinates from metadata: cfgrib dimensions, then extra keys
# --------------------------------------------------------------------------------------------


def _axis_coords(variables, options, index_coords, lookups) -> None:
    """cfgrib dimensions: one coordinate per dimension over all variables (the union of their
    values); a single value overall makes a scalar coordinate, more make a dimension of every
    variable that has it (with holes where a variable lacks a value)."""
    values: dict[str, list[Any]] = defaultdict(list)
    levtypes: dict[str, dict[Any, str]] = defaultdict(dict)
    for var in variables.values():
        for f in var.fields:
            for dim, axis in f.axes.items():
                values[dim].append(axis.value)
                if mars.is_level(dim):
                    levtypes[dim].setdefault(axis.levtype, var.name)
    for dim, kinds in levtypes.items():
        if len(kinds) > 1:
            (a, var_a), (b, var_b) = list(kinds.items())[:2]
            raise TgmConflictError(
                f"{options.source}: variables {var_a!r} (levtype {a!r}) and {var_b!r} (levtype "
                f"{b!r}) would share the level dimension {dim!r}. Open one level type with "
                f"filter_by_keys={{'levtype': {a!r}}}, or every group with "
                f"xr.open_datatree(path, engine='tensogram').")
    order = {d: i for i, d in enumerate(mars.AXIS_ORDER)}
    for dim in sorted(values, key=lambda d: (order.get(d, len(order)), d)):
        coord, lookup = _coordinate_values(dim, values[dim])
        lookups[dim] = lookup
        attrs = dict(mars.COORD_ATTRS.get(dim, {}))
        if len(coord) == 1:
            index_coords[dim] = ((), coord.reshape(()), attrs)
        else:
            index_coords[dim] = ((dim,), coord, attrs)
            for var in variables.values():
                if dim in var.fields[0].axes:
                    var.outer.append(dim)


def _extra_dims(var: _Variable) -> list[str]:
    """Metadata keys (besides cfgrib's) that must become dimensions to tell the fields apart.

    Candidates are keys with a scalar value in every field that do not all agree. Keys already
    determined by the cfgrib dimensions (``grib.level`` next to ``mars.levelist``) are left
    out, and so are keys equivalent to another (the first by name stays). Among the remaining
    subsets that separate the fields as well as all candidates together, the one with the
    smallest grid (fewest holes) wins, then the one with more dimensions, then names.
    """
    fields = var.fields
    consumed = set().union(*(f.consumed for f in fields))
    base = [tuple((d, f.axes[d].value) for d in var.outer) for f in fields]
    candidates = {}
    for key in sorted(set().union(*(f.object.keys for f in fields)) - consumed):
        values = [f.object.keys.get(key) for f in fields]
        if all(is_scalar(v) for v in values) and len({freeze(v) for v in values}) > 1:
            labels = _labels(values)
            if not _determined(base, labels) and labels not in candidates.values():
                candidates[key] = labels
    if not candidates:
        return []
    keys = list(candidates)
    target = len(set(zip(base, *candidates.values())))
    sizes = {k: max(candidates[k]) + 1 for k in keys}

    def separates(subset) -> bool:
        return len(set(zip(base, *(candidates[k] for k in subset)))) == target

    if len(keys) <= _MAX_EXHAUSTIVE_KEYS:
        subsets = (s for n in range(len(keys) + 1) for s in itertools.combinations(keys, n))
        ranked = sorted(subsets, key=lambda s: (math.prod(sizes[k] for k in s), -len(s), s))
        chosen = next(s for s in ranked if separates(s))
    else:
        chosen = _greedy_dims(keys, candidates, base, sizes, separates)
    return sorted(chosen)


#: The dimension that stacks fields no metadata tells apart, labelled by message number.
MESSAGE_DIM = "message"


def _stack_indistinct_fields(var: _Variable, options: _Options) -> bool:
    """Whether fields with identical metadata but different contents must stack along ``message``.

    Such fields are distinct data the metadata fails to label (upstream's golden
    ``multi_message.tgm``): stacking them by message number drops nothing. Fields that also
    have identical bytes are true duplicates and are left to the ``duplicates=`` rule.
    """
    cells: dict[tuple, list[_Object]] = defaultdict(list)
    for f in var.fields:
        cells[tuple(freeze(_outer_value(f, d)) for d in var.outer + var.generic)].append(f.object)
    clashes = [objects for objects in cells.values() if len(objects) > 1]
    if not clashes or any(len({o.msg for o in objects}) < len(objects) for objects in clashes):
        return False
    for objects in clashes:
        prints = [options.fingerprint(*o.ref) for o in objects]
        if len(set(prints)) < len(prints):
            return False
    for f in var.fields:
        f.object.keys[MESSAGE_DIM] = f.object.msg
    return True


def _greedy_dims(keys, candidates, base, sizes, separates) -> tuple[str, ...]:
    """Add the key that separates the most fields until all are apart, then drop keys that
    turned out unnecessary (for files with too many candidate keys to search exhaustively)."""
    chosen: list[str] = []
    while not separates(chosen):
        rest = [k for k in keys if k not in chosen]
        chosen.append(max(rest, key=lambda k: (
            len(set(zip(base, *(candidates[c] for c in chosen), candidates[k]))), -sizes[k])))
    for key in reversed(list(chosen)):
        if separates([k for k in chosen if k != key]):
            chosen.remove(key)
    return tuple(chosen)


def _labels(values: list[Any]) -> tuple[int, ...]:
    """Values relabelled by order of first appearance: equal labels = same partition."""
    seen: dict[Any, int] = {}
    return tuple(seen.setdefault(freeze(v), len(seen)) for v in values)


def _determined(base: list[tuple], labels: tuple[int, ...]) -> bool:
    mapping: dict[tuple, int] = {}
    return all(mapping.setdefault(b, label) == label for b, label in zip(base, labels))


def _generic_coords(variables, index_coords, lookups, options, coord_attrs) -> None:
    """Coordinates of the extra dimensions: the union of the values of every variable using it.

    Their attributes are the entries of ``_extra_["coordinate_attrs"][key]`` common to every
    message holding a field stacked along it (none when one of them lacks it).
    """
    values: dict[str, list[Any]] = defaultdict(list)
    described: dict[str, list[dict]] = defaultdict(list)
    for var in variables.values():
        for key in var.generic:
            values[key].extend(f.object.keys[key] for f in var.fields)
            described[key].extend(coord_attrs.get(f.object.msg, {}).get(key, {})
                                  for f in var.fields)
    for key in sorted(values):
        if key in index_coords:
            raise TgmConflictError(
                f"{options.source}: metadata key {key!r} varies like a dimension in some "
                f"variables but {key!r} is already a coordinate of others. Open a subset with "
                f"filter_by_keys=..., or every group with "
                f"xr.open_datatree(path, engine='tensogram').")
        coord, lookups[key] = _coordinate_values(key, values[key])
        index_coords[key] = ((key,), coord, to_attrs(_common(described[key])))
    for var in variables.values():
        var.outer.extend(var.generic)


def _coordinate_values(dim: str, values: list[Any]) -> tuple[np.ndarray, dict[Any, int]]:
    """Sorted unique coordinate values, and each raw value's position among them."""
    convert = _converter(values)
    unique = mars.sort_values(dim, list({convert(v) for v in values}))
    positions = {v: i for i, v in enumerate(unique)}
    array = np.array(unique)
    if array.dtype.kind == "M":
        array = array.astype("datetime64[ns]")
    elif array.dtype.kind == "m":
        array = array.astype("timedelta64[ns]")
    return array, {freeze(v): positions[convert(v)] for v in values}


# ISO 8601 date-times (a time of day required, `Z` = UTC allowed): what a generic key needs to
# be read as datetime64, as ERA5's `valid_time` is written. Dates alone stay strings.
_ISO_DATETIME = re.compile(r"\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(?::\d{2}(?:\.\d{1,9})?)?Z?")


def _converter(values: list[Any]) -> Callable[[Any], Any]:
    """One type for a coordinate: bool, int, float, datetime64, timedelta64, strings that are
    all ISO 8601 date-times as datetime64[ns], else strings."""
    kinds = {type(v) for v in values}
    if kinds <= {bool} or kinds <= {np.datetime64} or kinds <= {np.timedelta64}:
        return lambda v: v
    if kinds <= {str} and _iso_datetimes(values):
        return _iso_datetime
    if not any(issubclass(k, bool) for k in kinds):
        if all(issubclass(k, (int, np.integer)) for k in kinds):
            return int
        if all(issubclass(k, (int, float, np.integer, np.floating)) for k in kinds):
            return float
    return str


def _iso_datetimes(values: list[str]) -> bool:
    """Whether every value is an ISO 8601 date-time that datetime64[ns] holds (numpy wraps
    years beyond 1678-2261 around silently, so those stay strings)."""
    if not all(_ISO_DATETIME.fullmatch(v) and 1678 <= int(v[:4]) <= 2261 for v in values):
        return False
    try:
        for value in set(values):
            _iso_datetime(value)
    except ValueError:  # month 13, hour 25, ...
        return False
    return True


def _iso_datetime(value: str) -> np.datetime64:
    return np.datetime64(value.removesuffix("Z"), "ns")


def _add_valid_time(index_coords) -> None:
    """cfgrib's ``valid_time = time + step``, over the dims of whichever of them are dims
    (unless a metadata key of that name already made a ``valid_time`` dimension)."""
    if "time" not in index_coords or "step" not in index_coords or "valid_time" in index_coords:
        return
    time_dims, time, _ = index_coords["time"]
    step_dims, step, _ = index_coords["step"]
    if time.dtype.kind == "M" and step.dtype.kind == "m":
        dims, values = mars.valid_time(time, time_dims, step, step_dims)
        index_coords["valid_time"] = (dims, values, dict(mars.COORD_ATTRS["valid_time"]))


# --------------------------------------------------------------------------------------------
# Variables, attributes and encodings
# --------------------------------------------------------------------------------------------


def _variable_plan(var: _Variable, index_coords, lookups, common_extra, options) -> VariablePlan:
    """Place every field of a variable on its grid of stacked dimensions."""
    outer_shape = tuple(len(index_coords[d][1]) for d in var.outer)
    cells: dict[tuple[int, ...], list[_Object]] = defaultdict(list)
    for f in var.fields:
        position = tuple(lookups[d][freeze(_outer_value(f, d))] for d in var.outer)
        cells[position].append(f.object)
    kept = {}
    for position, objects in cells.items():
        if len(objects) > 1 and options.duplicates == "error":
            where = ", ".join(f"{d}={index_coords[d][1][i]}" for d, i in zip(var.outer, position))
            raise TgmDuplicateError(
                f"{options.source}: variable {var.name!r} has {len(objects)} fields at "
                f"{f'({where})' if where else 'the same place'}: "
                f"{' and '.join(o.where for o in objects[:3])} have the same metadata. "
                f"Keep one with duplicates='first' or 'last', or open one message with "
                f"message_index=... or filter_by_keys=....")
        kept[position] = min(objects, key=lambda o: o.ref) if options.duplicates != "last" else \
            max(objects, key=lambda o: o.ref)
    grid = np.full(outer_shape, -1, dtype=np.int64)
    refs = []
    for position in sorted(kept):
        grid[position] = len(refs)
        refs.append(kept[position].ref)
    objects = [kept[p] for p in sorted(kept)]
    dtype = np.result_type(*{o.dtype for o in objects})
    if (grid < 0).any() and dtype.kind in "biu":
        dtype = np.dtype("float64")  # holes read as NaN
    dims = tuple(var.outer) + tuple(d for d, _ in var.inner)
    shape = outer_shape + var.first.shape
    return VariablePlan(
        name=var.name, dims=dims, shape=shape, dtype=dtype, fields=grid, refs=tuple(refs),
        attrs=_variable_attrs(var, common_extra),
        encoding=_encoding(options.source, objects, dims, shape, len(outer_shape)),
    )


def _outer_value(f: _Field, dim: str) -> Any:
    return f.axes[dim].value if dim in f.axes else f.object.keys[dim]


def _variable_attrs(var: _Variable, common_extra: Mapping[str, Any]) -> dict:
    """The metadata every field of the variable agrees on (its own keys, and the ``_extra_``
    entries that are not the Dataset's), minus what became coordinates and the key that named
    it. An attribute of its own stays even when a Dataset attribute has the same value."""
    views = [{k: v for k, v in f.object.keys.items()
              if k in f.object.own or k not in common_extra} for f in var.fields]
    dropped = _dropped(var)
    return to_attrs({k: v for k, v in _common(views).items() if k not in dropped})


def _dropped(var: _Variable) -> set[str]:
    """Keys that became the variable's coordinates or name: never its attributes."""
    dropped = set().union(*(f.consumed for f in var.fields)) | set(var.generic)
    return dropped | {f.name_key for f in var.fields if f.name_key}


def _dataset_attrs(common_extra: Mapping[str, Any], variables: dict[str, _Variable]) -> dict:
    """``_extra_`` entries common to every message, minus those that became a coordinate or a
    variable name (read from ``_extra_``, not from an object's own key of the same name)."""
    dropped = {key for var in variables.values() for f in var.fields
               for key in f.consumed | {f.name_key} if key not in f.object.own}
    return to_attrs({k: v for k, v in common_extra.items() if k not in dropped})


def _common(maps: list[Mapping[str, Any]]) -> dict[str, Any]:
    """Entries present with the same value in every map."""
    frozen = {k: freeze(v) for k, v in maps[0].items()}
    for m in maps[1:]:
        frozen = {k: v for k, v in frozen.items() if k in m and freeze(m[k]) == v}
    return {k: maps[0][k] for k in frozen}


def _encoding(source: str, objects: list[_Object], dims, shape, n_outer: int) -> dict:
    """Where the data comes from and how it is stored (settings shared by all its fields).

    Codec settings are prefixed ``tensogram_`` so that ``to_netcdf`` never mistakes them for
    its own ``compression``/``shuffle`` encodings.
    """
    encoding: dict[str, Any] = {"source": source}
    if len(objects) == 1:
        encoding["message_index"], encoding["object_index"] = objects[0].ref
    for key in ("dtype", "byte_order", "encoding", "filter", "compression"):
        values = {str(o.descriptor.get(key)) for o in objects}
        if len(values) == 1 and objects[0].descriptor.get(key) is not None:
            encoding[f"tensogram_{key}"] = values.pop()
    params = _common([{k: v for k, v in (o.descriptor.get("params") or {}).items()
                       if k.startswith(CODEC_PARAM_PREFIXES) and k != "szip_block_offsets"}
                      for o in objects])
    if params:
        encoding["tensogram_params"] = params
    if "sp_bits_per_value" in params:
        encoding["bits_per_value"] = params["sp_bits_per_value"]
    # One chunk per stored field: 1 along stacked dimensions, whole along the object's own.
    encoding["preferred_chunks"] = {d: 1 if i < n_outer else n
                                    for i, (d, n) in enumerate(zip(dims, shape))}
    return encoding


# --------------------------------------------------------------------------------------------
# The objects' own dimensions
# --------------------------------------------------------------------------------------------


def _resolve_inner_dims(variables, coords, index_coords, options) -> None:
    """Name every data variable's own axes, so that each dimension has one size.

    Per axis: the user's ``dim_names``, else the metadata hint, else the first 1-D coordinate of
    that size, else ``dim_<axis>``. A name from the user or a hint with two sizes is a
    conflict; a ``dim_<axis>`` already taken at another size becomes ``obj_<i>_dim_<axis>``
    (or ``<variable>_dim_<axis>`` if that is taken too).
    """
    dimension_coords = [(name, c.object.shape[0]) for name, c in coords.items()
                        if c.dims == (name,)]
    for var in variables.values():
        var.inner = _inner_dims(var, dimension_coords, options)

    sizes: dict[str, tuple[int, str]] = {}  # dim -> (size, who claimed it)

    def claim(dim: str, size: int, who: str) -> None:
        if dim in sizes and sizes[dim][0] != size:
            raise TgmConflictError(
                f"{options.source}: dimension {dim!r} has size {sizes[dim][0]} in "
                f"{sizes[dim][1]} but {size} in {who}. Rename the axes with dim_names=..., "
                f"open a subset with filter_by_keys=..., or every group with "
                f"xr.open_datatree(path, engine='tensogram').")
        sizes.setdefault(dim, (size, who))

    for name, (dims, values, _) in index_coords.items():
        for dim, size in zip(dims, values.shape):
            claim(dim, size, f"coordinate {name!r}")
    for name, c in coords.items():
        for dim, size in zip(c.dims or (), c.object.shape):
            claim(dim, size, f"coordinate {name!r}")
    for var in variables.values():
        for (dim, generic), size in zip(var.inner, var.first.shape):
            if not generic:
                claim(dim, size, f"variable {var.name!r} ({var.first.where})")
    for var in variables.values():
        for axis, ((dim, generic), size) in enumerate(zip(var.inner, var.first.shape)):
            if generic:
                for candidate in (dim, f"obj_{var.first.obj}_dim_{axis}", f"{var.name}_dim_{axis}"):
                    if sizes.get(candidate, (size,))[0] == size:
                        break
                var.inner[axis] = (candidate, True)
                claim(candidate, size, f"variable {var.name!r} ({var.first.where})")

    # Coordinates without hints over several axes take the dims of a variable of their shape.
    for name, c in coords.items():
        if c.dims is None:
            shape = c.object.shape
            match = next((var for var in variables.values() if var.first.shape == shape), None)
            c.dims = tuple(d for d, _ in match.inner) if match else \
                tuple(f"{name}_dim_{axis}" for axis in range(len(shape)))
            for dim, size in zip(c.dims, shape):
                claim(dim, size, f"coordinate {name!r}")

    for var in variables.values():
        own = [d for d, _ in var.inner]
        if len(set(own + var.outer)) != len(own) + len(var.outer):
            raise TgmConflictError(
                f"{options.source}: variable {var.name!r} would have the dimension "
                f"{sorted(set(own) & set(var.outer)) or own} twice ({var.first.where} names its "
                f"axes {own}, stacked along {var.outer}). Rename the axes with dim_names=....")


def _inner_dims(var: _Variable, dimension_coords, options) -> list[tuple[str, bool]]:
    first = var.first
    ndim = len(first.shape)
    user = _user_dims(var, options)
    hint = first.hint or (None,) * ndim
    dims: list[tuple[str, bool] | None] = [None] * ndim
    for axis in range(ndim):
        name = user[axis] or hint[axis]
        if name:
            dims[axis] = (name, False)
    used = {d for d, _ in filter(None, dims)}
    for axis, size in enumerate(first.shape):
        if dims[axis] is None:
            match = next((c for c, n in dimension_coords if n == size and c not in used), None)
            if match:
                used.add(match)
            dims[axis] = (match, False) if match else (f"dim_{axis}", True)
    return dims


def _user_dims(var: _Variable, options: _Options) -> tuple[str | None, ...]:
    """The user's ``dim_names`` for this variable, ``None`` for axes it leaves unnamed."""
    shape = var.first.shape
    given = options.dim_names
    if isinstance(given, Mapping):
        if var.name in given:
            given = tuple(given[var.name])
        else:
            by_size = {k: v for k, v in given.items() if isinstance(k, int)}
            return tuple(by_size.get(n) for n in shape)
    if given is None:
        return (None,) * len(shape)
    if len(given) != len(shape) or len(set(given)) != len(given):
        raise ValueError(
            f"{options.source}: dim_names {list(given)} does not fit variable {var.name!r} with "
            f"{len(shape)} dimensions of shape {shape} ({var.first.where}); give {len(shape)} "
            f"distinct names, or a mapping {{variable name: names}}.")
    return tuple(given)


def _check_names(plans, coords, index_coords, options) -> None:
    names = Counter(list(plans) + list(coords) + list(index_coords))
    clashes = sorted(n for n, count in names.items() if count > 1)
    if clashes:
        raise TgmConflictError(
            f"{options.source}: the name {clashes[0]!r} is used by more than one of the data "
            f"variables, object coordinates and metadata coordinates. Rename variables with "
            f"variable_key=..., or open a subset with filter_by_keys=....")


# --------------------------------------------------------------------------------------------
# Splitting into groups
# --------------------------------------------------------------------------------------------


def _groups(messages: list[_Message], options: _Options) -> dict[str, list[_Message]]:
    """Partition the data objects into consistent groups (see :func:`split_groups`)."""
    coords_of = {m.index: {o.coordinate: o for o in m.coords} for m in messages}
    keyed: dict[tuple, list[_Object]] = {}
    for m in messages:
        for o in m.data:
            keyed.setdefault(_group_key(o), []).append(o)
    # Different coordinate payloads under one name cannot share a Dataset: split on them.
    groups: list[tuple[str, list[_Object]]] = []
    for key, objects in keyed.items():
        for part in _split_by_coordinates(objects, coords_of, options).values():
            groups.append((_group_name(key), part))
    named: dict[str, list[_Object]] = {}
    for base, objects in sorted(groups, key=lambda g: g[1][0].ref):
        name, n = base, 1
        while name in named:
            n += 1
            name = f"{base}_{n}"
        named[name] = objects

    result: dict[str, list[_Message]] = {}
    placed: set[tuple[int, int]] = set()  # coordinates that joined some group
    for name, objects in named.items():
        refs = {o.ref for o in objects}
        members = {o.msg for o in objects}
        group = [replace(m, data=tuple(o for o in m.data if o.ref in refs))
                 for m in messages if m.index in members]
        own = {o.coordinate for m in group for o in m.coords}
        grid = set(objects[0].shape)
        borrowed = {o.ref for o in _borrowed(messages, members, own, grid, options)}
        group += [replace(m, data=(), coords=tuple(o for o in m.coords if o.ref in borrowed))
                  for m in messages if any(o.ref in borrowed for o in m.coords)]
        placed |= {o.ref for m in group for o in m.coords}
        result[name] = sorted(group, key=lambda m: m.index)
    homeless = [replace(m, coords=tuple(o for o in m.coords if o.ref not in placed))
                for m in messages if not m.data]
    if any(m.coords for m in homeless):
        result["coordinates"] = [m for m in homeless if m.coords]
    return result


def _borrowed(messages, members, own, sizes, options) -> list[_Object]:
    """Coordinates from outside a group that fit it (e.g. from a grid message): a name the group
    lacks, sizes found in its grid, and the same payload wherever the name appears."""
    candidates: dict[str, list[_Object]] = defaultdict(list)
    for m in messages:
        if m.index not in members:
            for o in m.coords:
                if o.coordinate not in own and set(o.shape) <= sizes:
                    candidates[o.coordinate].append(o)
    borrowed = []
    for objects in candidates.values():
        if len({(o.shape, o.dtype, o.hint, options.fingerprint(*o.ref)) for o in objects}) == 1:
            borrowed += objects
    return borrowed


def _group_key(o: _Object) -> tuple:
    levtype = mars.lookup(o.keys, "levtype")
    axes = mars.find_axes(o.keys)
    return (str(levtype[1]) if levtype else None, o.shape, _dtype_family(o.dtype), o.hint,
            tuple(sorted(axes)))


def _group_name(key: tuple) -> str:
    levtype, shape = key[0], key[1]
    grid = "x".join(str(n) for n in shape) if shape else "scalar"
    name = f"{levtype}_{grid}" if levtype else grid
    return name.replace("/", "_")  # a DataTree path separator


def _split_by_coordinates(objects: list[_Object], coords_of, options) -> dict[tuple, list[_Object]]:
    names = sorted({c for o in objects for c in coords_of[o.msg]})
    varying = []
    for name in names:
        prints = {options.fingerprint(*coords_of[o.msg][name].ref) for o in objects
                  if name in coords_of[o.msg]}
        if len(prints) > 1:
            varying.append(name)
    parts: dict[tuple, list[_Object]] = {}
    for o in objects:
        key = tuple(options.fingerprint(*coords_of[o.msg][n].ref) if n in coords_of[o.msg] else None
                    for n in varying)
        parts.setdefault(key, []).append(o)
    return parts
