"""The objects' own dimensions: names for every data variable's axes, one size per name.

Per axis: the user's ``dim_names``, else the metadata hint, else the first 1-D coordinate of
that size, else ``dim_<axis>``. A data variable's axis whose name (from the user or a hint) is
already taken at another size becomes ``obj_<i>_dim_<axis>`` with a warning, as upstream
tensogram-xarray does (names of coordinates at two sizes stay a conflict); a ``dim_<axis>``
already taken at another size becomes ``obj_<i>_dim_<axis>`` silently (or
``<variable>_dim_<axis>`` if that is taken too). This works per variable and per coordinate,
never per object.
"""

from __future__ import annotations

import warnings
from collections import Counter
from collections.abc import Mapping

from tgm_xarray.errors import TgmConflictError
from tgm_xarray.hypercube.objects import Options
from tgm_xarray.hypercube.variables import Variable


def resolve_inner_dims(variables, coords, index_coords, options: Options) -> None:
    """Name every data variable's own axes (``var.inner``) and the axes of coordinates
    without hints (``coord.dims``), so that each dimension has one size."""
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
                f"xr.open_datatree(path, engine='tgm').")
        sizes.setdefault(dim, (size, who))

    for name, (dims, values, _) in index_coords.items():
        for dim, size in zip(dims, values.shape):
            claim(dim, size, f"coordinate {name!r}")
    for name, c in coords.items():
        for dim, size in zip(c.dims or (), c.object.shape):
            claim(dim, size, f"coordinate {name!r}")
    for var in variables.values():
        for axis, ((dim, generic), size) in enumerate(zip(var.inner, var.first.shape)):
            if generic:
                continue
            if dim in sizes and sizes[dim][0] != size:
                # upstream's fallback: the Dataset opens, the axis under a name of its own
                var.inner[axis] = (f"obj_{var.first.obj}_dim_{axis}", True)
                warnings.warn(
                    f"{options.source}: dimension {dim!r} has size {sizes[dim][0]} in "
                    f"{sizes[dim][1]} but {size} in variable {var.name!r} ({var.first.where}): that "
                    f"axis is named {var.inner[axis][0]!r} instead (a fallback, as upstream "
                    f"tensogram-xarray's). Name the axes with dim_names=... to choose.",
                    UserWarning, stacklevel=2)
                continue
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


def _inner_dims(var: Variable, dimension_coords, options: Options) -> list[tuple[str, bool]]:
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


def _user_dims(var: Variable, options: Options) -> tuple[str | None, ...]:
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


def check_names(plans, coords, index_coords, options: Options) -> None:
    """One name, one thing: data variables, object and metadata coordinates never share one."""
    names = Counter(list(plans) + list(coords) + list(index_coords))
    clashes = sorted(n for n, count in names.items() if count > 1)
    if clashes:
        raise TgmConflictError(
            f"{options.source}: the name {clashes[0]!r} is used by more than one of the data "
            f"variables, object coordinates and metadata coordinates. Rename variables with "
            f"variable_key=..., or open a subset with filter_by_keys=....")
