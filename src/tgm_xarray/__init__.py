"""Read and write Tensogram (``.tgm``) files from xarray, dask and zarr.

The reads run in a Rust core with the interpreter released, so dask's threads decode chunks in
parallel on ordinary and free-threaded CPython alike.

>>> import xarray as xr                                        # doctest: +SKIP
>>> ds = xr.open_dataset("forecast.tgm", engine="tgm", chunks={})   # doctest: +SKIP
>>> ds.tgm.to_file("copy.tgm")                                # doctest: +SKIP

The engine's name is ``engine="tgm"``. It also answers to ``engine="tensogram"``, the name
upstream's ``tensogram-xarray`` registers too: with both packages installed only ``"tgm"`` is
certain to mean this one.
"""

from importlib import import_module
from importlib.metadata import PackageNotFoundError, version

from tgm_xarray import accessor
from tgm_xarray.errors import (
    TgmCodecError,
    TgmConflictError,
    TgmDuplicateError,
    TgmError,
    TgmFormatError,
    TgmHashMismatchError,
    TgmIndexError,
    TgmStaleFileError,
)
from tgm_xarray.source import TgmFile, open_file

accessor.register()  # ``ds.tgm``, once xarray is imported: `import tgm_xarray` does not import it

try:
    __version__ = version("tgm-xarray")
except PackageNotFoundError:  # running from a source tree
    __version__ = "0+unknown"

# Heavier or optional parts load on first use: `import tgm_xarray` must not import zarr.
_LAZY = {
    "to_tgm": "tgm_xarray.writer",
    "to_grib": "tgm_xarray.grib",
    "TensogramCodec": "tgm_xarray.zarr_codec",
    "show_versions": "tgm_xarray.versions",
}


def __getattr__(name):
    if name in _LAZY:
        return getattr(import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'tgm_xarray' has no attribute {name!r}")


__all__ = [
    "TgmCodecError",
    "TgmConflictError",
    "TgmDuplicateError",
    "TgmError",
    "TgmFile",
    "TgmFormatError",
    "TgmHashMismatchError",
    "TgmIndexError",
    "TgmStaleFileError",
    "TensogramCodec",
    "open_file",
    "show_versions",
    "to_grib",
    "to_tgm",
]
