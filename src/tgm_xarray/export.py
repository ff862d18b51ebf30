"""``.tgm`` to NetCDF and Zarr through xarray's own writers (``tgm-xarray convert in.tgm out.nc``).

Each variable's Tensogram encoding becomes its nearest equivalent there (docs/cli.md):

- the CF packing a variable had before it was written to the ``.tgm`` (recorded there) -> that
  packing again: the same dtype, ``scale_factor``, ``add_offset`` and ``_FillValue``;
- simple packing whose parameters every field shares -> its own integers as CF packing
  (:func:`integer_packing`): uint8, uint16 or uint32, exactly the values the ``.tgm`` gives;
- other simple packing (fields packed each over its own range) -> float32 where that holds the
  values, else the floats as decoded; or, where the caller trades exactness for size
  (``convert --pack-over-range``), CF packing over the variable's range for at most 16 bits
  (int8 or int16, :func:`packing`: at most half its step added);
- any compression -> zlib (NetCDF), zarr's default compressors (Zarr); none -> none; Zarr
  chunks are the stored fields (``preferred_chunks``);
- everything else (filters, lossy zfp/sz3 values) is written as the floats it decodes to.

>>> packing(np.array([0.0, 10.0]), 16)  # doctest: +NORMALIZE_WHITESPACE
{'dtype': 'int16', 'scale_factor': 0.00015259254737998596, 'add_offset': 5.0, '_FillValue': -32768}
"""

from __future__ import annotations

import importlib
import os
import warnings
from collections.abc import Callable, Mapping
from typing import Any, Literal

import numpy as np
import xarray as xr

from tgm_xarray import cf
from tgm_xarray.atomic import AtomicFile
from tgm_xarray.attrs import json_text
from tgm_xarray.grib import GRIB_SUFFIXES
from tgm_xarray.installation import install_hint
from tgm_xarray.pipeline import packing_step

#: Output file name endings and the format written there.
NETCDF_SUFFIXES = (".nc", ".nc4", ".cdf", ".netcdf")
ZARR_SUFFIXES = (".zarr",)
#: The widest simple packing CF packing holds (int16).
MAX_PACKED_BITS = 16
#: Encoding keys of the input kept on output: how xarray itself writes times and coordinates.
_KEPT_ENCODING = ("units", "calendar", "coordinates")


def output_format(path: str) -> str | None:
    """``"netcdf"``, ``"zarr"``, ``"grib"`` or None (a ``.tgm`` or other name) from ``path``'s ending."""
    suffix = os.path.splitext(path.rstrip("/"))[1].lower()
    formats = {**dict.fromkeys(NETCDF_SUFFIXES, "netcdf"), **dict.fromkeys(ZARR_SUFFIXES, "zarr"),
               **dict.fromkeys(GRIB_SUFFIXES, "grib")}
    return formats.get(suffix)


def packing(values: np.ndarray, bits: int) -> dict | None:
    """CF packing of ``values`` stored with ``bits``-bit simple packing: int8 or int16 steps over
    their range (NaN ignored), the type's lowest value for NaN; None when nothing is finite.

    The packed error is at most half a step, ``(max - min) / (2 * (2**width - 2))``: below the
    ``(max - min) / (2**bits - 1)`` Tensogram's packing already allowed.
    """
    finite = values[np.isfinite(values)]
    if not finite.size:
        return None
    dtype = np.dtype("int8" if bits <= 8 else "int16")
    top = np.iinfo(dtype).max  # values fill -top..top; -top - 1 is the fill value
    low, high = float(finite.min()), float(finite.max())
    scale = (high - low) / (2 * top) if high > low else 1.0
    return {"dtype": dtype.name, "scale_factor": scale, "add_offset": (low + high) / 2 if high > low else low,
            "_FillValue": int(-top - 1)}


