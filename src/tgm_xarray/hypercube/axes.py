"""cfgrib dimensions of the data objects, and coordinates built from metadata values.

:func:`tgm_xarray.mars.find_axes` reads each dimension from its own few keys (``number``;
``date``/``time``; ``step``; ``levtype``/``levelist``/``level``, and for a height above the ground
``grib.typeOfLevel``/``grib.level`` or ``param``: ``mars.AXIS_KEYS``), so it runs once per
distinct combination of those keys, one dimension at a time, and :func:`tgm_xarray.mars.decode_axes`
decides over those combinations what it would decide over every field.
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Iterable, Mapping
from dataclasses import replace
from typing import TYPE_CHECKING, Any

import numpy as np

from tgm_xarray import cf, mars
from tgm_xarray.attrs import freeze
from tgm_xarray.errors import TgmConflictError
from tgm_xarray.hypercube.columns import Keys, factorize
from tgm_xarray.hypercube.objects import Objects

if TYPE_CHECKING:  # variables.py imports this module
    from tgm_xarray.hypercube.variables import Variable

#: Coordinates built from metadata keys: ``name -> (dims, values, attrs)``, scalar ones with dims ``()``.
IndexCoords = dict[str, tuple[tuple[str, ...], np.ndarray, dict]]
#: Per stacked dimension, each value number's position along it.
Lookups = dict[str, np.ndarray]


#: Per row, its combination of one group's keys, and per combination its ``(dim, Axis)`` or None.
Group = tuple[np.ndarray, list[tuple[str, mars.Axis] | None]]


class Axes:
    """The cfgrib dimensions of ``rows`` (data objects), decoded unless ``decode=False``, with
    cfgrib's ``time_dims`` as the time dimensions, in that order (``mars.TIME_DIMS``).

    Arrays are over the positions of ``rows``.
    """

    def __init__(self, keys: Keys, rows: np.ndarray, decode: bool = True,
                 time_dims: Iterable[str] = mars.DEFAULT_TIME_DIMS, source: str = ""):
        self.n = len(rows)
        time_dims = tuple(time_dims)
        number, time, step, level = (_group(keys, rows, group, decode, source) for group in mars.AXIS_KEYS)
        times = {"time": time, "step": step}
        if "valid_time" in time_dims:
            times["valid_time"] = _valid_times(time, step, source)
        # A time or step not in time_dims is no dimension: its keys are metadata like any other.
        self._groups: list[Group] = [number, *(times[d] for d in time_dims), level]
        #: the dimensions in the order cfgrib stacks them, the levels after them
        self.order = ("number", *time_dims)
        self.dims = self._dims()
        #: each row's structure number: ``structures[i] = (sorted dimensions, level type)``
        self.structure, self.structures = self._structure()

    def _dims(self) -> dict[str, tuple[np.ndarray, list]]:
        """``dim -> (value number per row (-1: absent), distinct values)``."""
        result = {}
        for inverse, axes in self._groups:
            per_dim: dict[str, tuple[np.ndarray, list, dict]] = {}
            for combination, found in enumerate(axes):
                if found is None:
                    continue
                dim, axis = found
                if dim not in per_dim:  # not setdefault: its O(n) default would cost O(n) per row
                    per_dim[dim] = (np.full(len(axes), -1, dtype=np.int64), [], {})
                of_combination, values, index = per_dim[dim]
                key = (type(axis.value), freeze(axis.value))
                if key not in index:
                    index[key] = len(values)
                    values.append(axis.value)
                of_combination[combination] = index[key]
            for dim, (of_combination, values, _) in per_dim.items():
                result[dim] = (of_combination[inverse], values)
        return result

    def _structure(self) -> tuple[np.ndarray, list[tuple[list[str], str | None]]]:
        """Each row's ``(sorted dimensions, level type)`` number, and those pairs."""
        if not self.n:
            return np.zeros(0, dtype=np.int64), []
        # per group, what a combination contributes: (dim, level type) or None, numbered
        kinds: list[list] = []
        codes = []
        for inverse, axes in self._groups:
            index: dict[Any, int] = {}
            of_combination = [index.setdefault(
                (found[0], found[1].levtype) if found else None, len(index)) for found in axes]
            kinds.append(list(index))
            codes.append(np.array(of_combination, dtype=np.int64)[inverse])
        combination, first = factorize(*codes)
        index = {}
        pairs: list[tuple[list[str], str | None]] = []
        of_combination = []
        for row in first.tolist():
            found = [kind[code[row]] for kind, code in zip(kinds, codes)]
            found = [f for f in found if f is not None]
            dims = sorted(d for d, _ in found)
            levtype = next((t for d, t in found if mars.is_level(d)), None)
            if (tuple(dims), levtype) not in index:
                index[(tuple(dims), levtype)] = len(pairs)
                pairs.append((dims, levtype))
            of_combination.append(index[(tuple(dims), levtype)])
        return np.array(of_combination, dtype=np.int64)[combination], pairs

    def consumed(self, positions: np.ndarray) -> set[str]:
        """The metadata keys the dimensions of these rows were read from."""
        keys: set[str] = set()
        for inverse, axes in self._groups:
            for combination in np.unique(inverse[positions]).tolist():
                if axes[combination] is not None:
                    keys.update(axes[combination][1].keys)
        return keys

    def consuming(self, key: str) -> np.ndarray:
        """Whether each row's dimensions were read from ``key`` (in part)."""
        mask = np.zeros(self.n, dtype=bool)
        for inverse, axes in self._groups:
            hits = [i for i, found in enumerate(axes) if found is not None and key in found[1].keys]
            if hits:
                mask |= np.isin(inverse, hits)
        return mask

    def has(self, dim: str, position: int) -> bool:
        return dim in self.dims and self.dims[dim][0][position] >= 0


