"""Opens that meet an atomic replace (``os.replace`` of a new file over the path, as writers
publish one) go on with the new file, and reads bound to the old version raise
``TgmStaleFileError``: never another version's values, never a bare error.

Deterministic, with no timing: the replace is made at the exact step under test, from our own
code's stat of the path (``FileKey.of``) or its identity check (``index.find``).
"""

from __future__ import annotations

import os
import pickle
import subprocess
import sys

import numpy as np
import pytest
import xarray as xr

import tgm_xarray
from tgm_xarray.backend import TensogramBackendEntrypoint as ENGINE
from tgm_xarray.errors import TgmStaleFileError
from tgm_xarray.plans import index
from tgm_xarray.source import handles
from tgm_xarray.writer import to_tgm

# Every test patches the stat of the process-wide cache's files, or counts their opens.
pytestmark = [pytest.mark.thread_unsafe(reason="patches how the handle cache stats files"),
              pytest.mark.usefixtures("own_cache")]


def _dataset(value: float) -> xr.Dataset:
    return xr.Dataset({"t": (("step", "x"), np.full((2, 3), value))},
                      coords={"step": np.array([0, 6], "m8[h]")})


@pytest.fixture
def files(tmp_path):
    """``(path, replace)``: a file of t = 1, and the call that replaces it, once, with one of
    t = 2 (as a writer publishes one: written beside it, then renamed over it)."""
    path, new = tmp_path / "data.tgm", tmp_path / "new.tgm"
    to_tgm(_dataset(1.0), path)
    to_tgm(_dataset(2.0), new)

    def replace():
        if new.exists():
            os.replace(new, path)

    return str(path), replace


def _replace_after_next_stat(monkeypatch, replace, calls: int = 1) -> None:
    """The file is replaced right after the ``calls``-th stat of it from now, between that stat
    and what it was made for (a mapping, an identity's read)."""
    stat = handles.FileKey.of
    left = [calls]

    def of(cls, path):
        key = stat(path)
        left[0] -= 1
        if left[0] == 0:
            replace()
        return key

    monkeypatch.setattr(handles.FileKey, "of", classmethod(of))


def test_an_open_that_meets_a_replace_before_its_mapping_opens_the_new_file(files, monkeypatch):
    """The handle was cached under the old version's key: the open's version was the old
    file's, so the same TgmFile, pickled, raised TgmStaleFileError on the file it had read."""
    path, replace = files
    _replace_after_next_stat(monkeypatch, replace)
    f = tgm_xarray.open_file(path)
    assert f.version == handles.FileKey.of(path).version
    np.testing.assert_array_equal(f.read(0, 0), np.full(3, 2.0))
    np.testing.assert_array_equal(pickle.loads(pickle.dumps(f)).read(0, 0), np.full(3, 2.0))


@pytest.mark.parametrize("index_mode", [False, "auto"])
def test_a_read_reopening_across_a_replace_before_the_mapping_raises_stale(files, monkeypatch, index_mode):
    """A Dataset bound to the old file reopens it (after ``close``; a warm open's first read):
    its stat saw the old version, the mapping the new one. It read the new file's values under
    the old file's plan (with an index: a TgmStaleFileError blaming the index)."""
    path, replace = files
    if index_mode:
        xr.open_dataset(path, engine=ENGINE).close()  # writes the cache's index
    ds = xr.open_dataset(path, engine=ENGINE, index=index_mode)
    ds.close()
    handles.CACHE.clear()
    _replace_after_next_stat(monkeypatch, replace)
    with pytest.raises(TgmStaleFileError, match=f"{path}: the file changed after it was opened"):
        ds["t"].values


def test_an_open_whose_identity_check_meets_a_replace_opens_the_new_file(files, monkeypatch):
    """The index's identity stat'ed the old file and hashed the new one: a bare OSError."""
    path, replace = files
    _replace_after_next_stat(monkeypatch, replace)
    with xr.open_dataset(path, engine=ENGINE) as ds:
        np.testing.assert_array_equal(ds["t"].values, np.full((2, 3), 2.0))


