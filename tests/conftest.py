"""Shared fixtures of the read-path test suite: the shared fixture files, a codec matrix written
with upstream ``tensogram``, upstream decodes as the oracle, and random outer selections.

Everything here writes and reads real ``.tgm`` files; nothing is mocked.

The codec matrix (``codec_matrix`` fixture) is written once per session with upstream
``tensogram.encode``: every codec and filter upstream 0.24 supports, float32 and float64 where
upstream allows them (simple packing, zfp and sz3 take float64 only), integer, float16 and
complex types, shapes 1-D to 4-D of about 3,000 elements (more than one szip RSI block, so range
reads cross blocks), NaN/Inf masks (``allow_nan``/``allow_inf``, encoding ``none`` only),
big-endian objects, and several objects per message. ``MATRIX_IDS`` is known at collection time
so tests can parametrize over it; the fixture maps each id to its ``MatrixObject``.
"""

from __future__ import annotations

import atexit
import functools
import importlib
import os
import shutil
import sysconfig
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest

REPO = Path(__file__).resolve().parents[1]
#: Read-only fixtures shared by every developer and CI (``<repo>/../shared``).
SHARED = REPO.parent / "shared"
FIXTURES = SHARED / "fixtures"
REAL = FIXTURES / "real"
GOLDEN = FIXTURES / "upstream" / "golden"
REMOTE_PARITY = FIXTURES / "upstream" / "remote-parity"
NETCDF = FIXTURES / "upstream" / "netcdf"
SHARED_MISSING = f"the shared fixtures are not at {FIXTURES} (expected at <repo>/../shared/fixtures)"
#: In CI (the ``CI`` environment variable set) missing fixtures fail the run instead of skipping
#: every real-data test: a green run must have read the real files.
IN_CI = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")
#: Modules (space-separated) a lane installs and whose tests may not skip there: the newest lane
#: sets it (``make test-newest``), so a failed install fails the run instead of skipping tests.
REQUIRE_MODULES_ENV = "TGM_REQUIRE_MODULES"


def _missing(module: str) -> str | None:
    try:
        importlib.import_module(module)
    except ImportError as err:
        return f"{module} ({err})"
    return None


def pytest_sessionstart(session) -> None:
    if IN_CI and not FIXTURES.is_dir():
        raise pytest.UsageError(f"{SHARED_MISSING}; CI is set, so the real-data tests may not skip "
                                "(check out the shared fixtures there, or unset CI to skip them)")
    missing = [m for m in map(_missing, os.environ.get(REQUIRE_MODULES_ENV, "").split()) if m is not None]
    if missing:
        raise pytest.UsageError(f"{REQUIRE_MODULES_ENV} requires modules that do not import: {'; '.join(missing)}. "
                                "The newest lane (make test-newest) installs them (scripts/newest-python.sh, "
                                "log /tmp/tgm-newest-pip.log), so its tests may not skip for want of them")

# Opens write indexes to the cache directory (docs/archives.md): this session's own, never the
# user's, inherited by the processes tests start.
os.environ["TGM_XARRAY_CACHE_DIR"] = tempfile.mkdtemp(prefix="tgm-xarray-test-cache-")
atexit.register(shutil.rmtree, os.environ["TGM_XARRAY_CACHE_DIR"], ignore_errors=True)

# dask.distributed samples every thread's stack (sys._current_frames) in each scheduler, nanny and
# worker process, except on 3.11. On free-threaded CPython that read races the threads it samples
# and can crash the process (CPython gh-152355): the 3.13t suite died once so, in the teardown of a
# LocalCluster. Off for this session and the processes it starts (docs/remote.md).
if sysconfig.get_config_var("Py_GIL_DISABLED"):
    os.environ["DASK_DISTRIBUTED__WORKER__PROFILE__ENABLED"] = "False"

# The backend class rather than its name: while another installed package also registers an
# xarray engine called "tensogram", the name may resolve to it (test_backend checks the name).
from tgm_xarray.backend import TensogramBackendEntrypoint as ENGINE  # noqa: E402
from tgm_xarray.selection import outer  # noqa: E402


