"""The xarray engine: dask chunks and schedulers, pickling, engine options, format detection,
closing, and attributes."""

from __future__ import annotations

import gc
import json
import os
import pickle
import shutil
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
import xarray as xr

import tgm_xarray
from tests.helpers.oracle import ENGINE, assert_same_bits, check_dataset_against_upstream, upstream_decode_cached
from tests.helpers.selections import describe_key, outer_index, random_outer_key
from tests.helpers.shared import NETCDF, REAL, require_shared, shared_files
from tgm_xarray.backend import TensogramBackendArray, TensogramBackendEntrypoint, TensogramDataStore
from tgm_xarray.source import handles

dask = pytest.importorskip("dask")


@pytest.fixture(scope="module")
def ifs_eager(ifs_file):
    with xr.open_dataset(ifs_file, engine=ENGINE) as ds:
        return ds.load()


def assert_datasets_identical(actual: xr.Dataset, expected: xr.Dataset):
    xr.testing.assert_identical(actual, expected)
    for name in expected.data_vars:
        assert_same_bits(actual[name].values, expected[name].values, name)


# --------------------------------------------------------------------------------------------
# The engine name
# --------------------------------------------------------------------------------------------


@pytest.mark.thread_unsafe(reason="xarray's engine list is a process-wide cache")
def test_engine_name_resolves_to_this_package():
    """``engine="tgm"`` must open files with tgm_xarray's backend, whatever else is installed
    (upstream's ``tensogram-xarray`` registers ``"tensogram"`` too: tests/package/test_conveniences.py)."""
    engines = xr.backends.list_engines()
    assert type(engines["tgm"]) is TensogramBackendEntrypoint, (
        f"engine 'tgm' is {type(engines['tgm']).__module__}")
    path = require_shared(REAL / "ifs-0p25-20260404.tgm")
    with xr.open_dataset(path, engine="tgm") as ds:
        assert set(ds.data_vars) == {"2t", "lsm", "q", "t"}  # every message, not just the first


@pytest.mark.thread_unsafe(reason="xarray's engine list is a process-wide cache")
def test_open_datatree_finds_the_engine_without_engine(tmp_path):
    """xarray looks for an engine of a tree only among those that declare groups."""
    path = str(tmp_path / "two.tgm")
    xr.Dataset({"t": (("y", "x"), np.arange(6.0).reshape(2, 3))}).tgm.to_file(path)
    with xr.open_datatree(path) as tree, xr.open_datatree(path, engine=ENGINE) as named:
        assert tree.identical(named)
        assert {name for node in tree.subtree for name in node.ds.data_vars} == {"t"}
    assert TensogramBackendEntrypoint.open_dataset_parameters[0] == "filename_or_obj"


# --------------------------------------------------------------------------------------------
# dask: chunks and schedulers
# --------------------------------------------------------------------------------------------


def test_chunks_are_one_per_stored_object(ifs_file):
    with xr.open_dataset(ifs_file, engine=ENGINE, chunks={}) as ds:
        assert ds["q"].chunks == ((1, 1), (721,), (1440,))
        assert ds["t"].chunks == ((1, 1), (721,), (1440,))
        assert ds["2t"].chunks == ((721,), (1440,))
        assert ds["lsm"].data.npartitions == 1
        assert ds["q"].data.npartitions == 2
    path = require_shared(REAL / "2t-codecs.tgm")
    with xr.open_dataset(path, engine=ENGINE, chunks={}) as ds:
        assert ds["2t"].chunks == ((1,) * 13, (721,), (1440,))


def test_threaded_compute_equals_eager(ifs_file, ifs_eager):
    with xr.open_dataset(ifs_file, engine=ENGINE, chunks={}) as ds:
        with dask.config.set(scheduler="threads", num_workers=4):
            computed = ds.compute()
    assert_datasets_identical(computed, ifs_eager)


def test_threaded_compute_of_small_chunks(ifs_file, ifs_eager):
    """Chunks smaller than a field: many partial reads of one object at once."""
    with xr.open_dataset(ifs_file, engine=ENGINE, chunks={"latitude": 97, "longitude": 500}) as ds:
        assert len(ds["2t"].chunks[0]) == 8
        with dask.config.set(scheduler="threads", num_workers=4):
            computed = ds[["2t", "q"]].compute()
    assert_datasets_identical(computed, ifs_eager[["2t", "q"]])


