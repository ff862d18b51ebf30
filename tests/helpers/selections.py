"""Random outer selections and a numpy oracle for them."""

from __future__ import annotations

import numpy as np

from tgm_xarray.selection import outer


def _random_axis_item(rng: np.random.Generator, n: int):
    kind = rng.integers(0, 9)
    if kind == 0:
        return slice(None)
    if kind in (1, 2):  # a slice with any step, either direction, bounds past the ends allowed
        step = int(rng.choice([1, 1, 2, 3, 7, -1, -2, -5]))
        start = None if rng.random() < 0.2 else int(rng.integers(-n - 2, n + 2))
        stop = None if rng.random() < 0.2 else int(rng.integers(-n - 2, n + 2))
        return slice(start, stop, step)
    if kind == 3:  # a contiguous run
        a = int(rng.integers(0, n))
        return slice(a, a + int(rng.integers(1, n + 1)))
    if kind == 4:  # an int, negative half the time
        i = int(rng.integers(0, n))
        return i - n if rng.random() < 0.5 else i
    if kind in (5, 6):  # an int array, unsorted, repeats, some negative
        k = int(rng.integers(1, min(n, 12) + 1))
        points = rng.integers(0, n, size=k)
        if rng.random() < 0.3:
            points = np.concatenate([points, points[:2]])
        negative = rng.random(points.size) < 0.3
        return np.where(negative, points - n, points).astype(rng.choice([np.int64, np.int32, np.intp]))
    if kind == 7:  # a boolean mask
        return rng.random(n) < rng.choice([0.1, 0.5, 0.9])
    return np.sort(rng.choice(n, size=min(n, int(rng.integers(1, 6))), replace=False))  # sorted points


def random_outer_key(rng: np.random.Generator, shape: tuple[int, ...]):
    """A random outer index for ``shape``: slices with any step, ints, int arrays (unsorted,
    repeated, negative), boolean arrays, Ellipsis and missing trailing axes."""
    items = [_random_axis_item(rng, n) for n in shape]
    r = rng.random()
    if r < 0.15 and len(items) > 1:  # partial trailing axes
        return tuple(items[: int(rng.integers(1, len(items)))])
    if r < 0.3:  # Ellipsis standing for a run of whole axes (possibly none)
        a = int(rng.integers(0, len(items) + 1))
        b = int(rng.integers(a, len(items) + 1))
        return tuple(items[:a]) + (Ellipsis,) + tuple(items[b:])
    if r < 0.35 and len(items) == 1:
        return items[0]  # a bare item, not a tuple
    return tuple(items)


def outer_index(array: np.ndarray, key) -> np.ndarray:
    """``array[key]`` with outer (orthogonal) semantics, computed axis by axis with numpy."""
    if not isinstance(key, tuple):
        key = (key,)
    if any(k is Ellipsis for k in key):
        at = next(i for i, k in enumerate(key) if k is Ellipsis)
        key = key[:at] + (slice(None),) * (array.ndim - len(key) + 1) + key[at + 1 :]
    key = key + (slice(None),) * (array.ndim - len(key))
    result = array
    for axis in reversed(range(array.ndim)):  # last axis first: dropping it shifts nothing before
        item = key[axis]
        if isinstance(item, slice):
            result = result[(slice(None),) * axis + (item,)]
        elif isinstance(item, (int, np.integer)) or np.ndim(item) == 0:
            result = np.take(result, int(item), axis=axis)
        else:
            item = np.asarray(item)
            if item.dtype == bool:
                item = np.flatnonzero(item)
            result = np.take(result, item, axis=axis)
    return np.array(result, order="C")  # (np.ascontiguousarray would make a 0-d result 1-d)


def core_selection(key, shape: tuple[int, ...]):
    """The ``_core`` selection for an outer key and the shape it fills (the package's normaliser)."""
    found = outer(key, shape)
    return found.core, found.decoded_shape


def describe_key(key) -> str:
    def one(k):
        if isinstance(k, np.ndarray):
            return f"bool[{int(k.sum())}/{k.size}]" if k.dtype == bool else f"{k.tolist()}"
        if k is Ellipsis:
            return "..."
        if isinstance(k, slice):
            return f"{'' if k.start is None else k.start}:{'' if k.stop is None else k.stop}:{k.step or ''}"
        return repr(k)

    return "(" + ", ".join(one(k) for k in (key if isinstance(key, tuple) else (key,))) + ")"

