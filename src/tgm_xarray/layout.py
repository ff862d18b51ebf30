"""How a Dataset is laid out in Tensogram messages: the writer's plan, built from metadata only.

:func:`plan` decides, before any value is read, what every message will hold, so that the
reader (``hypercube.build_hypercube``) rebuilds the same Dataset:

- ``layout="field"`` (GRIB-like): one message per field. A variable's *stacked* dimensions
  become per-message metadata keys, one field per combination: ``time``, ``step``, ``number``
  and the level dimension as MARS keys (``mars.date``/``mars.time``, ``mars.step``,
  ``mars.number``, ``mars.levtype`` + ``mars.levelist``), any other dimension as a key named
  after it (times as ISO 8601 strings; the attributes of those dimensions' coordinates go in
  ``_extra_["coordinate_attrs"]``). The rest (by default the last two dimensions, e.g. latitude
  and longitude) form the field, stored with the 1-D coordinates of its dimensions.
- ``layout="variable"``: one message per data variable, holding all of it.

A dimension is stacked only when the reader can rebuild its coordinate from keys: it has an
index coordinate of unique values in the reader's sort order, of numbers, strings or times
(durations only for ``step``), and more than one value unless it is a MARS
dimension (which then reads back as a scalar coordinate, as cfgrib squeezes it). Others stay
inside the field, with a warning when that makes messages hold several fields.
Scalar MARS coordinates (``time``, ``step``, ``number``, a level) also become keys. The
remaining coordinates (scalar, non-index, or on dimensions no field holds) go, CF-encoded, in one
trailing message, named in the ``coordinates`` attribute of the variables they belong to.

>>> import xarray as xr
>>> ds = xr.Dataset({"t": (("step", "y", "x"), np.zeros((2, 3, 4)))},
...                 coords={"step": np.array([0, 6], "timedelta64[h]"), "y": [1, 2, 3]})
>>> p = plan(ds)
>>> p.count, p.variables[0].stacked, p.variables[0].inner
(2, ('step',), ('y', 'x'))
>>> [m.objects[0].base["mars"] for m in p.messages()]
[{'step': 0}, {'step': 6}]
"""

from __future__ import annotations

import json
import math
import warnings
from collections.abc import Collection, Hashable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from functools import cached_property
from typing import Any

import numpy as np
import xarray as xr

from tgm_xarray import cf, mars
from tgm_xarray._core import COORDINATE_ATTRS_KEY, DIM_NAMES_KEY, VALUES_DTYPE_KEY
from tgm_xarray.attrs import (
    CF_PACKING_KEY,
    LABELS_KEY,
    REVERSED_DIMS_KEY,
    STACKED_DIMS_KEY,
    STRUCTURAL_KEYS,
    structural,
)
from tgm_xarray.errors import TgmCodecError
from tgm_xarray.pipeline import Codec, cf_packed, reader_options, resolve

LAYOUTS = ("field", "variable")
#: Metadata keys the reader gives a meaning of their own (names, structure, and the plain keys
#: ``mars.find_axes`` reads): a dimension of one of these names is stacked only through its MARS
#: rule, never under a plain key of its name (except ``time`` holding numbers, which the reader
#: takes as a plain key).
RESERVED_KEYS = frozenset({"name", "shortName", "mars", cf.COORDINATES, "_extra_", *STRUCTURAL_KEYS,
                           *(k for keys in mars.AXIS_KEYS for k in keys if "." not in k)})


@dataclass(frozen=True)
class ObjectSpec:
    """One object of a message: its values (lazy), how they are stored, and ``base`` metadata."""

    name: str
    whole: xr.Variable  # the variable the object is a field of: itself, unless `at` says where
    codec: Codec
    base: dict
    at: tuple[int, ...] = ()  # the field's position along the variable's stacked dimensions

    @cached_property
    def variable(self) -> xr.Variable:
        """The object's values, sliced from ``whole`` when first asked for: the fields of dask
        blocks never are (slicing a dask variable costs a graph of its own per field)."""
        return self.whole[self.at] if self.at else self.whole