def _group(keys: Keys, rows: np.ndarray, group: tuple[str, ...], decode: bool, source: str) -> Group:
    """The dimension the keys of ``group`` give each row (``mars.AXIS_KEYS``), found once per
    distinct combination of them."""
    present = [k for k in group if k in keys]
    inverse, maps, _ = keys.dicts(present, rows)
    found = [mars.find_axes(m) for m in maps]
    if decode:
        found = mars.decode_axes(found, source)
    return inverse, [next(iter(f.items()), None) for f in found]


def _valid_times(time: Group, step: Group, source: str) -> Group:
    """Each row's ``valid_time`` (``mars.valid_time_axis``), once per pair of combinations; none,
    with a warning naming ``source``, where a sum is past datetime64[ns] (as ``decode_axes``
    drops a dimension that is)."""
    (time_of, times), (step_of, steps) = time, step
    inverse, first = factorize(time_of, step_of)
    found: list[tuple[str, mars.Axis] | None] = []
    try:
        for row in first.tolist():
            t, s = times[time_of[row]], steps[step_of[row]]
            axis = mars.valid_time_axis(t[1] if t else None, s[1] if s else None)
            found.append(("valid_time", axis) if axis else None)
    except mars.BeyondNanoseconds as err:
        warnings.warn(f"{source}: {err}: the 'valid_time' dimension is read as its metadata keys",
                      UserWarning, stacklevel=3)
        found = [None] * len(first)
    return inverse, found


def axis_coords(variables: Mapping[str, Variable], axes: Axes, objects: Objects
                ) -> tuple[dict[str, Variable], IndexCoords, Lookups]:
    """cfgrib dimensions: one coordinate per dimension over all variables (the union of their
    values); a single value overall makes a scalar coordinate (unless ``squeeze`` is
    false), more make a dimension of every variable that has it (with holes where a variable
    lacks a value). Returns the variables stacked along them, the coordinates and their
    lookups."""
    source = objects.source
    levtypes: dict[str, dict[Any, str]] = {}
    for var in variables.values():
        for dim in axes.dims:
            if mars.is_level(dim) and axes.has(dim, var.at[0]):
                levtype = axes.structures[axes.structure[var.at[0]]][1]
                levtypes.setdefault(dim, {}).setdefault(levtype, var.name)
    for dim, kinds in levtypes.items():
        if len(kinds) > 1:
            (a, var_a), (b, var_b) = list(kinds.items())[:2]
            raise TgmConflictError(
                f"{source}: variables {var_a!r} (levtype {a!r}) and {var_b!r} (levtype "
                f"{b!r}) would share the level dimension {dim!r}. Open one level type with "
                f"filter_by_keys={{'levtype': {a!r}}}, or every group with "
                f"xr.open_datatree(path, engine='tgm').")
    index_coords: IndexCoords = {}
    lookups: Lookups = {}
    stacked: dict[str, dict[str, np.ndarray]] = {name: {} for name in variables}  # dim -> ids
    for dim in mars.stacking_order(axes.dims, first=axes.order):
        ids, values = axes.dims[dim]
        coord, lookups[dim] = coordinate_values(dim, values, np.unique(ids[ids >= 0]))
        attrs = dict(cf.COORD_ATTRS.get(dim, {}))
        if len(coord) == 1 and objects.options.squeeze:
            index_coords[dim] = ((), coord.reshape(()), attrs)
        else:
            index_coords[dim] = ((dim,), coord, attrs)
            for var in variables.values():
                if axes.has(dim, var.at[0]):
                    stacked[var.name][dim] = ids[var.at]
    variables = {name: replace(var, outer=var.outer + tuple(stacked[name]), ids={**var.ids, **stacked[name]})
                 for name, var in variables.items()}
    return variables, index_coords, lookups


def coordinate_values(dim: str, values: list, used: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted unique coordinate values of ``values[used]``, and the position of each value
    number among them (``-1`` for values not used)."""
    raw = [values[i] for i in used.tolist()]
    convert = _converter(raw)
    array = np.array([convert(v) for v in raw])
    if array.dtype.kind == "M":
        array = array.astype("datetime64[ns]")
    elif array.dtype.kind == "m":
        array = array.astype("timedelta64[ns]")
    unique, positions = mars.sort_values(dim, array)
    lookup = np.full(len(values), -1, dtype=np.int64)
    lookup[used] = positions
    return unique, lookup


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


def with_valid_time(index_coords: IndexCoords, source: str = "") -> IndexCoords:
    """``index_coords`` and cfgrib's ``valid_time = time + step``, over the dims of whichever of
    them are dims (unless a metadata key of that name already made a ``valid_time`` dimension);
    without it, and a warning naming ``source``, where a sum is past datetime64[ns]."""
    if "time" not in index_coords or "step" not in index_coords or "valid_time" in index_coords:
        return index_coords
    time_dims, time, _ = index_coords["time"]
    step_dims, step, _ = index_coords["step"]
    if time.dtype.kind != "M" or step.dtype.kind != "m":
        return index_coords
    try:
        dims, values = mars.valid_time(time, time_dims, step, step_dims)
    except mars.BeyondNanoseconds as err:
        warnings.warn(f"{source}: {err}: the Dataset has no valid_time", UserWarning, stacklevel=2)
        return index_coords
    return {**index_coords, "valid_time": (dims, values, dict(cf.COORD_ATTRS["valid_time"]))}
