"""One Dataset from a selection of objects: the passes in order, and what they produce.

Fields land on their variable's grid by their place along each stacked dimension; a variable's
attributes are the metadata every field agrees on, its encoding the storage settings every
stored field shares.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tgm_xarray import cf, mars
from tgm_xarray._core import VALUES_DTYPE_KEY
from tgm_xarray.attrs import CF_PACKING_KEY, structural, to_attrs
from tgm_xarray.errors import TgmDuplicateError
from tgm_xarray.hypercube.axes import Axes, IndexCoords, axis_coords, with_valid_time
from tgm_xarray.hypercube.columns import KeyColumn, common_values, factorize
from tgm_xarray.hypercube.coords import Coordinate, Fingerprints, coordinates
from tgm_xarray.hypercube.dims import check_names, resolve_inner_dims
from tgm_xarray.hypercube.extra import generic_coords, with_extra_dims, with_stored_axis_attrs
from tgm_xarray.hypercube.objects import Objects, Selection
from tgm_xarray.hypercube.options import VALUES_DTYPES
from tgm_xarray.hypercube.variables import Variable
from tgm_xarray.hypercube.variables import variables as group_variables
from tgm_xarray.hypercube.written import as_written, labelled
from tgm_xarray.table import check_size


@dataclass(frozen=True)
class VariablePlan:
    """One Dataset variable: stored fields laid out on a grid of stacked (outer) dimensions.

    ``fields`` has the outer shape; each entry indexes ``refs`` (the ``(message, object)`` of a
    stored field), or is ``-1`` for a hole, read as ``fill_value``.
    """

    name: str
    dims: tuple[str, ...]
    shape: tuple[int, ...]
    dtype: np.dtype
    fields: np.ndarray
    refs: tuple[tuple[int, int], ...]
    attrs: dict
    encoding: dict

    @property
    def fill_value(self) -> float | int:
        """What a hole reads as: NaN, or 0 for dtypes without one."""
        return np.nan if self.dtype.kind in "fc" else 0


@dataclass(frozen=True)
class HypercubePlan:
    """The layout of one Dataset, as the reader plans it.

    ``variables`` holds data variables and object-backed coordinates (``coord_names``);
    ``index_coords`` the coordinates built from metadata keys, ``name -> (dims, values, attrs)``,
    scalar ones with dims ``()``.
    """

    variables: dict[str, VariablePlan]
    coord_names: frozenset[str]
    index_coords: IndexCoords
    attrs: dict

    def cf_attrs(self) -> tuple[dict[str, dict], dict]:
        """The attributes of every variable (``index_coords`` and ``variables``, by name) and of
        the Dataset, with CF's ``coordinates`` attributes: they tell xarray (and a zarr store's
        reader) which variables are coordinates. A scalar level coordinate is named by the
        variables the planner declared it for (those on that level), so that the writer keys
        each variable's own level; the Dataset's ``coordinates`` keeps every scalar level a
        coordinate, also when the variables naming it are dropped (``drop_variables``)."""
        dims = {name: d for name, (d, _, _) in self.index_coords.items()}
        attrs = {name: dict(a) for name, (_, _, a) in self.index_coords.items()}
        dims.update((name, p.dims) for name, p in self.variables.items())
        attrs.update((name, dict(p.attrs)) for name, p in self.variables.items())
        coords = {c: dims[c] for c in set(self.coord_names) | set(self.index_coords)}
        for name in set(attrs) - set(coords):
            declared = cf.named_coordinates(attrs[name]) or set()
            extra = [c for c in cf.attached_to(dims[name], coords)
                     if coords[c] or not mars.is_level(c) or c in declared]
            if extra:
                attrs[name] = cf.naming(attrs[name], extra)
        dataset = dict(self.attrs)
        levels = {c for c in self.index_coords if mars.is_level(c) and not dims[c]}
        if levels:
            dataset = cf.naming(dataset, levels)
        return attrs, dataset


def plan(objects: Objects, selection: Selection, fingerprints: Fingerprints) -> HypercubePlan:
    coords = coordinates(objects, selection.coords, fingerprints)
    axes = Axes(objects.keys, selection.data, time_dims=objects.options.time_dims, source=objects.source)
    variables = group_variables(objects, selection.data, axes)

    # Each pass returns what it found: the variables as far as they are known, the coordinates
    # built from metadata, and per stacked dim, each value number's position along it.
    variables, index_coords, lookups = axis_coords(variables, axes, objects)
    variables = {name: with_extra_dims(var, objects, axes.consumed(var.at) | labelled(var, objects), fingerprints)
                 for name, var in variables.items()}
    variables, generic, generic_lookups = generic_coords(variables, objects, index_coords)
    index_coords, lookups = {**index_coords, **generic}, {**lookups, **generic_lookups}
    variables, index_coords, lookups, renamed = as_written(variables, index_coords, lookups, axes, objects)
    index_coords = with_valid_time(with_stored_axis_attrs(
        index_coords, [renamed.get(d, d) for d in axes.dims], objects, selection.messages), objects.source)
    variables, coords = resolve_inner_dims(variables, coords, index_coords, objects)

    common_extra = {}
    extra = objects.table.extra
    for key in extra.in_every(selection.messages):
        agreed, value = common_values(KeyColumn(extra[key].codes, extra[key].values), selection.messages)
        if agreed:
            common_extra[key] = value
    dataset_attrs = _dataset_attrs(objects, selection, axes, variables, common_extra)
    data = {var.name: _variable_plan(var, objects, axes, index_coords, lookups, common_extra)
            for var in variables.values()}
    coord_plans = {name: _coordinate_plan(name, c, objects) for name, c in coords.items()}
    check_names(data, coord_plans, index_coords, objects.source)
    return HypercubePlan(
        variables={**data, **coord_plans},
        coord_names=frozenset(coord_plans),
        index_coords=index_coords,
        attrs=dataset_attrs,
    )


def _variable_plan(var: Variable, objects: Objects, axes: Axes, index_coords, lookups,
                   common_extra) -> VariablePlan:
    """Place every field of a variable on its grid of stacked dimensions."""
    t, options = objects.table, objects.options
    outer_shape = tuple(len(index_coords[d][1]) for d in var.outer)
    where = f"variable {var.name!r} (first field: {var.first.where})"
    check_size(outer_shape, 8, f"the grid of fields of {where}", objects.source)  # int64 cells
    n = len(var.rows)
    if var.outer:
        flat = np.ravel_multi_index([lookups[d][var.ids[d]] for d in var.outer], outer_shape)
    else:
        flat = np.zeros(n, dtype=np.int64)
    order = np.argsort(flat, kind="stable")  # by cell, in file order within a cell
    cells = flat[order]
    starts = np.flatnonzero(np.concatenate([[True], cells[1:] != cells[:-1]]))
    counts = np.diff(np.concatenate([starts, [n]]))
    if options.duplicates == "error" and (counts > 1).any():
        crowded = np.flatnonzero(counts > 1)
        k = int(crowded[np.argmin(order[starts[crowded]])])  # the first met in file order
        position = np.unravel_index(int(cells[starts[k]]), outer_shape)
        where = ", ".join(f"{d}={index_coords[d][1][i]}" for d, i in zip(var.outer, position))
        # at most three of the clashing fields, none from the next cell
        clashing = [objects.row(int(var.rows[i]))
                    for i in order[starts[k]:starts[k] + min(int(counts[k]), 3)]]
        raise TgmDuplicateError(
            f"{objects.source}: variable {var.name!r} has {int(counts[k])} fields at "
            f"{f'({where})' if where else 'the same place'}: "
            f"{' and '.join(o.where for o in clashing)} have the same metadata. "
            f"Keep one with duplicates='first' or 'last', or open one message with "
            f"message_index=... or filter_by_keys=....")
    kept = var.rows[order[starts] if options.duplicates != "last" else order[starts + counts - 1]]
    grid = np.full(outer_shape, -1, dtype=np.int64)
    grid.flat[cells[starts]] = np.arange(len(kept))
    refs = tuple(zip(t.msg[kept].tolist(), t.obj[kept].tolist()))
    dtype = _read_dtype(objects, kept, np.result_type(*{objects.dtypes[d] for d in np.unique(t.descriptor[kept]).tolist()}),
                        options.values_dtype)
    if (grid < 0).any() and dtype.kind in "biu":
        dtype = np.dtype("float64")  # holes read as NaN
    dims = tuple(var.outer) + tuple(d for d, _ in var.inner)
    shape = outer_shape + var.first.shape
    check_size(shape, dtype.itemsize, where, objects.source)
    return VariablePlan(
        name=var.name, dims=dims, shape=shape, dtype=dtype, fields=grid, refs=refs,
        attrs=_with_scalar_levels(_variable_attrs(var, objects, axes, common_extra), var, axes, index_coords),
        encoding={**_encoding(objects, kept, dims, shape, len(outer_shape)), **_cf_packing(objects, kept, dtype)},
    )


def _cf_packing(objects: Objects, rows: np.ndarray, dtype: np.dtype) -> dict:
    """The CF packing every field records (``attrs.CF_PACKING_KEY``), as xarray's NetCDF backends
    give it in ``encoding`` (``to_netcdf`` packs with it again); none where fields differ."""
    record = {}
    for entry in cf.PACKING:
        key = f"{CF_PACKING_KEY}.{entry}"
        column = objects.keys.column(key) if key in objects.keys else None
        if column is not None and (column.codes[rows] >= 0).any():
            agreed, value = common_values(column, rows)
            if not agreed:
                return {}
            record[entry] = value
    return cf.packing_encoding(record, dtype) if "dtype" in record and dtype.kind == "f" else {}


def _variable_attrs(var: Variable, objects: Objects, axes: Axes, common_extra) -> dict:
    """The metadata every field of the variable agrees on (its own keys, and the ``_extra_``
    entries that are not the Dataset's), minus what became coordinates and the key that named
    it. An attribute of its own stays even when a Dataset attribute has the same value."""
    dropped = axes.consumed(var.at) | set(var.generic) | set(var.labels) | {k for k in set(var.name_keys.tolist()) if k}
    rows = var.rows
    attrs = {}
    for key in objects.keys.in_every(rows):  # agreeing needs every field to have it
        if key in dropped or structural(key):
            continue
        if key in common_extra:  # a Dataset attribute, unless every field has it as its own
            own = objects.table.own.get(key)
            if own is None or (own.codes[rows] < 0).any():
                continue
        agreed, value = common_values(objects.keys.column(key), rows)
        if agreed:
            attrs[key] = value
    return to_attrs(attrs)


def _read_dtype(objects: Objects, rows: np.ndarray, stored: np.dtype, wanted: str | None) -> np.dtype:
    """The dtype a variable's floating-point fields are read as: ``wanted`` (``values_dtype``),
    else the narrower one the writer recorded every field was given in (packing stores
    float64), else as stored."""
    if stored.kind != "f":
        return stored
    if wanted is not None:
        return np.dtype(wanted)
    if VALUES_DTYPE_KEY not in objects.keys:
        return stored
    agreed, given = common_values(objects.keys.column(VALUES_DTYPE_KEY), rows)
    if not agreed or given not in VALUES_DTYPES or np.dtype(given).itemsize >= stored.itemsize:
        return stored
    return np.dtype(given)


def _with_scalar_levels(attrs: dict, var: Variable, axes: Axes, index_coords) -> dict:
    """``attrs`` naming, in CF's ``coordinates``, the scalar level coordinate of the variable's
    fields: a Dataset may hold several (``heightAboveGround`` of ``2t``, ``surface`` of ``lsm``),
    and only this tells whose each is (the writer keys each variable's own)."""
    levels = [dim for dim, (dims, _, _) in index_coords.items()
              if mars.is_level(dim) and dims == () and axes.has(dim, var.at[0])]
    return cf.naming(attrs, levels) if levels else attrs


def _dataset_attrs(objects: Objects, selection: Selection, axes: Axes, variables,
                   common_extra) -> dict:
    """``_extra_`` entries common to every message, minus those that became a coordinate or a
    variable name (read from ``_extra_``, not from an object's own key of the same name)."""
    own = objects.table.own

    def from_extra(key: str, rows: np.ndarray) -> bool:
        return len(rows) > 0 and (key not in own or (own[key].codes[rows] < 0).any())

    dropped = set()
    all_rows = np.arange(len(selection.data))
    for key in axes.consumed(all_rows) & set(common_extra):
        if from_extra(key, selection.data[axes.consuming(key)]):
            dropped.add(key)
    for var in variables.values():
        for key in set(var.name_keys.tolist()) & set(common_extra):
            if from_extra(key, var.rows[var.name_keys == key]):
                dropped.add(key)
    return to_attrs({k: v for k, v in common_extra.items() if k not in dropped})


def _coordinate_plan(name: str, coord: Coordinate, objects: Objects) -> VariablePlan:
    o = coord.object
    check_size(o.shape, o.dtype.itemsize, f"coordinate {name!r} ({o.where})",
                objects.source)
    attrs = to_attrs({k: v for k, v in o.own.items() if k != o.name_key})
    return VariablePlan(
        name=name, dims=coord.resolved_dims, shape=o.shape, dtype=o.dtype,
        fields=np.array(0, dtype=np.int64), refs=(o.ref,), attrs=attrs,
        encoding=_encoding(objects, np.array([o.index]), coord.resolved_dims, o.shape, 0),
    )


def _encoding(objects: Objects, rows: np.ndarray, dims, shape, n_outer: int) -> dict:
    """Where the data comes from and how it is stored (settings shared by all its fields).

    Codec settings are prefixed ``tensogram_`` so that ``to_netcdf`` never mistakes them for
    its own ``compression``/``shuffle`` encodings.
    """
    t = objects.table
    encoding: dict[str, Any] = {"source": objects.source}
    if len(rows) == 1:
        encoding["message_index"], encoding["object_index"] = int(t.msg[rows[0]]), int(t.obj[rows[0]])
    descriptor = t.descriptor[rows]
    descriptors = [t.descriptors[d] for d in descriptor[factorize(descriptor)[1]].tolist()]
    for key in ("dtype", "byte_order", "encoding", "filter", "compression"):
        values = {str(d.get(key)) for d in descriptors}
        if len(values) == 1 and descriptors[0].get(key) is not None:
            encoding[f"tensogram_{key}"] = values.pop()
    params = {}
    for key, column in objects.codec_params.items():  # the pipeline's params only (the core's split)
        agreed, value = common_values(column, rows)
        if agreed:
            params[key] = value
    if params:
        encoding["tensogram_params"] = params
    if "sp_bits_per_value" in params:
        encoding["bits_per_value"] = params["sp_bits_per_value"]
    # One chunk per stored field: 1 along stacked dimensions, whole along the object's own.
    encoding["preferred_chunks"] = {d: 1 if i < n_outer else n
                                    for i, (d, n) in enumerate(zip(dims, shape))}
    return encoding