@dataclass(frozen=True)
class MessageSpec:
    """One message. ``field`` is true for a data field, which may be skipped when all-NaN;
    ``label`` says which, for error messages."""

    objects: tuple[ObjectSpec, ...]
    extra: dict
    field: bool = True
    label: str = ""
    #: What the field stands for in the Dataset the reader builds: ``("", variable)`` and, per
    #: stacked dimension, ``(dimension, its keys as JSON)``; a field skipped as a hole must leave
    #: each of them to other fields (of this Dataset or another written with it).
    at: tuple[tuple[str, Any], ...] = ()
    #: For a field: its variable's layout and its position along the stacked dimensions, so
    #: that the writer can take its values from a dask block computed once for all its fields.
    origin: tuple[VariableLayout, tuple[int, ...]] | None = dataclass_field(default=None, compare=False)


@dataclass(frozen=True)
class VariableLayout:
    """A data variable: stacked dimensions (one field each) and the dimensions of a field."""

    name: str
    variable: xr.Variable  # CF-encoded, dimensions ordered stacked + inner
    stacked: tuple[str, ...]
    inner: tuple[str, ...]
    codec: Codec
    base: dict  # metadata shared by every field
    stack_keys: tuple[tuple[mars.Keys, ...], ...]  # per stacked dim, per position
    coordinates: tuple[ObjectSpec, ...]  # the 1-D coordinates of the inner dimensions

    @property
    def count(self) -> int:
        return math.prod(len(keys) for keys in self.stack_keys)


@dataclass(frozen=True)
class DatasetPlan:
    """Every message of one Dataset, in writing order (fields by variable, in C order)."""

    variables: tuple[VariableLayout, ...]
    auxiliary: tuple[ObjectSpec, ...]  # coordinates for the trailing message
    extra: dict

    @property
    def count(self) -> int:
        """Number of messages (at most: the writer may drop known auxiliary coordinates)."""
        return sum(v.count for v in self.variables) + bool(self.auxiliary)

    def messages(self) -> Iterator[MessageSpec]:
        """The field messages, lazily (a field is neither sliced nor read); then the auxiliary one."""
        for var in self.variables:
            for position in np.ndindex(*(len(keys) for keys in var.stack_keys)):
                base = var.base
                at = [("", var.name)]
                for dim, dim_keys, i in zip(var.stacked, var.stack_keys, position):
                    base = merge(base, dim_keys[i])
                    at.append((dim, json.dumps(dim_keys[i], sort_keys=True)))
                field = ObjectSpec(var.name, var.variable, var.codec, base, position)
                where = f" at {dict(zip(var.stacked, position))}" if position else ""
                yield MessageSpec((field, *var.coordinates), self.extra,
                                  label=f"variable {var.name!r}{where}",
                                  at=tuple(at), origin=(var, position))
        if self.auxiliary:
            yield MessageSpec(self.auxiliary, self.extra, field=False,
                              label=f"coordinates {[o.name for o in self.auxiliary]}")


@dataclass(frozen=True)
class Plans:
    """The plans of several Datasets, written as one: the progress bar knows its total up front,
    and encoding runs on without draining between Datasets."""

    plans: list[DatasetPlan]

    @property
    def count(self) -> int:
        return sum(p.count for p in self.plans)

    def messages(self) -> Iterator[MessageSpec]:
        for p in self.plans:
            yield from p.messages()


