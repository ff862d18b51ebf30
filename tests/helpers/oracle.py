"""Upstream ``tensogram``'s decodes, the oracle of the read tests, and bitwise comparisons."""

from __future__ import annotations

import functools
import os

import numpy as np

# The backend class rather than its name: while another installed package also registers an
# xarray engine called "tensogram", the name may resolve to it (test_backend checks the name).
from tgm_xarray.backend import TensogramBackendEntrypoint as ENGINE


def upstream_decode(path, msg: int, verify_hash: bool = False) -> list[np.ndarray]:
    """Every object of message ``msg`` as upstream ``tensogram`` decodes it (native order)."""
    import tensogram

    with tensogram.TensogramFile.open(os.fspath(path)) as f:
        _, objects = f.decode_message(msg, verify_hash=verify_hash)
    return [np.asarray(array) for _, array in objects]


@functools.lru_cache(maxsize=512)
def upstream_decode_cached(path: str, msg: int) -> tuple[np.ndarray, ...]:
    """``upstream_decode`` for small files, computed once (arrays are read-only)."""
    arrays = tuple(upstream_decode(path, msg))
    for a in arrays:
        a.flags.writeable = False
    return arrays


def assert_same_bits(actual: np.ndarray, expected: np.ndarray, what: str = "") -> None:
    """Equal dtype, shape and bytes (so NaN positions and payloads, and signed zeros, match)."""
    expected = np.asarray(expected)
    assert actual.dtype == expected.dtype.newbyteorder("="), f"{what}: dtype {actual.dtype} != {expected.dtype}"
    assert actual.shape == expected.shape, f"{what}: shape {actual.shape} != {expected.shape}"
    a = np.ascontiguousarray(actual)
    e = np.ascontiguousarray(expected, dtype=expected.dtype.newbyteorder("="))
    if a.tobytes() != e.tobytes():
        if a.dtype.kind in "fc":
            bad = ~((a == e) | (np.isnan(a) & np.isnan(e)))
        else:
            bad = a != e
        where = np.argwhere(bad)[:5].tolist() if bad.ndim else []
        raise AssertionError(
            f"{what}: {int(np.count_nonzero(bad))} of {a.size} elements differ (first at {where})"
            if bad.any() else f"{what}: values equal but bits differ (NaN payloads or signed zeros)"
        )


def check_dataset_against_upstream(path, expected: list[list[np.ndarray]], chunks=None, **open_kwargs) -> None:
    """Opens ``path`` with ``xr.open_dataset`` and checks every stored field of every variable
    against ``expected[msg][obj]`` (upstream's decode), and that every object of the file is in
    the Dataset or is a coordinate identical to one that is."""
    import xarray as xr

    import tgm_xarray
    from tgm_xarray.backend import TensogramDataStore
    from tgm_xarray.hypercube import PlanOptions

    with xr.open_dataset(path, engine=ENGINE, chunks=chunks, **open_kwargs) as ds:
        plan = TensogramDataStore.open(os.fspath(path), options=PlanOptions(**open_kwargs)).plan
        assert set(plan.variables) <= set(ds.variables)
        covered = {}
        for name, vplan in plan.variables.items():
            values = ds[name].values
            assert values.shape == vplan.shape, name
            for pos in np.ndindex(vplan.fields.shape):
                which = vplan.fields[pos]
                if which < 0:
                    continue
                msg, obj = vplan.refs[which]
                got = np.ascontiguousarray(values[pos])
                assert_same_bits(got, expected[msg][obj].astype(got.dtype),
                                 f"{path}: variable {name} at {pos} (message {msg} object {obj})")
                covered[(msg, obj)] = name
    handle = tgm_xarray.open_file(path).handle
    fingerprints = {handle.fingerprint(m, o): (m, o) for (m, o) in covered}
    for msg, objects in enumerate(expected):
        for obj, want in enumerate(objects):
            if (msg, obj) in covered:
                continue
            # Only a coordinate identical to one already in the Dataset may be left out.
            twin = fingerprints.get(handle.fingerprint(msg, obj))
            assert twin is not None, f"{path}: message {msg} object {obj} is not in the Dataset"
            assert_same_bits(want, expected[twin[0]][twin[1]], f"{path}: shared object {msg}/{obj}")

