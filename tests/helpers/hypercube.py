"""What the hypercube tests share (tests/hypercube/): the shared files they plan, reading
files' metadata with upstream ``tensogram``, writing small files, materialising plans, and the
generated cube's values. Import it after ``pytest.importorskip("tensogram")``."""

from __future__ import annotations

import hashlib
from pathlib import Path

import numpy as np
import pytest
import tensogram
import xarray as xr

from tests.helpers.attrs import assert_netcdf_friendly
from tests.helpers.shared import FIXTURES
from tgm_xarray.hypercube import (
    HypercubePlan,
    MetadataTable,
    PlanOptions,
    build_hypercube,
    split_groups,
)

#: The read-only fixtures shared by every developer and CI (``<repo>/../shared``).
IFS = FIXTURES / "real" / "ifs-0p25-20260404.tgm"
CODECS = FIXTURES / "real" / "2t-codecs.tgm"
THOUSAND = FIXTURES / "upstream" / "remote-parity" / "thousand-msg.tgm"
MULTI_MESSAGE = FIXTURES / "upstream" / "golden" / "multi_message.tgm"


# The real IFS file (through require_shared: skipped without the shared fixtures, failed in CI).
needs = pytest.mark.usefixtures("ifs_file")


# --------------------------------------------------------------------------------------------
# Helpers: reading with upstream, writing test files, materialising plans
# --------------------------------------------------------------------------------------------


def _table(path) -> MetadataTable:
    """The file's metadata table, built by the core from its bytes (no payload decoded)."""
    return MetadataTable.of_bytes(Path(path).read_bytes())


class _Fingerprint:
    """Identity of a stored object (the first 8 bytes of the sha256 of its decoded values, as
    the core's fingerprints are 64-bit numbers), counting the calls."""

    def __init__(self, path):
        self.path = str(path)
        self.calls = 0

    def __call__(self, msg: int, obj: int) -> int:
        self.calls += 1
        with tensogram.TensogramFile.open(self.path) as f:
            _, _, array = tensogram.decode_object(f.read_message(msg), obj)
        return int.from_bytes(hashlib.sha256(np.ascontiguousarray(array).tobytes()).digest()[:8], "little")


def _plan(path, **options) -> HypercubePlan:
    return build_hypercube(_table(path), PlanOptions(**options, source=str(path)), source=str(path),
                           fingerprint=_Fingerprint(path))


def _groups(path, **options) -> dict[str, HypercubePlan]:
    return split_groups(_table(path), PlanOptions(**options, source=str(path)), source=str(path),
                        fingerprint=_Fingerprint(path))


def _desc(array: np.ndarray, **codec) -> dict:
    return {"type": "ntensor", "shape": list(array.shape), "dtype": str(array.dtype),
            "byte_order": "little", "encoding": "none", "filter": "none", "compression": "none",
            **codec}


def _write(path, messages) -> Path:
    """Write ``[(global metadata, [(descriptor or None, array), ...]), ...]`` as a .tgm file."""
    with open(path, "wb") as f:
        for meta, objects in messages:
            pairs = [(d or _desc(a), np.ascontiguousarray(a)) for d, a in objects]
            f.write(tensogram.encode(meta, pairs, hash=None))
    return Path(path)


def _message(*objects, extra=None):
    """One message from ``(per-object metadata, array)`` pairs."""
    return ({"base": [m for m, _ in objects], **(extra or {})}, [(None, a) for _, a in objects])


def _field(value=0.0, shape=(3, 4), dtype="float64"):
    return np.full(shape, value, dtype=dtype)


def _materialize(plan: HypercubePlan, path) -> xr.Dataset:
    """Build the planned Dataset eagerly, decoding each field with upstream (holes are NaN)."""
    with tensogram.TensogramFile.open(str(path)) as f:
        raw = {}

        def read(msg, obj):
            if msg not in raw:
                raw[msg] = f.read_message(msg)
            return tensogram.decode_object(raw[msg], obj)[2]

        variables = {}
        for name, var in plan.variables.items():
            data = np.full(var.shape, np.nan if var.dtype.kind in "fc" else 0, dtype=var.dtype)
            for index in np.ndindex(var.fields.shape):
                which = int(var.fields[index])
                if which >= 0:
                    data[index] = read(*var.refs[which])
            variables[name] = xr.Variable(var.dims, data, var.attrs, var.encoding)
    coords = {name: variables.pop(name) for name in plan.coord_names}
    coords.update({name: xr.Variable(dims, values, attrs)
                   for name, (dims, values, attrs) in plan.index_coords.items()})
    return xr.Dataset(variables, coords=coords, attrs=plan.attrs)


def _assert_plan_consistent(plan: HypercubePlan) -> None:
    """Invariants every plan keeps: refs exist, fields index refs, every dim has one size."""
    sizes = {}
    for name, var in plan.variables.items():
        assert var.name == name
        assert len(var.dims) == len(var.shape)
        assert var.fields.dtype == np.int64 and var.fields.shape == var.shape[: var.fields.ndim]
        used = sorted(int(i) for i in var.fields.ravel() if i >= 0)
        assert used == list(range(len(var.refs)))
        assert var.encoding["preferred_chunks"] == {
            d: 1 if i < var.fields.ndim else n for i, (d, n) in enumerate(zip(var.dims, var.shape))}
        assert_netcdf_friendly(var.attrs)
        for dim, size in zip(var.dims, var.shape):
            assert sizes.setdefault(dim, size) == size, dim
    for name, (dims, values, _) in plan.index_coords.items():
        assert values.ndim == len(dims), name
        assert values.dtype != object, name
        for dim, size in zip(dims, values.shape):
            assert sizes.setdefault(dim, size) == size, dim
    assert_netcdf_friendly(plan.attrs)


# --------------------------------------------------------------------------------------------
# (2) A generated 2 params x 4 dates x 3 steps x 5 levels x 2 members file, shuffled
# --------------------------------------------------------------------------------------------


PARAMS = ["t", "q"]
DATES = ["20260403", "20260401", "20260404", "20260402"]  # written unsorted on purpose
STEPS = [12, 0, 6]
LEVELS = [500, 1000, 100, 850, 300]
MEMBERS = [2, 1]
LAT = np.array([10.0, 0.0, -10.0])
LON = np.array([0.0, 90.0, 180.0, 270.0])


def _code(p, d, s, lev, m) -> float:
    """Sentinel field value: one decimal digit per coordinate (indices into the sorted axes)."""
    return 10000 * p + 1000 * d + 100 * s + 10 * lev + m


# --------------------------------------------------------------------------------------------
# (3) The examples of upstream's xarray guide, in tensogram 0.24's metadata layout
# --------------------------------------------------------------------------------------------


def _assert_no_dict_coordinates(ds: xr.Dataset) -> None:
    for name, coord in ds.coords.items():
        assert coord.dtype != object, name
        assert not any(isinstance(v, dict) for v in np.ravel(coord.values)), name