def shared_files(*patterns: str) -> list:
    """Paths under ``fixtures/`` matching ``patterns``, as pytest params (one skip if absent)."""
    if not FIXTURES.is_dir():
        return [pytest.param(None, marks=pytest.mark.skip(reason=SHARED_MISSING), id="no-shared")]
    paths = sorted({p for pattern in patterns for p in FIXTURES.glob(pattern)})
    return [pytest.param(p, id=f"{p.parent.name}/{p.name}") for p in paths]


def require_shared(path: Path | None = None) -> Path:
    """Skips the test when the shared fixtures (or ``path`` in them) are missing; fails it in CI."""
    target = path if path is not None else FIXTURES
    if not target.exists():
        (pytest.fail if IN_CI else pytest.skip)(
            SHARED_MISSING if not FIXTURES.is_dir() else f"missing shared fixture {target}")
    return target


def require_entry_point(group: str, name: str) -> None:
    """Skips the test when the installed tgm-xarray lacks an entry point of pyproject.toml (a
    source tree newer than the install); fails it in CI, where the install is the tree's."""
    from importlib.metadata import entry_points

    if not entry_points(group=group, name=name):
        (pytest.fail if IN_CI else pytest.skip)(
            f"no {group} entry point {name!r} is installed: reinstall tgm-xarray (make setup)")


@pytest.fixture
def own_cache(tmp_path, monkeypatch):
    """An index cache directory of the test's own and a fresh handle cache (modules that count
    index files or patch how files are stat'ed use it: ``pytest.mark.usefixtures("own_cache")``)."""
    from tgm_xarray.plans import index
    from tgm_xarray.source import handles

    monkeypatch.setenv(index.CACHE_DIR_ENV, str(tmp_path / "cache"))
    handles.CACHE.clear()
    yield
    handles.CACHE.clear()


@pytest.fixture(scope="session")
def shared_dir() -> Path:
    return require_shared(SHARED)


@pytest.fixture(scope="session")
def real_dir() -> Path:
    return require_shared(REAL)


@pytest.fixture(scope="session")
def ifs_file() -> Path:
    """The real 4-message operational-style file (2t, lsm, q, t; packed 24 bit + szip)."""
    return require_shared(REAL / "ifs-0p25-20260404.tgm")


@pytest.fixture(scope="session")
def manifest(real_dir) -> dict:
    import json

    return json.loads((real_dir / "manifest.json").read_text())


# --------------------------------------------------------------------------------------------
# Upstream decodes: the oracle
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# Random outer selections and a numpy oracle for them
# --------------------------------------------------------------------------------------------


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


# --------------------------------------------------------------------------------------------
# The codec matrix
# --------------------------------------------------------------------------------------------

S1, S2, S3, S4 = (3001,), (45, 67), (7, 19, 23), (3, 5, 11, 17)
SZIP_SMALL = {"szip_rsi": 8, "szip_block_size": 16, "szip_flags": 8}  # 128 values per RSI block
SZIP_TINY = {"szip_rsi": 4, "szip_block_size": 8, "szip_flags": 8}  # 32
SZIP_MID = {"szip_rsi": 32, "szip_block_size": 32, "szip_flags": 8}  # 1024


@dataclass(frozen=True)
class Spec:
    """One object of the matrix, before it is written."""

    id: str
    dtype: str
    shape: tuple[int, ...]
    params: dict
    big_endian: bool = False
    nan: bool = False  # put NaNs in (the message is written with allow_nan)
    inf: bool = False  # put +-Inf in (allow_inf)
    lossy: bool = False

    def descriptor(self) -> dict:
        d = {"type": "ntensor", "shape": list(self.shape), "dtype": self.dtype,
             "byte_order": "big" if self.big_endian else "little",
             "encoding": "none", "filter": "none", "compression": "none"}
        d.update(self.params)
        return d

    def values(self) -> np.ndarray:
        """Deterministic data: a smooth field plus noise (so compressors have work to do)."""
        seed = sum(ord(c) * 131**i for i, c in enumerate(self.id)) % 2**32
        rng = np.random.default_rng(seed)
        n = int(np.prod(self.shape))
        t = np.linspace(0, 12 * np.pi, n)
        field = 40 * np.sin(t) + 15 * np.cos(3.7 * t) + rng.standard_normal(n)
        dt = np.dtype(self.dtype)
        if dt.kind == "c":
            values = (field + 1j * np.roll(field, 7)).astype(dt)
        elif dt.kind in "iu":
            info = np.iinfo(dt)
            scaled = field * (min(info.max, 2**20) / 60.0)
            values = np.clip(np.round(scaled - (0 if dt.kind == "i" else scaled.min())), info.min, info.max).astype(dt)
        else:
            values = (field + 250.0).astype(dt)
        if self.nan:
            values[rng.random(n) < 0.2] = np.nan
            values[:3] = np.nan
        if self.inf:
            values[rng.random(n) < 0.05] = np.inf
            values[rng.random(n) < 0.05] = -np.inf
        return values.reshape(self.shape)