def test_an_open_replaced_after_its_identity_check_opens_the_new_file(files, monkeypatch):
    """The file was replaced between the identity check (no index yet) and the mapping: the
    open raised TgmStaleFileError."""
    path, replace = files
    find = index.find

    def find_then_replace(*args, **kwargs):
        found = find(*args, **kwargs)
        replace()
        return found

    monkeypatch.setattr(index, "find", find_then_replace)
    with xr.open_dataset(path, engine=ENGINE) as ds:
        np.testing.assert_array_equal(ds["t"].values, np.full((2, 3), 2.0))


def test_a_file_replaced_at_every_try_of_an_open_raises_stale_naming_it(tmp_path, monkeypatch):
    """Retried once, not for ever: a writer that replaces the file again within the open."""
    path = tmp_path / "data.tgm"
    to_tgm(_dataset(1.0), path)
    stat = handles.FileKey.of

    def of(cls, p):
        key = stat(p)
        to_tgm(_dataset(float(key.mtime_ns % 7)), tmp_path / "new.tgm")
        os.replace(tmp_path / "new.tgm", path)
        return key

    monkeypatch.setattr(handles.FileKey, "of", classmethod(of))
    with pytest.raises(TgmStaleFileError, match=f"{path}: the file was replaced twice while it was being opened"):
        tgm_xarray.open_file(path)


# --- a Dataset opened from its index, whose file is replaced before its first read -------------
# (a warm open records the file's version without opening it: each object it reads is proven
# the one its index recorded, in the file there at the read)

def _steps(*values: float) -> xr.Dataset:
    """One message per step: t = ``values[i]`` at step ``i``."""
    return xr.Dataset({"t": (("step", "x"), np.repeat(np.array(values)[:, None], 3, axis=1))},
                      coords={"step": np.arange(len(values)) * np.timedelta64(6, "h")})


def _warm(path, **kwargs) -> xr.Dataset:
    """``path`` opened from the index a first open wrote: the data file is not opened."""
    xr.open_dataset(path, engine=ENGINE).close()
    opens = handles.CACHE.opens
    ds = xr.open_dataset(path, engine=ENGINE, cache=False, **kwargs)
    assert handles.CACHE.opens == opens, "the open was not warm"
    return ds


def _publish(path, ds: xr.Dataset, **kwargs) -> None:
    """``ds`` written beside ``path``, then renamed over it (as writers publish a file)."""
    new = path.with_name("new.tgm")
    to_tgm(ds, new, **kwargs)
    os.replace(new, path)


@pytest.mark.parametrize("chunks", [None, {}], ids=["numpy", "dask threads"])
def test_a_warm_open_whose_file_is_republished_with_the_same_data_reads_it(tmp_path, chunks):
    path = tmp_path / "data.tgm"
    to_tgm(_steps(1.0, 2.0), path)
    ds = _warm(path, chunks=chunks)
    before = handles.FileKey.of(path).version
    _publish(path, _steps(1.0, 2.0))
    assert handles.FileKey.of(path).version != before
    np.testing.assert_array_equal(ds.t.compute(scheduler="threads").values, [[1.0] * 3, [2.0] * 3])


def test_a_warm_open_whose_file_gains_a_message_reads_the_planned_ones(tmp_path):
    path, extra = tmp_path / "data.tgm", tmp_path / "extra.tgm"
    to_tgm(_steps(1.0, 2.0), path)
    to_tgm(_steps(9.0), extra)
    ds = _warm(path)
    (tmp_path / "new.tgm").write_bytes(path.read_bytes() + extra.read_bytes())
    os.replace(tmp_path / "new.tgm", path)
    assert len(tgm_xarray.open_file(path)) == 3
    assert ds.sizes["step"] == 2
    np.testing.assert_array_equal(ds.t.values, [[1.0] * 3, [2.0] * 3])


@pytest.mark.parametrize("chunks", [None, {}], ids=["numpy", "dask threads"])
@pytest.mark.parametrize(("new", "differs"), [((2.0, 1.0), "[01]"), ((1.0, 5.0), "1"), ((1.0,), "1")],
                         ids=["messages swapped", "values changed", "message dropped"])
