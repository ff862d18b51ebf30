"""Metadata tables for the planner's tests, built by the core from encoded messages
(``benchmarks/planner.py`` times the planner on ``distinct_steps_table`` too)."""

from __future__ import annotations

import numpy as np

from tgm_xarray._core import encode_message
from tgm_xarray.table import MetadataTable


def _object(shape, dtype: str) -> tuple[dict, np.ndarray]:
    descriptor = {"type": "ntensor", "shape": list(shape), "dtype": dtype, "byte_order": "little",
                  "encoding": "none", "filter": "none", "compression": "zstd"}
    return descriptor, np.zeros(shape, dtype=dtype)


def distinct_steps_table(n: int, reverse: bool = False) -> MetadataTable:
    """``n`` one-value messages of ``2t``, message ``i`` at step ``i`` (``n - 1 - i`` with
    ``reverse``): the table of a file of them. One message is encoded, with its step as a 4-byte
    CBOR integer, and each message is that one with its step's bytes in place."""
    marker = 0x12345678
    one = encode_message({"base": [{"mars": {"param": "2t", "step": marker}}]}, [_object((), "float32")], hash=False)
    mark = b"dstep\x1a" + marker.to_bytes(4, "big")
    assert one.count(mark) == 1
    steps = range(n)[::-1] if reverse else range(n)
    return MetadataTable.of_bytes(b"".join(one.replace(mark, b"dstep\x1a" + s.to_bytes(4, "big")) for s in steps))
