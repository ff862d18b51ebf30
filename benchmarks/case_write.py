"""The ``write`` case of ``run.py``: one write of the real 2 m temperature field, 24-bit simple
packing + szip, against ecCodes (GRIB2 CCSDS, same bits), upstream ``tensogram.encode`` and
xarray's netCDF4 and zarr writers; one large field and 8 fields on 1 and 2 threads; N and 10 N
fields."""

from __future__ import annotations

import contextlib
import functools
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

import datagen
from common import CaseResult, Context, Table, Target, check, optional, time_ratio
from harness import fmt_ratio, fmt_time, once_each, paired_ratio, timed_calls
from tgm_xarray import _core, to_tgm
from tgm_xarray.atomic import atomic_write_bytes

ECCODES = "ecCodes GRIB2 CCSDS 24-bit (codes_set_values + codes_get_message)"
OURS = "tgm_xarray to_tgm(threads=1)"


def case_write(ctx: Context) -> CaseResult:
    with contextlib.ExitStack() as stack:  # the files written go with their directories
        def directory(**where) -> Path:
            return Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tgm-write-", **where)))

        # tmpfs: where fsync costs nothing, the write without the disk's sync
        return _case_write(ctx, directory(), directory(dir="/dev/shm") if Path("/dev/shm").is_dir() else None)


def _case_write(ctx: Context, disk: Path, tmpfs: Path | None) -> CaseResult:
    res = CaseResult("write", "One write of the real 2 m temperature, 24-bit packing + szip (721 x 1440)",
                     "One thread, the same float64 values and the same quantisation (24 bits, szip "
                     "RSI 128, blocks of 32, as GRIB2's CCSDS packing): `to_tgm` of a one-variable "
                     "Dataset to a file (`threads=1`; packing parameters, encoding, hashes, framing "
                     "and the file write, atomic: renamed into place), the same with `durable=True` "
                     "(the file and its directory fsynced), to tmpfs (`/dev/shm`), `_core.encode_message` "
                     "(the message alone), upstream `tensogram.encode`, and ecCodes setting the "
                     "values of a 24-bit GRIB2 handle and taking its message; beside them xarray "
                     "writing the same Dataset losslessly (float64, one chunk, not fsynced) to netCDF4 "
                     "with zlib and to zarr v3 with zstd. Ratios are speed vs ecCodes (>= 1: faster). "
                     "Then one 1442 x 2880 field and 8 fields of 721 x 1440 on 1 and 2 threads, and "
                     "how the time grows with 10x the fields.")
    values = np.ascontiguousarray(datagen.grib_values("2t"))
    desc = {"type": "ntensor", "shape": list(values.shape), "dtype": "float64", "byte_order": "little",
            **datagen.PACKING}
    meta = {"base": [{"name": "2t"}]}
    lat, lon = datagen.coordinates()
    ds = xr.Dataset({"t2m": (("latitude", "longitude"), values)}, coords={"latitude": lat, "longitude": lon})
    encoding = {"t2m": {"bits": 24, "compression": "szip", "szip_rsi": datagen.PACKING["szip_rsi"],
                        "szip_block_size": datagen.PACKING["szip_block_size"]}}
    out = disk / "2t.tgm"
    contenders: dict[str, Callable[[], Any]] = {
        OURS: lambda: to_tgm(ds, out, encoding=encoding, threads=1),
        f"{OURS}, durable=True": lambda: to_tgm(ds, out, encoding=encoding, threads=1, durable=True),
        "tgm_xarray _core.encode_message": lambda: _core.encode_message(meta, [(desc, values)], threads=1),
    }
    if tmpfs is not None:
        in_memory = tmpfs / "2t.tgm"
        contenders[f"{OURS} to tmpfs"] = lambda: to_tgm(ds, in_memory, encoding=encoding, threads=1)
    sizes = {"tgm_xarray message": len(_core.encode_message(meta, [(desc, values)]))}
    to_tgm(ds, out, encoding=encoding, threads=1)
    written = xr.open_dataset(out, engine="tgm")["t2m"].values
    step = (values.max() - values.min()) / (2**24 - 1)
    res.notes.append(check(float(np.abs(written - values).max()) <= step,
                           "to_tgm's file reads back within one packing step"))
    tensogram = optional("tensogram")
    if tensogram is not None:
        contenders["upstream tensogram.encode"] = lambda: tensogram.encode(meta, [(desc, values)])
        sizes["upstream message"] = len(tensogram.encode(meta, [(desc, values)]))
        up = tensogram.decode_object(out.read_bytes(), 0)[2]
        res.notes.append(check(np.array_equal(up, written), "upstream decodes to_tgm's file to the same values"))
    eccodes = optional("eccodes")
    if eccodes is not None:
        with open(datagen.GRIB_2T, "rb") as f:
            handle = eccodes.codes_new_from_message(f.read())
        eccodes.codes_set(handle, "bitsPerValue", 24)
        flat = values.ravel()

        def grib() -> bytes:
            eccodes.codes_set_values(handle, flat)
            return eccodes.codes_get_message(handle)

        contenders[ECCODES] = grib
        sizes["ecCodes GRIB2 message"] = len(grib())
    else:
        res.notes.append("ecCodes is not installed in this interpreter: its row and target are skipped")

    sizes["tgm_xarray to_tgm file (with latitude/longitude)"] = out.stat().st_size
    for name, (write, where) in _peers(ds, disk).items():
        contenders[name] = write
        write()
        sizes[f"{name} (lossless float64, with latitude/longitude)"] = _size(where)
        res.notes.append(check(np.array_equal(_read_peer(name, where), values), f"{name} reads back the same values"))

    m = timed_calls(contenders, ctx.repeats, ctx.target_s)
    rows = []
    for name, samples in m.items():
        vs = fmt_ratio(paired_ratio(samples, m[ECCODES])) if ECCODES in m else "-"
        rows.append([name, fmt_time(samples.median()), vs])
    res.tables.append(Table("one thread, median time per field", ["writer", "time", "speed vs ecCodes"], rows))
    res.tables.append(Table("sizes", ["output", "bytes"], [[k, f"{v:,}"] for k, v in sizes.items()]))
    if ECCODES in m:
        res.targets.append(Target("write: to_tgm of the 2t field, sp24+szip, 1 thread vs ecCodes, speed ratio",
                                  paired_ratio(m[OURS], m[ECCODES]), 1.0, ">="))
    res.raw = {name: s.to_json() for name, s in m.items()}
    threads_table, threads_cases = _threads_table(ctx, disk, encoding, values)
    res.tables.append(threads_table)
    two_processes, machine = _two_processes_table(ctx, disk)
    res.tables.append(two_processes)
    res.tables.append(_bounds_table(ctx, disk, threads_cases, machine))
    for case in threads_cases:
        res.targets.append(Target(f"write: {case.what}, to_tgm threads=2 vs threads=1, speed ratio", case.speedup,
                                  case.target, ">="))
    growth, ratios = _growth_table(ctx, tmpfs or disk, encoding, values)
    res.tables.append(growth)
    res.targets.append(Target(f"write: {OURS}, time of 10x the fields / time of the fields",
                              ratios[OURS], 10.0, "<="))
    return res