def plan(ds: xr.Dataset, *, encoding: Mapping[Hashable, Mapping] | None = None,
         layout: str = "field", field_dims: Sequence[str] | None = None) -> DatasetPlan:
    """Lay ``ds`` out in messages, checking every name and encoding (reads no data values).

    ``field_dims`` names the dimensions a field keeps (default: each variable's last two that are
    not MARS dimensions: ``number``, ``time``, ``step``, levels). See the module docstring.

    Text variables and coordinates (other than the labels of stacked dimensions, which are
    keys) are left out with a warning. Variables packed by their source (netCDF
    ``scale_factor``/``add_offset`` on integers) and given no encoding keep that width as simple
    packing.

    Raises ``TgmCodecError`` for a bad encoding or a variable Tensogram cannot store,
    ``ValueError`` for a bad ``layout``, ``encoding`` key or variable name.
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, got {layout!r}")
    encoding = dict(encoding or {})
    for name in encoding:
        if name not in ds.variables:
            raise ValueError(f"encoding names {name!r}, which is not a variable of the Dataset "
                             f"(variables: {sorted(map(str, ds.variables))})")
    _names(ds.variables, "variable")
    _names(ds.dims, "dimension")  # of variables without a coordinate too
    if not ds.variables:
        raise ValueError("the Dataset has no variables: a Tensogram file needs a message")

    ds = _without_text(ds, list(ds.data_vars))
    keyed = _KeyedCoordinates(ds, field_dims) if layout == "field" else _KeyedCoordinates.none()
    skip = set(keyed.stacked) | set(keyed.scalars) | keyed.derived | set(keyed.labels)
    # Text labels of stacked dimensions are keys; other text coordinates cannot be stored.
    ds = _without_text(ds, [c for c in ds.coords if c not in skip])
    inner_coords = {d for name in ds.data_vars for d in ds[name].dims if d not in keyed.stacked}
    auxiliary = [c for c in _names(ds.coords) if c not in skip and not (c in ds.dims and c in inner_coords)]
    attached = {c: ds[c].dims for c in auxiliary if c not in ds.dims}
    owned: set[str] = set()  # the attached coordinates some variable names
    coordinate_objects = {c: _object(ds, c, encoding) for c in _names(ds.coords) if c not in skip}
    variables = []
    for name in _names(ds.data_vars):
        var = ds.variables[name]
        stacked = tuple(d for d in _names(var.dims) if d in keyed.stacked)
        inner = tuple(d for d in _names(var.dims) if d not in keyed.stacked)
        encoded = cf.encode(name, var.transpose(*stacked, *inner))
        codec = _codec(name, encoded.dtype, encoding, var.encoding)
        base = {**_base(name, encoded.attrs, inner), **keyed.stacking(stacked)}
        packed = cf.packing(var.encoding)
        if packed is not None and encoded.dtype.kind == "f":
            base[CF_PACKING_KEY] = packed  # the reader gives it back in `encoding`
        if codec.dtype != encoded.dtype and encoded.dtype.kind == "f":
            base[VALUES_DTYPE_KEY] = encoded.dtype.name  # stored wider (packed): read back as given
        own = cf.attached_to(var.dims, attached)
        if own:
            base[cf.COORDINATES] = cf.coordinates_attr(own)
        owned.update(own)
        for keys in keyed.scalar_keys(name):
            base = merge(base, keys)
        variables.append(VariableLayout(
            name, encoded, stacked, inner, codec, base,
            tuple(keyed.stacked[d] for d in stacked),
            tuple(coordinate_objects[d] for d in inner if d in ds.coords),
        ))
    extra = to_metadata(dict(ds.attrs))
    if set(attached) - owned:  # coordinates of no variable: the Dataset's
        extra[cf.COORDINATES] = cf.coordinates_attr(set(attached) - owned)
    extra = unflatten(extra)
    # Attributes of the coordinates that become keys, which the reader's coordinates built
    # from those keys take back; for MARS ones only when they are not cfgrib's (which the
    # reader gives them anyway), e.g. a NetCDF input's CF `time`.
    described = {name: to_metadata(dict(ds[name].attrs)) for name in keyed.described()}
    if described:
        extra[COORDINATE_ATTRS_KEY] = described
    return DatasetPlan(tuple(variables), tuple(coordinate_objects[c] for c in auxiliary), extra)


def _names(names: Collection[Hashable], what: str = "variable") -> tuple[str, ...]:
    """``names`` (of variables or dimensions), which must be strings to be metadata keys and
    names: a ``ValueError`` for any other (:func:`plan` checks them all first)."""
    strings = tuple(name for name in names if isinstance(name, str))
    if len(strings) != len(names):
        other = next(name for name in names if not isinstance(name, str))
        raise ValueError(f"{what} names must be strings to be written, got {other!r}")
    return strings


def _without_text(ds: xr.Dataset, names: Sequence[Hashable]) -> xr.Dataset:
    """``ds`` without those of ``names`` that hold text (station names, labels, flags as
    strings), which Tensogram cannot store: skipped with a warning, so that one such variable
    does not stop a whole conversion."""
    text = [name for name in names if _is_text(ds.variables[name])]
    if not text:
        return ds
    warnings.warn(f"variables {text} hold text, which Tensogram does not store: they are not "
                  f"written (drop them first, e.g. ds.drop_vars({text}) or tgm-xarray convert "
                  f"--drop-variables {','.join(map(str, text))}, to silence this)", stacklevel=4)
    if not set(text) < set(ds.variables):
        raise ValueError(f"the Dataset holds only text variables ({text}): nothing to write")
    return ds.drop_vars(text)


def _is_text(var: xr.Variable) -> bool:
    if var.dtype.kind in "SU":
        return True
    if var.dtype.kind != "O" or var.size == 0:
        return False
    return isinstance(np.asarray(var.values).flat[0], (str, bytes))


def merge(base: dict, keys: Mapping[str, Any]) -> dict:
    """``base`` updated with ``keys``, merging nested dictionaries (``mars``) one level deep."""
    merged = dict(base)
    for key, value in keys.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = {**merged[key], **value}
        else:
            merged[key] = value
    return merged


def to_metadata(value: Any) -> Any:
    """A CBOR-friendly copy of an attribute value: numpy scalars and arrays become Python ones.

    Dates become ISO 8601 text and durations numpy's text ("6 hours"): ``.item()`` would give
    a bare integer of nanoseconds, or a ``datetime.date`` that CBOR cannot carry.

    >>> to_metadata({"levels": np.array([500, 850]), "scale": np.float32(0.5)})
    {'levels': [500, 850], 'scale': 0.5}
    >>> to_metadata({"t0": np.datetime64("2026-04-04T06", "ns"), "steps": np.array([0, 6], "m8[h]")})
    {'t0': '2026-04-04T06:00:00.000000000', 'steps': ['0 hours', '6 hours']}
    """
    if isinstance(value, (np.ndarray, np.datetime64, np.timedelta64)) and np.asarray(value).dtype.kind in "mM":
        return np.asarray(value).astype(str).tolist()
    if isinstance(value, np.ndarray):
        return value.tolist()
    if isinstance(value, np.generic):
        return value.item()
    if isinstance(value, Mapping):
        return {str(k): to_metadata(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [to_metadata(v) for v in value]
    if value is None or isinstance(value, (str, bytes, bool, int, float)):
        return value
    return str(value)


def unflatten(flat: Mapping[str, Any]) -> dict:
    """Nest dotted keys (``"mars.class"``) the way the reader flattens them, unless that clashes.

    >>> unflatten({"mars.class": "od", "mars.type": "fc", "units": "K"})
    {'mars': {'class': 'od', 'type': 'fc'}, 'units': 'K'}
    """
    nested: dict[str, Any] = {}
    for key, value in flat.items():
        parts = key.split(".")
        if len(parts) == 1 or "" in parts:
            _put(nested, [key], value)
        elif not _put(nested, parts, value):
            _put(nested, [key], value)
    return nested


def _put(tree: dict, parts: list[str], value: Any) -> bool:
    for part in parts[:-1]:
        node = tree.setdefault(part, {})
        if not isinstance(node, dict):
            return False
        tree = node
    if parts[-1] in tree and isinstance(tree[parts[-1]], dict) != isinstance(value, dict):
        return False
    if isinstance(value, dict) and isinstance(tree.get(parts[-1]), dict):
        tree[parts[-1]].update(value)
    else:
        tree[parts[-1]] = value
    return True


def _base(name: str, attrs: Mapping[str, Any], dims: Sequence[str]) -> dict:
    # The object's own `name` and `dim_names` win over attributes of those names.
    meta = unflatten({k: v for k, v in to_metadata(dict(attrs)).items()
                      if k != "name" and not structural(k)})
    return {"name": name, DIM_NAMES_KEY: list(dims), **meta}


def _object(ds: xr.Dataset, name: str, encoding: Mapping) -> ObjectSpec:
    var = ds.variables[name]
    encoded = cf.encode(name, var)
    codec = _codec(name, encoded.dtype, encoding, var.encoding, coordinate=True)
    return ObjectSpec(name, encoded, codec, _base(name, encoded.attrs, _names(var.dims)))


def _codec(name: str, dtype: np.dtype, encoding: Mapping, source: Mapping, *,
           coordinate: bool = False) -> Codec:
    """The user's encoding of ``name``; else the pipeline of the file it was read from (a
    ``.tgm`` re-written keeps its codecs), when this writer accepts it, keeping a CF-packed
    input's precision (``pipeline.cf_packed``); else the defaults."""
    packed = cf.packing(source)
    if name not in encoding:
        reused = reader_options(source)
        try:
            if packed is not None and dtype.kind == "f":
                return cf_packed(name, dtype, packed, reused, coordinate=coordinate)
            if reused is not None:
                return resolve(name, dtype, reused, coordinate=coordinate)
        except TgmCodecError:
            pass  # e.g. szip on a packed width upstream decodes wrong: use the defaults
    codec = resolve(name, dtype, encoding.get(name), coordinate=coordinate)
    if packed is not None and codec.pipeline.bits_per_value is None:
        width = np.dtype(packed["dtype"]).itemsize * 8
        warnings.warn(f"variable {name!r} was packed in {width} bits (scale_factor/add_offset) "
                      f"and is written as {codec.dtype.itemsize * 8}-bit values: about "
                      f"{codec.dtype.itemsize * 8 / width:g} times larger before compression; "
                      f"encoding={{{name!r}: {{'bits': {width}}}}} keeps its size",
                      stacklevel=4)
    return codec


