"""Opens that meet an atomic replace (``os.replace`` of a new file over the path, as writers
publish one) go on with the new file, and reads bound to the old version raise
``TgmStaleFileError``: never another version's values, never a bare error.

Deterministic, with no timing: the replace is made at the exact step under test, from our own
code's stat of the path (``FileKey.of``) or its identity check (``index.find``).
"""

from __future__ import annotations

import os
import pickle

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
