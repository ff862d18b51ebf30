"""What ``convert`` reads: its inputs, a directory standing for the files in it, each opened as
xarray Datasets (GRIB through cfgrib, under a lock of its own where ecCodes allows), and the
variables of them ``--variables`` and ``--drop-variables`` keep. earthkit's plugin opens GRIB
fields with ``open_inputs`` too."""

from __future__ import annotations

import argparse
import errno
import functools
import os
import threading
import warnings
from collections.abc import Sequence
from typing import Any

from tgm_xarray.cli.parser import UsageError
from tgm_xarray.cli.report import error_line, plural
from tgm_xarray.grib import GRIB_SUFFIXES
from tgm_xarray.installation import install_hint
from tgm_xarray.source.remote import is_url

#: A directory holding one of these is a Zarr store (v3, v2 group, v2 array); any other directory
#: given to `convert` stands for the files in it.
ZARR_MARKERS = ("zarr.json", ".zgroup", ".zarray")


def expand_inputs(paths: Sequence[str], engine: str | None) -> list[str]:
    """``paths`` with each local directory that is not a Zarr store replaced by its files, sorted:
    those of a format ``convert`` reads (any file but hidden ones when ``engine`` is given), the
    others skipped with a warning naming them."""
    from tgm_xarray.export import NETCDF_SUFFIXES, ZARR_SUFFIXES

    readable = (*GRIB_SUFFIXES, *NETCDF_SUFFIXES, *ZARR_SUFFIXES, ".h5", ".hdf5", ".tgm")
    expanded = []
    for path in paths:
        if is_url(path) or not os.path.isdir(path) or is_zarr_store(path):
            expanded.append(path)
            continue
        taken, skipped = [], []
        for name in sorted(os.listdir(path)):
            full = os.path.join(path, name)
            wanted = engine is not None or name.lower().endswith(readable)
            if not name.startswith(".") and wanted and (os.path.isfile(full) or is_zarr_store(full)):
                taken.append(full)
            else:
                skipped.append(name + "/" if os.path.isdir(full) else name)
        if not taken:
            raise ValueError(f"input {path!r}: a directory without GRIB, NetCDF, Zarr or .tgm files, "
                             f"and not a Zarr store (no {', '.join(ZARR_MARKERS)})")
        if skipped:
            warnings.warn(f"input {path!r}: skipped {plural(len(skipped), 'entry', 'entries')} "
                          f"not GRIB, NetCDF, Zarr or .tgm: {', '.join(skipped)}", stacklevel=1)
        expanded.extend(taken)
    return expanded


def is_zarr_store(path: str) -> bool:
    return os.path.isdir(path) and any(os.path.exists(os.path.join(path, m)) for m in ZARR_MARKERS)


def open_inputs(path: str, engine: str | None, chunks: Any, storage_options: dict | None = None) -> list:
    """The Datasets of one input: one for NetCDF/Zarr/.tgm, one per hypercube for GRIB (cfgrib).
    ``storage_options`` go to the ``.tgm`` and Zarr engines (remote inputs).

    A failure names the input; a corrupt GRIB message is an error, not a field left out.
    """
    import xarray as xr

    from tgm_xarray.backend import TensogramBackendEntrypoint

    if not is_url(path) and not os.path.exists(path):
        raise FileNotFoundError(errno.ENOENT, "input does not exist", path)
    opener: str | type[TensogramBackendEntrypoint] | None = engine
    if engine is None:
        lower = path.rstrip("/").lower()
        opener = "cfgrib" if lower.endswith(GRIB_SUFFIXES) else \
            "zarr" if lower.endswith(".zarr") or is_zarr_store(path) else \
            TensogramBackendEntrypoint if lower.endswith(".tgm") else None
    try:
        if opener == "cfgrib":
            try:
                import cfgrib
            except ImportError:
                raise ImportError(f"GRIB inputs need cfgrib and eccodes ({install_hint('cfgrib', 'eccodes')})") from None
            # No index files next to inputs (they may be read-only); errors="raise": cfgrib
            # would otherwise log a corrupt message or variable and leave it out.
            return cfgrib.open_datasets(path, backend_kwargs={"indexpath": "", "errors": "raise",
                                                              "lock": grib_lock()}, chunks=chunks)
        remote = {"storage_options": storage_options} if storage_options is not None else None
        return [xr.open_dataset(path, engine=opener, chunks=chunks, backend_kwargs=remote)]
    except Exception as error:
        raise ValueError(f"input {path!r}: {error_line(error)}") from error


def grib_lock() -> Any:
    """The lock of one GRIB input's reads. cfgrib's default is one lock for every file of the
    process, so fields of different files never decode at once (40 fields took 2.2x longer to
    decode on 2 threads under it than each file under its own lock); an ecCodes built with
    thread support (as its wheels are) decodes them on several threads: each input gets its own
    lock. None (cfgrib's lock) for an ecCodes without."""
    return threading.Lock() if _eccodes_threaded() else None


@functools.cache
def _eccodes_threaded() -> bool:
    import eccodes

    try:
        return "ECCODES_THREADS" in eccodes.codes_get_features().split()
    except Exception:  # an ecCodes too old to say (no such function, or an error of its own)
        return False


def selected(args: argparse.Namespace, datasets: list) -> list:
    """``datasets`` with ``--drop-variables`` left out and only ``--variables`` kept."""
    check_selection(args, datasets)
    return select(args, datasets)


def check_selection(args: argparse.Namespace, datasets: list) -> None:
    """Refuse, as usage errors naming what the inputs have, a ``--drop-variables`` or
    ``--variables`` name that none of ``datasets`` has (a dropped variable counts as absent),
    and a ``--chunks`` or ``--field-dims`` dimension none of them has (xarray ignores those, so
    ``time=1`` on an input with ``valid_time`` would chunk nothing)."""
    dims = {str(d) for ds in datasets for d in ds.dims}
    for flag, names in (("--chunks", list(args.chunks) if isinstance(args.chunks, dict) else []),
                        ("--field-dims", args.field_dims.split(",") if args.field_dims else [])):
        _refuse_unknown(flag, "the dimensions ", [d for d in names if d], dims)
    dropped = [v for v in args.drop_variables.split(",") if v] if args.drop_variables else []
    _refuse_unknown("--drop-variables", "", dropped, {str(v) for ds in datasets for v in ds.variables})
    wanted = [v for v in args.variables.split(",") if v] if args.variables else []
    _refuse_unknown("--variables", "", wanted, {str(v) for ds in datasets for v in ds.data_vars} - set(dropped))


def _refuse_unknown(option: str, what: str, given: list[str], there: set[str]) -> None:
    unknown = [name for name in given if name not in there]
    if unknown:
        raise UsageError(f"{option}: no input has {what}{unknown}; theirs are {sorted(there)}")


def select(args: argparse.Namespace, datasets: list) -> list:
    """As :func:`selected`, the names already checked (:func:`check_selection`)."""
    if args.drop_variables:
        datasets = [ds.drop_vars([v for v in args.drop_variables.split(",") if v], errors="ignore")
                    for ds in datasets]
    if args.variables:
        wanted = [v for v in args.variables.split(",") if v]
        datasets = [ds[[v for v in wanted if v in ds.data_vars]] for ds in datasets]
        datasets = [ds for ds in datasets if ds.data_vars]
    return datasets