# --------------------------------------------------------------------------------------------
# Coordinates as per-message keys (field layout)
# --------------------------------------------------------------------------------------------


class _KeyedCoordinates:
    """Which coordinates become per-message keys, and the keys of each of their values.

    ``stacked``: dimension -> keys of each position; ``scalars``: scalar coordinate -> keys;
    ``levels``: the stacked dimensions and the scalar coordinates keyed as MARS levels (a field
    has one level: a variable with a level dimension takes no scalar level, a variable without
    one takes one scalar level, its own);
    ``derived``: coordinates the reader rebuilds itself (``valid_time = time + step``);
    ``aliases``: stacked levels keyed as the MARS level of another name (``pressure_level`` as
    ``isobaricInhPa``: ``mars.level_alias``); ``reversed``: stacked dimensions whose values run
    against the reader's sort; ``labels``: text coordinates along a stacked dimension (the CDS's
    ``expver`` along ``valid_time``), keys of their own -> that dimension. All three are
    recorded in each field (:meth:`stacking`).
    """

    def __init__(self, ds: xr.Dataset | None, field_dims: Sequence[str] | None):
        self.stacked: dict[str, tuple[mars.Keys, ...]] = {}
        self.scalars: dict[str, mars.Keys] = {}
        self.levels: set[str] = set()
        self.derived: set[str] = set()
        self.aliases: dict[str, str] = {}
        self.reversed: set[str] = set()
        self.labels: dict[str, str] = {}
        self._own_level: dict[str, str | None] = {}  # data variable -> its scalar level
        self._attrs: dict[str, dict] = {}
        if ds is None:
            return
        dims_of = {name: _names(ds[name].dims) for name in _names(ds.data_vars)}
        aliases = {dim: alias for dim in _names(ds.dims) if dim in ds.coords
                   and (alias := mars.level_alias(dim, ds[dim].attrs, ds[dim].dtype)) is not None}
        fields = {name: _field_dims(dims, field_dims, aliases) for name, dims in dims_of.items()}
        for dim in _data_dims(ds):
            if any(dim in f for f in fields.values()) or ds.sizes[dim] == 0:
                continue
            if ds.sizes[dim] == 1 and aliases.get(dim, dim) not in mars.DIMS:
                continue  # the reader would make a constant key an attribute: keep the dimension
            users = [name for name, dims in dims_of.items() if dim in dims]
            # A second level dimension of one variable is stacked under a plain key instead.
            level_free = not any(self.levels & set(dims_of[name]) for name in users)
            as_dim = aliases[dim] if dim in aliases and level_free else dim  # the reader's name
            taken = set().union(*(ds[name].attrs for name in users), ds.attrs)
            keys = _stack_keys(as_dim, ds[dim].values, level_free, taken) if dim in ds.coords \
                else "it has no coordinate"
            if isinstance(keys, str):
                # Correct, but each message then holds every value along `dim`.
                inside = [*fields[users[0]], dim]
                warnings.warn(f"dimension {dim!r} stays inside each field (one message holds "
                              f"all {ds.sizes[dim]} of its values): {keys}. To keep it there "
                              f"without this warning, name the dimensions of a field: "
                              f"field_dims={inside} (tgm-xarray convert --field-dims "
                              f"{','.join(inside)})", stacklevel=4)
                continue
            self.stacked[dim] = keys
            if as_dim != dim:
                self.aliases[dim] = as_dim
            if not mars.in_reader_order(as_dim, ds[dim].values):
                self.reversed.add(dim)
            if mars.is_level(as_dim) and level_free:
                self.levels.add(dim)
        scalars = {name: mars.scalar_keys(name, ds[name].values[()]) for name in _names(ds.coords)
                   if ds[name].ndim == 0 and name not in ds.dims}
        self.scalars = {name: keys for name, keys in scalars.items() if keys is not None and not mars.is_level(name)}
        # A field has one level: each variable without a stacked one takes a scalar level, the
        # one its CF `coordinates` names (a Dataset may hold `heightAboveGround` for `2t` and
        # `surface` for `lsm`), else the first. A level no variable takes stays a coordinate.
        scalar_levels = {name: keys for name, keys in scalars.items() if keys is not None and mars.is_level(name)}
        for name, dims in dims_of.items():
            if not self.levels & set(dims):
                named = cf.named_coordinates(ds[name].attrs, ds[name].encoding)
                own = [level for level in scalar_levels if named is None or level in named][:1]
                self._own_level[name] = own[0] if own else None
        for level, level_keys in scalar_levels.items():
            if level in self._own_level.values():
                self.scalars[level] = level_keys
        self.levels.update(level for level in self._own_level.values() if level is not None)
        for name in _names(ds.coords):  # text along a stacked dimension: keys of its own
            coord = ds[name]
            along = str(coord.dims[0]) if coord.ndim == 1 else ""
            if along not in self.stacked or name in ds.dims or not _is_text(coord.variable):
                continue
            values = coord.values.tolist()
            clash = set().union(*(ds[v].attrs for v, dims in dims_of.items() if along in dims), ds.attrs)
            if name in RESERVED_KEYS or "." in name or name in clash or not all(isinstance(v, str) for v in values):
                continue  # (left out with the other text coordinates)
            self.stacked[along] = tuple({**keys, name: value} for keys, value in zip(self.stacked[along], values))
            self.labels[name] = along
        keyed = set(self.stacked) | set(self.scalars)
        if {"time", "step"} <= keyed and "valid_time" in ds.coords:
            self.derived.add("valid_time")
        self._attrs = {name: dict(ds[name].attrs) for name in keyed | set(self.labels)}

    @classmethod
    def none(cls) -> _KeyedCoordinates:
        return cls(None, None)

    def generic(self) -> list[str]:
        """The stacked dimensions keyed under a plain key of their name (not a MARS rule)."""
        return [dim for dim, keys in self.stacked.items() if dim != mars.DEFAULT_LEVEL_DIM
                and all([key for key in k if key not in self.labels] == [dim] for k in keys)]

    def described(self) -> list[str]:
        """The keyed coordinates whose attributes the reader would not give them itself (cfgrib's
        for MARS ones, none for others): a NetCDF ``time`` without attributes keeps none."""
        generic = self.generic()
        return [name for name in (*self.stacked, *self.scalars, *self.labels) if self._attrs[name] != (
            {} if name in generic or name in self.labels else cf.COORD_ATTRS.get(self.aliases.get(name, name), {}))]

    def stacking(self, stacked: Sequence[str]) -> dict[str, list]:
        """The record of a variable's ``stacked`` dimensions that its fields carry, for the
        reader to give them back as written (``hypercube.written``): their order and names
        where the keys do not tell (an order other than the reader's, a level keyed under
        another name), those whose values it must reverse, and the text coordinates along them
        that are keys."""
        record: dict[str, list] = {}
        read = [self.aliases.get(dim, dim) for dim in stacked]  # as the reader names them
        if read != list(stacked) or read != mars.stacking_order(read, self.generic()):
            record[STACKED_DIMS_KEY] = list(stacked)
        backwards = [dim for dim in stacked if dim in self.reversed]
        if backwards:
            record[REVERSED_DIMS_KEY] = backwards
        labels = [[name, dim] for name, dim in self.labels.items() if dim in stacked]
        if labels:
            record[LABELS_KEY] = labels
        return record

    def scalar_keys(self, variable: str) -> list[mars.Keys]:
        """The keys of the scalar coordinates of a data variable: its own level's, no other."""
        return [keys for name, keys in self.scalars.items()
                if not mars.is_level(name) or self._own_level.get(variable) == name]


