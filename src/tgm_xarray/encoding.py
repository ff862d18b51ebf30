"""Per-variable encodings: the Tensogram pipeline that stores a variable, checked before writing.

A variable's encoding is a dict of options, like xarray's ``encoding``::

    {"bits": 16}                                   # simple packing, then blosc2 (lossless)
    {"bits": 16, "compression": "szip"}            # as GRIB 2's CCSDS packing
    {"compression": "zstd", "zstd_level": 9}       # lossless
    {"compression": "zfp", "zfp_mode": "fixed_accuracy", "zfp_tolerance": 0.01}

:func:`resolve` turns the options and the variable's dtype into a :class:`Codec`, filling in the
defaults and rejecting what upstream tensogram 0.24 cannot store, so a bad option fails before
any byte is written. :meth:`Codec.prepare` then builds one field's descriptor. ``docs/writer.md``
lists every option and default.

>>> codec = resolve("t2m", np.dtype("float32"), {"bits": 12})
>>> codec.dtype, codec.encoding, codec.compression
(dtype('float64'), 'simple_packing', 'blosc2')
>>> resolve("t2m", np.dtype("float32"), None).compression
'blosc2'
"""

from __future__ import annotations

import math
import sys
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tgm_xarray.errors import TgmCodecError

COMPRESSIONS = ("none", "zstd", "lz4", "blosc2", "szip", "zfp", "sz3")
FILTERS = ("none", "shuffle")
BLOSC2_CODECS = ("blosclz", "lz4", "lz4hc", "zlib", "zstd")
ZFP_MODES = {"fixed_rate": "zfp_rate", "fixed_precision": "zfp_precision",
             "fixed_accuracy": "zfp_tolerance"}
SZ3_MODES = ("abs", "rel", "psnr")

#: Default compression of data variables, packed or not. blosc2 keeps partial (range) reads
#: possible; on IFS 0.25 degree fields (2 m temperature, specific humidity) it compresses raw
#: float32 as well as shuffle+zstd (4.7 and 5.4 times) at the same speed, and 16-bit packed
#: values 35-50 % better than szip.
DEFAULT_COMPRESSION = {"compression": "blosc2", "blosc2_codec": "zstd", "blosc2_clevel": 3}
#: szip parameters by default: GRIB 2's CCSDS blocks of 32 samples, but a reference sample
#: interval of 16 blocks instead of 128 (512 values, a third of a 0.25-degree row), so that a
#: window decompresses little more than its own points: a 1/4 x 1/4 box of the 2 m temperature
#: field costs 0.11 of a full decode instead of 0.19, for 0.47 % more bytes (docs/benchmarks.md).
DEFAULT_SZIP = {"szip_rsi": 16, "szip_block_size": 32, "szip_flags": 8}
#: Packed widths szip stores correctly: upstream 0.24 hands szip a bit stream it reads as
#: byte-aligned samples, so other widths fail or silently decode wrong values.
SZIP_PACKED_BITS = (8, 16, 24, 32)
#: The largest binary scale factor (in magnitude) of simple packing that tensogram 0.24 encodes.
MAX_BINARY_SCALE = 256

# Options by the compression they configure; `filter`, `bits` and the decimal scale factor of
# packing are accepted with any compression.
_CODEC_OPTIONS = {
    "zstd": {"zstd_level"},
    "blosc2": {"blosc2_codec", "blosc2_clevel"},
    "szip": {"szip_rsi", "szip_block_size", "szip_flags"},
    "zfp": {"zfp_mode", "zfp_rate", "zfp_precision", "zfp_tolerance"},
    "sz3": {"sz3_error_bound_mode", "sz3_error_bound"},
}
_GENERAL_OPTIONS = {"bits", "compression", "filter", "sp_decimal_scale_factor"}
OPTIONS = frozenset(_GENERAL_OPTIONS.union(*_CODEC_OPTIONS.values()))

_BYTE_ORDER = sys.byteorder  # arrays are written in native order, which the descriptor names


