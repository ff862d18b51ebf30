"""The ``convert`` case of ``run.py``: the shared GRIB2 fields repeated into an archive of 200
files of one field each, converted by ``tgm-xarray convert`` (into one archive, and into one
``.tgm`` per input) against cfgrib + ``xarray.Dataset.to_netcdf`` of the same inputs."""

from __future__ import annotations

import contextlib
import io
import multiprocessing
import os
import shutil
import tempfile
import warnings
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

import datagen
from common import CaseResult, Context, Skip, Table, check, optional
from harness import fmt_ratio, fmt_time, once_each, paired_ratio

#: The shared fields repeated, in this order, into the archive.
FIELDS = ("2t", "lsm", "q_150", "t_600")
NETCDF = "cfgrib + to_netcdf, one .nc per input"


def case_convert(ctx: Context) -> CaseResult:
    with tempfile.TemporaryDirectory(prefix="tgm-convert-") as tmp:
        return _case_convert(ctx, Path(tmp))


def _case_convert(ctx: Context, tmp: Path) -> CaseResult:
    if optional("cfgrib") is None:
        raise Skip("cfgrib is not installed in this interpreter")
    count, rounds = (8, 3) if ctx.quick else (200, ctx.repeats)
    cores = os.cpu_count() or 1
    res = CaseResult("convert", f"Converting an archive of {count} GRIB2 files (one field each)",
                     f"The shared GRIB2 fields ({', '.join(FIELDS)}; 721 x 1440) copied into {count} "
                     "files, converted whole, each round, by `tgm_xarray.cli.main` in this process "
                     "with its defaults (lossless blosc2/zstd): into one archive, and into one `.tgm` "
                     f"per input on all {cores} cores (`--threads {cores}`, the default), on one "
                     "(`--threads 1`), and, for the choice of threads over processes, the inputs "
                     f"split among {cores} processes (`ProcessPoolExecutor`, forkserver, their start "
                     "included) each converting its share with `--threads 1`; against a loop of "
                     "cfgrib opening each file and `to_netcdf` writing it (netCDF4, default encoding "
                     f"and zlib level 4). One call per round, {rounds} rounds interleaved; speed vs "
                     "cfgrib + to_netcdf (>= 1: faster).")
    source = tmp / "grib"
    source.mkdir()
    inputs = []
    for i in range(count):
        name = FIELDS[i % len(FIELDS)]
        inputs.append(str(source / f"{name}-{i:03d}.grib2"))
        shutil.copyfile(datagen.GRIB_DIR / f"{name}.grib2", inputs[-1])
    archive, each, netcdf, netcdf_zlib = tmp / "all.tgm", tmp / "each", tmp / "nc", tmp / "nc-zlib"
    each_one = tmp / "each-1"
    for directory in (each, netcdf, netcdf_zlib, each_one):
        directory.mkdir()
    per_input = f"tgm_xarray convert, one .tgm per input, --threads {cores}"
    contenders: dict[str, Callable[[], Any]] = {
        f"tgm_xarray convert, one archive, --threads {cores}": lambda: convert(inputs, archive),
        per_input: lambda: convert(inputs, each),
        "tgm_xarray convert, one .tgm per input, --threads 1": lambda: convert(inputs, each_one, "--threads", "1"),
        f"tgm_xarray convert, one .tgm per input, {cores} processes": lambda: in_processes(inputs, each, cores),
        NETCDF: lambda: to_netcdf(inputs, netcdf, zlib=False),
        "cfgrib + to_netcdf (zlib level 4), one .nc per input": lambda: to_netcdf(inputs, netcdf_zlib, zlib=True),
    }
    _warm(inputs[0], tmp / "warm")
    m = once_each(contenders, rounds, warmup=0)
    rows = []
    for name, samples in m.items():
        rows.append([name, fmt_time(samples.median()), fmt_time(samples.median() / count),
                     fmt_ratio(paired_ratio(samples, m[NETCDF]))])
    res.tables.append(Table(f"{count} files, median time", ["converter", "time", "per input", "speed vs " + NETCDF],
                            rows))
    sizes = {"GRIB2 inputs": directory_size(source), "tgm_xarray one archive": archive.stat().st_size,
             "tgm_xarray one .tgm per input": directory_size(each),
             "netCDF4, default encoding": directory_size(netcdf),
             "netCDF4, zlib level 4": directory_size(netcdf_zlib)}
    res.tables.append(Table("output sizes", ["files", "bytes", "vs GRIB2"],
                            [[k, f"{v:,}", f"{v / sizes['GRIB2 inputs']:.2f}"] for k, v in sizes.items()]))
    first = Path(inputs[0])
    with xr.open_dataset(each / f"{first.stem}.tgm", engine="tgm") as ours, \
            xr.open_dataset(netcdf / f"{first.stem}.nc") as theirs:
        res.notes.append(check(all(np.array_equal(ours[v].values, theirs[v].values) for v in theirs.data_vars),
                               f"{first.stem}: our .tgm holds the values of cfgrib's netCDF"))
    res.raw = {name: s.to_json() for name, s in m.items()}
    return res


def convert(inputs: list[str], output: Path, *options: str) -> None:
    """``tgm-xarray convert INPUTS... OUTPUT --force --no-progress OPTIONS`` in this process; an
    OUTPUT that is a directory gets one .tgm per input."""
    from tgm_xarray.cli import main

    target = f"{output}{os.sep}" if output.is_dir() else str(output)
    with contextlib.redirect_stdout(io.StringIO()), warnings.catch_warnings():
        # the archive of copies holds each field many times (it opens with duplicates=...)
        warnings.filterwarnings("ignore", message=".* will not open as one Dataset")
        if main(["convert", *inputs, target, "--force", "--no-progress", *options]) != 0:
            raise RuntimeError(f"convert into {target} failed")


def in_processes(inputs: list[str], output: Path, processes: int) -> None:
    """The inputs split among ``processes`` processes, each converting its share on one thread."""
    shares = [inputs[i::processes] for i in range(processes)]
    context = multiprocessing.get_context("forkserver")  # no fork of a process running threads
    with ProcessPoolExecutor(processes, mp_context=context) as pool:
        list(pool.map(convert, shares, [output] * processes, ["--threads"] * processes, ["1"] * processes))


def to_netcdf(inputs: list[str], output: Path, *, zlib: bool) -> None:
    for path in inputs:
        with xr.open_dataset(path, engine="cfgrib", backend_kwargs={"indexpath": ""}) as ds:
            encoding = {v: {"zlib": True, "complevel": 4} for v in ds.data_vars} if zlib else None
            ds.to_netcdf(output / f"{Path(path).stem}.nc", engine="netcdf4", encoding=encoding)


def directory_size(directory: Path) -> int:
    return sum(p.stat().st_size for p in directory.iterdir())


def _warm(path: str, directory: Path) -> None:
    """One untimed conversion of one input each way: imports, ecCodes' definitions, first writes
    (a warm-up round of every contender would double the case's time)."""
    directory.mkdir()
    convert([path], directory)
    to_netcdf([path], directory, zlib=True)
    shutil.rmtree(directory)