# A subset keeps what the worker processes send back small; every task still reads from a file.
SUBSET = {"latitude": slice(100, 400, 3), "longitude": slice(None, None, -7)}


@pytest.mark.thread_unsafe(reason="starts worker processes")
def test_processes_scheduler_equals_eager(ifs_file, ifs_eager):
    with xr.open_dataset(ifs_file, engine=ENGINE, chunks={}) as ds:
        lazy = ds.isel(SUBSET)
        with dask.config.set(scheduler="processes", num_workers=2):
            computed = lazy.compute()
    assert_datasets_identical(computed, ifs_eager.isel(SUBSET))


@pytest.mark.thread_unsafe(reason="uses a distributed cluster")
def test_distributed_scheduler_equals_eager(dask_client, ifs_file, ifs_eager):
    with xr.open_dataset(ifs_file, engine=ENGINE, chunks={}) as ds:
        lazy = ds.isel(SUBSET)
        computed = dask_client.compute(lazy).result()
    assert_datasets_identical(computed, ifs_eager.isel(SUBSET))
    # The workers really read the file themselves (each opened it through its own cache).
    opened = dask_client.run(lambda: handles.CACHE.opens)
    assert len(opened) == 2 and sum(opened.values()) >= 1


@pytest.mark.thread_unsafe(reason="uses a distributed cluster")
def test_distributed_matrix_file(dask_client, codec_matrix):
    """A file of many codecs, partly read on the workers."""
    o = codec_matrix["sp24+szip-f64-3d"]
    with xr.open_dataset(o.path, engine=ENGINE, chunks={}) as ds:
        name = o.spec.id
        assert name in ds.data_vars
        part = ds[name][2:5, ::-2]
        got = dask_client.compute(part).result()
    assert_same_bits(np.ascontiguousarray(got.values), o.upstream()[2:5, ::-2], name)


def test_open_dataset_of_every_matrix_file(matrix_paths):
    """Every codec through the engine (eager and with dask), against upstream's decode."""
    for path in matrix_paths:
        expected = [list(upstream_decode_cached(path, m)) for m in range(len(tgm_xarray.open_file(path)))]
        check_dataset_against_upstream(path, expected)
        check_dataset_against_upstream(path, expected, chunks={})


# --------------------------------------------------------------------------------------------
# Variables stacked from many messages: values, holes, random outer indexing through xarray
# --------------------------------------------------------------------------------------------

STACK_CODECS = [
    {},
    {"compression": "zstd"},
    {"encoding": "simple_packing", "sp_bits_per_value": 16, "compression": "szip",
     "szip_rsi": 8, "szip_block_size": 16, "szip_flags": 8},
    {"compression": "blosc2"},
    {"filter": "shuffle", "shuffle_element_size": 8, "compression": "lz4"},
    {"compression": "zfp", "zfp_mode": "fixed_rate", "zfp_rate": 20.0},
]
STEPS, LEVELS, HOLE = (0, 6, 12), (500, 850, 1000), (12, 1000)


@pytest.fixture(scope="module")
def stacked_file(tmp_path_factory):
    """Fields of one variable ``t`` over step x level (one missing), each with its own codec."""
    import tensogram

    rng = np.random.default_rng(3)
    path = tmp_path_factory.mktemp("stacked") / "stacked.tgm"
    with open(path, "wb") as f:
        for i, (step, level) in enumerate((s, lev) for s in STEPS for lev in LEVELS):
            if (step, level) == HOLE:
                continue
            descriptor = {"type": "ntensor", "shape": [30, 40], "dtype": "float64", "byte_order": "little",
                          "encoding": "none", "filter": "none", "compression": "none",
                          **STACK_CODECS[i % len(STACK_CODECS)]}
            meta = {"base": [{"name": "t", "mars": {"param": "t", "step": step, "levelist": level, "levtype": "pl"}}]}
            f.write(tensogram.encode(meta, [(descriptor, rng.standard_normal((30, 40)) + 10 * i)]))
    return path


