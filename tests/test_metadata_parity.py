"""The core's metadata table resolves metadata as upstream ``tensogram`` parses it: repeated CBOR
keys (the last one counts), and nesting as deep as upstream reads. Messages are upstream's own
output with CBOR bytes renamed in place (same length: every offset stays valid)."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

import tgm_xarray
from conftest import ENGINE

tensogram = pytest.importorskip("tensogram")

FIELD = {"type": "ntensor", "shape": [2], "dtype": "float64", "byte_order": "little", "encoding": "none",
         "filter": "none", "compression": "none"}


def renamed(metadata: dict, old: bytes, new: bytes) -> bytes:
    message = bytearray(tensogram.encode(metadata, [(FIELD, np.arange(2.0))]))
    assert len(old) == len(new) and message.count(old) == 1
    at = message.find(old)
    message[at:at + len(old)] = new
    return bytes(message)


def names(message: bytes, tmp_path) -> tuple[str, str, list[str]]:
    """Object 0's name as upstream, ``open_file().metadata`` and the Dataset (the table) see it."""
    path = tmp_path / "crafted.tgm"
    path.write_bytes(message)
    upstream = tensogram.decode(message).metadata.base[0]["name"]
    ours = tgm_xarray.open_file(path).metadata(0)["base"][0]["name"]
    with xr.open_dataset(path, engine=ENGINE, index=False) as ds:
        return upstream, ours, list(ds.data_vars)


def test_a_repeated_top_level_base_resolves_as_upstream(tmp_path):
    # `_extra_` {"pad": 20 x} (34 bytes) becomes a second `base` of the same length.
    message = renamed({"base": [{"name": "a"}], "_extra_": {"pad": "x" * 20}},
                      b"g_extra_\xa1cpadt" + b"x" * 20, b"dbase\x81\xa2dnameabapq" + b"y" * 17)
    assert names(message, tmp_path) == ("b", "b", ["b"])


def test_a_repeated_key_in_a_base_entry_resolves_as_upstream(tmp_path):
    # {"name": "a", "namx": "b"}: "namx" renamed "name", after the first in the encoded map.
    message = renamed({"base": [{"name": "a", "namx": "b"}]}, b"dnamxab", b"dnameab")
    assert names(message, tmp_path) == ("b", "b", ["b"])


def test_metadata_as_deep_as_upstream_reads_opens(tmp_path):
    """Attributes nested 70 deep (upstream reads up to 253): written by ``to_tgm``, read back."""
    nested: dict = {"leaf": 1}
    for _ in range(70):
        nested = {"n": nested}
    ds = xr.Dataset({"t": (("x",), np.arange(3.0), {"deep": nested})})
    path = tmp_path / "deep.tgm"
    tgm_xarray.to_tgm(ds, path)
    with xr.open_dataset(path, engine=ENGINE, index=False) as back:
        np.testing.assert_array_equal(back["t"].values, ds["t"].values)
    tensogram.decode(path.read_bytes())  # upstream reads it too