def encodings(ds: xr.Dataset, fmt: str, warn: Callable[[str], None], *,
              pack_over_range: bool = False) -> dict[str, dict]:
    """The ``encoding=`` of ``to_netcdf``/``to_zarr`` that stands for each variable's Tensogram
    encoding. ``pack_over_range``: fields packed each over its own range that float32 does not
    hold become CF packing over the variable's range (``warn`` names the wider ones, which stay
    floats) instead of the floats they decode to."""
    out: dict[str, dict] = {}
    wide: list[str] = []
    over_range = wide.append if pack_over_range else None
    for name, var in ds.variables.items():
        source = var.encoding
        encoding = _packed(str(name), var, fmt, over_range) if var.dtype.kind == "f" else {}
        compressed = source.get("tensogram_compression", "none") != "none"
        if fmt == "netcdf":
            encoding.update({"zlib": True, "complevel": 4} if compressed else {"zlib": False})
        else:
            if not compressed:
                encoding["compressors"] = None  # else zarr's default compressors
            chunks = source.get("preferred_chunks") or {}
            if var.dims and all(d in chunks for d in var.dims):  # one stored field per chunk
                encoding["chunks"] = tuple(chunks[d] for d in var.dims)
        out[str(name)] = encoding
    if wide:
        warn(f"{', '.join(wide)}: fields packed to more than {MAX_PACKED_BITS} bits with "
             f"parameters of their own have no CF packing equivalent; written as floating point")
    return out


def _packed(name: str, var: xr.Variable, fmt: str, wide: Callable[[str], None] | None) -> dict:
    """The encoding of one floating-point variable: the CF packing its values had before they
    were written to the ``.tgm`` (recorded there), else the packed integers of its simple
    packing (:func:`integer_packing`), else float32 where that holds the values, else (where
    ``wide`` is given: packing over the range was asked for) CF packing over their range for
    packing of up to 16 bits, else floats as decoded."""
    recorded = cf.packing(var.encoding)
    if recorded is not None:
        return cf.packing_encoding(recorded, var.dtype)
    bits = var.encoding.get("bits_per_value")
    if var.encoding.get("tensogram_encoding") != "simple_packing" or bits is None:
        return {}
    values = np.asarray(var.values)
    exact = integer_packing(values, int(bits), var.encoding.get("tensogram_params") or {},
                            typed_attrs=fmt == "netcdf")
    if exact is not None:
        return exact
    if values.dtype.itemsize <= 4:
        return {}  # the values as the .tgm gives them (float32 of cfgrib's fields, say)
    if _float32_holds(values):
        return {"dtype": "float32"}
    if wide is None:
        return {}
    if bits <= MAX_PACKED_BITS:
        return packing(values, int(bits)) or {}
    wide(f"{name} ({bits} bits)")
    return {}


def integer_packing(values: np.ndarray, bits: int, params: Mapping[str, Any], *,
                    typed_attrs: bool = True) -> dict | None:
    """CF packing that stores simple packing's own integers: ``scale_factor`` its step
    ``2**E * 10**-D`` and ``add_offset`` its reference, so that CF decoding (``packed *
    scale_factor + add_offset``) gives the values the ``.tgm`` packed: the bits its reader gives.
    The smallest unsigned type holding ``bits``, its greatest value the ``_FillValue`` where there
    are NaN (a wider type where a value takes it). ``scale_factor`` and ``add_offset`` are of the
    values' type where ``typed_attrs`` (NetCDF's; Zarr's attributes are JSON numbers) and CF
    decoding in it gives the same bits, so that xarray decodes into it (CF's rule; but 32-bit
    integers it decodes into float64, whose values the ``.tgm``'s float32 are then the rounding
    of). ``None`` where it does not hold: fields packed with different parameters (``params``
    has those every field shares), infinities, more than 32 bits.

    >>> step = 2.0 ** -4
    >>> integer_packing(np.array([1.0, 1.0 + 5 * step, np.nan]), 8, {"sp_reference_value": 1.0,
    ...     "sp_binary_scale_factor": -4, "sp_decimal_scale_factor": 0})  # doctest: +NORMALIZE_WHITESPACE
    {'dtype': 'uint8', 'scale_factor': np.float64(0.0625), 'add_offset': np.float64(1.0),
     '_FillValue': np.uint8(255)}
    """
    try:
        reference = float(params["sp_reference_value"])
        step = packing_step(int(params["sp_binary_scale_factor"]), int(params["sp_decimal_scale_factor"]))
    except (KeyError, TypeError, ValueError):
        return None
    finite = np.isfinite(values)
    if bits > 32 or np.isinf(values).any():
        return None
    known = values[finite]
    packed = np.round((known.astype(np.float64) - reference) / step)
    if known.size and (packed.min() < 0 or packed.max() > 2 ** bits - 1):
        return None
    top = int(packed.max()) if known.size else 0
    for dtype in (np.dtype("uint8"), np.dtype("uint16"), np.dtype("uint32")):
        greatest = int(np.iinfo(dtype).max)
        if 2 ** bits - 1 <= greatest and (finite.all() or top < greatest):
            break
    else:
        return None
    narrow = typed_attrs and values.dtype == np.float32 and dtype.itemsize <= 2
    for kind in (np.float32, np.float64) if narrow else (np.float64,):
        decoded = packed.astype(kind) * kind(step) + kind(reference)
        if np.array_equal(decoded.astype(values.dtype), known):
            return {"dtype": dtype.name, "scale_factor": kind(step), "add_offset": kind(reference),
                    "_FillValue": None if finite.all() else dtype.type(greatest)}
    return None