def test_stacked_variable_matches_upstream(stacked_file):
    expected = [upstream_decode_cached(os.fspath(stacked_file), m) for m in range(len(STEPS) * len(LEVELS) - 1)]
    check_dataset_against_upstream(stacked_file, expected)
    with xr.open_dataset(stacked_file, engine=ENGINE) as ds:
        assert ds["t"].dims[:2] == ("step", "isobaricInhPa") and ds["t"].shape == (3, 3, 30, 40)
        hole = ds["t"].sel(step=np.timedelta64(HOLE[0], "h"), isobaricInhPa=HOLE[1]).values
        assert np.isnan(hole).all()
        assert np.isnan(ds["t"].values).sum() == hole.size


@pytest.mark.parametrize("chunks", [None, {}], ids=["lazy", "dask"])
def test_random_outer_indexing_through_xarray(stacked_file, chunks):
    """xarray's orthogonal indexing (ints, slices with any step, unsorted int arrays, boolean
    arrays) across stacked and field dimensions equals numpy on the loaded values."""
    with xr.open_dataset(stacked_file, engine=ENGINE) as eager:
        full = eager["t"].values
    rng = np.random.default_rng(5)
    with xr.open_dataset(stacked_file, engine=ENGINE, chunks=chunks) as ds:
        var = ds["t"]
        for _ in range(100):
            key = random_outer_key(rng, full.shape)
            while not _safe_for_xarray_and_dask(key, full.shape):
                key = random_outer_key(rng, full.shape)
            got = var[key].values
            want = outer_index(full, key)
            np.testing.assert_array_equal(got, want, err_msg=describe_key(key))


def _safe_for_xarray_and_dask(key, shape) -> bool:
    """Leaves out negative-step slices that are empty or start before the array: xarray 2026.9's
    lazy outer indexing raises IndexError on the first (netCDF too: ``v[19:22:-5]``) and dask
    2026.8 returns an element for the second (``da.arange(3, chunks=1)[-5:-2:-2]`` is ``[2]``)."""
    items = key if isinstance(key, tuple) else (key,)
    if any(k is Ellipsis for k in items):
        at = next(i for i, k in enumerate(items) if k is Ellipsis)
        items = items[:at] + (slice(None),) * (len(shape) - len(items) + 1) + items[at + 1:]
    for item, n in zip(items, shape):
        if isinstance(item, slice) and (item.step or 1) < 0:
            if len(range(*item.indices(n))) == 0 or (item.start is not None and item.start < -n):
                return False
    return True


def test_scalar_objects(tmp_path):
    """0-d objects: alone, and stacked along a dimension from the metadata."""
    import tensogram

    descriptor = {"type": "ntensor", "shape": [], "dtype": "float64", "byte_order": "little",
                  "encoding": "none", "filter": "none", "compression": "none"}
    path = tmp_path / "scalar.tgm"
    path.write_bytes(tensogram.encode({"base": [{"name": "s"}]}, [(descriptor, np.array(3.5))]))
    assert tgm_xarray.open_file(path).read(0, 0)[()] == 3.5
    with xr.open_dataset(path, engine=ENGINE) as ds:
        assert ds["s"].shape == ()
        assert float(ds["s"].values) == 3.5
    path = tmp_path / "scalars.tgm"
    path.write_bytes(b"".join(
        tensogram.encode({"base": [{"name": "s", "mars": {"param": "s", "step": k}}]}, [(descriptor, np.array(1.5 * k))])
        for k in range(3)))
    with xr.open_dataset(path, engine=ENGINE) as ds:
        np.testing.assert_array_equal(ds["s"].values, [0.0, 1.5, 3.0])
    with xr.open_dataset(path, engine=ENGINE, chunks={}) as ds:
        np.testing.assert_array_equal(ds["s"].compute().values, [0.0, 1.5, 3.0])


# --------------------------------------------------------------------------------------------
# pickling
# --------------------------------------------------------------------------------------------


def test_pickled_dataset_is_small(ifs_file):
    with xr.open_dataset(ifs_file, engine=ENGINE) as ds:
        size = len(pickle.dumps(ds))
        # Dimension coordinates are in memory (pandas indexes); everything else stays lazy.
        index_bytes = sum(ds[d].values.nbytes for d in ds.indexes)
        assert size - index_bytes < 20_000, size
        assert size < 48_000
    with xr.open_dataset(ifs_file, engine=ENGINE, chunks={}) as ds:
        assert len(pickle.dumps(ds)) < 48_000