@dataclass(frozen=True)
class Codec:
    """How one variable's fields are stored.

    ``dtype`` is the stored dtype (``float64`` for packing, zfp and sz3, which upstream only
    accepts in double precision); ``params`` are the descriptor's codec parameters.
    """

    dtype: np.dtype
    encoding: str = "none"
    filter: str = "none"
    compression: str = "none"
    params: Mapping[str, Any] = field(default_factory=dict)

    @property
    def bits(self) -> int | None:
        return self.params.get("sp_bits_per_value")

    def prepare(self, values: np.ndarray) -> tuple[dict, np.ndarray]:
        """The descriptor and C-contiguous, native-order array of one field.

        Packing parameters are computed here from the finite values, so fields with NaN or
        infinities pack too (upstream's own computation rejects them); the encoder stores the
        non-finite points as masks.

        >>> d, a = Codec(np.dtype("float64"), "simple_packing",
        ...              params={"sp_bits_per_value": 8}).prepare(np.array([0.0, np.nan, 255.0]))
        >>> d["sp_reference_value"], d["sp_binary_scale_factor"], a.dtype
        (0.0, 0, dtype('float64'))
        """
        # (np.asarray, not np.ascontiguousarray, which turns 0-d arrays into 1-d ones)
        array = np.asarray(values, dtype=self.dtype.newbyteorder("="), order="C")
        descriptor = {
            "type": "ntensor", "shape": list(array.shape), "dtype": self.dtype.name,
            "byte_order": _BYTE_ORDER, "encoding": self.encoding, "filter": self.filter,
            "compression": self.compression, **self.params,
        }
        if self.encoding == "simple_packing":
            descriptor.update(packing_params(array, self.bits,
                                             self.params.get("sp_decimal_scale_factor", 0)))
        return descriptor, array


def reader_options(encoding: Mapping[str, Any]) -> dict | None:
    """Options that store a variable the way the file it was read from did, from the
    ``tensogram_*`` entries the reader puts in ``Variable.encoding``; ``None`` without them.

    >>> reader_options({"tensogram_encoding": "simple_packing", "tensogram_filter": "none",
    ...                 "tensogram_compression": "szip", "tensogram_params": {
    ...                     "sp_bits_per_value": 24, "sp_reference_value": 212.8,
    ...                     "szip_rsi": 128, "szip_block_size": 32, "szip_flags": 8}})
    {'szip_rsi': 128, 'szip_block_size': 32, 'szip_flags': 8, 'bits': 24, 'filter': 'none', 'compression': 'szip'}
    """
    if "tensogram_compression" not in encoding or "tensogram_encoding" not in encoding:
        return None  # fields stored differently: no common pipeline to repeat
    params = encoding.get("tensogram_params") or {}
    options = {k: v for k, v in params.items() if k in OPTIONS and not k.startswith("sp_")}
    if encoding["tensogram_encoding"] == "simple_packing":
        options["bits"] = params.get("sp_bits_per_value")
        if params.get("sp_decimal_scale_factor"):
            options["sp_decimal_scale_factor"] = params["sp_decimal_scale_factor"]
    options["filter"] = encoding.get("tensogram_filter", "none")
    options["compression"] = encoding["tensogram_compression"]
    return options


def packing_params(values: np.ndarray, bits: int, decimal_scale_factor: int = 0) -> dict:
    """Reference value and binary scale factor of simple packing, from the finite values.

    The same rule as upstream's (and GRIB's): the reference is the minimum, and ``2**E`` the
    smallest power of two with ``(max - min) * 10**D <= 2**E * (2**bits - 1)``. The largest
    error is therefore ``2**E / 2 / 10**D``, below ``(max - min) / (2**bits - 1)``.

    >>> packing_params(np.array([200.0, 300.0]), 16)
    {'sp_reference_value': 200.0, 'sp_binary_scale_factor': -9, 'sp_decimal_scale_factor': 0}
    """
    low, high = _finite_range(values)
    return {"sp_reference_value": low,
            "sp_binary_scale_factor": _binary_scale(low, high, bits, decimal_scale_factor),
            "sp_decimal_scale_factor": decimal_scale_factor}


def _binary_scale(low: float, high: float, bits: int, decimal_scale_factor: int) -> int:
    if low == high or bits == 0:
        return 0
    try:
        spread = (high - low) * 10.0**decimal_scale_factor
        scale = math.ceil(math.log2(spread / float(2**bits - 1)))
    except (OverflowError, ValueError):  # a spread beyond float64, or one that underflows to 0
        scale = None
    if scale is None or abs(scale) > MAX_BINARY_SCALE:
        decimal = f" with sp_decimal_scale_factor={decimal_scale_factor}" if decimal_scale_factor else ""
        needed = "outside float64's range" if scale is None else f"2**{scale}"
        raise TgmCodecError(
            f"simple packing to {bits} bits cannot hold values from {low!r} to {high!r}{decimal}: "
            f"the packing step would be {needed}, and tensogram encodes steps from "
            f"2**-{MAX_BINARY_SCALE} to 2**{MAX_BINARY_SCALE} only; store them unpacked (drop "
            "'bits') or rescale them")
    return scale


