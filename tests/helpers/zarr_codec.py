"""The configurations and data of the zarr codec tests (``tgm_xarray.zarr_codec``): every
lossless and lossy configuration with the bound of its error, and the real field in every dtype."""

from __future__ import annotations

import numpy as np
import zarr

from tgm_xarray import TensogramCodec

SHAPE, CHUNKS = (45, 67), (16, 30)  # 3 x 3 chunks, the last row and column of them partial


LOSSLESS = {
    "none": {},
    "szip": {"compression": "szip"},
    "shuffle+szip": {"filter": "shuffle", "compression": "szip", "szip_block_size": 32},
    "zstd": {"compression": "zstd", "zstd_level": 5},
    "lz4-nohash": {"compression": "lz4", "hash": False},
    "blosc2": {"compression": "blosc2", "blosc2_codec": "zstd", "blosc2_clevel": 3},
    "shuffle+zstd": {"filter": "shuffle", "compression": "zstd"},
}


def sp(bits: int, **stages) -> dict:
    """A simple-packing configuration."""
    return {"encoding": "simple_packing", "bits_per_value": bits, **stages}


def packing_bound(bits: int):
    return lambda v: float(np.ptp(v)) / (2**bits - 1)


def with_zero(v: np.ndarray) -> float:
    return float(max(v.max(), 0) - min(v.min(), 0))


# name -> (configuration, bound(finite values) on |decoded - values| before the dtype's own rounding).
# The test arrays hold NaN and infinities, which Tensogram replaces by 0 before zfp and sz3 see the
# values: their relative bounds are relative to a range that includes 0 (simple packing's is not).
LOSSY = {
    "sp16": (sp(16), packing_bound(16)),
    "sp24+szip": (sp(24, compression="szip"), packing_bound(24)),
    "sp16+szip-dsf1": (sp(16, decimal_scale_factor=1, compression="szip"), packing_bound(16)),
    "sp12+zstd": (sp(12, compression="zstd"), packing_bound(12)),
    "sp24+shuffle+blosc2": (sp(24, filter="shuffle", compression="blosc2"), packing_bound(24)),
    "sp7+lz4": (sp(7, compression="lz4"), packing_bound(7)),
    "zfp-accuracy": ({"compression": "zfp", "zfp_mode": "fixed_accuracy", "zfp_tolerance": 0.01},
                     lambda v: 0.01),
    "zfp-rate": ({"compression": "zfp", "zfp_mode": "fixed_rate", "zfp_rate": 24.0},
                 lambda v: 1e-3 * with_zero(v)),
    "zfp-precision": ({"compression": "zfp"}, lambda v: 1e-6 * with_zero(v)),
    "sz3-abs": ({"compression": "sz3", "sz3_error_bound_mode": "abs", "sz3_error_bound": 0.01},
                lambda v: 0.01),
    "sz3-rel": ({"compression": "sz3"}, lambda v: 1e-4 * with_zero(v)),
    "sz3-psnr": ({"compression": "sz3", "sz3_error_bound_mode": "psnr", "sz3_error_bound": 80.0},
                 lambda v: 1e-3 * with_zero(v)),
}


def as_dtype(field: np.ndarray, dtype: str) -> np.ndarray:
    """``field`` in ``dtype``: floats as they are (with NaN and +-inf), integers over their full
    range (extremes included), complex with the field reversed as imaginary part."""
    dt = np.dtype(dtype)
    if dt.kind == "f":
        values = field.astype(dt)
        values[1, 2] = values[20, 33] = np.nan
        values[3, 4], values[40, 60] = np.inf, -np.inf
        return values
    if dt.kind == "c":
        return (field + 1j * field[::-1, ::-1]).astype(dt)
    info = np.iinfo(dt)
    span = min(float(info.max) - float(info.min), 2.0**52)  # exact in float64
    unit = (field - field.min()) / np.ptp(field)
    values = (np.round(unit * span) + max(float(info.min), -(2.0**51))).astype(dt)
    values[0, 0], values[0, 1] = info.min, info.max
    return values


def valid(configuration: dict, dtype: str) -> bool:
    """Whether zarr accepts an array of ``dtype`` with this configuration (the matrix skips the rest)."""
    try:
        zarr.create_array({}, shape=(1,), dtype=dtype, serializer=TensogramCodec(**configuration),
                          compressors=None)
    except ValueError:
        return False
    return True


CONFIGURATIONS = {**LOSSLESS, **{name: c for name, (c, _) in LOSSY.items()}}