def test_a_warm_open_whose_file_is_republished_with_other_objects_raises_stale_naming_them(
        tmp_path, chunks, new, differs):
    path = tmp_path / "data.tgm"
    to_tgm(_steps(1.0, 2.0), path)
    ds = _warm(path, chunks=chunks)
    _publish(path, _steps(*new))
    with pytest.raises(TgmStaleFileError, match=rf"{path}: the file changed after it was opened \(.*\): "
                                                rf"message {differs}, object 0 is not the object its index recorded"):
        ds.t.compute(scheduler="threads")
    if differs == "1":  # the first message is the same stored bytes: it is read
        np.testing.assert_array_equal(ds.t.isel(step=0).values, [1.0] * 3)


def test_a_warm_open_of_objects_without_a_hash_reads_the_same_bytes_and_refuses_others(tmp_path):
    """Their fingerprint hashes their whole frame (descriptor, payload, masks): it proves the same
    stored bytes in another file as an inline hash does."""
    path = tmp_path / "data.tgm"
    to_tgm(_steps(1.0, 2.0), path, hash=False)
    ds = _warm(path)
    _publish(path, _steps(1.0, 2.0), hash=False)
    np.testing.assert_array_equal(ds.t.values, [[1.0] * 3, [2.0] * 3])
    ds.close()
    _publish(path, _steps(1.0, 5.0), hash=False)
    with pytest.raises(TgmStaleFileError, match=rf"{path}: the file changed after it was opened \(.*\): "
                                                "message 1, object 0 is not the object its index recorded"):
        ds.t.values


def test_a_warm_open_closed_then_replaced_again_proves_each_object_in_the_newest_file(tmp_path):
    """What was proven in one replacing file says nothing of the next."""
    path = tmp_path / "data.tgm"
    to_tgm(_steps(1.0, 2.0), path)
    ds = _warm(path)
    _publish(path, _steps(1.0, 2.0))
    np.testing.assert_array_equal(ds.t.values, [[1.0] * 3, [2.0] * 3])
    ds.close()
    _publish(path, _steps(2.0, 1.0))
    with pytest.raises(TgmStaleFileError, match="message 0, object 0 is not the object its index recorded"):
        ds.t.values


def test_pickled_warm_dataset_reads_a_republished_file_in_another_process(tmp_path):
    path = tmp_path / "data.tgm"
    to_tgm(_steps(1.0, 2.0), path)
    pickled = pickle.dumps(_warm(path, chunks={}))
    read = [sys.executable, "-c", "import pickle, sys; print(pickle.loads(sys.stdin.buffer.read()).t.values.sum())"]
    _publish(path, _steps(1.0, 2.0))
    done = subprocess.run(read, input=pickled, capture_output=True, timeout=300)
    assert done.returncode == 0 and done.stdout.decode().strip() == "9.0", done.stderr.decode()
    _publish(path, _steps(2.0, 1.0))
    done = subprocess.run(read, input=pickled, capture_output=True, timeout=300)
    assert done.returncode != 0
    assert f"TgmStaleFileError: {path}: the file changed after it was opened" in done.stderr.decode()


def test_dask_workers_of_a_warm_open_read_a_republished_file(dask_client, tmp_path):
    path = tmp_path / "data.tgm"
    to_tgm(_steps(1.0, 2.0), path)
    with _warm(path, chunks={}) as ds:
        _publish(path, _steps(1.0, 2.0))
        np.testing.assert_array_equal(dask_client.compute(ds.t).result().values, [[1.0] * 3, [2.0] * 3])
        _publish(path, _steps(1.0, 5.0))
        with pytest.raises(TgmStaleFileError, match="message 1, object 0 is not the object its index recorded"):
            dask_client.compute(ds.t).result()


def test_an_open_without_an_index_reads_the_version_it_mapped_until_it_is_closed(tmp_path):
    """It maps the file at the open: a file published over it later is not read, even with the
    same data (nothing proves an object the same without an index's fingerprints)."""
    path = tmp_path / "data.tgm"
    to_tgm(_steps(1.0, 2.0), path)
    ds = xr.open_dataset(path, engine=ENGINE, index=False, cache=False)
    _publish(path, _steps(5.0, 5.0))
    np.testing.assert_array_equal(ds.t.values, [[1.0] * 3, [2.0] * 3])
    ds.close()
    with pytest.raises(TgmStaleFileError, match=f"{path}: the file changed after it was opened"):
        ds.t.values
