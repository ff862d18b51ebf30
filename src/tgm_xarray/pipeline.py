"""The Tensogram pipeline that stores an array: one table of options, their validation and the
descriptor (the core finds simple packing's parameters in the values it encodes).

This is the one home of the encoding vocabulary: the writer's ``encoding=`` (through
:func:`resolve`), ``tgm-xarray convert``'s flags and the zarr ``TensogramCodec`` all parse their
options with :meth:`Pipeline.from_options`, so the same options give the same objects, and a bad
option fails with the same :class:`~tgm_xarray.errors.TgmCodecError` and message everywhere.
:data:`TABLE` lists every option with its values, default and aliases; ``docs/writer.md`` and
``docs/zarr.md`` show :func:`markdown_table` (a test keeps them equal).

>>> p = Pipeline.from_options({"bits": 16, "compression": "szip"})
>>> p.encoding, p.bits_per_value, p.filter, p.params
('simple_packing', 16, 'none', {'szip_rsi': 4, 'szip_block_size': 32, 'szip_flags': 8})
>>> Pipeline.from_options({}).options()
{'encoding': 'none', 'filter': 'none', 'compression': 'blosc2', 'blosc2_codec': 'zstd', 'blosc2_clevel': 1}
>>> Pipeline.from_options({"zstd_level": 30})
Traceback (most recent call last):
...
tgm_xarray.errors.TgmCodecError: zstd_level must be an integer from -131072 to 22; got 30
"""

from __future__ import annotations

import math
import sys
import warnings
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from tgm_xarray import _core
from tgm_xarray.errors import TgmCodecError
from tgm_xarray.vocabulary import close_matches, did_you_mean

ENCODINGS = ("none", "simple_packing")
FILTERS = ("none", "shuffle")
COMPRESSIONS = ("none", "zstd", "lz4", "blosc2", "szip", "zfp", "sz3")
#: zfp mode -> the one parameter it takes.
ZFP_MODES = {"fixed_rate": "zfp_rate", "fixed_precision": "zfp_precision", "fixed_accuracy": "zfp_tolerance"}
#: Packed widths szip stores correctly: upstream 0.24 hands szip a bit stream it reads as
#: byte-aligned samples, so other widths fail or silently decode wrong values.
SZIP_PACKED_BITS = (8, 16, 24, 32)
#: Compressions that read the payload as float64 whatever the dtype (upstream 0.24).
FLOAT64_ONLY = ("zfp", "sz3")


@dataclass(frozen=True)
class Check:
    """How one option's value is checked: called with the option's name and a value, it returns
    the value to use or raises ``TgmCodecError``; ``values`` says what is allowed (the docs'
    table)."""

    values: str
    check: Callable[[str, Any], Any]

    def __call__(self, name: str, value: Any) -> Any:
        return self.check(name, value)


def _choice(*choices: Any) -> Check:
    def check(name: str, value: Any) -> Any:
        # Same type too: 16.0 is no szip block size, nor is True one.
        if not any(type(value) is type(c) and value == c for c in choices):
            raise TgmCodecError(f"{name} must be one of {', '.join(map(repr, choices))}; got {value!r}")
        return value
    return Check(", ".join(f"`{c}`" for c in choices), check)


def _integer(low: int, high: int) -> Check:
    def check(name: str, value: Any) -> int:
        # bool is an int subclass, and `true` in JSON is never meant as a number here.
        if isinstance(value, bool) or not isinstance(value, int | np.integer) or not low <= value <= high:
            raise TgmCodecError(f"{name} must be an integer from {low} to {high}; got {value!r}")
        return int(value)
    return Check(f"{low} to {high}", check)


def _szip_flags_check(name: str, value: Any) -> int:
    """The core's rule: only flags whose streams read back (``AEC_PAD_RSI`` does not; once the
    bits are known, :meth:`Pipeline.from_options` checks them again at that width)."""
    value = _integer(0, 127).check(name, value)
    return _core.writable_szip_flags(value)


_szip_flags = Check("0 to 127 without AEC_PAD_RSI (32)", _szip_flags_check)


def _positive_number(name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float | np.number) or \
            not math.isfinite(value) or value <= 0:
        raise TgmCodecError(f"{name} must be a finite number > 0; got {value!r}")
    return float(value)


