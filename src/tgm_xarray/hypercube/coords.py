"""Coordinates stored as objects: one per name, shared by every message that holds it.

A coordinate object is shared when its shape, dtype, hints and stored bytes agree everywhere.
Stored bytes are compared by the core's fingerprints (``FileHandle.fingerprint``): the table's
where the frame carries its hash, and through the ``fingerprint(message, object)`` callback only
for frames without one.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from tgm_xarray.errors import TgmConflictError
from tgm_xarray.hypercube.columns import factorize
from tgm_xarray.hypercube.objects import Objects, Row


class Fingerprints:
    """Numbers identifying each object's stored bytes (equal numbers, same bytes): the core's
    fingerprints, the table's where frames carry their hash and through the ``fingerprint``
    callback for the others, numbered once per object and only when asked."""

    def __init__(self, objects: Objects):
        self.objects = objects
        self._prints: np.ndarray | None = None  # the table's, 0 where a frame has no hash
        self._known = np.full(len(objects.table), -1, dtype=np.int64)
        self._numbers: dict[int, int] = {}

    def ids(self, rows: np.ndarray) -> np.ndarray:
        todo = rows[self._known[rows] < 0]
        if len(todo):
            t = self.objects.table
            if self._prints is None:
                self._prints = t.core.fingerprints()
            prints = self._prints[todo]
            for i in np.flatnonzero(~t.has_frame_hash[todo]).tolist():
                prints[i] = self.objects.fingerprint(int(t.msg[todo[i]]), int(t.obj[todo[i]]))
            distinct, number = np.unique(prints, return_inverse=True)
            ids = np.array([self._numbers.setdefault(p, len(self._numbers)) for p in distinct.tolist()],
                           dtype=np.int64)
            self._known[todo] = ids[number.reshape(-1)]
        return self._known[rows]


@dataclass(frozen=True)
class Coordinate:
    object: Row  # the first occurrence, which the plan reads
    dims: tuple[str, ...] | None  # None until resolved (multi-dimensional, without hints)

    @property
    def resolved_dims(self) -> tuple[str, ...]:
        """``dims``, once ``dims.resolve_inner_dims`` has named the axes of every coordinate."""
        if self.dims is None:
            raise RuntimeError(f"coordinate {self.object.coordinate!r}: its axes are not named yet")
        return self.dims


def coordinates(objects: Objects, rows: np.ndarray, fingerprints: Fingerprints
                ) -> dict[str, Coordinate]:
    """One shared coordinate per name; the same name with different payloads is a conflict."""
    coords: dict[str, Coordinate] = {}
    if not len(rows):
        return coords
    t = objects.table
    number, _ = factorize(objects.coordinate[rows])  # names in order of first appearance
    order = np.argsort(number, kind="stable")
    for these in np.split(rows[order], np.flatnonzero(np.diff(number[order])) + 1):
        first = objects.row(int(these[0]))
        name = objects.coordinate_names[int(objects.coordinate[these[0]])]  # first.coordinate, typed str
        if len(these) > 1:
            layout = factorize(t.shape[these], objects.dtype_id[these], objects.hint[these])[0]
            prints = fingerprints.ids(these)
            differs = (layout != layout[0]) | (prints != prints[0])
            if differs.any():
                other = objects.row(int(these[np.argmax(differs)]))
                raise TgmConflictError(
                    f"{objects.source}: coordinate {name!r} differs between "
                    f"{first.where} and {other.where}, so it cannot be shared. Open the messages "
                    f"separately with filter_by_keys=... or message_index=..., or every group "
                    f"with xr.open_datatree(path, engine='tgm').")
        named = tuple(d for d in first.hint or () if d is not None)
        dims: tuple[str, ...] | None
        if first.hint and len(named) == len(first.hint):  # the hint names every axis
            dims = named
        else:
            dims = (name,) if len(first.shape) == 1 else None
        coords[name] = Coordinate(first, dims)
    return coords
