"""Dimensions from other metadata keys: the fewest keys that tell a variable's fields apart.

Per variable, a key is a candidate when every field has a scalar value for it and the values do
not all agree; keys already determined by the cfgrib dimensions, and keys equivalent to an
earlier one, are left out. Partitions of the fields are compared as label arrays.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from tgm_xarray.attrs import flatten, freeze, structural, to_attrs
from tgm_xarray.errors import TgmConflictError
from tgm_xarray.hypercube.axes import IndexCoords, Lookups, coordinate_values
from tgm_xarray.hypercube.columns import common, count_distinct, factorize
from tgm_xarray.hypercube.objects import Objects
from tgm_xarray.hypercube.variables import Variable

#: The dimension that stacks fields no metadata tells apart, labelled by message number.
MESSAGE_DIM = "message"

# Exhaustive search of the best extra dimensions is 2**n subsets; past this, a greedy pick.
_MAX_EXHAUSTIVE_KEYS = 10


def with_extra_dims(var: Variable, objects: Objects, consumed: set[str], fingerprints) -> Variable:
    """``var`` with the metadata keys that tell its fields apart (:func:`extra_dims`) as its
    ``generic`` dimensions, and ``message`` after them where fields no metadata tells apart hold
    different data (:func:`stack_indistinct_fields`)."""
    var = replace(var, generic=tuple(extra_dims(var, objects, consumed)))
    if stack_indistinct_fields(var, objects, fingerprints):
        var = replace(var, generic=(*var.generic, MESSAGE_DIM), by_message=True)
    return var


def extra_dims(var: Variable, objects: Objects, consumed: set[str]) -> list[str]:
    """Metadata keys (besides cfgrib's) that must become dimensions to tell the fields apart.

    Candidates are keys with a scalar value in every field that do not all agree. Keys already
    determined by the cfgrib dimensions (``grib.level`` next to ``mars.levelist``) are left
    out, and so are keys equivalent to another (the first by name stays). Among the remaining
    subsets that separate the fields as well as all candidates together, the one with the
    smallest grid (fewest holes) wins, then the one with more dimensions, then names.
    """
    rows = var.rows
    base = _base(var)
    n_base = count_distinct(base)
    candidates: dict[str, np.ndarray] = {}
    seen: set[bytes] = set()
    for key in objects.keys.in_every(rows):  # a candidate is scalar in every field
        if key in consumed or structural(key):
            continue
        column = objects.keys.column(key)
        if not column.scalar[rows].all():
            continue
        canon = column.canon[rows]
        if (canon == canon[0]).all():
            continue
        labels = factorize(canon)[0]
        if count_distinct(base, labels) == n_base or labels.tobytes() in seen:
            continue  # determined by the cfgrib dimensions, or the same partition as another
        seen.add(labels.tobytes())
        candidates[key] = labels
    if not candidates:
        return []
    keys = list(candidates)
    target = count_distinct(base, *candidates.values())
    sizes = {k: int(candidates[k].max()) + 1 for k in keys}

    def separates(subset) -> bool:
        return count_distinct(base, *(candidates[k] for k in subset)) == target

    if len(keys) <= _MAX_EXHAUSTIVE_KEYS:
        subsets = (s for n in range(len(keys) + 1) for s in itertools.combinations(keys, n))
        ranked = sorted(subsets, key=lambda s: (math.prod(sizes[k] for k in s), -len(s), s))
        chosen = next(s for s in ranked if separates(s))
    else:
        chosen = _greedy_dims(keys, candidates, base, sizes, separates)
    return sorted(chosen)


def _base(var: Variable) -> np.ndarray:
    """Each field's place along the variable's cfgrib dimensions, numbered."""
    if not var.outer:
        return np.zeros(len(var.rows), dtype=np.int64)
    return factorize(*(var.ids[d] for d in var.outer))[0]


def _greedy_dims(keys, candidates, base, sizes, separates) -> tuple[str, ...]:
    """Add the key that separates the most fields until all are apart, then drop keys that
    turned out unnecessary (for files with too many candidate keys to search exhaustively)."""
    chosen: list[str] = []
    while not separates(chosen):
        rest = [k for k in keys if k not in chosen]
        chosen.append(max(rest, key=lambda k: (
            count_distinct(base, *(candidates[c] for c in chosen), candidates[k]), -sizes[k])))
    for key in reversed(list(chosen)):
        if separates([k for k in chosen if k != key]):
            chosen.remove(key)
    return tuple(chosen)


def stack_indistinct_fields(var: Variable, objects: Objects, fingerprints) -> bool:
    """Whether fields with identical metadata but different contents must stack along ``message``.

    Such fields are distinct data the metadata fails to label (upstream's golden
    ``multi_message.tgm``): stacking them by message number drops nothing. Fields that also
    have identical bytes are true duplicates and are left to the ``duplicates=`` rule.
    """
    columns = [var.ids[d] for d in var.outer]
    columns += [objects.keys.column(k).canon[var.rows] for k in var.generic]
    cell = factorize(*columns)[0] if columns else np.zeros(len(var.rows), dtype=np.int64)
    clash = np.bincount(cell)[cell] > 1
    if not clash.any():
        return False
    rows, cells = var.rows[clash], cell[clash]
    if count_distinct(cells, objects.table.msg[rows]) < len(rows):
        return False
    return count_distinct(cells, fingerprints.ids(rows)) == len(rows)


def generic_coords(variables: Mapping[str, Variable], objects: Objects, index_coords: IndexCoords
                   ) -> tuple[dict[str, Variable], IndexCoords, Lookups]:
    """Coordinates of the extra dimensions: the union of the values of every variable using it.

    Their attributes are the entries of ``_extra_["coordinate_attrs"][key]`` common to every
    message holding a field stacked along it (none when one of them lacks it). Returns the
    variables stacked along their ``generic`` dimensions too, those coordinates (a name of
    ``index_coords`` is a conflict) and their lookups.
    """
    users: dict[str, list[Variable]] = {}
    for var in variables.values():
        for key in var.generic:
            users.setdefault(key, []).append(var)
    coords: IndexCoords = {}
    lookups: Lookups = {}
    stacked: dict[str, dict[str, np.ndarray]] = {name: {} for name in variables}  # key -> ids
    for key in sorted(users):
        if key in index_coords:
            raise TgmConflictError(
                f"{objects.source}: metadata key {key!r} varies like a dimension in some "
                f"variables but {key!r} is already a coordinate of others. Open a subset with "
                f"filter_by_keys=..., or every group with "
                f"xr.open_datatree(path, engine='tgm').")
        values: list[Any] = []
        index: dict[Any, int] = {}
        described: list[dict] = []
        for var in users[key]:
            ids, own_values = _values(var, key, objects)
            remap = np.full(len(own_values), -1, dtype=np.int64)
            for u in np.unique(ids).tolist():
                v = own_values[u]
                remap[u] = index.setdefault((type(v), freeze(v)), len(index))
                if remap[u] == len(values):
                    values.append(v)
            stacked[var.name][key] = remap[ids]
            described.extend(stored_attrs(key, objects, var.rows))
        coord, lookups[key] = coordinate_values(key, values, np.arange(len(values)))
        coords[key] = ((key,), coord, to_attrs(common(described)))
    variables = {name: replace(var, outer=var.outer + var.generic, ids={**var.ids, **stacked[name]})
                 for name, var in variables.items()}
    return variables, coords, lookups


def stored_attrs(key: str, objects: Objects, rows: np.ndarray) -> list[dict]:
    """The attributes the messages of ``rows`` store for coordinate ``key`` in
    ``_extra_["coordinate_attrs"]``, one map per distinct entry (empty where one has none)."""
    t = objects.table
    codes = t.coordinate_attrs.codes[t.msg[rows]]
    return [_coordinate_attrs(t.coordinate_attrs.values[code] if code >= 0 else None).get(key, {})
            for code in codes[factorize(codes)[1]].tolist()]


def with_stored_axis_attrs(index_coords: IndexCoords, axes: Iterable[str], objects: Objects,
                           messages: np.ndarray) -> IndexCoords:
    """``index_coords`` where the attributes a writer stored for a MARS coordinate (``time``,
    ``step``, a level) in ``_extra_["coordinate_attrs"]``, where every message agrees, replace
    cfgrib's: a NetCDF input's CF ``time`` stays ``time``, not ``forecast_reference_time``."""
    column = objects.table.coordinate_attrs
    codes = np.unique(column.codes[messages]).tolist() if len(messages) else [-1]
    if -1 in codes:
        return index_coords
    stored = [_coordinate_attrs(column.values[code]) for code in codes]
    result = dict(index_coords)
    for dim in axes:
        if dim in index_coords and all(dim in s for s in stored):
            dims, values, _ = index_coords[dim]
            result[dim] = (dims, values, to_attrs(common([s[dim] for s in stored])))
    return result


def _values(var: Variable, key: str, objects: Objects) -> tuple[np.ndarray, Sequence[Any]]:
    """Each field's value number for ``key``, and the values."""
    if key == MESSAGE_DIM and var.by_message:
        return objects.table.msg[var.rows], range(objects.table.n_messages)
    column = objects.keys.column(key)
    return column.codes[var.rows], column.values


def _coordinate_attrs(value: Any) -> dict[str, dict[str, Any]]:
    """``_extra_["coordinate_attrs"]``: ``{coordinate: {attribute: value}}``, flattened; anything
    malformed is ignored."""
    if not isinstance(value, Mapping):
        return {}
    return {str(name): flatten(attrs) for name, attrs in value.items()
            if isinstance(attrs, Mapping)}