def _sp(bits):
    return {"encoding": "simple_packing", "sp_bits_per_value": bits}


MATRIX_SPECS: list[Spec] = [
    # encoding none, compression none (raw bytes copied straight from the map)
    Spec("none-f32-2d", "float32", S2, {}),
    Spec("none-f64-3d", "float64", S3, {}),
    Spec("none-f32-4d", "float32", S4, {}),
    Spec("none-f64-1d", "float64", S1, {}),
    Spec("none-i8-2d", "int8", S2, {}),
    Spec("none-u16-3d", "uint16", S3, {}),
    Spec("none-i32-1d", "int32", S1, {}),
    Spec("none-i64-4d", "int64", S4, {}),
    Spec("none-f16-2d", "float16", S2, {}),
    Spec("none-c64-3d", "complex64", S3, {}),
    # simple packing (float64 only upstream)
    Spec("sp16-f64-1d", "float64", S1, _sp(16)),
    Spec("sp16-f64-3d", "float64", S3, _sp(16)),
    Spec("sp24-f64-2d", "float64", S2, _sp(24)),
    Spec("sp24-f64-4d", "float64", S4, _sp(24)),
    Spec("sp12-f64-2d", "float64", S2, _sp(12)),
    Spec("sp8-f64-3d", "float64", S3, _sp(8)),
    Spec("sp32-f64-1d", "float64", S1, _sp(32)),
    # szip on raw values
    Spec("szip-f32-2d", "float32", S2, {"compression": "szip", **SZIP_SMALL}),
    Spec("szip-f32-4d", "float32", S4, {"compression": "szip", **SZIP_MID}),
    Spec("szip-i16-3d", "int16", S3, {"compression": "szip", **SZIP_SMALL}),
    Spec("szip-u8-1d", "uint8", S1, {"compression": "szip", **SZIP_TINY}),
    Spec("szip-i32-2d", "int32", S2, {"compression": "szip", **SZIP_SMALL}),
    Spec("szip-u16-1d", "uint16", S1, {"compression": "szip", **SZIP_MID}),
    # simple packing + szip (the operational GRIB-like combination)
    Spec("sp16+szip-f64-2d", "float64", S2, {**_sp(16), "compression": "szip", **SZIP_SMALL}),
    Spec("sp24+szip-f64-3d", "float64", S3, {**_sp(24), "compression": "szip", **SZIP_SMALL}),
    Spec("sp24+szip-f64-1d", "float64", S1, {**_sp(24), "compression": "szip", **SZIP_MID}),
    Spec("sp16+szip-f64-4d", "float64", S4, {**_sp(16), "compression": "szip", **SZIP_TINY}),
    Spec("sp8+szip-f64-2d", "float64", S2, {**_sp(8), "compression": "szip", **SZIP_SMALL}),
    Spec("sp32+szip-f64-3d", "float64", S3, {**_sp(32), "compression": "szip", **SZIP_MID}),
    # simple packing + blosc2 (the writer's default compression of packed fields)
    Spec("sp16+blosc2-f64-3d", "float64", S3, {**_sp(16), "compression": "blosc2", "blosc2_codec": "zstd", "blosc2_clevel": 3}),
    Spec("sp12+blosc2-f64-2d", "float64", S2, {**_sp(12), "compression": "blosc2", "blosc2_codec": "lz4"}),
    # zstd, lz4, blosc2
    Spec("zstd-f32-2d", "float32", S2, {"compression": "zstd", "zstd_level": 3}),
    Spec("zstd-f64-4d", "float64", S4, {"compression": "zstd", "zstd_level": 9}),
    Spec("zstd-i32-3d", "int32", S3, {"compression": "zstd"}),
    Spec("lz4-f32-3d", "float32", S3, {"compression": "lz4"}),
    Spec("lz4-f64-1d", "float64", S1, {"compression": "lz4"}),
    Spec("lz4-i16-2d", "int16", S2, {"compression": "lz4"}),
    Spec("blosc2-f32-2d", "float32", S2, {"compression": "blosc2", "blosc2_codec": "lz4", "blosc2_clevel": 5}),
    Spec("blosc2-f64-3d", "float64", S3, {"compression": "blosc2", "blosc2_codec": "zstd", "blosc2_clevel": 3}),
    Spec("blosc2-i16-4d", "int16", S4, {"compression": "blosc2", "blosc2_codec": "blosclz", "blosc2_clevel": 9}),
    Spec("blosc2-f32-1d", "float32", S1, {"compression": "blosc2", "blosc2_codec": "zlib", "blosc2_clevel": 1}),
    # shuffle filter
    Spec("shuffle+zstd-f32-2d", "float32", S2, {"filter": "shuffle", "shuffle_element_size": 4, "compression": "zstd"}),
    Spec("shuffle+zstd-f64-3d", "float64", S3, {"filter": "shuffle", "shuffle_element_size": 8, "compression": "zstd"}),
    Spec("shuffle+szip-f32-4d", "float32", S4, {"filter": "shuffle", "shuffle_element_size": 4, "compression": "szip", **SZIP_SMALL}),
    Spec("shuffle+szip-f64-2d", "float64", S2, {"filter": "shuffle", "shuffle_element_size": 8, "compression": "szip", **SZIP_MID}),
    # zfp and sz3 (float64 only upstream; lossy)
    Spec("zfp-rate-f64-2d", "float64", S2, {"compression": "zfp", "zfp_mode": "fixed_rate", "zfp_rate": 16.0}, lossy=True),
    Spec("zfp-rate-f64-1d", "float64", S1, {"compression": "zfp", "zfp_mode": "fixed_rate", "zfp_rate": 12.0}, lossy=True),
    Spec("zfp-accuracy-f64-3d", "float64", S3, {"compression": "zfp", "zfp_mode": "fixed_accuracy", "zfp_tolerance": 0.01}, lossy=True),
    Spec("zfp-precision-f64-4d", "float64", S4, {"compression": "zfp", "zfp_mode": "fixed_precision", "zfp_precision": 20}, lossy=True),
    Spec("sz3-abs-f64-2d", "float64", S2, {"compression": "sz3", "sz3_error_bound_mode": "abs", "sz3_error_bound": 0.01}, lossy=True),
    Spec("sz3-abs-f64-3d", "float64", S3, {"compression": "sz3", "sz3_error_bound_mode": "abs", "sz3_error_bound": 0.5}, lossy=True),
    Spec("sz3-rel-f64-4d", "float64", S4, {"compression": "sz3", "sz3_error_bound_mode": "rel", "sz3_error_bound": 0.001}, lossy=True),
    # NaN / Inf masks (encoding none only upstream)
    Spec("nan-none-f32-2d", "float32", S2, {}, nan=True),
    Spec("nan-zstd-f64-3d", "float64", S3, {"compression": "zstd"}, nan=True),
    Spec("nan-shuffle+szip-f32-4d", "float32", S4,
         {"filter": "shuffle", "shuffle_element_size": 4, "compression": "szip", **SZIP_SMALL}, nan=True),
    Spec("nan-blosc2-f32-1d", "float32", S1, {"compression": "blosc2", "blosc2_codec": "lz4"}, nan=True),
    Spec("nan-szip-f32-2d", "float32", S2, {"compression": "szip", **SZIP_SMALL}, nan=True),
    Spec("nan-lz4-f64-4d", "float64", S4, {"compression": "lz4"}, nan=True),
    Spec("inf-none-f64-2d", "float64", S2, {}, inf=True),
    Spec("naninf-zstd-f32-3d", "float32", S3, {"compression": "zstd"}, nan=True, inf=True),
    # big-endian objects
    Spec("be-none-f32-2d", "float32", S2, {}, big_endian=True),
    Spec("be-none-f64-3d", "float64", S3, {}, big_endian=True),
    Spec("be-none-i32-1d", "int32", S1, {}, big_endian=True),
    Spec("be-sp16-f64-2d", "float64", S2, _sp(16), big_endian=True),
    Spec("be-sp24+szip-f64-1d", "float64", S1, {**_sp(24), "compression": "szip", **SZIP_SMALL}, big_endian=True),
    Spec("be-szip-f32-3d", "float32", S3, {"compression": "szip", **SZIP_SMALL}, big_endian=True),
    Spec("be-zstd-f64-4d", "float64", S4, {"compression": "zstd"}, big_endian=True),
    Spec("be-blosc2-i32-2d", "int32", S2, {"compression": "blosc2", "blosc2_codec": "lz4"}, big_endian=True),
    Spec("be-shuffle+zstd-f32-2d", "float32", S2, {"filter": "shuffle", "shuffle_element_size": 4, "compression": "zstd"}, big_endian=True),
    Spec("be-nan-none-f32-2d", "float32", S2, {}, big_endian=True, nan=True),
    Spec("be-zfp-f64-3d", "float64", S3, {"compression": "zfp", "zfp_mode": "fixed_rate", "zfp_rate": 16.0}, big_endian=True, lossy=True),
]
MATRIX_IDS = [s.id for s in MATRIX_SPECS]
_SPECS_BY_ID = {s.id: s for s in MATRIX_SPECS}

