"""Data objects into variables: naming, and the structure every field of a variable shares.

A data object is named by ``variable_key``, else the first of
:data:`~tgm_xarray.hypercube.objects.NAME_KEYS` with a scalar value, else ``object_<i>``.
Fields of one variable must agree in shape, dtype kind, axis hints, level type and cfgrib
dimensions; anything else is a :class:`~tgm_xarray.errors.TgmConflictError` with advice.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tgm_xarray.attrs import freeze, is_scalar
from tgm_xarray.errors import TgmConflictError
from tgm_xarray.hypercube.axes import Axes
from tgm_xarray.hypercube.columns import factorize
from tgm_xarray.hypercube.objects import NAME_KEYS, Objects, Row


@dataclass(frozen=True)
class Variable:
    """A data variable as the passes see it: each pass returns a new one with what it found
    (``dataclasses.replace``), never changes one another pass holds."""

    name: str
    rows: np.ndarray  # table rows of its fields, in file order
    at: np.ndarray  # their positions among the plan's data rows
    name_keys: np.ndarray  # per field, the key that named it (None: none), object array
    first: Row
    outer: tuple[str, ...] = ()  # stacked dims
    generic: tuple[str, ...] = ()  # stacked dims named by metadata keys
    inner: tuple[tuple[str, bool], ...] = ()  # (own dim, is generic fallback)
    by_message: bool = False  # stacked along `message` (see `extra.stack_indistinct_fields`)
    labels: tuple[str, ...] = ()  # keys that are coordinates along its stacked dims (`written`)
    ids: Mapping[str, np.ndarray] = field(default_factory=dict)  # outer dim -> value number per field


def variables(objects: Objects, rows: np.ndarray, axes: Axes) -> dict[str, Variable]:
    """Group data objects into variables (in file order) and check each is consistent."""
    if not len(rows):
        return {}
    key_of, name_of, names = _names(objects, rows)
    number, _ = factorize(name_of)  # variables in order of first appearance
    order = np.argsort(number, kind="stable")
    bounds = np.flatnonzero(np.diff(number[order])) + 1
    result = {}
    for at in np.split(order, bounds):
        var_rows = rows[at]
        var = Variable(names[name_of[at[0]]], var_rows, at, key_of[at],
                       objects.row(int(var_rows[0])))
        _check_structure(var, objects, axes)
        result[var.name] = var
    return result


def _names(objects: Objects, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """Each row's naming key (object array) and name number, and the names."""
    chain = ((objects.options.variable_key,) if objects.options.variable_key else ()) + NAME_KEYS
    chain = tuple(dict.fromkeys(k for k in chain if k in objects.keys))
    inverse, maps, firsts = objects.keys.dicts(chain, rows,
                                               extra_columns=[objects.table.obj[rows]])
    key_names: dict[Any, int] = {}
    names: dict[str, int] = {}
    key_of, name_of = [], []
    for m, row in zip(maps, firsts.tolist()):
        key = naming_key(m, objects.options.variable_key)
        name = variable_name(m, int(objects.table.obj[row]), objects.options.variable_key)
        key_of.append(key_names.setdefault(key, len(key_names)))
        name_of.append(names.setdefault(name, len(names)))
    keys = np.empty(len(key_names), dtype=object)
    keys[:] = list(key_names)
    return (keys[np.array(key_of, dtype=np.int64)][inverse],
            np.array(name_of, dtype=np.int64)[inverse], list(names))


def naming_key(keys: dict, variable_key: str | None) -> str | None:
    """The key naming a data object's variable: ``variable_key``, else the first of
    :data:`NAME_KEYS` with a scalar value; ``None`` when it has none."""
    for key in ((variable_key,) if variable_key else ()) + NAME_KEYS:
        if is_scalar(keys.get(key)):
            return key
    return None


def variable_name(keys: dict, obj: int, variable_key: str | None) -> str:
    """The variable of a data object with these keys, object ``obj`` of its message."""
    key = naming_key(keys, variable_key)
    return str(keys[key]) if key else f"object_{obj}"


def _check_structure(var: Variable, objects: Objects, axes: Axes) -> None:
    """Fields of one variable must share shape, dtype kind, axis hints and cfgrib dims."""
    t = objects.table
    rows, at = var.rows, var.at
    structure = axes.structure[at]
    compared = [  # (what differs, each field's value number, how a field shows it)
        ("shape", t.shape[rows], lambda r, a: f"shape {r.shape}"),
        ("dtype kind", objects.family[rows], lambda r, a: f"dtype {r.dtype}"),
        ("dimension names", objects.hint[rows],
         lambda r, a: f"dim_names {list(r.hint) if r.hint else None}"),
        ("dimension names by size", objects.size_hint[rows],
         lambda r, a: f"names by size {list(r.size_names) if r.size_names else None}"),
        ("level type", _levtypes(axes)[structure],
         lambda r, a: f"levtype {axes.structures[axes.structure[a]][1]!r}"),
        ("dimensions", _dimension_sets(axes)[structure],
         lambda r, a: f"dimensions {axes.structures[axes.structure[a]][0]}"),
    ]
    differs = np.zeros(len(rows), dtype=bool)
    for _, codes, _ in compared:
        differs |= codes != codes[0]
    if not differs.any():
        return
    i = int(np.argmax(differs))
    label, _, show = next(c for c in compared if c[1][i] != c[1][0])
    first, other = var.first, objects.row(int(rows[i]))
    raise TgmConflictError(
        f"{objects.source}: variable {var.name!r} cannot be stacked: "
        f"{first.where} has {show(first, at[0])} but {other.where} has "
        f"{show(other, at[i])} (different {label}). "
        + advice(objects, int(rows[0]), int(rows[i])))


def _levtypes(axes: Axes) -> np.ndarray:
    index: dict[Any, int] = {}
    return np.array([index.setdefault(t, len(index)) for _, t in axes.structures] or [0],
                    dtype=np.int64)


def _dimension_sets(axes: Axes) -> np.ndarray:
    index: dict[Any, int] = {}
    return np.array([index.setdefault(tuple(d), len(index)) for d, _ in axes.structures] or [0],
                    dtype=np.int64)


def advice(objects: Objects, a: int, b: int) -> str:
    """How to open conflicting objects: a filter telling them apart, or one group each."""
    hint = ""
    a_keys, b_keys = objects.view(a), objects.view(b)  # what filter_by_keys sees
    differing = sorted((k for k, v in a_keys.items()
                        if is_scalar(v) and freeze(v) != freeze(b_keys.get(k))),
                       key=lambda k: (not k.startswith("mars."), k))
    if differing:
        hint = f"filter_by_keys={{{differing[0]!r}: {a_keys[differing[0]]!r}}} or "
    return (f"Open a consistent subset with {hint}filter_by_keys=..., or every group with "
            f"xr.open_datatree(path, engine='tgm').")