_positive = Check("> 0", _positive_number)


@dataclass(frozen=True)
class Option:
    """One option: ``stage`` is what it configures (``"pipeline"`` for the stages' choices,
    ``"simple_packing"``, or a compression); ``default`` is None where there is none or it
    depends on other options (``doc`` says how)."""

    name: str
    stage: str
    default: Any
    check: Check
    aliases: tuple[str, ...] = ()
    doc: str = ""


TABLE = (
    Option("encoding", "pipeline", None, _choice(*ENCODINGS),
           doc="`simple_packing` when `bits_per_value` is given, else `none`"),
    Option("bits_per_value", "simple_packing", None, _integer(1, 64), ("bits",),
           doc="simple packing (GRIB's quantisation; lossy, floats only); 8, 16, 24 or 32 with "
               "szip, a multiple of 8 with shuffle"),
    Option("decimal_scale_factor", "simple_packing", 0, _integer(-308, 308), ("sp_decimal_scale_factor",),
           doc="values are scaled by 10^D before packing, as in GRIB"),
    Option("filter", "pipeline", "none", _choice(*FILTERS),
           doc="`shuffle` moves the encoded samples' bytes (szip on raw 8-byte values needs it)"),
    Option("compression", "pipeline", "blosc2", _choice(*COMPRESSIONS),
           doc="the writer stores coordinates with `none`; a compression's parameter alone "
               "chooses it (`zstd_level=9`: zstd)"),
    Option("szip_rsi", "szip", 4, _integer(1, 4096),
           doc="blocks per reference sample interval: 4 x 32 = 128 values keeps windows cheap"),
    Option("szip_block_size", "szip", 32, _choice(8, 16, 32, 64), doc="as GRIB 2's CCSDS packing"),
    Option("szip_flags", "szip", 8, _szip_flags,
           doc="libaec flags but `AEC_PAD_RSI` (32), which does not read back; 8 is `AEC_DATA_PREPROCESS`"),
    Option("zstd_level", "zstd", 3, _integer(-131072, 22)),
    Option("blosc2_codec", "blosc2", "zstd", _choice("blosclz", "lz4", "lz4hc", "zlib", "zstd")),
    Option("blosc2_clevel", "blosc2", 1, _integer(0, 9),
           doc="1 writes ~1.7x faster than 3 for ~6% more bytes (the IFS sample), fewer than zstd at 3"),
    Option("zfp_mode", "zfp", "fixed_precision", _choice(*ZFP_MODES), doc="lossy, floats only"),
    Option("zfp_rate", "zfp", 16.0, _positive, doc="with `fixed_rate` only"),
    Option("zfp_precision", "zfp", 32, _integer(1, 64), doc="with `fixed_precision` only"),
    Option("zfp_tolerance", "zfp", None, _positive, doc="with `fixed_accuracy` only; required (it has units)"),
    Option("sz3_error_bound_mode", "sz3", "rel", _choice("abs", "rel", "psnr"), doc="lossy, floats only"),
    Option("sz3_error_bound", "sz3", 1e-4, _positive),
)
OPTIONS = {option.name: option for option in TABLE}
#: Every accepted spelling -> its option.
NAMES = OPTIONS | {alias: option for option in TABLE for alias in option.aliases}


def canonical(name: str) -> str:
    """The table's name of option ``name`` (itself, or the option it is an alias of).

    >>> canonical("bits"), canonical("zstd_levl")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    tgm_xarray.errors.TgmCodecError: unknown encoding option 'zstd_levl' (did you mean 'zstd_level'?); valid ...
    """
    if name not in NAMES:
        raise TgmCodecError(f"unknown encoding option {name!r}{did_you_mean(close_matches(name, NAMES))}; "
                            f"valid options are {sorted(NAMES)}")
    return NAMES[name].name