def test_pickled_backend_array_is_small(ifs_file):
    store = TensogramDataStore.open(os.fspath(ifs_file))
    array = store.get_variables()["q"]._data.array
    assert isinstance(array, TensogramBackendArray)
    data = pickle.dumps(array)
    assert len(data) < 1024, len(data)
    clone = pickle.loads(data)
    assert clone.shape == array.shape and clone.dtype == array.dtype
    np.testing.assert_array_equal(clone[xr.core.indexing.BasicIndexer((1, 5, slice(None)))],
                                  array[xr.core.indexing.BasicIndexer((1, 5, slice(None)))])
    store.close()


@pytest.mark.thread_unsafe(reason="runs a subprocess")
def test_pickle_unpickles_in_a_fresh_process(ifs_file, ifs_eager, tmp_path):
    with xr.open_dataset(ifs_file, engine=ENGINE) as ds:
        (tmp_path / "eager.pkl").write_bytes(pickle.dumps(ds))
    with xr.open_dataset(ifs_file, engine=ENGINE, chunks={}) as ds:
        (tmp_path / "chunked.pkl").write_bytes(pickle.dumps(ds))
    script = textwrap.dedent(f"""
        import pickle, numpy as np
        from tgm_xarray.source import handles
        assert handles.CACHE.opens == 0
        out = {{}}
        for kind in ("eager", "chunked"):
            ds = pickle.load(open({str(tmp_path)!r} + f"/{{kind}}.pkl", "rb"))
            for name in ("2t", "lsm", "q", "t"):
                out[f"{{kind}}-{{name}}"] = ds[name].values
        np.savez({str(tmp_path / "out.npz")!r}, **out)
        assert handles.CACHE.opens >= 1
    """)
    subprocess.run([sys.executable, "-c", script], check=True, timeout=120, cwd=tmp_path)
    with np.load(tmp_path / "out.npz") as got:
        for kind in ("eager", "chunked"):
            for name in ("2t", "lsm", "q", "t"):
                assert_same_bits(got[f"{kind}-{name}"], ifs_eager[name].values, f"{kind} {name}")


# --------------------------------------------------------------------------------------------
# options
# --------------------------------------------------------------------------------------------


def test_drop_variables(ifs_file, ifs_eager):
    with xr.open_dataset(ifs_file, engine=ENGINE, drop_variables=["lsm", "t"]) as ds:
        assert set(ds.data_vars) == {"2t", "q"}
        assert_datasets_identical(ds.load(), ifs_eager.drop_vars(["lsm", "t"]))
    with xr.open_dataset(ifs_file, engine=ENGINE, drop_variables="q") as ds:
        assert set(ds.data_vars) == {"2t", "lsm", "t"}


class CountingLock:
    def __init__(self):
        self._lock = threading.Lock()
        self.acquired = 0

    def __enter__(self):
        self._lock.acquire()
        self.acquired += 1
        return self

    def __exit__(self, *exc):
        self._lock.release()

    def acquire(self, *args, **kwargs):
        self.acquired += 1
        return self._lock.acquire(*args, **kwargs)

    def release(self):
        self._lock.release()


def test_lock_is_accepted_and_used(ifs_file, ifs_eager):
    with xr.open_dataset(ifs_file, engine=ENGINE, lock=threading.Lock()) as ds:
        assert_datasets_identical(ds.load(), ifs_eager)
    lock = CountingLock()
    with xr.open_dataset(ifs_file, engine=ENGINE, lock=lock, chunks={}) as ds:
        with dask.config.set(scheduler="threads", num_workers=4):
            computed = ds.compute()
    assert_datasets_identical(computed, ifs_eager)
    assert lock.acquired >= 6  # one per stored field read


# --------------------------------------------------------------------------------------------
# guess_can_open
# --------------------------------------------------------------------------------------------


