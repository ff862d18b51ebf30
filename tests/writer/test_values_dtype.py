"""Packed float32 stays float32: the writer records the dtype a packed variable was given in
(simple packing stores float64, as upstream 0.24 packs), the reader gives its fields back in it,
equal to the float64 decode cast to float32; cfgrib's ``values_dtype`` says otherwise for every
floating-point data variable, upstream's files included."""

from __future__ import annotations

import os

import numpy as np
import pytest
import xarray as xr

import tgm_xarray
from tests.helpers.oracle import ENGINE, upstream_decode
from tgm_xarray import _core


def forecast(dtype: str = "float32") -> xr.Dataset:
    values = (250 + 30 * np.random.default_rng(5).random((3, 40, 50))).astype(dtype)
    return xr.Dataset({"t": (("step", "latitude", "longitude"), values, {"units": "K"})},
                      coords={"step": np.array([0, 6, 12], "timedelta64[h]").astype("timedelta64[ns]"),
                              "latitude": np.linspace(60, 20, 40), "longitude": np.linspace(-20, 29, 50)})


@pytest.mark.parametrize("encoding", [{"bits": 16}, {"bits": 24, "compression": "szip"}],
                         ids=["16 bits", "24 bits szip"])
@pytest.mark.parametrize("chunks", [None, {}], ids=["numpy", "dask"])
def test_a_packed_float32_variable_reads_back_float32(tmp_path, encoding, chunks):
    ds = forecast()
    path = tmp_path / "f32.tgm"
    tgm_xarray.to_tgm(ds, path, encoding={"t": encoding})
    with xr.open_dataset(path, engine=ENGINE, chunks=chunks) as read:
        assert read.t.dtype == np.float32
        assert read.t.attrs == {"units": "K"}  # the record is no attribute
        assert read.latitude.dtype == np.float64
        values = read.t.values
    stored = np.stack([upstream_decode(path, msg)[0] for msg in range(3)])  # upstream reads float64
    assert stored.dtype == np.float64
    np.testing.assert_array_equal(values, stored.astype(np.float32))
    step = 30 / 2 ** encoding["bits"]
    assert np.abs(values - ds.t.values).max() <= step


def test_values_dtype_float64_reads_the_stored_values(tmp_path):
    path = tmp_path / "f32.tgm"
    tgm_xarray.to_tgm(forecast(), path, encoding={"t": {"bits": 16}})
    with xr.open_dataset(path, engine=ENGINE, values_dtype=np.float64) as read:
        assert read.t.dtype == np.float64
        np.testing.assert_array_equal(read.t.values[1], upstream_decode(path, 1)[0])


def test_values_dtype_float32_narrows_upstream_s_float64_files(ifs_file):
    with xr.open_dataset(ifs_file, engine=ENGINE) as stored, \
            xr.open_dataset(ifs_file, engine=ENGINE, values_dtype="float32") as narrow:
        floats = [name for name in stored.data_vars if stored[name].dtype == np.float64]
        assert floats
        for name in floats:
            assert narrow[name].dtype == np.float32
            np.testing.assert_array_equal(narrow[name].values, stored[name].values.astype(np.float32))
        assert narrow.latitude.dtype == stored.latitude.dtype  # coordinates as stored


def test_unpacked_and_float64_variables_record_nothing(tmp_path):
    ds = forecast().assign(q=forecast("float64").t)
    path = tmp_path / "plain.tgm"
    tgm_xarray.to_tgm(ds, path, encoding={"q": {"bits": 16}})  # t: lossless float32
    handle = _core.FileHandle(os.fspath(path))
    bases = [base for msg in range(len(handle)) for base in handle.metadata(msg)["base"]]
    assert not any(_core.VALUES_DTYPE_KEY in base for base in bases)
    with xr.open_dataset(path, engine=ENGINE) as read:
        assert (read.t.dtype, read.q.dtype) == (np.float32, np.float64)


def test_a_packed_float32_file_written_again_stays_float32(tmp_path):
    tgm_xarray.to_tgm(forecast(), tmp_path / "a.tgm", encoding={"t": {"bits": 16}})
    with xr.open_dataset(tmp_path / "a.tgm", engine=ENGINE) as first:
        tgm_xarray.to_tgm(first, tmp_path / "b.tgm")  # the file's own packing, reused
        with xr.open_dataset(tmp_path / "b.tgm", engine=ENGINE) as second:
            assert second.t.dtype == np.float32
            assert second.t.encoding["bits_per_value"] == 16
            np.testing.assert_array_equal(second.t.values, first.t.values)


@pytest.mark.parametrize("bad", ["int16", np.int32, "float16", "nonsense"])
def test_a_values_dtype_that_is_not_a_float_width_read_is_refused(tmp_path, bad):
    path = tmp_path / "f32.tgm"
    tgm_xarray.to_tgm(forecast(), path, encoding={"t": {"bits": 16}})
    with pytest.raises(ValueError, match=r"f32.tgm.*values_dtype must be one of \('float32', 'float64'\)"):
        xr.open_dataset(path, engine=ENGINE, values_dtype=bad)