def _finite_range(values: np.ndarray) -> tuple[float, float]:
    if values.size == 0:
        return 0.0, 0.0
    with np.errstate(invalid="ignore"):
        low, high = float(np.nanmin(values)), float(np.nanmax(values))
    if math.isfinite(low) and math.isfinite(high):
        return low, high
    finite = values[np.isfinite(values)]  # infinities (or only NaN): rarely taken, copies
    return (float(finite.min()), float(finite.max())) if finite.size else (0.0, 0.0)


def resolve(name: str, dtype: np.dtype, options: Mapping[str, Any] | None, *,
            coordinate: bool = False) -> Codec:
    """The :class:`Codec` of variable ``name`` with numpy ``dtype``, from its encoding options.

    Defaults: coordinates are stored uncompressed (small, and any part reads without decoding
    the rest); data variables use :data:`DEFAULT_COMPRESSION` (lossless); ``bits`` alone adds
    szip (:data:`DEFAULT_SZIP`); szip on unpacked values adds the byte shuffle it needs.

    Raises
    ------
    TgmCodecError
        For an unknown option, an option of another compression, or a combination upstream
        cannot store (packing, zfp or sz3 on integers or complex numbers, szip on raw 8-byte
        samples without shuffle or on packed widths other than 8, 16, 24, 32, ...). The message
        names the variable and the option.

    >>> resolve("n", np.dtype("int32"), {"bits": 8})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    tgm_xarray.errors.TgmCodecError: variable 'n': bits=8 (simple packing) needs floating-point values, ...
    """
    options = dict(options or {})
    where = f"variable {name!r}"
    unknown = sorted(set(options) - OPTIONS)
    if unknown:
        raise TgmCodecError(f"{where}: unknown encoding option {unknown[0]!r}; "
                            f"valid options are {sorted(OPTIONS)}")
    dtype = np.dtype(dtype)
    if dtype.kind not in "iufc":
        raise TgmCodecError(f"{where}: Tensogram stores numbers, not {dtype} values; "
                            f"drop it with ds.drop_vars({name!r}) or convert it to numbers")
    bits = options.pop("bits", None)
    compression = options.pop("compression", None)
    filter_ = options.pop("filter", None)
    decimal = options.pop("sp_decimal_scale_factor", None)

    if compression is None:
        if coordinate or options:
            # codec parameters alone name their compression (`zstd_level=9` means zstd)
            compression = next((c for c, keys in _CODEC_OPTIONS.items() if set(options) & keys), "none")
        else:
            compression = DEFAULT_COMPRESSION["compression"]
            options = {k: v for k, v in DEFAULT_COMPRESSION.items() if k != "compression"} | options
    _check_choice(where, "compression", compression, COMPRESSIONS)
    if filter_ is not None:
        _check_choice(where, "filter", filter_, FILTERS)
    foreign = sorted(k for k in options if k not in _CODEC_OPTIONS.get(compression, ()))
    if foreign:
        raise TgmCodecError(f"{where}: option {foreign[0]!r} does not apply to "
                            f"compression={compression!r}")

    stored = dtype
    encoding = "none"
    params: dict[str, Any] = {}
    lossy_float = bits is not None or compression in ("zfp", "sz3")
    if lossy_float:
        what = f"bits={bits} (simple packing)" if bits is not None else f"compression={compression!r}"
        if dtype.kind != "f":
            fix = "drop 'bits'" if bits is not None else "choose a lossless compression"
            raise TgmCodecError(f"{where}: {what} needs floating-point values, but {name!r} is "
                                f"{dtype}; cast it with ds[{name!r}].astype('float64') or {fix}")
        stored = np.dtype("float64")  # upstream 0.24 packs, zfps and sz3s float64 only
    if bits is not None:
        if compression in ("zfp", "sz3"):
            raise TgmCodecError(f"{where}: bits (simple packing) cannot be combined with "
                                f"compression={compression!r}; choose one lossy method")
        if isinstance(bits, bool) or not isinstance(bits, (int, np.integer)) or not 1 <= bits <= 64:
            raise TgmCodecError(f"{where}: bits must be an integer from 1 to 64, got {bits!r}")
        if filter_ == "shuffle":
            raise TgmCodecError(f"{where}: filter='shuffle' applies to raw values, not to "
                                f"packed ones (bits={bits}); drop the filter")
        if compression == "szip" and bits not in SZIP_PACKED_BITS:
            raise TgmCodecError(f"{where}: szip stores packed values of {list(SZIP_PACKED_BITS)} "
                                f"bits only (tensogram 0.24 decodes other widths wrong), got "
                                f"bits={bits}; choose one of those or another compression")
        encoding = "simple_packing"
        params["sp_bits_per_value"] = int(bits)
        if decimal is not None:
            params["sp_decimal_scale_factor"] = _integer(where, "sp_decimal_scale_factor", decimal)
    elif decimal is not None:
        raise TgmCodecError(f"{where}: sp_decimal_scale_factor needs bits (simple packing)")

    if compression == "szip" and encoding == "none":
        if filter_ == "none" and stored.itemsize > 4:
            raise TgmCodecError(
                f"{where}: szip codes samples of at most 32 bits, and {name!r} is {stored} "
                f"without packing; add filter='shuffle' or set bits=...")
        filter_ = filter_ or "shuffle"
    filter_ = filter_ or "none"
    if filter_ == "shuffle":
        params["shuffle_element_size"] = stored.itemsize
    params.update(_codec_params(where, compression, options))
    return Codec(stored, encoding, filter_, compression, params)