def _data_dims(ds: xr.Dataset) -> list[str]:
    seen: dict[str, None] = {}
    for name in ds.data_vars:
        seen.update(dict.fromkeys(_names(ds[name].dims)))
    return list(seen)


def _field_dims(dims: tuple[str, ...], field_dims: Sequence[str] | None,
                aliases: Collection[str] = ()) -> tuple[str, ...]:
    if field_dims is not None:
        return tuple(d for d in dims if d in field_dims)
    return tuple(d for d in dims if d not in mars.DIMS and d not in aliases)[-2:]


def _stack_keys(dim: str, values: np.ndarray, level_free: bool, taken: set) -> tuple[mars.Keys, ...] | str:
    """Keys of each coordinate value, or why the reader could not rebuild them from keys.

    A MARS dimension of one value is stacked too, so that later appends extend it; read alone,
    it comes back as a scalar coordinate (cfgrib's squeeze).
    """
    if not (mars.in_reader_order(dim, values) or mars.in_reader_order(dim, values[::-1])):
        return "its values are not unique and sorted (ascending or descending)"
    to_keys = mars.key_maker(dim, values.dtype, level_free)
    if to_keys is not None:
        keys = tuple(k for k in map(to_keys, values) if k is not None)
        return keys if len(keys) == len(values) else \
            "some of its values have no key (not finite, a negative step, or past the reader's nanoseconds)"
    if values.dtype.kind == "m":
        return ("the reader rebuilds durations from keys only for 'step'; rename it, or keep it "
                "in the field")
    if dim in RESERVED_KEYS and not (dim == "time" and values.dtype.kind in "iuf"):
        return f"{dim!r} is a metadata key the reader gives another meaning"
    if dim in taken or "." in dim:
        return f"{dim!r} is also the name of an attribute, or has a dot"
    if values.dtype.kind == "M":  # ISO 8601 strings, which the reader decodes as datetime64
        if np.isnat(values).any():
            return "some of its values are not finite"
        try:
            return tuple({dim: np.datetime_as_string(mars.as_ns(v), unit="ns")} for v in values)
        except mars.BeyondNanoseconds as err:
            return str(err)
    if not _plain(values):
        return f"its values ({values.dtype}) are not finite numbers or strings"
    return tuple({dim: to_metadata(v)} for v in values)


def _plain(values: np.ndarray) -> bool:
    """Numbers, booleans or strings: what a generic key holds and the reader reads back."""
    if values.dtype.kind in "biu":
        return True
    if values.dtype.kind == "f":
        return bool(np.isfinite(values).all())
    return values.dtype.kind in "UO" and all(isinstance(v, str) for v in values.tolist())
