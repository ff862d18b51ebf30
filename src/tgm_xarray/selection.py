"""Outer (orthogonal) keys in the form reads take: xarray's, zarr's and users' keys, normalised
by the core's binding (``_core.outer_key``, the one home of the rule), with the shapes planning
needs.

Per axis a read takes a ``slice`` with ``0 <= start <= stop`` and ``step >= 1`` or a 1-D int64
array of in-range points; an integer is a length-1 slice whose axis the result drops.

>>> s = outer((2, slice(None, None, 2), [0, -1]), (4, 5, 3))
>>> s.core, s.decoded_shape, s.result_shape
((slice(2, 3, 1), slice(0, 5, 2), array([0, 2])), (1, 3, 2), (3, 2))
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from tgm_xarray import _core


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
    def core(self) -> tuple[slice | np.ndarray, ...] | None:
        """The selection to read (``None``: the whole object)."""
        if all(isinstance(i, slice) and i == slice(0, n, 1) for i, n in zip(self.items, self.shape)):
            return None
        return self.items


def outer(key: Any, shape: tuple[int, ...]) -> Outer:
    """``key`` (an item or a tuple of them: slices, integers, 1-D integer or boolean arrays,
    lists or tuples, one ``...``; missing trailing axes are whole) over an array of ``shape``.

    Raises ``IndexError`` (``TgmIndexError``) for out-of-range integers and points, too many
    items, and items that are none of those, as numpy does.
    """
    items, decoded_shape, result_shape = _core.outer_key(key, tuple(shape))
    return Outer(tuple(shape), items, tuple(decoded_shape), tuple(result_shape))
