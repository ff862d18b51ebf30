"""``show_versions()``: what a bug report needs to say about the installation.

>>> import tgm_xarray
>>> tgm_xarray.show_versions()                            # doctest: +ELLIPSIS
tgm-xarray: ...
tgm_xarray._core: _core...
tensogram crate: 0.24.0
...
free-threaded build: ...
"""

from __future__ import annotations

import os
import platform
import sys
import sysconfig
from importlib.metadata import PackageNotFoundError, entry_points, version
from typing import TextIO

from tgm_xarray.installation import OWN_ENGINE, SHARED_ENGINE, EngineNameWarning

# EngineNameWarning is importable from here too: docs/cli.md names it so, for warning filters.
__all__ = ["PACKAGES", "EngineNameWarning", "show_versions", "versions"]

#: Distributions worth naming in a report: the array stack, every optional dependency of the
#: extras (pyproject.toml; tests/test_keywords.py keeps the two in step), the other readers and
#: writers a Dataset meets (NetCDF, GRIB), and upstream's packages.
PACKAGES = ("numpy", "xarray", "packaging", "dask", "distributed", "zarr", "numcodecs", "fsspec",
            "aiohttp", "s3fs", "pooch", "tqdm", "virtualizarr", "icechunk", "obstore", "netCDF4",
            "h5netcdf", "h5py", "cfgrib", "eccodes", "matplotlib", "earthkit-data", "tensogram",
            "tensogram-xarray")


def versions() -> dict[str, str]:
    """``{name: version or "not installed"}``, with the interpreter's details and the engines
    registered under xarray's ``tensogram`` and ``tgm`` names. A NetCDF writer installed
    without what it needs to write says so (``h5netcdf: 1.3.0 (cannot write NetCDF without
    h5py)``)."""
    from tgm_xarray import __version__, _core
    from tgm_xarray.export import NETCDF_ENGINES

    info = {
        "tgm-xarray": __version__,
        "tgm_xarray._core": os.path.basename(_core.__file__),
        "tensogram crate": _core.TENSOGRAM_VERSION,
        "python": sys.version.replace("\n", " "),
        "platform": platform.platform(),
        "free-threaded build": str(bool(sysconfig.get_config_var("Py_GIL_DISABLED"))),
        # 3.13+: False while running without the GIL (a free-threaded build may re-enable it).
        "GIL enabled": str(getattr(sys, "_is_gil_enabled", lambda: True)()),
    }
    for name in PACKAGES:
        try:
            info[name] = version(name)
        except PackageNotFoundError:
            info[name] = "not installed"
    # h5netcdf without h5py imports, and lists as installed, but writes no NetCDF.
    for _, (writer, *needed) in NETCDF_ENGINES:
        missing = [name for name in needed if info[name] == "not installed"]
        if info[writer] != "not installed" and missing:
            info[writer] += f" (cannot write NetCDF without {', '.join(missing)})"
    for engine in (SHARED_ENGINE, OWN_ENGINE):
        providers = sorted(ep.value for ep in entry_points(group="xarray.backends", name=engine))
        info[f'engine="{engine}"'] = ", ".join(providers) or "none"
    return info


def show_versions(file: TextIO | None = None) -> None:
    """Print :func:`versions`, one ``name: version`` a line (to ``file``, default stdout), for
    bug reports."""
    file = sys.stdout if file is None else file
    for name, value in versions().items():
        print(f"{name}: {value}", file=file)