def _codec_params(where: str, compression: str, options: dict) -> dict:
    if compression == "zstd":
        return {"zstd_level": _integer(where, "zstd_level", options.get("zstd_level", 3), -7, 22)}
    if compression == "blosc2":
        codec = options.get("blosc2_codec", "lz4")
        _check_choice(where, "blosc2_codec", codec, BLOSC2_CODECS)
        level = _integer(where, "blosc2_clevel", options.get("blosc2_clevel", 5), 0, 9)
        return {"blosc2_codec": codec, "blosc2_clevel": level}
    if compression == "szip":
        return {key: _integer(where, key, options.get(key, default), 0)
                for key, default in DEFAULT_SZIP.items()}
    if compression == "zfp":
        mode = options.get("zfp_mode")
        _check_choice(where, "zfp_mode", mode, tuple(ZFP_MODES))
        key = ZFP_MODES[mode]
        extra = sorted(set(options) - {"zfp_mode", key})
        if key not in options or extra:
            raise TgmCodecError(f"{where}: zfp_mode={mode!r} takes exactly {key}=..."
                                + (f", not {extra[0]}" if extra else ""))
        value = options[key]
        value = _integer(where, key, value, 1, 64) if key == "zfp_precision" else _positive(where, key, value)
        return {"zfp_mode": mode, key: value}
    if compression == "sz3":
        mode = options.get("sz3_error_bound_mode")
        _check_choice(where, "sz3_error_bound_mode", mode, SZ3_MODES)
        if "sz3_error_bound" not in options:
            raise TgmCodecError(f"{where}: compression='sz3' needs sz3_error_bound=...")
        return {"sz3_error_bound_mode": mode,
                "sz3_error_bound": _positive(where, "sz3_error_bound", options["sz3_error_bound"])}
    return {}


def _check_choice(where: str, key: str, value: Any, choices: tuple[str, ...]) -> None:
    if value not in choices:
        raise TgmCodecError(f"{where}: {key}={value!r} is not one of {list(choices)}")


def _integer(where: str, key: str, value: Any, low: int | None = None, high: int | None = None) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or \
            (low is not None and value < low) or (high is not None and value > high):
        bounds = f" from {low} to {high}" if high is not None else f" >= {low}" if low is not None else ""
        raise TgmCodecError(f"{where}: {key} must be an integer{bounds}, got {value!r}")
    return int(value)


def _positive(where: str, key: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float, np.number)) or \
            not math.isfinite(value) or value <= 0:
        raise TgmCodecError(f"{where}: {key} must be a positive number, got {value!r}")
    return float(value)
