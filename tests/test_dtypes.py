"""The one table of Tensogram dtype names (the core's, ``_core.DTYPES``), and what a bitmask object becomes."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

import tgm_xarray
from tests.helpers.oracle import ENGINE
from tgm_xarray import _core
from tgm_xarray.cli.info import describe
from tgm_xarray.errors import TgmCodecError


def _descriptor(dtype: str, shape: list[int], compression: str = "none") -> dict:
    return {"type": "ntensor", "shape": shape, "dtype": dtype, "byte_order": "little",
            "encoding": "none", "filter": "none", "compression": compression}


@pytest.fixture
def bitmask_file(tmp_path):
    """A real file written by upstream tensogram: a float field ``t`` and a 64-bit bitmask ``m``."""
    import tensogram

    t = np.linspace(250.0, 300.0, 8)
    bits = np.packbits(np.arange(64) % 3 == 0)
    path = tmp_path / "bitmask.tgm"
    path.write_bytes(tensogram.encode({"base": [{"name": "t"}, {"name": "m"}]},
                                      [(_descriptor("float64", [8]), t),
                                       (_descriptor("bitmask", [64], "rle"), bits)]))
    return path, t


def test_every_dtype_upstream_writes_is_in_the_table(tmp_path):
    """The names in the table are the ones upstream writes: each reads back as its numpy dtype."""
    import tensogram

    for name in sorted(set(_core.DTYPES) - {"bitmask", "bfloat16"}):
        values = np.arange(6).astype(name)
        path = tmp_path / f"{name}.tgm"
        path.write_bytes(tensogram.encode({"base": [{"name": "v"}]}, [(_descriptor(name, [6]), values.tobytes())]))
        f = tgm_xarray.open_file(path)
        assert f.descriptors(0)[0]["dtype"] == name
        assert f.layout(0, 0) == ((6,), np.dtype(name))
        np.testing.assert_array_equal(f.read(0, 0), values)
        assert describe(str(path))["decoded_bytes"] == values.nbytes


def test_unknown_names_are_refused():
    with pytest.raises(TgmCodecError, match="unknown dtype 'float128'"):
        _core.numpy_dtype("float128")


def test_a_bitmask_object_fails_the_dataset_at_open(bitmask_file):
    """Planning and reading agree: a bitmask object has no array form, so a Dataset holding it
    fails when it is opened (it was planned as 64 uint8 values that no read could fill)."""
    path, _ = bitmask_file
    with pytest.raises(TgmCodecError) as info:
        xr.open_dataset(path, engine=ENGINE)
    for part in (str(path), "message 0 object 1", "bitmask", "filter_by_keys"):
        assert part in str(info.value)
    with pytest.raises(TgmCodecError, match="message 0, object 1: bitmask"):
        tgm_xarray.open_file(path).layout(0, 1)


def test_a_filter_leaving_the_bitmask_out_opens(bitmask_file):
    path, t = bitmask_file
    with xr.open_dataset(path, engine=ENGINE, filter_by_keys={"name": "t"}) as ds:
        assert list(ds.data_vars) == ["t"]
        np.testing.assert_array_equal(ds["t"].values, t)


def test_info_counts_a_bitmask_as_its_packed_bytes(bitmask_file):
    path, t = bitmask_file
    assert describe(str(path))["decoded_bytes"] == t.nbytes + 64 // 8


def test_append_beside_an_object_without_numpy_dtype(tmp_path):
    """Appending reads the file's objects named like the new auxiliary coordinates; one without
    a numpy dtype (bfloat16 without ml_dtypes, a bitmask) is skipped, not a crash (it was a
    TypeError from numpy)."""
    import tensogram

    path = tmp_path / "a.tgm"
    path.write_bytes(tensogram.encode({"base": [{"name": "area"}]},
                                      [(_descriptor("bfloat16", [3, 4]), np.ones(12, np.uint16).tobytes())]))
    ds = xr.Dataset({"v": (("y", "x"), np.ones((3, 4)))}, coords={"area": (("y", "x"), np.ones((3, 4)))})
    tgm_xarray.to_tgm(ds, path, mode="a")
    names = [b.get("name") for m in range(len(tgm_xarray.open_file(path)))
             for b in tgm_xarray.open_file(path).metadata(m)["base"]]
    assert names.count("area") == 2


def test_info_summarises_a_file_whose_dataset_cannot_open(bitmask_file, capsys):
    from tgm_xarray.cli import main

    path, _ = bitmask_file
    assert main(["info", str(path)]) == 0
    out = capsys.readouterr().out
    assert "2 objects" in out and "dataset: none (" in out and "bitmask" in out
