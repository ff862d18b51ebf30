"""cfgrib's ``errors`` on a file cut short inside its last message (written by upstream
``tensogram``): ``"raise"`` (the default) raises, ``"warn"`` reads the complete messages with one
warning, ``"ignore"`` reads them silently; the way the file was opened travels to dask's threads
and to worker processes, and no index is read or written for it."""

from __future__ import annotations

import os
import pickle
import warnings

import dask
import numpy as np
import pytest
import xarray as xr

from tests.helpers.oracle import ENGINE
from tgm_xarray.errors import TgmFormatError
from tgm_xarray.source import handles

pytestmark = pytest.mark.usefixtures("own_cache")

STEPS = (0, 6, 12)


def _messages() -> list[bytes]:
    tensogram = pytest.importorskip("tensogram")
    desc = {"type": "ntensor", "shape": [3, 4], "dtype": "float32", "byte_order": "little",
            "encoding": "none", "filter": "none", "compression": "none"}
    return [tensogram.encode({"base": [{"mars": {"param": "2t", "date": "20260404", "time": "0000", "step": step}}]},
                             [(desc, np.arange(12, dtype="float32").reshape(3, 4) + step)])
            for step in STEPS]


@pytest.fixture
def cut(tmp_path):
    """``(a file of three messages cut inside the third, a file of its two complete messages)``."""
    messages = _messages()
    path, whole = tmp_path / "cut.tgm", tmp_path / "two.tgm"
    path.write_bytes(b"".join(messages)[:-len(messages[-1]) // 2])
    whole.write_bytes(b"".join(messages[:2]))
    return path, whole


def _strict(path) -> xr.Dataset:
    with xr.open_dataset(path, engine=ENGINE, index=False) as ds:
        return ds.load()


def test_errors_warn_reads_the_complete_messages_with_one_warning(cut):
    path, whole = cut
    with pytest.warns(UserWarning) as caught:
        ds = xr.open_dataset(path, engine=ENGINE, errors="warn", chunks={})
    assert [str(w.message) for w in caught] == [
        f"{path}: errors='warn': read its 2 complete message(s); the rest is left out: "
        f"{path}: bytes {len(b''.join(_messages()[:2]))}..{path.stat().st_size} (after 2 complete message(s)) "
        "are a truncated message"]
    with ds, dask.config.set(scheduler="threads"):
        assert ds["2t"].chunks is not None
        xr.testing.assert_identical(ds.compute(), _strict(whole))


def test_errors_ignore_reads_them_silently(cut):
    path, whole = cut
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with xr.open_dataset(path, engine=ENGINE, errors="ignore", chunks={}) as ds, \
                dask.config.set(scheduler="threads"):
            xr.testing.assert_identical(ds.compute(), _strict(whole))


def test_a_strict_open_still_raises_after_a_lenient_one(cut, tmp_path):
    """The lenient open's handle is a cache entry of its own, and it leaves no index (beside the
    file or in the cache) that a strict open could plan from without a scan."""
    path, _ = cut
    for mode, strict in (("auto", {}), ("beside", {"errors": "raise"}), ("auto", {"errors": None})):
        with xr.open_dataset(path, engine=ENGINE, errors="ignore", index=mode) as ds:
            assert ds["2t"].sizes["step"] == 2
        with pytest.raises(TgmFormatError, match=rf"{path}: .*after 2 complete message\(s\)"):
            xr.open_dataset(path, engine=ENGINE, index=mode, **strict)
    assert sorted(os.listdir(tmp_path)) == ["cut.tgm", "two.tgm"]  # no index beside it, no cache
    assert len(handles.CACHE) == 1  # the lenient open's handle; the strict ones cached nothing


def test_a_pickled_dataset_reopens_the_complete_messages(cut):
    """A worker reopens the file as it was opened: a strict reopen would raise."""
    path, whole = cut
    with xr.open_dataset(path, engine=ENGINE, errors="ignore", chunks={}) as ds:
        data = pickle.dumps(ds)
    handles.CACHE.clear()
    with pickle.loads(data) as back:
        xr.testing.assert_identical(back.compute(), _strict(whole))


@pytest.mark.thread_unsafe(reason="starts a cluster of worker processes")
def test_errors_warn_under_distributed(cut):
    distributed = pytest.importorskip("distributed")
    path, whole = cut
    expected = _strict(whole)
    with distributed.LocalCluster(processes=True, n_workers=1, threads_per_worker=1,
                                  dashboard_address=None) as cluster, distributed.Client(cluster):
        with pytest.warns(UserWarning, match="errors='warn'"):
            ds = xr.open_dataset(path, engine=ENGINE, errors="warn", chunks={})
        with ds:
            xr.testing.assert_identical(ds.compute(), expected)


@pytest.mark.parametrize("errors", ["Warn", "strict", 1, True])
def test_other_values_of_errors_are_refused(cut, errors):
    path, _ = cut
    with pytest.raises(ValueError, match=rf"{path}: errors must be one of 'raise', 'warn', 'ignore'"):
        xr.open_dataset(path, engine=ENGINE, errors=errors)


@pytest.mark.parametrize("errors", ["warn", "ignore"])
def test_a_url_is_refused_with_lenient_errors(errors):
    """The core's remote scan reads a file whole or refuses it: refused before any request."""
    url = "http://127.0.0.1:9/x.tgm"
    with pytest.raises(ValueError, match=rf"{url}: .*a URL is read whole or refused"):
        xr.open_dataset(url, engine=ENGINE, errors=errors)