NETCDF = "netCDF4 zlib (level 4, shuffle)"
ZARR = "zarr v3 zstd (level 3)"


def _peers(ds: xr.Dataset, disk: Path) -> dict[str, tuple[Callable[[], Any], Path]]:
    """The same Dataset (float64, one chunk) written by xarray's netCDF4 (else h5netcdf) and zarr
    backends, each with its usual lossless compression: name -> (write, where it lands)."""
    peers = {}
    engine = "netcdf4" if optional("netCDF4") is not None else "h5netcdf" if optional("h5netcdf") else None
    if engine is not None:
        nc = disk / "2t.nc"
        nc_encoding = {"t2m": {"zlib": True, "complevel": 4, "shuffle": True}}
        name = NETCDF if engine == "netcdf4" else NETCDF.replace("netCDF4", "h5netcdf")
        peers[name] = (lambda: ds.to_netcdf(nc, engine=engine, encoding=nc_encoding), nc)
    zarr = optional("zarr")
    if zarr is not None:
        store = disk / "2t.zarr"
        z_encoding = {"t2m": {"compressors": [zarr.codecs.ZstdCodec(level=3)], "chunks": ds["t2m"].shape}}
        peers[ZARR] = (lambda: ds.to_zarr(store, mode="w", encoding=z_encoding, zarr_format=3,
                                          consolidated=False), store)
    return peers


def _read_peer(name: str, where: Path) -> np.ndarray:
    if name == ZARR:
        with xr.open_zarr(where, consolidated=False) as back:
            return back["t2m"].values
    with xr.open_dataset(where) as back:
        return back["t2m"].values


