"""Tensogram dtype names and their numpy dtypes: the one table every reader, writer and
command of the package looks them up in.

>>> numpy_dtype("float32")
dtype('float32')
>>> decoded_bytes("bitmask", 64), decoded_bytes("bfloat16", 10)
(8, 20)
>>> numpy_dtype("bitmask")
Traceback (most recent call last):
...
tgm_xarray.errors.TgmCodecError: bitmask objects (packed bits) have no array form here; leave them out with filter_by_keys
"""

from __future__ import annotations

import numpy as np

from tgm_xarray.errors import TgmCodecError

#: Every Tensogram dtype name and the bits one element takes.
BITS: dict[str, int] = {
    "float16": 16, "bfloat16": 16, "float32": 32, "float64": 64,
    "complex64": 64, "complex128": 128,
    "int8": 8, "int16": 16, "int32": 32, "int64": 64,
    "uint8": 8, "uint16": 16, "uint32": 32, "uint64": 64,
    "bitmask": 1,
}


def numpy_dtype(name: str) -> np.dtype:
    """The numpy dtype objects of Tensogram dtype ``name`` are read as.

    Raises ``TgmCodecError`` for a name without one: ``bitmask`` (packed bits, whose shape
    counts bits, not bytes: a Dataset never plans them), ``bfloat16`` without the
    ``ml_dtypes`` package, and names Tensogram does not define.
    """
    if name == "bfloat16":
        try:
            import ml_dtypes
        except ImportError:
            raise TgmCodecError("bfloat16 objects need the ml_dtypes package") from None
        return np.dtype(ml_dtypes.bfloat16)
    if name == "bitmask":
        raise TgmCodecError("bitmask objects (packed bits) have no array form here; "
                            "leave them out with filter_by_keys")
    if name not in BITS:
        raise TgmCodecError(f"unknown dtype {name!r}")
    return np.dtype(name)


def decoded_bytes(name: str, count: int) -> int:
    """Bytes ``count`` elements of dtype ``name`` take decoded (bitmasks: whole bytes of bits)."""
    return (count * BITS[name] + 7) // 8
