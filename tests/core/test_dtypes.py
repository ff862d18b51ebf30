"""The Rust core's one dtype table: every numpy-readable Tensogram dtype reads without the core
calling back into the Python package."""

import numpy as np
import pytest

import tgm_xarray.source.file
from tgm_xarray import _core

DTYPES = ["float16", "float32", "float64", "complex64", "complex128",
          "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64"]


@pytest.mark.parametrize("dtype", DTYPES)
def test_reads_and_out_arrays_of_every_numpy_dtype(tmp_path, monkeypatch, dtype):
    import tensogram

    values = (np.arange(12) * 3).astype(dtype).reshape(3, 4)
    descriptor = {"type": "ntensor", "shape": [3, 4], "dtype": dtype, "byte_order": "little",
                  "encoding": "none", "filter": "none", "compression": "none"}
    path = tmp_path / f"{dtype}.tgm"
    path.write_bytes(tensogram.encode({"base": [{"name": "v"}]}, [(descriptor, values.astype(values.dtype.newbyteorder("<")).tobytes())]))

    def no_callback(name):
        raise AssertionError(f"the core asked the Python package for {name}")

    # The core's dtype table holds float16 and complex too: it never asks the Python package.
    monkeypatch.setattr(tgm_xarray.source.file, "numpy_dtype", no_callback)
    handle = _core.FileHandle(str(path))
    got = handle.read(0, 0)
    assert got.dtype == np.dtype(dtype) and np.array_equal(got, values)
    out = np.empty((2, 4), dtype=dtype)
    assert handle.read(0, 0, (slice(1, 3),), out=out) is out
    assert np.array_equal(out, values[1:])
    with pytest.raises(ValueError, match="out has shape"):
        handle.read(0, 0, out=np.empty((3, 4), dtype="S1" if dtype != "int8" else "uint16"))