def _size(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.is_dir() else path.stat().st_size


def _growth_table(ctx: Context, where: Path, encoding: dict, values: np.ndarray) -> tuple[Table, dict[str, float]]:
    """N and 10 N distinct fields (the 2t field plus 0.01 x its index) written into one file, one
    thread: the time of 10 N over the time of N, per writer (10.00x: a constant cost per field).
    Ours from numpy and from dask (one chunk per field, as a lazily opened archive is)."""
    import dask.array as da

    n = 2 if ctx.quick else 4
    fields = values[None] + 0.01 * np.arange(10 * n)[:, None, None]
    lat, lon = datagen.coordinates()

    def dataset(count: int, lazy: bool) -> xr.Dataset:
        data = da.from_array(fields[:count], chunks=(1, *values.shape)) if lazy else fields[:count]
        return xr.Dataset({"t2m": (("number", "latitude", "longitude"), data)},
                          coords={"number": np.arange(count), "latitude": lat, "longitude": lon})

    contenders: dict[str, Callable[[], Any]] = {}
    writers: dict[str, Callable[[int], Callable[[], Any]]] = {
        OURS: lambda count: functools.partial(to_tgm, dataset(count, False), where / f"grow{count}.tgm",
                                              encoding=encoding, threads=1),
        f"{OURS}, dask (a chunk per field)": lambda count: functools.partial(
            to_tgm, dataset(count, True), where / f"grow{count}-dask.tgm", encoding=encoding, threads=1),
    }
    eccodes = optional("eccodes")
    if eccodes is not None:
        def grib_writer(count: int) -> Callable[[], Any]:
            def write():
                with open(datagen.GRIB_2T, "rb") as f:
                    handle = eccodes.codes_new_from_message(f.read())
                try:
                    eccodes.codes_set(handle, "bitsPerValue", 24)
                    with open(where / f"grow{count}.grib2", "wb") as out:
                        for field in fields[:count]:
                            eccodes.codes_set_values(handle, field.ravel())
                            out.write(eccodes.codes_get_message(handle))
                finally:
                    eccodes.codes_release(handle)
            return write

        writers[ECCODES] = grib_writer
    for name, make in writers.items():
        for count in (n, 10 * n):
            contenders[f"{name}, {count} fields"] = make(count)
    m = once_each(contenders, ctx.repeats)
    rows, ratios = [], {}
    for name in writers:
        small, large = m[f"{name}, {n} fields"], m[f"{name}, {10 * n} fields"]
        ratios[name] = time_ratio(large, small)
        rows.append([name, fmt_time(small.median()), fmt_time(small.median() / n), fmt_time(large.median()),
                     fmt_time(large.median() / (10 * n)), fmt_ratio(ratios[name])])
    on = " on tmpfs" if where.is_relative_to("/dev/shm") else ""
    columns = ["writer", f"{n} fields", "per field", f"{10 * n} fields", "per field", "time ratio 10N / N"]
    return Table(f"growth: {n} and {10 * n} fields of 721 x 1440 into one file{on}, median time", columns, rows), ratios


# A child writing the 2t field with to_tgm(threads=1) in a loop, from when the file `go` appears,
# for `seconds`; it prints how many writes it made.
WRITING_CHILD = """
import os, sys, time
sys.path.insert(0, sys.argv[1])
import numpy as np, xarray as xr
import datagen
from tgm_xarray import to_tgm
go, out, seconds = sys.argv[2], sys.argv[3], float(sys.argv[4])
values = np.ascontiguousarray(datagen.grib_values("2t"))
ds = xr.Dataset({"t2m": (("y", "x"), values)})
encoding = {"t2m": {"bits": 24, "compression": "szip", "szip_rsi": 128, "szip_block_size": 32}}
to_tgm(ds, out, encoding=encoding, threads=1)
print("ready", flush=True)
while not os.path.exists(go):
    time.sleep(0.001)
start, count = time.perf_counter(), 0
while time.perf_counter() - start < seconds:
    to_tgm(ds, out, encoding=encoding, threads=1)
    count += 1
print(count / (time.perf_counter() - start), flush=True)
"""


def _two_processes_table(ctx: Context, disk: Path) -> tuple[Table, float]:
    """What two cores give this workload at most: two processes each writing the 2t field with
    threads=1 at once, against one alone (writes per second, rounds alternating); threads in one
    process share its memory, allocator and interpreter besides, so they get at most this."""
    seconds = 1.5 if ctx.quick else 4.0

    def writes_per_second(processes: int) -> float:
        go = disk / "go"
        go.unlink(missing_ok=True)
        children = [subprocess.Popen([sys.executable, "-c", WRITING_CHILD, str(Path(__file__).parent), str(go),
                                      str(disk / f"process{i}.tgm"), str(seconds)], stdout=subprocess.PIPE, text=True)
                    for i in range(processes)]
        for child in children:
            assert child.stdout is not None and child.stdout.readline().strip() == "ready"
        go.touch()
        rates = [float(child.communicate(timeout=600)[0]) for child in children]
        return sum(rates)

    ratios = []
    for _ in range(max(3, ctx.repeats // 2)):
        one, two = writes_per_second(1), writes_per_second(2)
        ratios.append(two / one)
    machine = statistics.median(ratios)
    return Table("the machine's own limit: writes per second of two processes at once / of one, to_tgm(threads=1) "
                 "of the 2t field each (median of rounds)",
                 ["processes", "speed vs one process"], [["1", "1.00x"], ["2", fmt_ratio(machine)]]), machine


@dataclass
class ThreadsCase:
    """One write of the threads table: its threads=1 time, the speed-up of threads=2 and its
    target, and the bytes of the message that ends it (its file, or one of its messages)."""

    what: str
    one_thread_s: float
    speedup: float
    target: float
    last_message: bytes


def _threads_table(ctx: Context, disk: Path, encoding: dict, values: np.ndarray) -> tuple[Table, list[ThreadsCase]]:
    """One 1442 x 2880 field (the 2t field tiled 2 x 2; packed and szip-encoded in pieces on the
    threads it is given, into the same bytes) and 8 distinct fields of 721 x 1440 (messages
    encoded at once), each written with threads=1 and threads=2: the speed-ups of threads=2."""
    large = xr.Dataset({"t2m": (("y", "x"), np.ascontiguousarray(np.tile(values, (2, 2))))})
    eight = xr.Dataset({"t2m": (("number", "y", "x"), values[None] + 0.01 * np.arange(8)[:, None, None])},
                       coords={"number": np.arange(8)})
    # (the Dataset, its target, its messages)
    cases = {"one 1442 x 2880 field": (large, 1.7, 1), "8 fields of 721 x 1440": (eight, 1.8, 8)}
    contenders = {f"{what}, to_tgm(threads={n})": functools.partial(to_tgm, ds, disk / f"threads{i}-{n}.tgm",
                                                                     encoding=encoding, threads=n)
                  for i, (what, (ds, *_)) in enumerate(cases.items()) for n in (1, 2)}
    m = timed_calls(contenders, ctx.repeats, ctx.target_s)
    rows, results = [], []
    for i, (what, (_, target, messages)) in enumerate(cases.items()):
        one, two = m[f"{what}, to_tgm(threads=1)"], m[f"{what}, to_tgm(threads=2)"]
        written = (disk / f"threads{i}-1.tgm").read_bytes()
        results.append(ThreadsCase(what, one.median(), paired_ratio(two, one), target,
                                   written[-(len(written) // messages):]))
        for n, samples, speedup in ((1, one, "1.00x"), (2, two, fmt_ratio(results[-1].speedup))):
            rows.append([f"{what}, to_tgm(threads={n})", fmt_time(samples.median()), speedup,
                         fmt_time(samples.cpu_median()), f"{samples.cores_busy():.2f}"])
    # CPU time that grows with threads is work the threads add (or slow each other down with);
    # the same CPU time on fewer busy cores than threads is time a core waited.
    return Table("threads=1 and threads=2, median time, and the process's CPU time per write",
                 ["write", "time", "speed vs threads=1", "CPU time", "cores busy"], rows), results


def _bounds_table(ctx: Context, disk: Path, cases: list[ThreadsCase], machine: float) -> Table:
    """The most threads=2 can give each write of the threads table on this machine: the part a
    write does on one thread whatever its threads runs at one core's speed, the rest at most at
    the speed-up two processes get (``machine``). That part is measured here as what follows the
    packing and szip of the write's last message: upstream framing as many bytes
    (``encode_pre_encoded``, the copies and the hash of the writer's framing) and writing them
    into a file that replaces the last one (the write and the rename). The writer's planning and
    the scan for the packing parameters (which streams the values from memory) are left out, so
    the bound is generous."""
    rows = []
    for case in cases:
        payload = np.frombuffer(case.last_message, np.uint8)
        desc = {**datagen.PLAIN, "shape": [payload.size], "dtype": "uint8"}
        where = disk / "last-message.tgm"
        m = timed_calls({"frame": functools.partial(_core.encode_message, {}, [(desc, payload)], threads=1, copy=False),
                         "write": functools.partial(atomic_write_bytes, where, case.last_message)},
                        ctx.repeats, ctx.target_s)
        serial = m["frame"].median() + m["write"].median()
        bound = case.one_thread_s / (serial + (case.one_thread_s - serial) / machine)
        rows.append([case.what, fmt_time(case.one_thread_s), f"{len(payload) / 1e6:.1f} MB",
                     fmt_time(m["frame"].median()), fmt_time(m["write"].median()), fmt_ratio(bound),
                     fmt_ratio(case.speedup), fmt_ratio(case.target)])
    return Table("the most threads=2 can give here: threads=1 time / (one thread's part + the rest / the two-process "
                 "speed-up); one thread's part: the last message framed by upstream and written to the file",
                 ["write", "threads=1", "last message", "framing", "file write", "at most", "measured", "target"],
                 rows)
