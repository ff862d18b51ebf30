"""``.tgm`` to NetCDF and Zarr through xarray's own writers (``tgm-xarray convert in.tgm out.nc``).

Each variable's Tensogram encoding becomes its nearest equivalent there (docs/cli.md):

- simple packing of at most 16 bits -> CF packing: int8 (<= 8 bits) or int16 with
  ``scale_factor``/``add_offset`` over the variable's range and a ``_FillValue`` for NaN; wider
  packing stays floating point (no integer type of NetCDF/Zarr's CF packing holds it better);
- any compression -> zlib (NetCDF), zarr's default compressors (Zarr); none -> none; Zarr
  chunks are the stored fields (``preferred_chunks``);
- everything else (filters, lossy zfp/sz3 values) is written as the floats it decodes to.

>>> packing(np.array([0.0, 10.0]), 16)  # doctest: +NORMALIZE_WHITESPACE
{'dtype': 'int16', 'scale_factor': 0.00015259254737998596, 'add_offset': 5.0, '_FillValue': -32768}
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Callable
from typing import Literal

import numpy as np
import xarray as xr

from tgm_xarray.atomic import AtomicFile
from tgm_xarray.attrs import json_text
from tgm_xarray.versions import install_hint

#: Output file name endings and the format written there.
NETCDF_SUFFIXES = (".nc", ".nc4", ".cdf", ".netcdf")
ZARR_SUFFIXES = (".zarr",)
#: The widest simple packing CF packing holds (int16).
MAX_PACKED_BITS = 16
#: Encoding keys of the input kept on output: how xarray itself writes times and coordinates.
_KEPT_ENCODING = ("units", "calendar", "coordinates")


def output_format(path: str) -> str | None:
    """``"netcdf"``, ``"zarr"`` or None (a ``.tgm`` or other name) from ``path``'s ending."""
    suffix = os.path.splitext(path.rstrip("/"))[1].lower()
    return "netcdf" if suffix in NETCDF_SUFFIXES else "zarr" if suffix in ZARR_SUFFIXES else None


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


def encodings(ds: xr.Dataset, fmt: str, warn: Callable[[str], None]) -> dict[str, dict]:
    """The ``encoding=`` of ``to_netcdf``/``to_zarr`` that stands for each variable's Tensogram
    encoding (``warn`` names the packed variables kept as floats)."""
    out, wide = {}, []
    for name, var in ds.variables.items():
        source = var.encoding
        encoding: dict = {}
        bits = source.get("bits_per_value")
        if source.get("tensogram_encoding") == "simple_packing" and bits is not None and var.dtype.kind == "f":
            packed = packing(np.asarray(var.values), int(bits)) if bits <= MAX_PACKED_BITS else None
            if packed:
                encoding.update(packed)
            elif bits > MAX_PACKED_BITS:
                wide.append(f"{name} ({bits} bits)")
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
        warn(f"{', '.join(wide)}: simple packing wider than {MAX_PACKED_BITS} bits has no "
             f"CF packing equivalent; written as floating point")
    return out


def export(ds: xr.Dataset, output: str, fmt: str, warn: Callable[[str], None], *, durable: bool = False) -> None:
    """Writes ``ds`` to ``output`` (NetCDF or Zarr) atomically (:mod:`tgm_xarray.atomic`): into
    a temporary name beside it, renamed over ``output`` once complete (an existing ``output`` is
    replaced)."""
    engine = _netcdf_engine(output) if fmt == "netcdf" else None  # before anything is written
    encoding = encodings(ds, fmt, warn)
    ds = ds.copy()
    for var in ds.variables.values():
        var.encoding = {k: v for k, v in var.encoding.items() if k in _KEPT_ENCODING}
    with AtomicFile(output.rstrip("/"), by_name=True, durable=durable) as out:
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
