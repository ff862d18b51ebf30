"""The objects' own dimensions: names for every data variable's axes, one size per name.

Per axis: the user's ``dim_names``, else the object's or the message's list hint, else the first
1-D coordinate of that size, else the message's ``{size: name}`` hint, else ``dim_<axis>``. As
upstream tensogram-xarray: a name that data variables give axes of different sizes (or of
another size than the coordinate of that name) names none of them: each such axis becomes
``obj_<i>_dim_<axis>`` (``<variable>_dim_<axis>`` if that is taken at another size), with a
logged warning unless the name was a generic ``dim_<axis>``; axes of a coordinate's size keep
its name. Names of coordinates at two sizes stay a conflict. This works per variable and per
coordinate, never per object.
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Mapping
from dataclasses import replace

from tgm_xarray.errors import TgmConflictError
from tgm_xarray.hypercube.axes import IndexCoords
from tgm_xarray.hypercube.coords import Coordinate
from tgm_xarray.hypercube.objects import Objects
from tgm_xarray.hypercube.variables import Variable

log = logging.getLogger(__name__)


def resolve_inner_dims(variables: Mapping[str, Variable], coords: Mapping[str, Coordinate],
                       index_coords: IndexCoords, objects: Objects
                       ) -> tuple[dict[str, Variable], dict[str, Coordinate]]:
    """Name every data variable's own axes (``var.inner``) and the axes of coordinates
    without hints (``coord.dims``), so that each dimension has one size. Returns the variables
    and coordinates with them named."""
    dimension_coords = [(name, c.object.shape[0]) for name, c in coords.items()
                        if c.dims == (name,)]
    inner = {name: _inner_dims(var, dimension_coords, objects) for name, var in variables.items()}

    sizes: dict[str, tuple[int, str]] = {}  # dim -> (size, who claimed it)

    def claim(dim: str, size: int, who: str) -> None:
        if dim in sizes and sizes[dim][0] != size:
            raise TgmConflictError(
                f"{objects.source}: dimension {dim!r} has size {sizes[dim][0]} in "
                f"{sizes[dim][1]} but {size} in {who}. Rename the axes with dim_names=..., "
                f"open a subset with filter_by_keys=..., or every group with "
                f"xr.open_datatree(path, engine='tgm').")
        sizes.setdefault(dim, (size, who))

    for name, (dims, values, _) in index_coords.items():
        for dim, size in zip(dims, values.shape):
            claim(dim, size, f"coordinate {name!r}")
    for name, c in coords.items():
        for dim, size in zip(c.dims or (), c.object.shape):
            claim(dim, size, f"coordinate {name!r}")
    # upstream's fallback: a name given at several sizes names none of those axes, but for the
    # axes of its coordinate's size
    coordinate_sizes = {dim: size for dim, (size, _) in sizes.items()}
    given = {dim: {size} for dim, size in coordinate_sizes.items()}
    for var in variables.values():
        for (dim, _), size in zip(inner[var.name], var.first.shape):
            given.setdefault(dim, set()).add(size)
    renamed: dict[str, list[str]] = {}  # a declared name -> the variables whose axes lost it
    for var in variables.values():
        for axis, ((dim, generic), size) in enumerate(zip(inner[var.name], var.first.shape)):
            if len(given[dim]) > 1 and coordinate_sizes.get(dim) != size:
                if not generic:
                    renamed.setdefault(dim, []).append(var.name)
                fallback = f"obj_{var.first.obj}_dim_{axis}"
                dim = fallback if sizes.get(fallback, (size,))[0] == size else f"{var.name}_dim_{axis}"
                inner[var.name][axis] = (dim, generic)
            claim(dim, size, f"variable {var.name!r} ({var.first.where})")
    for dim, names in renamed.items():
        log.warning("%s: dimension %r is given the sizes %s; its axes in the variables %s are "
                    "named obj_<i>_dim_<axis> instead (upstream tensogram-xarray's fallback). "
                    "Name the axes with dim_names=... to choose.",
                    objects.source, dim, sorted(given[dim]), names)

    # Coordinates without hints over several axes take the dims of a variable of their shape.
    resolved = dict(coords)
    for name, c in coords.items():
        if c.dims is None:
            shape = c.object.shape
            match = next((var for var in variables.values() if var.first.shape == shape), None)
            dims = tuple(d for d, _ in inner[match.name]) if match else \
                tuple(f"{name}_dim_{axis}" for axis in range(len(shape)))
            for dim, size in zip(dims, shape):
                claim(dim, size, f"coordinate {name!r}")
            resolved[name] = replace(c, dims=dims)

    for var in variables.values():
        own = [d for d, _ in inner[var.name]]
        if len(set(own) | set(var.outer)) != len(own) + len(var.outer):
            raise TgmConflictError(
                f"{objects.source}: variable {var.name!r} would have the dimension "
                f"{sorted(set(own) & set(var.outer)) or own} twice ({var.first.where} names its "
                f"axes {own}, stacked along {list(var.outer)}). Rename the axes with dim_names=....")
    return {name: replace(var, inner=tuple(inner[name])) for name, var in variables.items()}, resolved


def _inner_dims(var: Variable, dimension_coords, objects: Objects) -> list[tuple[str, bool]]:
    first = var.first
    ndim = len(first.shape)
    user = _user_dims(var, objects)
    hint = first.hint or (None,) * ndim
    # names by axis size alone rank below a coordinate of that size, as upstream
    by_size = first.size_names or (None,) * ndim
    declared = [user[axis] or hint[axis] for axis in range(ndim)]
    used = {name for name in declared if name}
    dims: list[tuple[str, bool]] = []
    for axis, size in enumerate(first.shape):
        name = declared[axis]
        if not name:
            match = next((c for c, n in dimension_coords if n == size and c not in used), None)
            if match:
                used.add(match)
            name = match or by_size[axis]
        dims.append((name, False) if name else (f"dim_{axis}", True))
    return dims


def _user_dims(var: Variable, objects: Objects) -> tuple[str | None, ...]:
    """The user's ``dim_names`` for this variable, ``None`` for axes it leaves unnamed."""
    shape = var.first.shape
    given = objects.options.dim_names
    if isinstance(given, Mapping):
        if var.name not in given:
            by_size = {k: v for k, v in given.items() if isinstance(k, int)}
            return tuple(by_size.get(n) for n in shape)
        given = tuple(given[var.name])
    if given is None:
        return (None,) * len(shape)
    names = tuple(given)
    if len(names) != len(shape) or len(set(names)) != len(names):
        raise ValueError(
            f"{objects.source}: dim_names has {len(names)} entries {list(names)}, which does not fit "
            f"variable {var.name!r} with {len(shape)} dimensions of shape {shape} ({var.first.where}); "
            f"give {len(shape)} distinct names, or a mapping {{variable name: names}}.")
    return names


def check_names(plans, coords, index_coords, source: str) -> None:
    """One name, one thing: data variables, object and metadata coordinates never share one."""
    names = Counter(list(plans) + list(coords) + list(index_coords))
    clashes = sorted(n for n, count in names.items() if count > 1)
    if clashes:
        raise TgmConflictError(
            f"{source}: the name {clashes[0]!r} is used by more than one of the data "
            f"variables, object coordinates and metadata coordinates. Rename variables with "
            f"variable_key=..., or open a subset with filter_by_keys=....")
