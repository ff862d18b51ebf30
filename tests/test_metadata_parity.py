"""The core's metadata table resolves metadata as upstream ``tensogram`` parses it: repeated CBOR
keys (the last one counts), and nesting as deep as upstream reads. Messages are upstream's own
output with CBOR bytes renamed in place (same length: every offset stays valid)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import numpy as np
import pytest
import xarray as xr

import tgm_xarray
from conftest import ENGINE
from hostile import MEMORY_LIMIT

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


KEYS_OF_THEIR_OWN = textwrap.dedent("""
    import sys
    import xarray as xr
    import tgm_xarray
    path, budget = sys.argv[1], int(sys.argv[2])
""") + MEMORY_LIMIT + textwrap.dedent("""
    with xr.open_dataset(path, engine="tgm", index=False) as ds:
        print(ds.sizes["message"], len(ds.data_vars))
""")


@pytest.mark.thread_unsafe(reason="runs a subprocess")
def test_messages_with_keys_of_their_own_open_in_bounded_memory(tmp_path):
    """3,000 one-value messages, each with 100 metadata keys of its own (300,000 keys): the
    table keeps the 300,000 entries, not a column of 3,000 rows per key (9 x 10^8 cells, which
    aborted the process)."""
    path = tmp_path / "own-keys.tgm"
    with open(path, "wb") as f:
        for i in range(3000):
            meta = {"base": [{"name": "x", **{f"k{i}_{j}": j for j in range(100)}}]}
            f.write(tensogram.encode(meta, [(dict(FIELD, shape=[1]), np.array([float(i)]))]))
    # 1 GiB more address space than the imports take: the open adds ~0.3 GiB here (CPython 3.11);
    # a dense table needs over 3 GiB.
    budget = 1024**3
    run = subprocess.run([sys.executable, "-c", KEYS_OF_THEIR_OWN, str(path), str(budget)],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split() == ["3000", "1"]
