"""Stacked dimensions as the writer laid them out: their order, names and directions.

The keys of a field say where it lies, not how the Dataset it came from arranged its stacked
dimensions. ``to_tgm`` records that in each field (``layout._KeyedCoordinates.stacking``):

- ``_stacked_dims_``: the variable's stacked dimensions in the writer's order and names, where
  the reader's order (cfgrib's) is another, or a level is keyed under another name (the CDS's
  ``pressure_level`` keyed as ``isobaricInhPa``, a dimension even of one value);
- ``_reversed_dims_``: those whose values run against the reader's sort (pressure from 500 hPa
  down to 1000 hPa, a time dimension descending);
- ``_labels_``: text coordinates along one of them, ``[name, dimension]``, whose values are keys
  of the fields (the CDS's ``expver`` along ``valid_time``).

A record is followed where every field of a variable agrees on it and it fits the dimensions the
keys gave; the new name of a coordinate shared by several variables only where every variable
on it asks for the same. Anything
else keeps the reader's rules (docs/mapping.md), as for files of other writers.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace

import numpy as np

from tgm_xarray import mars
from tgm_xarray.attrs import LABELS_KEY, REVERSED_DIMS_KEY, STACKED_DIMS_KEY, to_attrs
from tgm_xarray.hypercube.axes import Axes, IndexCoords, Lookups
from tgm_xarray.hypercube.columns import common, common_values
from tgm_xarray.hypercube.extra import stored_attrs
from tgm_xarray.hypercube.objects import Objects
from tgm_xarray.hypercube.variables import Variable


def as_written(variables: Mapping[str, Variable], index_coords: IndexCoords, lookups: Lookups,
               axes: Axes, objects: Objects
               ) -> tuple[dict[str, Variable], IndexCoords, Lookups, dict[str, str]]:
    """The variables, coordinates and lookups with the writer's records followed, and the
    coordinates renamed (the reader's name -> the writer's)."""
    scalars = {d for d, (dims, _, _) in index_coords.items() if dims == () and d in axes.dims}

    def has(var: Variable, dim: str) -> bool:
        return dim in var.outer or (dim in scalars and axes.has(dim, int(var.at[0])))

    wanted: dict[str, tuple[list[str], dict[str, str]]] = {}  # variable -> (order, reader dim -> name)
    for name, var in variables.items():
        written = _record(var, objects, STACKED_DIMS_KEY)
        fit = None if written is None else _match(written, var, [d for d in scalars if has(var, d)])
        if fit is not None:
            wanted[name] = fit
    taken = set(index_coords) | set(variables)
    while True:  # a variable whose record cannot be followed vetoes the changes it asks for
        changed = _changes(wanted, variables, has, taken)
        followed = {name: w for name, w in wanted.items()
                    if all(changed.get(d) == new for d, new in w[1].items() if d != new)}
        if len(followed) == len(wanted):
            break
        wanted = followed
    index_coords = {changed.get(d, d): ((changed[d],), values.reshape(-1), attrs) if d in changed
                    else (dims, values, attrs) for d, (dims, values, attrs) in index_coords.items()}
    lookups = {changed.get(d, d): lookup for d, lookup in lookups.items()}
    result = {}
    for name, var in variables.items():
        if name in wanted:
            written, matched = wanted[name]
            ids = {new: var.ids[d] if d in var.outer else axes.dims[d][0][var.at] for d, new in matched.items()}
            var = replace(var, outer=tuple(written), ids={**var.ids, **ids})
        result[name] = var
    index_coords, lookups = _reversed(result, index_coords, lookups, objects)
    result, index_coords = _labels(result, index_coords, lookups, objects)
    return result, index_coords, lookups, changed


def _changes(wanted: Mapping[str, tuple[list[str], dict[str, str]]], variables: Mapping[str, Variable],
             has: Callable[[Variable, str], bool], taken: set[str]) -> dict[str, str]:
    """The coordinates to rename (a scalar one into a dimension of one value), ``{reader:
    written name}``: those every variable on them asks the same of, to a name nothing else has."""
    asked: dict[str, set[str]] = {}
    for _, matched in wanted.values():
        for dim, new in matched.items():
            if dim != new:
                asked.setdefault(dim, set()).add(new)
    changed: dict[str, str] = {}
    for dim, names in asked.items():
        new = next(iter(names))
        if len(names) == 1 and new not in taken and new not in changed.values() and all(
                name in wanted and wanted[name][1].get(dim) == new
                for name, var in variables.items() if has(var, dim)):
            changed[dim] = new
    return changed


def _record(var: Variable, objects: Objects, key: str) -> list[str] | None:
    """A record every field of ``var`` agrees on: distinct names; ``None`` where there is none."""
    value = _agreed(var, objects, key)
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        return None
    return value if len(set(value)) == len(value) else None


def _pairs(var: Variable, objects: Objects, key: str) -> list[tuple[str, str]]:
    """A record of pairs of names every field of ``var`` agrees on, the first ones distinct."""
    value = _agreed(var, objects, key)
    if not isinstance(value, list) or not all(
            isinstance(v, list) and len(v) == 2 and all(isinstance(n, str) for n in v) for v in value):
        return []
    pairs = [(first, second) for first, second in value]
    return pairs if len({first for first, _ in pairs}) == len(pairs) else []


def _agreed(var: Variable, objects: Objects, key: str) -> object:
    """The value of ``key`` every field of ``var`` has, ``None`` where they do not all agree."""
    if key not in objects.keys:
        return None
    agreed, value = common_values(objects.keys.column(key), var.rows)
    return value if agreed else None


def _match(written: list[str], var: Variable, scalars: list[str]
           ) -> tuple[list[str], dict[str, str]] | None:
    """The variable's stacked dimensions in the written order, and the reader's dimension (or
    scalar coordinate) of each, ``{reader: written name}``, where the record fits ``var``: the
    same dimensions, but a field's one level, which may come under another name (a MARS level).
    A dimension of one value under cfgrib's name stays the scalar cfgrib makes it; under
    another name it is the dimension it was."""
    order = [w for w in written if w not in scalars]
    matched = {w: w for w in order if w in var.outer}
    unnamed = [w for w in order if w not in matched]
    left = [d for d in var.outer if d not in matched]
    if not left and len(unnamed) == 1:
        left = [d for d in scalars if mars.is_level(d)]
    if not left and not unnamed:
        return order, matched
    if len(left) == len(unnamed) == 1 and mars.is_level(left[0]):
        return order, {**matched, left[0]: unnamed[0]}
    return None


def _labels(variables: dict[str, Variable], index_coords: IndexCoords, lookups: Lookups,
            objects: Objects) -> tuple[dict[str, Variable], IndexCoords]:
    """The variables with the text coordinates their records name (``Variable.labels``), and
    those coordinates: one value per position along their dimension, the one every field there
    has, and the same for every variable naming it; a coordinate that is not so is left out
    (its key then stays what the reader's rules make it)."""
    asked: dict[str, list[str]] = {}  # variable -> the labels its record names
    found: dict[str, tuple[str, np.ndarray] | None] = {}  # label -> (dim, values); None: no one coordinate
    for name, var in variables.items():
        for label, dim in _pairs(var, objects, LABELS_KEY):
            asked.setdefault(name, []).append(label)
            coord = _label(label, dim, var, index_coords, lookups, objects)
            if coord is None:
                found[label] = None
                continue
            seen = found.get(label, (dim, coord))
            same = seen is not None and seen[0] == dim and np.array_equal(seen[1], coord)
            found[label] = (dim, coord) if same else None
    kept = {label: at for label, at in found.items()
            if at is not None and label not in index_coords and label not in variables}

    def attrs(label: str) -> dict:
        rows = np.concatenate([variables[name].rows for name, labels in asked.items() if label in labels])
        return to_attrs(common(stored_attrs(label, objects, rows)))

    coords: IndexCoords = {label: ((dim,), values, attrs(label)) for label, (dim, values) in kept.items()}
    return ({name: replace(var, labels=tuple(label for label in asked.get(name, ()) if label in kept))
             for name, var in variables.items()}, {**index_coords, **coords})


def labelled(var: Variable, objects: Objects) -> set[str]:
    """The keys ``var``'s record names as text coordinates: never dimensions of their own."""
    return {label for label, _ in _pairs(var, objects, LABELS_KEY)}


def _label(label: str, dim: str, var: Variable, index_coords: IndexCoords, lookups: Lookups,
           objects: Objects) -> np.ndarray | None:
    """The values of text coordinate ``label`` along ``dim`` from the keys of ``var``'s fields."""
    if dim not in var.outer or label not in objects.keys:
        return None
    column = objects.keys.column(label)
    codes = column.codes[var.rows]
    positions = lookups[dim][var.ids[dim]]
    size = len(index_coords[dim][1])
    pairs = np.unique(np.stack([positions, codes]), axis=1)
    if (codes < 0).any() or pairs.shape[1] != size or len(np.unique(pairs[0])) != size:
        return None  # a field without it, a position without a field, or two values at one
    values = [column.values[code] for code in pairs[1].tolist()]  # (sorted by position)
    return np.array(values, dtype=object) if all(isinstance(v, str) for v in values) else None


def _reversed(variables: dict[str, Variable], index_coords: IndexCoords, lookups: Lookups,
              objects: Objects) -> tuple[IndexCoords, Lookups]:
    """The coordinates every variable on them records as reversed, in reverse order."""
    backwards: dict[str, bool] = {}
    for var in variables.values():
        listed = _record(var, objects, REVERSED_DIMS_KEY) or []
        for dim in var.outer:
            backwards[dim] = backwards.get(dim, True) and dim in listed
    index_coords, lookups = dict(index_coords), dict(lookups)
    for dim in (d for d, flip in backwards.items() if flip and d in index_coords):
        dims, values, attrs = index_coords[dim]
        index_coords[dim] = (dims, values[::-1], attrs)
        lookups[dim] = np.where(lookups[dim] >= 0, len(values) - 1 - lookups[dim], -1)
    return index_coords, lookups