def _float32_holds(values: np.ndarray) -> bool:
    """Whether float32 holds every one of ``values`` exactly."""
    return bool(np.array_equal(values.astype(np.float32), values, equal_nan=True))
def export(ds: xr.Dataset, output: str, fmt: str, warn: Callable[[str], None], *, durable: bool = False,
           pack_over_range: bool = False) -> None:
    """Writes ``ds`` to ``output`` (NetCDF or Zarr) atomically (:mod:`tgm_xarray.atomic`): into
    a temporary name beside it, renamed over ``output`` once complete (an existing ``output`` is
    replaced). ``pack_over_range``: as in :func:`encodings`."""
    engine = _netcdf_engine(output) if fmt == "netcdf" else None  # before anything is written
    encoding = encodings(ds, fmt, warn, pack_over_range=pack_over_range)
    ds = ds.copy()
    for var in ds.variables.values():
        var.encoding = {k: v for k, v in var.encoding.items() if k in _KEPT_ENCODING}
    with AtomicFile(output.rstrip("/"), by_name=True, durable=durable) as out, warnings.catch_warnings():
        # packed integers without a _FillValue are those of variables without NaN
        warnings.filterwarnings("ignore", "saving variable .* without any _FillValue", xr.SerializationWarning)
        if fmt == "netcdf":
            ds.attrs = _netcdf_attrs(ds.attrs)
            for var in ds.variables.values():
                var.attrs = _netcdf_attrs(var.attrs)
            ds.to_netcdf(out.tmp, engine=engine, encoding=encoding)
        else:
            ds.to_zarr(out.tmp, mode="w-", encoding=encoding, zarr_format=3, consolidated=False)


#: xarray's NetCDF engines, each with the modules it needs to write (h5netcdf imports without
#: h5py, then fails at the first write with a message of its own).
NetcdfEngine = Literal["netcdf4", "h5netcdf"]
NETCDF_ENGINES: tuple[tuple[NetcdfEngine, tuple[str, ...]], ...] = (
    ("netcdf4", ("netCDF4",)), ("h5netcdf", ("h5netcdf", "h5py")))


def _netcdf_engine(output: str) -> NetcdfEngine:
    """The first of :data:`NETCDF_ENGINES` whose modules import."""
    for engine, modules in NETCDF_ENGINES:
        try:
            for module in modules:
                importlib.import_module(module)
        except ImportError:
            continue
        return engine
    raise ImportError(f"{output}: writing NetCDF needs netCDF4, or h5netcdf with h5py, and neither "
                      f"is installed: {install_hint('netCDF4')}")


def _netcdf_attrs(attrs: dict) -> dict:
    """Attributes as NetCDF stores them: booleans as 0/1, mappings and mixed lists as JSON text."""
    def one(value):
        if isinstance(value, (bool, np.bool_)):
            return int(value)
        if isinstance(value, (str, int, float, np.number, np.ndarray)):
            return value
        if isinstance(value, (list, tuple)) and value and all(
                isinstance(v, (int, float)) and not isinstance(v, bool) for v in value):
            return list(value)
        return json_text(value)
    return {str(k): one(v) for k, v in attrs.items() if v is not None}
