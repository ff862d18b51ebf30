"""Virtual Zarr references in tests (``tgm_xarray.virtual``): parsing local files, the frames
the references point at, Icechunk commits, and bitwise comparison with the engine. Import it after
skipping where virtualizarr, icechunk or obstore are missing."""

from __future__ import annotations

from pathlib import Path

import icechunk
import numpy as np
import xarray as xr
from obspec_utils.registry import ObjectStoreRegistry
from obstore.store import LocalStore

import tgm_xarray
from tests.helpers.oracle import ENGINE
from tgm_xarray.virtual import TensogramParser

LOCAL = ObjectStoreRegistry({"file://": LocalStore()})


def parse(path, **options):
    return TensogramParser(**options)(Path(path).resolve().as_uri(), LOCAL)


def frame_spans(path) -> dict[tuple[int, int], tuple[int, int]]:
    """``(offset, length)`` of every object's data-object frame by ``(message, object)``, from
    the metadata table (where the parser takes them too)."""
    table = tgm_xarray.open_file(path).table()
    return {(int(m), int(o)): (int(start), int(end - start))
            for m, o, start, end in zip(table.msg, table.obj, table.frame_start, table.frame_end)}


def engine(path, **options) -> xr.Dataset:
    return xr.open_dataset(path, engine=ENGINE, **options)


def assert_identical_bits(actual: xr.Dataset, expected: xr.Dataset, what: str) -> None:
    """The same variables, dims, attributes and values, bit for bit (NaN payloads aside: the
    engine and the codec decode with the same core)."""
    assert set(actual.variables) == set(expected.variables), what
    assert set(actual.coords) == set(expected.coords), what
    assert actual.attrs == expected.attrs, what
    for name, want in expected.variables.items():
        got = actual.variables[name]
        assert got.dims == want.dims, f"{what}: {name}"
        assert got.attrs == want.attrs, f"{what}: {name}"
        assert got.dtype == want.dtype, f"{what}: {name}: {got.dtype} != {want.dtype}"
        a, e = np.ascontiguousarray(got.values), np.ascontiguousarray(want.values)
        assert a.shape == e.shape, f"{what}: {name}"
        if a.dtype.kind in "fc":
            same = (a == e) | (np.isnan(a) & np.isnan(e))
            assert same.all() and (np.signbit(a.real) == np.signbit(e.real)).all(), f"{what}: {name}"
        else:
            assert (a == e).all(), f"{what}: {name}"


def commit(repo: icechunk.Repository, vds: xr.Dataset, message: str, **kw) -> None:
    session = repo.writable_session("main")
    vds.vz.to_icechunk(session.store, **kw)
    session.commit(message)


def forecast_file(path: Path, step: int, seed: int, levels=(500, 850)) -> str:
    """One forecast step of two parameters on ``levels``, 24-bit packing + szip (upstream)."""
    rng = np.random.default_rng(seed)
    import tensogram

    with open(path, "wb") as f:
        for param in ("t", "q"):
            for level in levels:
                values = 250 + 30 * rng.random((19, 36))
                desc = {"type": "ntensor", "shape": [19, 36], "dtype": "float64", "byte_order": "little",
                        "encoding": "simple_packing", "filter": "none", "compression": "szip",
                        "sp_bits_per_value": 24, "szip_rsi": 128, "szip_block_size": 16, "szip_flags": 8}
                meta = {"base": [{"mars": {"param": param, "levelist": level, "levtype": "pl", "step": step,
                                           "date": "20260404", "time": "0000"}}]}
                f.write(tensogram.encode(meta, [(desc, values)], hash="xxh3"))
    return str(path)