OBJECTS_PER_MESSAGE = 3
MESSAGES_PER_FILE = 4
#: Files written without hashes (for verify_hash on an unhashed file).
UNHASHED_FILES = {"matrix-unhashed"}


@dataclass(frozen=True)
class MatrixObject:
    path: str
    msg: int
    obj: int
    description: str
    spec: Spec
    #: What was given to the encoder (native order): the decode must equal it when lossless.
    input: np.ndarray
    hashed: bool

    @property
    def shape(self) -> tuple[int, ...]:
        return self.spec.shape

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.spec.dtype)

    def upstream(self) -> np.ndarray:
        """Upstream's full decode of this object."""
        return upstream_decode_cached(self.path, self.msg)[self.obj]


def _layout(specs: list[Spec]) -> list[tuple[str, list[list[Spec]]]]:
    """Groups specs into messages (masked objects together: allow_nan is per message) and files."""
    plain = [s for s in specs if not (s.nan or s.inf)]
    masked = [s for s in specs if s.nan or s.inf]
    messages = [plain[i:i + OBJECTS_PER_MESSAGE] for i in range(0, len(plain), OBJECTS_PER_MESSAGE)]
    messages += [masked[i:i + OBJECTS_PER_MESSAGE] for i in range(0, len(masked), OBJECTS_PER_MESSAGE)]
    files = []
    for i in range(0, len(messages), MESSAGES_PER_FILE):
        files.append((f"matrix-{len(files):02d}", messages[i:i + MESSAGES_PER_FILE]))
    # One more file, unhashed, with a few objects again.
    files.append(("matrix-unhashed", [[_SPECS_BY_ID["none-f32-2d"], _SPECS_BY_ID["sp24+szip-f64-3d"],
                                       _SPECS_BY_ID["zstd-f32-2d"]]]))
    return files


