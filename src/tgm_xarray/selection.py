"""Outer (orthogonal) keys in the core's selection form: the one place xarray's, zarr's and
users' keys are normalised before a read.

Per axis the core takes ``(start, stop, step)`` with ``step >= 1`` or a 1-D int64 array of
in-range points; an integer is a length-1 range whose axis the result drops.

>>> s = outer((2, slice(None, None, 2), [0, -1]), (4, 5, 3))
>>> s.core, s.decoded_shape, s.result_shape
(((2, 3, 1), (0, 5, 2), array([0, 2])), (1, 3, 2), (3, 2))
"""

from __future__ import annotations

import operator
from dataclasses import dataclass
from typing import Any

import numpy as np


@dataclass(frozen=True)
class Outer:
    """A normalised outer key: per axis a ``slice`` with int start, stop and step >= 1, or an
    int64 array of points (what ``np.arange(n)[item]`` and the core's reads both take)."""

    #: The shape of the array indexed.
    shape: tuple[int, ...]
    items: tuple[slice | np.ndarray, ...]
    #: The shape a read of ``items`` fills (integer axes have length 1).
    decoded_shape: tuple[int, ...]
    #: The shape numpy gives ``array[key]`` (integer axes dropped).
    result_shape: tuple[int, ...]

    @property
    def core(self) -> tuple | None:
        """The core's selection (``None``: the whole object)."""
        if all(isinstance(i, slice) and i == slice(0, n, 1) for i, n in zip(self.items, self.shape)):
            return None
        return tuple((i.start, i.stop, i.step) if isinstance(i, slice) else i for i in self.items)


def outer(key: Any, shape: tuple[int, ...]) -> Outer:
    """``key`` (an item or a tuple of them: slices, integers, 1-D integer or boolean arrays or
    lists, one ``...``; missing trailing axes are whole) over an array of ``shape``.

    Raises ``IndexError`` for out-of-range integers and points and for too many items,
    ``TypeError`` for items that are none of those. A slice with a negative step becomes points.
    """
    items = key if isinstance(key, tuple) else (key,)
    if any(k is Ellipsis for k in items):
        at = next(i for i, k in enumerate(items) if k is Ellipsis)
        items = items[:at] + (slice(None),) * (len(shape) - len(items) + 1) + items[at + 1 :]
    if len(items) > len(shape):
        raise IndexError(f"too many indices: {len(items)} for {len(shape)} axes")
    items = items + (slice(None),) * (len(shape) - len(items))
    normal: list[slice | np.ndarray] = []
    decoded: list[int] = []
    result: list[int] = []
    for axis, (item, n) in enumerate(zip(items, shape)):
        if isinstance(item, slice):
            start, stop, step = item.indices(n)
            if step >= 1:
                normal.append(slice(start, stop, step))
                decoded.append(len(range(start, stop, step)))
                result.append(decoded[-1])
                continue
            item = np.arange(start, stop, step)
        elif not isinstance(item, (list, np.ndarray)):
            i = operator.index(item)  # TypeError for anything else
            if not -n <= i < n:
                raise IndexError(f"index {i} is out of bounds for axis {axis} with size {n}")
            i %= n
            normal.append(slice(i, i + 1, 1))
            decoded.append(1)
            continue
        points = _points(np.asarray(item), n, axis)
        normal.append(points)
        decoded.append(points.size)
        result.append(points.size)
    return Outer(tuple(shape), tuple(normal), tuple(decoded), tuple(result))


def _points(item: np.ndarray, n: int, axis: int) -> np.ndarray:
    if item.ndim != 1:
        raise IndexError(f"axis {axis}: an outer index array must be 1-D, got shape {item.shape}")
    if item.dtype == bool:
        if item.size != n:
            raise IndexError(f"axis {axis}: boolean index of length {item.size} for size {n}")
        return np.flatnonzero(item)
    if item.size == 0:
        return np.zeros(0, dtype=np.int64)
    if item.dtype.kind not in "iu":
        raise TypeError(f"axis {axis}: index arrays must hold integers or booleans, not {item.dtype}")
    if item.min() < -n or item.max() >= n:
        raise IndexError(f"axis {axis}: index out of bounds for size {n}")
    return np.where(item < 0, item + n, item).astype(np.int64, copy=False)
