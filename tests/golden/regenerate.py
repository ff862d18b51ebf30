"""Golden byte fixtures: what ``to_tgm`` and ``TensogramCodec`` write for rows of the option table.

Run ``python tests/golden/regenerate.py`` only when a change of the bytes written is meant (a new
default, a new encoder version): it rewrites ``writer-<case>.tgm`` (``to_tgm`` of a one-variable
Dataset), ``codec-<case>.tgm`` (the chunk ``TensogramCodec`` stores in a zarr array, a whole
message) and ``manifest.json`` (each case's options and the SHA-256 of its decoded values).
``tests/writer/test_golden.py`` imports :data:`CASES` and the writers from here, so the test and the
fixtures are made by the same code. See README.md.
"""

from __future__ import annotations

import hashlib
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
MANIFEST = HERE / "manifest.json"
SHAPE = (16, 24)


@dataclass(frozen=True)
class Case:
    """One row: the encoding options (the pipeline's names), the values' dtype, and whether the
    values hold NaN and infinities."""

    name: str
    options: dict = field(default_factory=dict)
    dtype: str = "float32"
    nan: bool = False

    def values(self) -> np.ndarray:
        """Exact values from integer arithmetic (no libm: the same bits on every platform): a
        field between 200 and 330 in steps of 1/8, NaN and +-Inf at fixed points when asked."""
        i, j = np.indices(SHAPE)
        ints = (i * i * 7 + j * 13 + (i * j) % 11 * 5) % 1024
        dtype = np.dtype(self.dtype)
        if dtype.kind in "iu":
            return (ints - (512 if dtype.kind == "i" else 0)).astype(dtype)
        values = (200.0 + ints / 8.0).astype(dtype)
        if self.nan:
            values[::5, ::7] = np.nan
            values[1, 1], values[2, 3] = np.inf, -np.inf
        return values


CASES = (
    Case("raw", {"compression": "none"}),
    Case("raw-int16", {"compression": "none"}, "int16"),
    Case("packing8", {"bits": 8, "compression": "none"}, "float64"),
    Case("packing16", {"bits": 16, "compression": "none"}),
    Case("packing24-szip", {"bits": 24, "compression": "szip"}),
    Case("packing12-decimal", {"bits": 12, "decimal_scale_factor": 1, "compression": "lz4"}),
    Case("szip", {"compression": "szip", "szip_rsi": 4, "szip_block_size": 16}),
    Case("zstd", {"compression": "zstd", "zstd_level": 5}, "int16"),
    Case("lz4", {"compression": "lz4"}, "float64"),
    Case("blosc2", {}),  # the default compression: blosc2 zstd/1
    Case("blosc2-lz4", {"blosc2_codec": "lz4", "blosc2_clevel": 9}, "float64"),
    Case("zfp-rate", {"compression": "zfp", "zfp_mode": "fixed_rate", "zfp_rate": 16.0}, "float64"),
    Case("zfp-accuracy", {"compression": "zfp", "zfp_mode": "fixed_accuracy", "zfp_tolerance": 0.01}),
    Case("sz3-abs", {"compression": "sz3", "sz3_error_bound_mode": "abs", "sz3_error_bound": 0.05}, "float64"),
    Case("shuffle-zstd", {"filter": "shuffle", "compression": "zstd"}, "float64"),
    Case("shuffle-packing16-lz4", {"bits": 16, "filter": "shuffle", "compression": "lz4"}),
    Case("shuffle-szip", {"filter": "shuffle", "compression": "szip"}, "float64"),
    Case("nan-raw", {"compression": "none"}, nan=True),
    Case("nan-blosc2", {}, "float64", nan=True),
    Case("nan-packing16-szip", {"bits": 16, "compression": "szip"}, nan=True),
)


def write_writer(case: Case, path: Path) -> None:
    """``to_tgm`` of ``{"v": (("y", "x"), values)}`` with ``case.options`` as v's encoding."""
    import xarray as xr

    from tgm_xarray import to_tgm

    to_tgm(xr.Dataset({"v": (("y", "x"), case.values())}), path, encoding={"v": case.options})


def codec_chunk(case: Case) -> bytes:
    """The one chunk ``TensogramCodec(**case.options)`` stores for the values in a zarr array."""
    import zarr

    from tgm_xarray.zarr_codec import TensogramCodec

    store = zarr.storage.MemoryStore()
    array = zarr.create_array(store, shape=SHAPE, chunks=SHAPE, dtype=case.dtype,
                              serializer=TensogramCodec(**case.options), compressors=None)
    array[:] = case.values()
    return store._store_dict["c/0/0"].to_bytes()


def decoded_digest(values: np.ndarray) -> str:
    """SHA-256 of decoded values: native little-endian bytes of the dtype, then the shape."""
    values = np.ascontiguousarray(values, dtype=values.dtype.newbyteorder("<"))
    return hashlib.sha256(values.tobytes() + repr(values.shape).encode()).hexdigest()


def decode(path: Path) -> np.ndarray:
    """The values of the only object of the only message of ``path``, as our reader decodes
    them (the hash checked)."""
    import tgm_xarray

    with tgm_xarray.open_file(path) as f:
        if len(f) != 1 or len(f.descriptors(0)) != 1:
            raise ValueError(f"{path}: expected one message of one object")
        return f.read(0, 0, verify_hash=True)


def regenerate() -> dict:
    """Rewrites every fixture and the manifest; returns the manifest."""
    manifest = {}
    for case in CASES:
        writer, codec = HERE / f"writer-{case.name}.tgm", HERE / f"codec-{case.name}.tgm"
        write_writer(case, writer)
        codec.write_bytes(codec_chunk(case))
        digests = {kind: decoded_digest(decode(path)) for kind, path in (("writer", writer), ("codec", codec))}
        manifest[case.name] = {"options": case.options, "dtype": case.dtype, "nan": case.nan,
                               "decoded_sha256": digests}
    MANIFEST.write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


if __name__ == "__main__":
    written = regenerate()
    total = sum(p.stat().st_size for p in HERE.glob("*.tgm"))
    print(f"{len(written)} cases, {2 * len(written)} files, {total:,} bytes in {HERE}", file=sys.stderr)