@dataclass(frozen=True)
class Pipeline:
    """A valid pipeline: encoding, filter, compression and the compression's ``params``."""

    encoding: str
    bits_per_value: int | None
    decimal_scale_factor: int | None
    filter: str
    compression: str
    params: Mapping[str, Any]

    @classmethod
    def from_options(cls, options: Mapping[str, Any] | None, *,
                     compression: str = OPTIONS["compression"].default) -> Pipeline:
        """The pipeline ``options`` name (table names or aliases; None values count as not
        given), defaults filled in; ``compression`` is the default compression.

        Raises ``TgmCodecError`` for an unknown option, a bad value, an option of a stage not
        chosen, or a combination upstream tensogram 0.24 cannot store.
        """
        given: dict[str, Any] = {}
        for name, value in (options or {}).items():
            key = canonical(name)
            if key in given:
                raise TgmCodecError(f"{name!r} and {key!r} are the same option; give one")
            if value is not None:
                given[key] = OPTIONS[key].check(key, value)
        params = {k: v for k, v in given.items() if OPTIONS[k].stage in COMPRESSIONS}
        # a compression's parameters alone choose it
        compression = given.get("compression") or next(
            (OPTIONS[k].stage for k in params), OPTIONS["compression"].check("compression", compression))
        bits = given.get("bits_per_value")
        encoding = given.get("encoding", "simple_packing" if bits is not None else "none")
        decimal = given.get("decimal_scale_factor")
        if encoding == "simple_packing":
            if bits is None:
                raise TgmCodecError("bits_per_value is required with encoding 'simple_packing'")
            decimal = decimal or 0
        else:
            for name, value in (("bits_per_value", bits), ("decimal_scale_factor", decimal)):
                if value is not None:
                    raise TgmCodecError(f"{name} applies to encoding 'simple_packing', not {encoding!r}")
        filter_ = given.get("filter", "none")  # none: szip and blosc2 windows decode alone
        if compression in FLOAT64_ONLY and (encoding, filter_) != ("none", "none"):
            raise TgmCodecError(f"compression {compression!r} needs encoding 'none' and filter 'none'")
        if bits is not None:  # simple packing: it needs bits_per_value, nothing else takes it
            if compression == "szip" and bits not in SZIP_PACKED_BITS:
                raise TgmCodecError(
                    f"bits_per_value must be one of {SZIP_PACKED_BITS} with simple_packing + szip "
                    f"(tensogram 0.24 decodes other widths wrongly); got {bits}")
            if compression == "szip":  # the flags' rule at these bits
                _core.writable_szip_flags(params.get("szip_flags", OPTIONS["szip_flags"].default), bits)
            if filter_ == "shuffle" and bits % 8:
                raise TgmCodecError(f"bits_per_value must be a multiple of 8 with filter 'shuffle'; got {bits}")
        return cls(encoding, bits, decimal, filter_, compression, _compression_params(compression, params))

    def options(self) -> dict[str, Any]:
        """The options that give this pipeline, all of them, by their table names."""
        options: dict[str, Any] = {"encoding": self.encoding}
        if self.encoding == "simple_packing":
            options |= {"bits_per_value": self.bits_per_value, "decimal_scale_factor": self.decimal_scale_factor}
        return options | {"filter": self.filter, "compression": self.compression, **self.params}

    @property
    def float64_only(self) -> bool:
        """Whether values are stored as float64 (upstream 0.24 packs, zfps and sz3s float64 only)."""
        return self.encoding == "simple_packing" or self.compression in FLOAT64_ONLY

    def stored_dtype(self, dtype: np.dtype) -> np.dtype:
        """The dtype values of ``dtype`` are stored as (native byte order); raises
        ``TgmCodecError`` for values this pipeline cannot store."""
        dtype = np.dtype(dtype)
        if dtype.kind not in "iufc" or (dtype.kind == "f" and dtype.itemsize not in (2, 4, 8)):
            raise TgmCodecError(f"Tensogram stores integers, floats and complex numbers, not {dtype} values")
        if self.float64_only:
            if dtype.kind != "f":
                what = ("encoding 'simple_packing'" if self.encoding == "simple_packing"
                        else f"compression {self.compression!r}")
                raise TgmCodecError(f"{what} is lossy and needs floating-point values; got {dtype}")
            return np.dtype("float64")
        if (self.compression, self.encoding, self.filter) == ("szip", "none", "none") and dtype.itemsize > 4:
            raise TgmCodecError(
                f"compression 'szip' takes samples of at most 32 bits; {dtype} values need "
                "filter 'shuffle' (or encoding 'simple_packing' for floats)")
        return dtype.newbyteorder("=")

    def input_dtype(self, dtype: np.dtype) -> np.dtype:
        """The dtype values of ``dtype`` go to the core's encode in: float32 stays float32 under
        simple packing (the core packs it in pieces as the float64 it stores, never making a
        float64 copy of the field), anything else is :meth:`stored_dtype`."""
        stored = self.stored_dtype(dtype)
        if self.encoding == "simple_packing" and np.dtype(dtype) == np.float32:
            return np.dtype("float32").newbyteorder("=")
        return stored

    def descriptor(self, shape: tuple[int, ...], dtype: np.dtype) -> dict[str, Any]:
        """The descriptor of values of ``shape`` stored as ``dtype`` (a :meth:`stored_dtype`).

        Simple packing's reference value and binary scale factor are left out: the core's
        encode finds them in the finite values (upstream's rule), so fields with NaN or
        infinities pack too, their non-finite points stored as masks.
        """
        descriptor = {
            "type": "ntensor", "shape": list(shape), "dtype": dtype.name,
            "byte_order": sys.byteorder, "encoding": self.encoding, "filter": self.filter,
            "compression": self.compression, **self.params,
        }
        # from_options gives bits and decimal scale with simple packing, and only with it
        bits, decimal = self.bits_per_value, self.decimal_scale_factor
        if bits is not None and decimal is not None:
            descriptor |= {"sp_bits_per_value": bits, "sp_decimal_scale_factor": decimal}
        if self.filter == "shuffle":
            # Shuffle runs after the encoding: it moves bytes of packed samples, or of values.
            descriptor["shuffle_element_size"] = -(-bits // 8) if bits is not None else dtype.itemsize
        return descriptor

    def prepare(self, values: np.ndarray) -> tuple[dict, np.ndarray]:
        """The descriptor and the (C-contiguous, native-order) array of ``values`` the core's
        encode takes (:meth:`input_dtype`).

        >>> d, a = Pipeline.from_options({"bits": 8}).prepare(np.array([0.0, np.nan, 255.0], "float32"))
        >>> d["sp_bits_per_value"], d["sp_decimal_scale_factor"], d["dtype"], a.dtype
        (8, 0, 'float64', dtype('float32'))
        """
        # (np.asarray, not np.ascontiguousarray, which turns 0-d arrays into 1-d ones)
        array = np.asarray(values, dtype=self.input_dtype(values.dtype), order="C")
        return self.descriptor(array.shape, self.stored_dtype(values.dtype)), array


def _compression_params(compression: str, given: dict[str, Any]) -> dict[str, Any]:
    """The parameters of ``compression``: the ``given`` ones, defaults for the others."""
    names = [o.name for o in TABLE if o.stage == compression]
    if compression == "zfp":
        mode = given.get("zfp_mode", OPTIONS["zfp_mode"].default)
        names = ["zfp_mode", ZFP_MODES[mode]]
    for name in given:
        if name not in names:
            owner = OPTIONS[name].stage
            raise TgmCodecError(f"{name} is a parameter of compression {owner!r}, not of {compression!r}"
                                if owner != compression else f"{name} does not apply to zfp_mode {mode!r}")
    params = {}
    for name in names:
        value = given.get(name, OPTIONS[name].default)
        if value is None:
            raise TgmCodecError(f"{name} is required with compression {compression!r}"
                                + (f" and zfp_mode {mode!r}" if compression == "zfp" else ""))
        params[name] = value
    return params


@dataclass(frozen=True)
class Codec:
    """How one variable of the writer is stored: its pipeline, its values' stored dtype, the
    dtype its values go to the encode in (:meth:`Pipeline.input_dtype`), and ``packing``, simple
    packing's reference value and binary scale factor for every field (a grid of its own, such
    as a CF packing's: :func:`cf_packed`), else found in each field."""

    pipeline: Pipeline
    dtype: np.dtype
    input_dtype: np.dtype
    packing: tuple[float, int] | None = None

    def prepare(self, values: np.ndarray) -> tuple[dict, np.ndarray]:
        """:meth:`Pipeline.prepare` of one field of the variable: with :attr:`packing` where
        the field's values lie on its grid's range (else, values changed since they were read,
        their own parameters)."""
        array = np.asarray(values, dtype=self.input_dtype, order="C")  # native dtypes: no check
        descriptor = self.pipeline.descriptor(array.shape, self.dtype)
        bits, decimal = self.pipeline.bits_per_value, self.pipeline.decimal_scale_factor
        if self.packing is not None and bits is not None and decimal is not None:
            reference, binary = self.packing
            step = packing_step(binary, decimal)
            finite = array[np.isfinite(array)]
            if not finite.size or (finite.min() >= reference - step / 2
                                   and finite.max() <= reference + step * ((1 << bits) - 0.5)):
                descriptor |= {"sp_reference_value": float(reference), "sp_binary_scale_factor": binary}
        return descriptor, array


def packing_step(binary: int, decimal: int) -> float:
    """Simple packing's step ``2**E * 10**-D``, as the core decodes with it (``reference + step
    * packed``: Rust's ``powi``, exact for ``|D| <= 22``), so that CF decoding with it as
    ``scale_factor`` gives the same bits.

    >>> packing_step(0, 2), packing_step(-3, -1)
    (0.01, 1.25)
    """
    tens = float(10 ** abs(decimal))
    return 2.0 ** binary * (1.0 / tens if decimal >= 0 else tens)


def exact_packing(scale: float) -> tuple[int, int] | None:
    """The binary and decimal scale factors ``(E, D)`` whose :func:`packing_step` is ``scale``
    exactly (the fewest decimal digits first), ``None`` where there are none.

    >>> exact_packing(0.01), exact_packing(0.5), exact_packing(0.001759), exact_packing(-1.0)
    ((0, 2), (-1, 0), None, None)
    """
    if not (isinstance(scale, float | int) and math.isfinite(scale) and scale > 0):
        return None
    for decimal in sorted(range(-22, 23), key=abs):
        binary = round(math.log2(scale * 10.0 ** decimal))
        if abs(binary) <= 1000 and packing_step(binary, decimal) == scale:
            return binary, decimal
    return None


def cf_packed(name: str, dtype: np.dtype, record: Mapping[str, Any], options: Mapping[str, Any] | None = None,
              *, coordinate: bool = False) -> Codec:
    """The codec that keeps a CF-packed variable (``record``: :func:`tgm_xarray.cf.packing`) as
    precise as it was, so that packing it again with the record gives the integers it had.
    Where ``scale_factor`` is a packing step (0.01, 0.5, 2**-7: :func:`exact_packing`), simple
    packing of the integers' width on the CF grid itself (the integer type's least value at
    the reference); else packing 8 bits wider than the integers, whose error is below
    ``scale_factor / 200``. ``options`` (a ``.tgm``'s own pipeline) give the compression.

    >>> c = cf_packed("t", np.dtype("float32"), {"dtype": "int16", "scale_factor": 0.01, "add_offset": 273.15})
    >>> c.pipeline.bits_per_value, c.pipeline.decimal_scale_factor, c.packing
    (16, 2, (-54.53000000000003, 0))
    """
    integers = np.dtype(record["dtype"])
    scale, offset = float(record.get("scale_factor", 1.0)), float(record.get("add_offset", 0.0))
    kept = {k: v for k, v in (options or {}).items() if k in ("filter", "compression") or
            NAMES[canonical(k)].stage in COMPRESSIONS}
    width = integers.itemsize * 8
    grid = exact_packing(scale)
    if grid is None:
        return resolve(name, dtype, {**kept, "bits": width + 8}, coordinate=coordinate)
    binary, decimal = grid
    codec = resolve(name, dtype, {**kept, "bits": width, "decimal_scale_factor": decimal}, coordinate=coordinate)
    return replace(codec, packing=(offset + scale * int(np.iinfo(integers).min), binary))


def resolve(name: str, dtype: np.dtype, options: Mapping[str, Any] | None, *,
            coordinate: bool = False) -> Codec:
    """The writer's :class:`Codec` of variable ``name`` with numpy ``dtype``, from its encoding
    options: coordinates are stored uncompressed by default (small, and any part reads
    without decoding the rest). Errors are the pipeline's, with a note naming the variable.

    >>> c = resolve("t2m", np.dtype("float32"), {"bits": 16})
    >>> c.dtype, c.pipeline.encoding, c.pipeline.compression
    (dtype('float64'), 'simple_packing', 'blosc2')
    >>> resolve("n", np.dtype("int32"), {"bits": 8})  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    tgm_xarray.errors.TgmCodecError: encoding 'simple_packing' is lossy and needs floating-point values; got int32
    in the encoding of variable 'n'
    """
    try:
        pipeline = Pipeline.from_options(options, compression="none" if coordinate else "blosc2")
        codec = Codec(pipeline, pipeline.stored_dtype(dtype), pipeline.input_dtype(dtype))
    except TgmCodecError as error:
        error.add_note(f"in the encoding of variable {name!r}")
        raise
    advice = bits_advice(pipeline.bits_per_value, pipeline.compression)
    if advice:
        warnings.warn(advice, stacklevel=3)  # no variable named: once for all the variables
    return codec


def bits_advice(bits: int | None, compression: str, spelling: str = "bits_per_value=") -> str | None:
    """Why packing to ``bits`` with ``compression`` will not make a smaller file than packing to
    the next whole byte (None when it may): blosc2 (the default) shuffles whole bytes, and packed
    values of 9 to 15 or 17 to 23 bits straddle them, so it finds little to compress (the IFS
    fields: 3.5 MB with 12 bits against 2.4 MB with 16); szip refuses those widths. Below 8
    bits, the fewer the smaller. ``spelling`` names the option (the CLI's ``"--bits "``).

    >>> bits_advice(16, "blosc2"), bits_advice(6, "blosc2"), bits_advice(12, "none")
    (None, None, None)
    >>> bits_advice(12, "blosc2")[:70]
    'bits_per_value=12 will not make a file smaller than bits_per_value=16 '
    """
    if bits is None or bits < 8 or bits % 8 == 0 or compression != "blosc2":
        return None
    wider = -(-bits // 8) * 8
    return (f"{spelling}{bits} will not make a file smaller than {spelling}{wider} does: blosc2 "
            f"compresses whole bytes and {bits}-bit values straddle them (and szip takes 8, 16, "
            f"24 or 32 bits only). Use {spelling}{wider} (smaller and more precise), or "
            f"{spelling}{wider - 8 or 8} for a smaller file")


def reader_options(encoding: Mapping[str, Any]) -> dict | None:
    """Options that store a variable the way the file it was read from did, from the
    ``tensogram_*`` entries the reader puts in ``Variable.encoding``; ``None`` without them.

    >>> reader_options({"tensogram_encoding": "simple_packing", "tensogram_filter": "none",
    ...                 "tensogram_compression": "szip", "tensogram_params": {
    ...                     "sp_bits_per_value": 24, "sp_reference_value": 212.8,
    ...                     "szip_rsi": 128, "szip_block_size": 32, "szip_flags": 8}})
    ... # doctest: +NORMALIZE_WHITESPACE
    {'encoding': 'simple_packing', 'bits_per_value': 24, 'filter': 'none', 'compression': 'szip',
     'szip_rsi': 128, 'szip_block_size': 32, 'szip_flags': 8}
    """
    if "tensogram_compression" not in encoding or "tensogram_encoding" not in encoding:
        return None  # fields stored differently: no common pipeline to repeat
    params = encoding.get("tensogram_params") or {}
    options: dict[str, Any] = {"encoding": encoding["tensogram_encoding"]}
    if options["encoding"] == "simple_packing":
        options["bits_per_value"] = params.get("sp_bits_per_value")
        if params.get("sp_decimal_scale_factor"):
            options["decimal_scale_factor"] = params["sp_decimal_scale_factor"]
    options |= {"filter": encoding.get("tensogram_filter", "none"),
                "compression": encoding["tensogram_compression"]}
    return options | {k: v for k, v in params.items() if k in OPTIONS and OPTIONS[k].stage in COMPRESSIONS}


def markdown_table() -> str:
    """The option table of the docs, from :data:`TABLE`."""
    rows = ["| option | values | default | notes |", "|---|---|---|---|"]
    for o in TABLE:
        name = " / ".join(f"`{n}`" for n in (o.name, *o.aliases))
        stage = "" if o.stage in ("pipeline", "simple_packing") or o.name == "zfp_mode" else f"{o.stage}: "
        default = "see notes" if o.default is None else f"`{o.default}`"
        rows.append(f"| {name} | {o.check.values} | {default} | {stage}{o.doc} |".replace(":  |", " |"))
    return "\n".join(rows)
