"""Heterogeneous files cut into groups that each form one Dataset (``xr.open_datatree``).

Data objects are grouped by level type, grid shape, dtype kind, axis hints and cfgrib
dimensions present, then split wherever a coordinate name has different stored bytes; the
group keys are computed once per distinct combination of codes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from tgm_xarray import mars
from tgm_xarray.hypercube.axes import Axes
from tgm_xarray.hypercube.columns import factorize
from tgm_xarray.hypercube.coords import Fingerprints
from tgm_xarray.hypercube.objects import Objects, Selection, dtype_family

#: The group of coordinates that join no group of data.
COORDINATES_GROUP = "coordinates"


def groups(objects: Objects, selection: Selection, fingerprints: Fingerprints
           ) -> dict[str, Selection]:
    """Partition the data objects into consistent groups (see :func:`split_groups`)."""
    t = objects.table
    data, coords = selection.data, selection.coords
    parts = []
    key_of, keys = _group_keys(objects, data)
    names = _group_names(keys)
    prints = _coordinate_prints(objects, data, coords, fingerprints)
    order = np.argsort(key_of, kind="stable")
    for at in np.split(order, np.flatnonzero(np.diff(key_of[order])) + 1):
        if not len(at):
            continue
        rows = data[at]
        # Different coordinate payloads under one name cannot share a Dataset: split on them.
        seen = prints[t.msg[rows]]
        varying = [j for j in range(seen.shape[1])
                   if len(np.unique(seen[:, j][seen[:, j] >= 0])) > 1]
        part, _ = factorize(*(seen[:, j] for j in varying)) if varying else \
            (np.zeros(len(rows), dtype=np.int64), None)
        name = names[key_of[at[0]]]
        part_order = np.argsort(part, kind="stable")
        for p in np.split(part_order, np.flatnonzero(np.diff(part[part_order])) + 1):
            parts.append((name, rows[p]))
    named: dict[str, np.ndarray] = {}
    last: dict[str, int] = {}  # per base name, its last suffix: the search resumes there
    for base, rows in sorted(parts, key=lambda g: int(g[1][0])):
        n = last.get(base, 1)
        name = base if n == 1 else f"{base}_{n}"
        while name in named:
            n += 1
            name = f"{base}_{n}"
        last[base] = n
        named[name] = rows

    result: dict[str, Selection] = {}
    placed = np.zeros(len(t), dtype=bool)  # coordinates that joined some group
    coord_msgs = t.msg[coords]
    for name, rows in named.items():
        members = np.unique(t.msg[rows])
        mine = coords[np.isin(coord_msgs, members)]
        borrowed = _borrowed(objects, coords[~np.isin(coord_msgs, members)],
                             set(objects.coordinate[mine].tolist()),
                             set(t.shapes[t.shape[rows[0]]]), fingerprints)
        group_coords = np.union1d(mine, borrowed)
        placed[group_coords] = True
        result[name] = Selection(rows, group_coords, np.union1d(members, t.msg[borrowed]))
    has_data = np.zeros(t.n_messages, dtype=bool)
    has_data[t.msg[data]] = True
    homeless = coords[~has_data[coord_msgs] & ~placed[coords]]
    if len(homeless):
        result[COORDINATES_GROUP] = Selection(data[:0], homeless, np.unique(t.msg[homeless]))
    return result


def _group_keys(objects: Objects, rows: np.ndarray) -> tuple[np.ndarray, list[tuple]]:
    """Each data row's group key number (in order of first appearance), and the keys."""
    t = objects.table
    if not len(rows):
        return np.zeros(0, dtype=np.int64), []
    axes = Axes(objects.keys, rows, decode=False, time_dims=objects.options.time_dims)
    present = [k for k in mars.lookup_keys("levtype") if k in objects.keys]
    levtype_of, levtypes, _ = objects.keys.dicts(present, rows)
    combination, first = factorize(levtype_of, t.shape[rows], objects.family[rows],
                                   objects.hint[rows], objects.size_hint[rows], axes.structure)
    index: dict[tuple, int] = {}
    of_combination = []
    for at in first.tolist():
        levtype = mars.lookup(levtypes[levtype_of[at]], "levtype")
        r = rows[at]
        key = (str(levtype[1]) if levtype else None, t.shapes[t.shape[r]],
               dtype_family(objects.dtypes[t.descriptor[r]]), objects.hints[objects.hint[r]],
               objects.size_hints[objects.size_hint[r]],
               tuple(axes.structures[axes.structure[at]][0]))
        of_combination.append(index.setdefault(key, len(index)))
    return np.array(of_combination, dtype=np.int64)[combination], list(index)


def _coordinate_prints(objects: Objects, data, coords, fingerprints) -> np.ndarray:
    """``[message, coordinate name]``: the fingerprint number of that message's coordinate of
    that name (``-1``: none), for the messages holding data."""
    t = objects.table
    prints = np.full((t.n_messages, len(objects.coordinate_names)), -1, dtype=np.int64)
    with_data = np.zeros(t.n_messages, dtype=bool)
    with_data[t.msg[data]] = True
    rows = coords[with_data[t.msg[coords]]]
    prints[t.msg[rows], objects.coordinate[rows]] = fingerprints.ids(rows)
    return prints


def _borrowed(objects: Objects, candidates: np.ndarray, own: set, sizes: set,
              fingerprints) -> np.ndarray:
    """Coordinates from outside a group that fit it (e.g. from a grid message): a name the group
    lacks, sizes found in its grid, and the same payload wherever the name appears."""
    t = objects.table
    fits = {s: set(t.shapes[s]) <= sizes for s in np.unique(t.shape[candidates]).tolist()}
    names = objects.coordinate[candidates]
    keep = np.array([fits[s] for s in t.shape[candidates].tolist()], dtype=bool) & \
        ~np.isin(names, list(own))
    candidates, names = candidates[keep], names[keep]
    borrowed = []
    for name in np.unique(names).tolist():
        these = candidates[names == name]
        layout = factorize(t.shape[these], objects.dtype_id[these], objects.hint[these],
                           fingerprints.ids(these))[1]
        if len(layout) == 1:
            borrowed.append(these)
    return np.concatenate(borrowed) if borrowed else candidates[:0]


def _group_names(keys: list[tuple[Any, ...]]) -> list[str]:
    """The name of each group key: its level as cfgrib names it (``isobaricInhPa``,
    ``heightAboveGround``, ``surface``: the level dimension), else its level type (one that names
    no dimension of its own, ``dp``), else its grid (``721x1440``, ``scalar``); a level of groups
    on several grids has the grid after it (``isobaricInhPa_721x1440``)."""
    levels = [_level(key) for key in keys]
    grids = ["x".join(str(n) for n in key[1]) if key[1] else "scalar" for key in keys]
    grids_of: dict[str | None, set[str]] = {}
    for level, grid in zip(levels, grids):
        grids_of.setdefault(level, set()).add(grid)
    names = [grid if level is None else f"{level}_{grid}" if len(grids_of[level]) > 1 else level
             for level, grid in zip(levels, grids)]
    return [name.replace("/", "_") for name in names]  # "/" separates a DataTree's groups


def _level(key: tuple[Any, ...]) -> str | None:
    levtype, dims = key[0], key[5]
    level = next((d for d in dims if mars.is_level(d) and d != mars.DEFAULT_LEVEL_DIM), None)
    return level or levtype
