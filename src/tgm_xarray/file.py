"""``open_file``: the low-level API over one ``.tgm`` file (what the backend and benchmarks call)."""

from __future__ import annotations

import os
import operator
from typing import Any

import numpy as np

from tgm_xarray import handles
from tgm_xarray.errors import TgmCodecError, TgmIndexError


def numpy_dtype(name: str) -> np.dtype:
    """The numpy dtype of a Tensogram dtype name."""
    if name == "bfloat16":
        try:
            import ml_dtypes
        except ImportError:
            raise TgmCodecError("bfloat16 objects need the ml_dtypes package") from None
        return np.dtype(ml_dtypes.bfloat16)
    if name == "bitmask":
        raise TgmCodecError("bitmask objects cannot be read as arrays")
    return np.dtype(name)


def normalize_index(index: Any, shape: tuple[int, ...]) -> tuple[tuple, tuple[int, ...], list[int]]:
    """Turns an outer index into the core's selection.

    Returns ``(selection, selected_shape, dropped_axes)``: one ``(start, stop, step)`` tuple or
    ``int64`` array per axis, the shape of what it selects (integer axes as length 1), and the
    axes that integers index (to drop from the result).
    """
    if not isinstance(index, tuple):
        index = (index,)
    if any(item is Ellipsis for item in index):
        at = next(i for i, item in enumerate(index) if item is Ellipsis)
        fill = (slice(None),) * (len(shape) - len(index) + 1)
        index = index[:at] + fill + index[at + 1 :]
    if len(index) > len(shape):
        raise TgmIndexError(f"too many indices: {len(index)} for an array of {len(shape)} dimensions")
    index = index + (slice(None),) * (len(shape) - len(index))
    selection, sizes, dropped = [], [], []
    for axis, (item, n) in enumerate(zip(index, shape)):
        if isinstance(item, slice):
            start, stop, step = item.indices(n)
            selection.append((start, stop, step))
            sizes.append(len(range(start, stop, step)))
            continue
        try:
            i = operator.index(item)
        except TypeError:
            points = np.asarray(item)
            if points.dtype == bool:
                if points.shape != (n,):
                    raise TgmIndexError(f"axis {axis}: boolean index of shape {points.shape} for size {n}")
                points = np.flatnonzero(points)
            if points.ndim != 1 or points.dtype.kind not in "iu":
                raise TgmIndexError(f"axis {axis}: expected a slice, an int or a 1-D integer array")
            # The core wraps negative indices and checks bounds (no numpy work per read here).
            points = np.ascontiguousarray(points, dtype=np.int64)
            selection.append(points)
            sizes.append(points.size)
            continue
        if not -n <= i < n:
            raise TgmIndexError(f"axis {axis}: index {i} is out of bounds for size {n}")
        i %= n
        selection.append((i, i + 1, 1))
        sizes.append(1)
        dropped.append(axis)
    return tuple(selection), tuple(sizes), dropped


class TgmFile:
    """One ``.tgm`` file: its messages' metadata and descriptors, and hyperslab reads.

    >>> f = open_file("forecast.tgm")                      # doctest: +SKIP
    >>> f.read(0, 0, (slice(0, 10), slice(None))).shape   # doctest: +SKIP
    (10, 1440)

    ``path`` may also be a URL (``https://...``, ``s3://...``; ``storage_options`` go to fsspec):
    then reads fetch only the frames they need (docs/remote.md).

    Instances share the process's cached handle of the file, are safe to use from any number
    of threads at once, and pickle as their path (a worker reopens through its own cache).
    """

    def __init__(self, path: str | os.PathLike, storage_options: dict | None = None):
        self.path = os.fspath(path)
        self.storage_options = storage_options
        self._handle = handles.acquire(self.path, storage_options)
        self._layouts: dict[tuple[int, int], tuple[tuple[int, ...], np.dtype]] = {}

    def __reduce__(self):
        return (type(self), (self.path, self.storage_options))

    def __len__(self) -> int:
        return len(self._handle)

    def __repr__(self) -> str:
        return f"<TgmFile {self.path!r}: {len(self)} messages>"

    @property
    def handle(self):
        """The shared handle (``tgm_xarray._core.FileHandle``, or ``remote.RemoteHandle``)."""
        return self._handle

    def metadata(self, msg: int) -> dict:
        """Message ``msg``'s metadata: ``{"base": [...], "_extra_": {...}, "_reserved_": {...}}``."""
        return self._handle.metadata(msg)

    def descriptors(self, msg: int) -> list[dict]:
        """The descriptors of message ``msg``'s objects."""
        return self._handle.descriptors(msg)

    def layout(self, msg: int, obj: int) -> tuple[tuple[int, ...], np.dtype]:
        """``(shape, numpy dtype)`` of an object."""
        key = (msg, obj)
        layout = self._layouts.get(key)
        if layout is None:
            descriptors = self._handle.descriptors(msg)
            if not 0 <= obj < len(descriptors):
                raise TgmIndexError(
                    f"{self.path}: message {msg}: object {obj} is out of range ({len(descriptors)} objects)"
                )
            d = descriptors[obj]
            try:
                dtype = numpy_dtype(d["dtype"])
            except TgmCodecError as err:
                raise TgmCodecError(f"{self.path}: message {msg}, object {obj}: {err}") from None
            layout = self._layouts[key] = (tuple(d["shape"]), dtype)
        return layout

    def read(self, msg: int, obj: int, index: Any = None, out: np.ndarray | None = None,
             verify_hash: bool = False) -> np.ndarray:
        """Reads an object, or the part ``index`` selects (outer indexing), into ``out``.

        ``index`` is a tuple of slices, ints and 1-D integer arrays (one per axis, missing trailing
        axes are whole); only what it selects is decoded where the codec allows. ``out``, when
        given, must be C-contiguous and of the result's shape and dtype.
        """
        shape, dtype = self.layout(msg, obj)
        if index is None:
            selection, sizes, dropped = None, shape, []
        else:
            try:
                selection, sizes, dropped = normalize_index(index, shape)
            except TgmIndexError as err:
                raise TgmIndexError(f"{self.path}: message {msg}, object {obj}: {err}") from None
        result_shape = tuple(s for axis, s in enumerate(sizes) if axis not in dropped)
        if out is None:
            out = np.empty(result_shape, dtype)
        elif out.shape != result_shape or out.dtype != dtype:
            raise ValueError(
                f"out has shape {out.shape} and dtype {out.dtype}; the read needs {result_shape} {dtype}"
            )
        self._handle.read_into(msg, obj, selection, out, verify_hash)
        return out


def open_file(path: str | os.PathLike, storage_options: dict | None = None) -> TgmFile:
    """Opens a ``.tgm`` file or URL through the process's handle cache."""
    return TgmFile(path, storage_options)