def encode_message(specs: list[Spec], *, hashed: bool = True, extra: dict | None = None) -> bytes:
    """One message of ``specs`` written by upstream ``tensogram.encode``."""
    import tensogram

    pairs = []
    for s in specs:
        values = s.values()
        if s.big_endian:
            data = values.astype(values.dtype.newbyteorder(">")).tobytes()
        elif values.dtype.kind == "c" or values.dtype == np.float16:
            data = values.tobytes()  # upstream's Python API takes these dtypes as bytes only
        else:
            data = values
        pairs.append((s.descriptor(), data))
    meta = {"base": [{"name": s.id, "codec": s.id} for s in specs]}
    if extra:
        meta.update(extra)
    return tensogram.encode(meta, pairs, hash="xxh3" if hashed else None,
                            allow_nan=any(s.nan for s in specs), allow_inf=any(s.inf for s in specs))


@pytest.fixture(scope="session")
def codec_matrix(tmp_path_factory) -> dict[str, MatrixObject]:
    """``id -> MatrixObject`` for every object of the matrix (the files are written once)."""
    root = tmp_path_factory.mktemp("codec-matrix")
    objects: dict[str, MatrixObject] = {}
    for name, messages in _layout(MATRIX_SPECS):
        path = root / f"{name}.tgm"
        hashed = name not in UNHASHED_FILES
        with open(path, "wb") as f:
            for specs in messages:
                f.write(encode_message(specs, hashed=hashed, extra={"matrix_file": name}))
        for msg, specs in enumerate(messages):
            for obj, s in enumerate(specs):
                key = s.id if hashed else f"unhashed:{s.id}"
                objects[key] = MatrixObject(os.fspath(path), msg, obj, f"{name} msg {msg} obj {obj}: {s.id}",
                                            s, s.values(), hashed)
    return objects