def test_guess_can_open(ifs_file, tmp_path):
    entry = TensogramBackendEntrypoint()
    assert entry.guess_can_open(ifs_file)
    assert entry.guess_can_open(os.fspath(ifs_file))
    assert entry.guess_can_open("not-yet-written.tgm")  # by extension
    renamed = tmp_path / "forecast.bin"  # by the magic bytes
    shutil.copyfile(require_shared(REAL.parent / "upstream" / "golden" / "simple_f32.tgm"), renamed)
    assert entry.guess_can_open(renamed)
    assert entry.guess_can_open(os.fspath(renamed))
    with xr.open_dataset(renamed, engine=ENGINE) as ds:
        assert ds["object_0"].size == 4
    netcdf = require_shared(NETCDF / "cf_temperature.nc")
    assert not entry.guess_can_open(netcdf)
    assert not entry.guess_can_open(os.fspath(netcdf))
    as_bin = tmp_path / "cf_temperature.bin"
    shutil.copyfile(netcdf, as_bin)
    assert not entry.guess_can_open(as_bin)
    assert not entry.guess_can_open(tmp_path / "missing.nc")
    assert not entry.guess_can_open(tmp_path)  # a directory
    empty = tmp_path / "empty.dat"
    empty.write_bytes(b"")
    assert not entry.guess_can_open(empty)
    assert not entry.guess_can_open(object())


# --------------------------------------------------------------------------------------------
# closing
# --------------------------------------------------------------------------------------------


@pytest.mark.thread_unsafe(reason="inspects the process-wide handle cache")
@pytest.mark.parametrize("chunks", [None, {}], ids=["eager", "dask"])
def test_close_releases_the_dataset_reference(ifs_file, ifs_eager, chunks):
    handle = handles.acquire(ifs_file)
    gc.collect()
    base = sys.getrefcount(handle)
    # Without an index (an open from one holds no handle until its first read).
    ds = xr.open_dataset(ifs_file, engine=ENGINE, chunks=chunks, index=False)
    assert sys.getrefcount(handle) > base  # the Dataset holds the cached handle
    ds.close()
    gc.collect()
    assert sys.getrefcount(handle) == base  # ... and lets go of it on close
    # Now the cache holds the only reference: dropping it from the cache frees the handle.
    handles.CACHE.release(ifs_file)
    assert sys.getrefcount(handle) == base - 1
    # A read after close reopens through the cache (documented in source.refs).
    opens = handles.CACHE.opens
    assert_same_bits(ds["lsm"][:5].values, ifs_eager["lsm"][:5].values, "read after close")
    assert handles.CACHE.opens == opens + 1
    del ds


# --------------------------------------------------------------------------------------------
# attributes
# --------------------------------------------------------------------------------------------


def _all_attrs(ds):
    yield "dataset", ds.attrs
    for name, var in ds.variables.items():
        yield name, var.attrs


@pytest.mark.parametrize("path", shared_files("upstream/golden/*.tgm", "upstream/remote-parity/*.tgm",
                                              "real/*.tgm"))
def test_attrs_are_json_serialisable(path):
    try:
        ds = xr.open_dataset(path, engine=ENGINE)
    except tgm_xarray.TgmDuplicateError:
        pytest.skip("does not open with the defaults (test_read covers it)")
    with ds:
        for name, attrs in _all_attrs(ds):
            json.dumps(attrs)
            for key in attrs:
                assert isinstance(key, str), (name, key)


def test_attrs_of_every_cbor_type_are_json_serialisable(tmp_path):
    """Bytes, None, big integers, NaN, nested maps and lists, empty containers."""
    descriptor = {"type": "ntensor", "shape": [4], "dtype": "float32", "byte_order": "little",
                  "encoding": "none", "filter": "none", "compression": "none"}
    meta = {"base": [{"name": "v", "blob": b"\x00\x01\xff", "none": None, "big": 2**63 + 5, "neg": -(2**63),
                      "ratio": 0.5, "nan": float("nan"), "flag": True, "empty_map": {}, "empty_list": [],
                      "mixed": [1, "a", 2.5, None], "matrix": [[1, 2], [3, 4]],
                      "nested": {"a": [1, {"b": b"x", "c": [None, True]}]}}],
            "blob": b"abc", "nothing": None, "deep": {"x": {"y": [b"q", {"z": 1}]}}}
    path = tmp_path / "attrs.tgm"
    path.write_bytes(tgm_xarray._core.encode_message(meta, [(descriptor, np.arange(4, dtype=np.float32))]))
    with xr.open_dataset(path, engine=ENGINE) as ds:
        assert "v" in ds.data_vars
        for _, attrs in _all_attrs(ds):
            json.dumps(attrs)
        np.testing.assert_array_equal(ds["v"].values, np.arange(4, dtype=np.float32))