@pytest.fixture(scope="session")
def matrix_list(codec_matrix) -> list[tuple[str, int, int, str]]:
    """The matrix as ``(path, msg, obj, description)`` tuples (hashed files)."""
    return [(o.path, o.msg, o.obj, o.description) for k, o in codec_matrix.items() if o.hashed]


@pytest.fixture(scope="session")
def matrix_paths(codec_matrix) -> list[str]:
    return sorted({o.path for o in codec_matrix.values()})


def write_message_file(path, specs_per_message: list[list[Spec]], **kw) -> str:
    """Writes a ``.tgm`` file of one message per entry (upstream's encoder)."""
    with open(path, "wb") as f:
        for specs in specs_per_message:
            f.write(encode_message(specs, **kw))
    return os.fspath(path)


def small_file(path, seed: int = 0, messages: int = 1) -> str:
    """A small hashed file whose values depend on ``seed`` (for cache and rewrite tests)."""
    import tensogram

    rng = np.random.default_rng(seed)
    with open(path, "wb") as f:
        for m in range(messages):
            values = rng.standard_normal((8, 9)).astype(np.float32)
            desc = {"type": "ntensor", "shape": [8, 9], "dtype": "float32", "byte_order": "little",
                    "encoding": "none", "filter": "none", "compression": "zstd"}
            f.write(tensogram.encode({"base": [{"name": "v", "seed": seed, "message": m}]}, [(desc, values)]))
    return os.fspath(path)


# --------------------------------------------------------------------------------------------
# A range-capable HTTP server on loopback (remote reads, tutorial downloads)


@pytest.fixture
def s3_endpoint():
    """The endpoint URL of a moto S3 server on loopback (keys "testing"); stopped afterwards.
    moto's buckets outlive its servers in one process: name buckets per test or port."""
    server_mod = pytest.importorskip("moto.server")
    server = server_mod.ThreadedMotoServer(ip_address="127.0.0.1", port=0)
    server.start()
    host, port = server.get_host_and_port()
    yield f"http://{host}:{port}"
    server.stop()


@pytest.fixture
def range_server(tmp_path):
    """A ``RangeServer`` serving ``tmp_path / "served"`` (copy files there); stopped afterwards."""
    from range_server import RangeServer

    root = tmp_path / "served"
    root.mkdir()
    server = RangeServer(root).start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def dask_client():
    """A dask.distributed client of 2 worker processes (one cluster per test module)."""
    distributed = pytest.importorskip("distributed")
    with distributed.LocalCluster(processes=True, n_workers=2, threads_per_worker=1,
                                  dashboard_address=None) as cluster:
        with distributed.Client(cluster, set_as_default=False) as client:
            yield client
