"""The benchmark cases of ``run.py``: each returns a ``CaseResult`` (tables, targets, raw samples).

Contender names start with who does the work: ``tgm_xarray`` (this package), ``upstream``
(ECMWF's ``tensogram`` / ``tensogram-xarray`` 0.24 packages), ``ecCodes``, ``cfgrib``,
``h5netcdf``, ``zarr``, ``numpy``.
"""

from __future__ import annotations

import importlib
import statistics
import subprocess
import sys
import threading
import time
import warnings
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

import datagen
from harness import (Samples, fmt_rate, fmt_ratio, fmt_time, once_each, paired_ratio, percentile,
                     perf, rounds, throughput_matrix, timed_calls)

from tgm_xarray import _core, handles, open_file

HERE = Path(__file__).resolve().parent
#: Packages the shared venv may lack (upstream tensogram-xarray, h5py), installed with
#: ``pip install --no-deps --target data/bench/_pkgs`` (see run_all.sh); searched last.
EXTRA_PACKAGES = datagen.CACHE / "_pkgs"


# --- results ---------------------------------------------------------------------------------

@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[list[str]]
    note: str = ""


@dataclass
class Target:
    name: str
    value: float
    threshold: float
    op: str  # ">=" or "<="
    detail: str = ""
    control: float | None = None  # the control's 2-thread scaling in the same rounds (scaling targets)

    @property
    def inconclusive(self) -> bool:
        """A scaling target measured while the machine did not offer a second core."""
        return self.control is not None and self.control < INCONCLUSIVE_BELOW

    @property
    def passed(self) -> bool:
        return self.value >= self.threshold if self.op == ">=" else self.value <= self.threshold

    def line(self) -> str:
        return (f"{'PASS' if self.passed else 'FAIL'}{'?' if self.inconclusive else ''}  {self.name}: {self.value:.2f} "
                f"(target {self.op} {self.threshold:g}){'  ' + self.detail if self.detail else ''}")

    def to_json(self) -> dict:
        return {**asdict(self), "passed": self.passed, "inconclusive": self.inconclusive}


@dataclass
class CaseResult:
    name: str
    title: str
    what: str
    tables: list[Table] = field(default_factory=list)
    targets: list[Target] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    series: dict = field(default_factory=dict)  # {contender: {threads: ops/s}} for the plot
    raw: dict = field(default_factory=dict)
    skipped: str = ""

    def to_json(self) -> dict:
        return {"name": self.name, "title": self.title, "what": self.what,
                "tables": [asdict(t) for t in self.tables],
                "targets": [t.to_json() for t in self.targets], "notes": self.notes,
                "series": {k: {str(n): v for n, v in s.items()} for k, s in self.series.items()},
                "raw": self.raw, "skipped": self.skipped}


@dataclass
class Context:
    quick: bool
    threads: list[int]
    repeats: int
    target_s: float  # seconds per throughput sample (one thread)
    e2e_threads: list[int]
    data: Path = datagen.CACHE

    @property
    def free_threaded(self) -> bool:
        return not getattr(sys, "_is_gil_enabled", lambda: True)()


class Skip(Exception):
    """A case (or a contender) cannot run in this interpreter."""


def optional(module: str):
    """Imports ``module`` or returns None (looking in ``data/bench/_pkgs`` too)."""
    try:
        return importlib.import_module(module)
    except ImportError:
        pass
    if EXTRA_PACKAGES.is_dir() and str(EXTRA_PACKAGES) not in sys.path:
        sys.path.append(str(EXTRA_PACKAGES))
        importlib.invalidate_caches()
        try:
            return importlib.import_module(module)
        except ImportError:
            return None
    return None


def upstream_xarray_entrypoint():
    """Upstream's engine class (both packages register ``engine="tensogram"``: pass classes)."""
    module = optional("tensogram_xarray.backend")
    return None if module is None else module.TensogramBackendEntrypoint


def ours_entrypoint():
    from tgm_xarray.backend import TensogramBackendEntrypoint

    return TensogramBackendEntrypoint


def message_bytes(path: Path, msg: int = 0) -> bytes:
    offset, length = open_file(path).handle.message_span(msg)
    with open(path, "rb") as f:
        f.seek(offset)
        return f.read(length)


# --- table helpers ---------------------------------------------------------------------------

def throughput_table(title: str, matrix: dict[str, dict[int, Samples]], threads: list[int],
                     baselines: list[str], mb_per_op: float | None = None, unit: str = "reads") -> Table:
    columns = ["contender", "threads", f"wall time / {unit[:-1]} (min / median)", f"{unit}/s"]
    if mb_per_op:
        columns.append("MB/s")
    columns.append("scaling vs 1 thread")
    columns += [f"vs {b}" for b in baselines]
    rows = []
    for name, per_threads in matrix.items():
        one = per_threads.get(threads[0])
        for n in threads:
            s = per_threads[n]
            row = [name, str(n), f"{fmt_time(s.min())} / {fmt_time(s.median())}", fmt_rate(s.rate())]
            if mb_per_op:
                row.append(fmt_rate(s.rate() * mb_per_op))
            row.append(fmt_ratio(paired_ratio(s, one)) if n != threads[0] else "1.00x")
            for b in baselines:
                row.append("" if b == name else fmt_ratio(paired_ratio(s, matrix[b][n])))
            rows.append(row)
    return Table(title, columns, rows)


def best_ratio(a: Samples, b: Samples) -> float:
    """Throughput of a's best sample / b's best sample (noise only ever slows a sample down)."""
    return max(a.rates) / max(b.rates)


def time_ratio(a: Samples, b: Samples) -> float:
    """Median over rounds of (time of a / time of b)."""
    return 1 / paired_ratio(a, b)


def raw_matrix(matrix: dict[str, dict[int, Samples]]) -> dict:
    return {name: {str(n): s.to_json() for n, s in per.items()} for name, per in matrix.items()}


def series_of(matrix: dict[str, dict[int, Samples]]) -> dict:
    return {name: {n: s.rate() for n, s in per.items()} for name, per in matrix.items()}


def check(condition: bool, text: str) -> str:
    line = f"check {'ok' if condition else 'FAILED'}: {text}"
    print("  " + line, flush=True)
    if not condition:
        raise AssertionError(line)
    return line


CONTROL = "control: sha256 of 256 KB"
#: Below this 2-thread scaling of the control, the machine was too busy to judge a scaling target.
INCONCLUSIVE_BELOW = 1.6


def add_control(contenders: dict) -> str:
    """A CPU-bound call that releases the GIL and touches little memory: the 2-thread scaling it
    gets in the same rounds is what the machine offered at the time (the cores are shared)."""
    import hashlib

    block = np.random.default_rng(0).bytes(256 * 1024)
    contenders[CONTROL] = lambda i: hashlib.sha256(block).digest()
    return CONTROL


def scaling_detail(m: dict, t1: int, ours: str, *names: str) -> str:
    """The 2-thread scaling of the other contenders of the same rounds, and ours relative to the
    control's (1.00 = ours scaled as well as the machine allowed at the time)."""
    parts = [f"{n}: {paired_ratio(m[n][2], m[n][t1]):.2f}x" for n in names if n in m]
    control = paired_ratio(m[CONTROL][2], m[CONTROL][t1])
    ratios = [ra2 / ra1 / (rc2 / rc1) for ra1, ra2, rc1, rc2 in
              zip(m[ours][t1].rates, m[ours][2].rates, m[CONTROL][t1].rates, m[CONTROL][2].rates)]
    best = max(m[ours][2].rates) / max(m[ours][t1].rates)
    return (f"[best samples: {best:.2f}x; {CONTROL}: {control:.2f}x, so relative to the control "
            f"{statistics.median(ratios):.2f}; " + ", ".join(parts) + "]")


# --- decode ----------------------------------------------------------------------------------

def case_decode(ctx: Context) -> CaseResult:
    res = CaseResult("decode", "Decode of one 1M-element float32 object, uncompressed (4 MB)",
                     "Reads of the whole object from a file in the page cache: ours through "
                     "`open_file(path).read(0, 0, out=buf)` (and without `out`), upstream "
                     "`tensogram.decode(bytes)` of the message in memory and "
                     "`TensogramFile.decode_message(0)`, against numpy copying the same 4 MB. "
                     "N threads each do K reads; throughput = N*K / wall time.")
    datagen.ensure(["raw"], ctx.data)
    path = ctx.data / "raw1m.tgm"
    f = open_file(path)
    src = datagen.raw_values()
    n = src.size
    bufs = [np.empty(n, np.float32) for _ in range(max(ctx.threads))]
    contenders: dict[str, Callable[[int], Any]] = {
        "tgm_xarray read(out=buf)": lambda i: f.read(0, 0, out=bufs[i]),
        "tgm_xarray read()": lambda i: f.read(0, 0),
    }
    tensogram = optional("tensogram")
    if tensogram is not None:
        blob = message_bytes(path)
        tfile = tensogram.TensogramFile.open(str(path))
        contenders["upstream decode(bytes)"] = lambda i: tensogram.decode(blob)
        contenders["upstream TensogramFile.decode_message"] = lambda i: tfile.decode_message(0)
    else:
        res.notes.append("upstream tensogram is not installed in this interpreter: its rows are skipped")
    contenders["numpy copyto (memcpy)"] = lambda i: np.copyto(bufs[i], src)
    contenders["numpy ndarray.copy()"] = lambda i: src.copy()
    add_control(contenders)

    res.notes.append(check(np.array_equal(f.read(0, 0), src), "tgm_xarray read == source values"))
    if tensogram is not None:
        up = tensogram.decode(blob).objects[0][1]
        res.notes.append(check(np.array_equal(up, src), "upstream decode == source values"))

    m = throughput_matrix(contenders, ctx.threads, ctx.repeats, ctx.target_s)
    baselines = ["numpy copyto (memcpy)"]
    if tensogram is not None:
        baselines.append("upstream decode(bytes)")
    res.tables.append(throughput_table("decode, 1M float32 (4.2 MB)", m, ctx.threads, baselines,
                                       mb_per_op=src.nbytes / 1e6))
    res.series, res.raw = series_of(m), raw_matrix(m)
    t1 = ctx.threads[0]
    ours, memcpy = m["tgm_xarray read(out=buf)"], m["numpy copyto (memcpy)"]
    res.targets.append(Target("decode: 1-thread uncompressed read(out=buf) / memcpy (np.copyto)",
                              paired_ratio(ours[t1], memcpy[t1]), 0.7, ">=",
                              f"[best samples: {best_ratio(ours[t1], memcpy[t1]):.2f}; read() / ndarray.copy(): "
                              f"{paired_ratio(m['tgm_xarray read()'][t1], m['numpy ndarray.copy()'][t1]):.2f}]"))
    if 2 in ctx.threads:
        res.targets.append(Target("decode: 2-thread scaling of read(out=buf), 4 MB chunk",
                                  paired_ratio(ours[2], ours[t1]), 1.8, ">=",
                                  scaling_detail(m, t1, "tgm_xarray read(out=buf)", "numpy copyto (memcpy)"),
                                  control=paired_ratio(m[CONTROL][2], m[CONTROL][t1])))
    return res


# --- range -----------------------------------------------------------------------------------

def case_range(ctx: Context) -> CaseResult:
    res = CaseResult("range", "Decode-range: 2 x 1K-element slices of the 1M float32 object",
                     "Upstream's decode-range benchmark: two 1,024-element runs (at elements 1,000 and "
                     "500,000) of the uncompressed 1M object. Ours as one read with an index array "
                     "(`read(0, 0, (np.r_[...],), out=buf)`), as two slice reads, and through the raw "
                     "handle (`FileHandle.read_into`, no Python index normalisation); upstream "
                     "`tensogram.decode_range(bytes, 0, [(start, count), ...])` and "
                     "`TensogramFile.file_decode_range`.")
    datagen.ensure(["raw"], ctx.data)
    path = ctx.data / "raw1m.tgm"
    f = open_file(path)
    h = f.handle
    src = datagen.raw_values()
    a, b, k = 1_000, 500_000, 1024
    idx = np.r_[a:a + k, b:b + k].astype(np.int64)
    outs = [np.empty(2 * k, np.float32) for _ in range(max(ctx.threads))]
    sel = (idx,)
    contenders: dict[str, Callable[[int], Any]] = {
        "tgm_xarray read(index array, out)": lambda i: f.read(0, 0, sel, out=outs[i]),
        "tgm_xarray 2 x read(slice)": lambda i: (f.read(0, 0, slice(a, a + k)),
                                                 f.read(0, 0, slice(b, b + k))),
        "tgm_xarray FileHandle.read_into(index array)": lambda i: h.read_into(0, 0, sel, outs[i]),
    }
    tensogram = optional("tensogram")
    ranges = [(a, k), (b, k)]
    if tensogram is not None:
        blob = message_bytes(path)
        tfile = tensogram.TensogramFile.open(str(path))
        contenders["upstream decode_range(bytes)"] = lambda i: tensogram.decode_range(blob, 0, ranges)
        contenders["upstream TensogramFile.file_decode_range"] = (
            lambda i: tfile.file_decode_range(0, 0, ranges, join=True))
        up = np.concatenate(tensogram.decode_range(blob, 0, ranges))
        res.notes.append(check(np.array_equal(up, src[idx]), "upstream decode_range == source values"))
    else:
        res.notes.append("upstream tensogram is not installed in this interpreter: its rows are skipped")
    add_control(contenders)
    res.notes.append(check(np.array_equal(f.read(0, 0, sel), src[idx]), "tgm_xarray read == source values"))

    m = throughput_matrix(contenders, ctx.threads, ctx.repeats, ctx.target_s)
    baselines = ["upstream decode_range(bytes)"] if tensogram is not None else []
    res.tables.append(throughput_table("decode-range, 2 x 1,024 float32 of 1M", m, ctx.threads, baselines))
    res.series, res.raw = series_of(m), raw_matrix(m)
    if 2 in ctx.threads:
        ours = m["tgm_xarray read(index array, out)"]
        res.targets.append(Target("range: 2-thread scaling of read(index array), 2 x 1K chunk read",
                                  paired_ratio(ours[2], ours[ctx.threads[0]]), 1.8, ">=",
                                  scaling_detail(m, ctx.threads[0], "tgm_xarray read(index array, out)",
                                                 "tgm_xarray FileHandle.read_into(index array)",
                                                 "upstream decode_range(bytes)"),
                                  control=paired_ratio(m[CONTROL][2], m[CONTROL][ctx.threads[0]])))
    return res


# --- sizes -----------------------------------------------------------------------------------

def case_sizes(ctx: Context) -> CaseResult:
    res = CaseResult("sizes", "Small reads: thread scaling by read size, either side of the release threshold",
                     "Raw float32 reads of the 1M object into a given `out`: one slice of 1K to 64K "
                     "elements, and index arrays of 2 runs of 128 to 4K points. Reads below about a "
                     "microsecond of work (32 KB copied, each separate run counting 128 bytes) keep the "
                     "interpreter: on a GIL build a thread that releases it for less waits ~20 µs to "
                     "get it back whenever another thread holds it, and two threads then do less than "
                     "one. The larger reads release it and scale.")
    datagen.ensure(["raw"], ctx.data)
    f = open_file(ctx.data / "raw1m.tgm")
    n_threads = max(ctx.threads)

    def keeps(nbytes: int, runs: int) -> bool:
        """The core's rule (`read::worth_releasing`) for a raw read copying `nbytes` in `runs` runs."""
        return nbytes + runs * _core.BYTES_PER_PIECE < _core.RELEASE_MIN_BYTES
    contenders: dict[str, Callable[[int], Any]] = {}
    for n in (1024, 4096, 16384, 65536):
        outs = [np.empty(n, np.float32) for _ in range(n_threads)]
        contenders[f"slice of {n // 1024}K ({'keeps' if keeps(4 * n, 1) else 'releases'})"] = (
            lambda i, n=n, outs=outs: f.read(0, 0, slice(1000, 1000 + n), out=outs[i]))
    for k in (128, 1024, 4096):
        sel = (np.r_[1000:1000 + k, 500_000:500_000 + k].astype(np.int64),)
        outs = [np.empty(2 * k, np.float32) for _ in range(n_threads)]
        contenders[f"index 2 x {k} ({'keeps' if keeps(8 * k, 2 * k) else 'releases'})"] = (
            lambda i, sel=sel, outs=outs: f.read(0, 0, sel, out=outs[i]))
    add_control(contenders)
    src = datagen.raw_values()
    res.notes.append(check(np.array_equal(f.read(0, 0, slice(1000, 1000 + 65536)), src[1000:1000 + 65536]),
                           "tgm_xarray slice read == source values"))
    m = throughput_matrix(contenders, ctx.threads, ctx.repeats, ctx.target_s)
    res.tables.append(throughput_table("raw float32 reads by size", m, ctx.threads, []))
    res.series, res.raw = series_of(m), raw_matrix(m)
    return res


# --- packed ----------------------------------------------------------------------------------

def eccodes_decoder(eccodes, message: bytes) -> Callable[[], np.ndarray]:
    def decode():
        handle = eccodes.codes_new_from_message(message)
        try:
            return eccodes.codes_get_values(handle)
        finally:
            eccodes.codes_release(handle)

    return decode


def case_packed(ctx: Context) -> CaseResult:
    res = CaseResult("packed", "The real 2 m temperature field, 24-bit simple packing + szip (721 x 1440)",
                     "Full decode of one real field to float64: ours from the `.tgm` file "
                     "(`read(0, 0, out=buf)`), upstream `tensogram.decode_object(bytes, 0)`, and ecCodes "
                     "(`codes_new_from_message` + `codes_get_values`) on the original GRIB2 message "
                     "(CCSDS, 12 bits, as ECMWF distributes it) and on the same field repacked at 24 "
                     "bits (the same quantisation as the `.tgm`).")
    datagen.ensure(["packed"], ctx.data)
    path = ctx.data / "packed-2t.tgm"
    f = open_file(path)
    shape = f.layout(0, 0)[0]
    threads = [n for n in ctx.threads if n <= 2]
    bufs = [np.empty(shape) for _ in range(max(threads))]
    contenders: dict[str, Callable[[int], Any]] = {"tgm_xarray read(out=buf)": lambda i: f.read(0, 0, out=bufs[i])}
    ours = f.read(0, 0)
    tensogram = optional("tensogram")
    if tensogram is not None:
        blob = message_bytes(path)
        contenders["upstream decode_object(bytes, 0)"] = lambda i: tensogram.decode_object(blob, 0)
        up = tensogram.decode_object(blob, 0)[2]
        res.notes.append(check(np.array_equal(up, ours), "upstream decode == tgm_xarray read (bit for bit)"))
    else:
        res.notes.append("upstream tensogram is not installed in this interpreter: its rows are skipped")
    eccodes = optional("eccodes")
    baseline = None
    if eccodes is not None:
        original = datagen.GRIB_2T.read_bytes()
        repacked = (ctx.data / "packed-2t-24bit.grib2").read_bytes()
        dec12, dec24 = eccodes_decoder(eccodes, original), eccodes_decoder(eccodes, repacked)
        baseline = "ecCodes, original GRIB2 (CCSDS 12-bit)"
        contenders[baseline] = lambda i: dec12()
        contenders["ecCodes, GRIB2 repacked at 24 bits"] = lambda i: dec24()
        grib = dec12().reshape(shape)
        res.notes.append(check(np.array_equal(grib, ours),
                               "tgm_xarray read == ecCodes values of the original GRIB2 (exact)"))
        err24 = float(np.abs(dec24().reshape(shape) - ours).max())
        res.notes.append(check(err24 < 1e-4, f"ecCodes 24-bit GRIB2 within {err24:.1e} K of the field"))
    else:
        res.notes.append("ecCodes is not installed in this interpreter: its rows are skipped")
    add_control(contenders)

    m = throughput_matrix(contenders, threads, ctx.repeats, ctx.target_s)
    baselines = [b for b in (baseline, "upstream decode_object(bytes, 0)") if b in contenders]
    res.tables.append(throughput_table("2t, 721 x 1440 float64 (8.3 MB decoded), sp24 + szip", m,
                                       threads, baselines, mb_per_op=ours.nbytes / 1e6, unit="decodes"))
    res.series, res.raw = series_of(m), raw_matrix(m)
    mine = m["tgm_xarray read(out=buf)"]
    t1 = threads[0]
    if baseline:
        res.targets.append(Target("packed: 1-thread sp24+szip decode vs ecCodes (original GRIB2), speed ratio",
                                  paired_ratio(mine[t1], m[baseline][t1]), 1.0, ">=",
                                  f"[best samples: {best_ratio(mine[t1], m[baseline][t1]):.2f}; vs ecCodes 24-bit GRIB2: "
                                  f"{paired_ratio(mine[t1], m['ecCodes, GRIB2 repacked at 24 bits'][t1]):.2f}x]"))
    if 2 in threads:
        res.targets.append(Target("packed: 2-thread scaling of read(out=buf), sp24+szip field",
                                  paired_ratio(mine[2], mine[t1]), 1.8, ">=",
                                  scaling_detail(m, t1, "tgm_xarray read(out=buf)", baseline or "",
                                                 "upstream decode_object(bytes, 0)"),
                                  control=paired_ratio(m[CONTROL][2], m[CONTROL][t1])))
    return res


# --- window ----------------------------------------------------------------------------------

def case_window(ctx: Context) -> CaseResult:
    res = CaseResult("window", "Partial reads of the packed + szip field: 1/16 windows vs a full decode",
                     "One thread. Rows 360:405 (45 of 721 rows = 1/16) and a 1/4 x 1/4 box (rows 180:360, "
                     "columns 360:720, also 1/16 of the points) against the full decode of the same field. "
                     "Upstream through `tensogram.decode_range` with the equivalent flat ranges (1 range "
                     "for the rows, 180 ranges for the box) against `decode_object`. The szip stream can be "
                     "entered every RSI block (128 x 32 = 4,096 values, about 2.8 rows), so a box still "
                     "decompresses every block of its 180 rows (1/4 of the field) but unpacks only its "
                     "points.")
    datagen.ensure(["packed"], ctx.data)
    path = ctx.data / "packed-2t.tgm"
    f = open_file(path)
    (ny, nx), _ = f.layout(0, 0)
    rows, box = (slice(360, 405), slice(None)), (slice(180, 360), slice(360, 720))
    full = f.read(0, 0)
    bufs = {"full": np.empty((ny, nx)), "rows": np.empty((45, nx)), "box": np.empty((180, 360))}
    contenders: dict[str, Callable[[], Any]] = {
        "tgm_xarray full read": lambda: f.read(0, 0, out=bufs["full"]),
        "tgm_xarray rows 1/16": lambda: f.read(0, 0, rows, out=bufs["rows"]),
        "tgm_xarray box 1/4 x 1/4": lambda: f.read(0, 0, box, out=bufs["box"]),
    }
    res.notes.append(check(np.array_equal(f.read(0, 0, rows), full[rows]) and
                           np.array_equal(f.read(0, 0, box), full[box]), "windows == slices of the full read"))
    tensogram = optional("tensogram")
    if tensogram is not None:
        blob = message_bytes(path)
        row_ranges = [(360 * nx, 45 * nx)]
        (r0, r1), (c0, c1) = (box[0].start, box[0].stop), (box[1].start, box[1].stop)
        box_ranges = [(r * nx + c0, c1 - c0) for r in range(r0, r1)]
        contenders["upstream full decode_object"] = lambda: tensogram.decode_object(blob, 0)
        contenders["upstream rows 1/16 decode_range"] = lambda: tensogram.decode_range(blob, 0, row_ranges, join=True)
        contenders["upstream box 1/4 x 1/4 decode_range"] = lambda: tensogram.decode_range(blob, 0, box_ranges, join=True)
        up_rows = tensogram.decode_range(blob, 0, row_ranges, join=True).reshape(45, nx)
        up_box = tensogram.decode_range(blob, 0, box_ranges, join=True).reshape(180, 360)
        res.notes.append(check(np.array_equal(up_rows, full[rows]) and np.array_equal(up_box, full[box]),
                               "upstream decode_range windows == slices of the full read"))
    else:
        res.notes.append("upstream tensogram is not installed in this interpreter: its rows are skipped")

    s = timed_calls(contenders, ctx.repeats, ctx.target_s)
    ours_of = {"upstream full decode_object": "tgm_xarray full read",
               "upstream rows 1/16 decode_range": "tgm_xarray rows 1/16",
               "upstream box 1/4 x 1/4 decode_range": "tgm_xarray box 1/4 x 1/4"}
    rows_out = []
    for name, sm in s.items():
        full_name = "tgm_xarray full read" if name.startswith("tgm_xarray") else "upstream full decode_object"
        rows_out.append([name, "1/1" if "full" in name else "1/16",
                         f"{fmt_time(sm.min())} / {fmt_time(sm.median())}",
                         f"{time_ratio(sm, s[full_name]):.3f}",
                         fmt_ratio(time_ratio(sm, s[ours_of[name]])) if name in ours_of else ""])
    res.tables.append(Table("windows of 2t (721 x 1440 float64, sp24 + szip), one thread",
                            ["contender", "points", "time (min / median)", "time / full decode (same library)",
                             "time / tgm_xarray's"], rows_out))
    res.raw = {k: v.to_json() for k, v in s.items()}
    res.targets.append(Target("window: rows 1/16 read time / full decode time (tgm_xarray)",
                              time_ratio(s["tgm_xarray rows 1/16"], s["tgm_xarray full read"]), 0.125, "<=",
                              f"[best samples: {1 / best_ratio(s['tgm_xarray rows 1/16'], s['tgm_xarray full read']):.3f}]"))
    # The box is reported, not held to the 1/8 target: szip can be entered only at RSI block
    # boundaries, and the rows of the box are closer together than a block, so every block from
    # its first point to its last is decompressed whole.
    params = f.descriptors(0)[0]["params"]
    block = params["szip_rsi"] * params["szip_block_size"]
    first, last = box[0].start * nx + box[1].start, (box[0].stop - 1) * nx + box[1].stop - 1
    box_blocks = last // block - first // block + 1
    box_note = (f"box 1/4 x 1/4: {time_ratio(s['tgm_xarray box 1/4 x 1/4'], s['tgm_xarray full read']):.3f} "
                     f"of a full decode (reported, not a target): its points lie in {box_blocks} RSI blocks "
                     f"of {block} values, {box_blocks * block / (ny * nx):.2f} of the field, which szip "
                     "decompresses whole")
    print("  " + box_note)
    res.notes.append(box_note)
    return res


# --- e2e -------------------------------------------------------------------------------------

def _hours(value) -> float:
    if isinstance(value, np.timedelta64):
        return float(value / np.timedelta64(1, "h"))
    return float(value)


def _means_of_dataset(result) -> dict[tuple, float]:
    """{(param, step in hours, level): value} of a reduced (step, level) Dataset."""
    out = {}
    for name, da in result.data_vars.items():
        step_dim = next(d for d in da.dims if "step" in d)
        level_dim = next(d for d in da.dims if d != step_dim)
        da = da.transpose(step_dim, level_dim)
        steps = [_hours(v) for v in da[step_dim].values]
        levels = [float(v) for v in da[level_dim].values]
        values = np.asarray(da.values, dtype=np.float64)
        for i, st in enumerate(steps):
            for j, lev in enumerate(levels):
                out[(str(name), st, lev)] = float(values[i, j])
    return out


def case_e2e(ctx: Context) -> CaseResult:
    import dask
    import xarray as xr

    name = "e2e-quick" if ctx.quick else "e2e"
    keys = list(datagen.e2e_keys(name))
    res = CaseResult("e2e", f"End to end: open lazily + global means of {len(keys)} fields of 721 x 1440",
                     f"`xr.open_dataset(path, chunks={{}})` then `ds.mean((\"latitude\", \"longitude\"))"
                     f".compute()` over every variable with dask's threaded scheduler. Data: {len(keys)} "
                     "fields (t, q, gh, r on pressure levels x steps) derived from the real IFS fields "
                     "(see `benchmarks/datagen.py`), the same values in every format: `.tgm` (24-bit "
                     "packing + szip, float64, one message per field with latitude/longitude objects), "
                     "GRIB2 (CCSDS 24 bits, through cfgrib, `indexpath=\"\"` so no index file is reused), "
                     "NetCDF4 (float32, zlib 4 + shuffle, one chunk per field, through h5netcdf) and zarr v3 "
                     "(float32, zstd 3, one chunk per field). Upstream tensogram-xarray 0.24 cannot stack "
                     "packed fields into one Dataset (it treats each field's packing parameters as "
                     "metadata that varies, so `merge_objects=True` keeps one field per variable): its "
                     "contender opens each message (`message_index=i`) and computes all the means in one "
                     "`dask.compute`. Open and reduce are timed separately; a sample is one whole "
                     "workflow. Two floors show what the same means cost without xarray and dask: "
                     "each library's own read of every field plus `np.nanmean` (what `mean` does "
                     "on floats) in a thread pool of as many threads.")
    groups = [f"{name}-tgm-grib", f"{name}-nc", f"{name}-zarr"]
    if optional("eccodes") is None:
        groups = [g for g in groups if not g.endswith("tgm-grib")]
        if not (ctx.data / f"{name}.tgm").exists():
            raise Skip(f"{name}.tgm is missing and ecCodes (to make it) is not installed here: "
                       "run the suite under CPython 3.11 first")
    datagen.ensure(groups, ctx.data)
    tgm, grib, nc, zarr_path = (ctx.data / f"{name}{ext}" for ext in (".tgm", ".grib2", ".nc", ".zarr"))
    dims = ("latitude", "longitude")
    ours_cls = ours_entrypoint()

    def ours_open():
        handles.CACHE.clear()  # a real open: map the file and index it again
        return xr.open_dataset(tgm, engine=ours_cls, chunks={})

    def reduce_ds(ds):
        try:
            return _means_of_dataset(ds.mean(dims).compute())
        finally:
            ds.close()

    # label: (open, reduce -> {(param, step, level): mean})
    flows: dict[str, tuple[Callable[[], Any], Callable[[Any], dict]]] = {"tgm_xarray": (ours_open, reduce_ds)}
    upstream_cls = upstream_xarray_entrypoint()
    tensogram = optional("tensogram")
    if upstream_cls is not None and tensogram is not None:
        def upstream_open():
            count = tensogram.TensogramFile.open(str(tgm)).message_count()
            return [xr.open_dataset(tgm, engine=upstream_cls, chunks={}, message_index=i) for i in range(count)]

        def upstream_reduce(datasets):
            try:
                results = dask.compute(*[ds[v].mean(dims) for ds in datasets for v in ds.data_vars])
                out = {}
                for da in results:
                    mars = da.attrs["mars"]
                    out[(str(da.name), float(mars["step"]), float(mars["levelist"]))] = float(da.values)
                return out
            finally:
                for ds in datasets:
                    ds.close()

        flows["upstream tensogram-xarray"] = (upstream_open, upstream_reduce)
    else:
        res.notes.append("upstream tensogram-xarray is not installed: its row is skipped "
                         "(pip install --no-deps --target data/bench/_pkgs tensogram-xarray==0.24.0)")
    if optional("cfgrib") is not None and grib.exists():
        flows["cfgrib (GRIB2)"] = (lambda: xr.open_dataset(grib, engine="cfgrib", indexpath="",
                                                           chunks={"step": 1, "isobaricInhPa": 1}), reduce_ds)
    else:
        res.notes.append("cfgrib is not installed in this interpreter: its row is skipped")
    if optional("h5netcdf") is not None and optional("h5py") is not None:
        flows["h5netcdf (NetCDF4)"] = (lambda: xr.open_dataset(nc, engine="h5netcdf", chunks={}), reduce_ds)
    else:
        res.notes.append("h5netcdf/h5py are not installed in this interpreter: their row is skipped "
                         "(pip install --no-deps --target data/bench/_pkgs h5py)")
    if optional("zarr") is not None:
        flows["zarr (zstd)"] = (lambda: xr.open_dataset(zarr_path, engine="zarr", chunks={}, consolidated=True),
                                reduce_ds)

    # the floors: the same means without xarray or dask (a thread pool over the fields)
    from concurrent.futures import ThreadPoolExecutor

    def floor(read_mean):
        def open_fn():
            return ThreadPoolExecutor(max_workers=dask.config.get("num_workers"))

        def reduce_fn(pool):
            with pool:
                return dict(zip(keys, pool.map(read_mean, range(len(keys)))))
        return open_fn, reduce_fn

    floor_file = {}

    def ours_read_mean(i):
        return float(np.nanmean(floor_file["f"].read(i, 0)))

    def ours_floor():
        open_fn, reduce_fn = floor(ours_read_mean)

        def open_all():
            handles.CACHE.clear()
            floor_file["f"] = open_file(tgm)
            return open_fn()
        return open_all, reduce_fn

    flows["floor: tgm_xarray read + np.nanmean, thread pool"] = ours_floor()
    if tensogram is not None:
        up_file = {}

        def up_read_mean(i):
            return float(np.nanmean(tensogram.decode_object(up_file["f"].read_message(i), 0)[2]))

        up_open, up_reduce = floor(up_read_mean)

        def up_open_all():
            up_file["f"] = tensogram.TensogramFile.open(str(tgm))
            return up_open()
        flows["floor: upstream decode_object + np.nanmean, thread pool"] = (up_open_all, up_reduce)

    def run(label):
        open_fn, reduce_fn = flows[label]
        t0 = perf()
        opened = open_fn()
        t1 = perf()
        values = reduce_fn(opened)
        return values, t1 - t0, perf() - t1

    rows, raw = [], {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for n in ctx.e2e_threads:
            with dask.config.set(scheduler="threads", num_workers=n):
                # one untimed run of each: the agreement check and the warm-up
                reference, _, _ = run("tgm_xarray")
                res.notes.append(check(len(reference) == len(keys),
                                       f"tgm_xarray: {len(reference)} means, one per field"))
                for label in list(flows)[1:]:
                    values, _, _ = run(label)
                    worst = max(abs(values[k] - v) / max(abs(v), 1e-30) for k, v in reference.items()
                                if k in values) if values else float("inf")
                    res.notes.append(check(set(values) == set(reference) and worst < 1e-5,
                                           f"{label}: the same {len(values)} means as tgm_xarray "
                                           f"(max relative difference {worst:.1e}, {n} dask threads)"))
                opens: dict[str, list[float]] = {label: [] for label in flows}
                reduces: dict[str, list[float]] = {label: [] for label in flows}
                s = {label: Samples() for label in flows}

                def sample(label, keep):
                    _, open_s, reduce_s = run(label)
                    if keep:
                        opens[label].append(open_s)
                        reduces[label].append(reduce_s)
                        s[label].seconds.append(open_s + reduce_s)

                rounds(list(flows), ctx.repeats, sample, warmup=0)
            mine = s["tgm_xarray"]
            for label, sm in s.items():
                rows.append([label, str(n), fmt_time(statistics.median(opens[label])),
                             fmt_time(statistics.median(reduces[label])),
                             f"{fmt_time(sm.min())} / {fmt_time(sm.median())}",
                             "1.00x" if label == "tgm_xarray" else fmt_ratio(time_ratio(sm, mine))])
                raw[f"{label} @{n}"] = {**sm.to_json(), "open_s": opens[label], "reduce_s": reduces[label]}
            if "upstream tensogram-xarray" in s:
                up = s["upstream tensogram-xarray"]
                res.targets.append(Target(f"e2e ({n} dask threads): speed-up over upstream tensogram-xarray",
                                          time_ratio(up, mine), 3.0, ">=",
                                          f"[best samples: {best_ratio(mine, up):.2f}]"))
            for label in ("cfgrib (GRIB2)", "h5netcdf (NetCDF4)"):
                if label in s:
                    res.targets.append(Target(f"e2e ({n} dask threads): speed-up over {label}",
                                              time_ratio(s[label], mine), 1.0, ">=",
                                              f"[best samples: {best_ratio(mine, s[label]):.2f}]"))
    res.tables.append(Table(f"{len(keys)} fields of 721 x 1440: open + global mean of every field",
                            ["contender", "dask threads", "open (median)", "reduce (median)",
                             "total (min / median)", "total / tgm_xarray's"], rows))
    res.raw = raw
    return res


# --- open ------------------------------------------------------------------------------------

def case_open(ctx: Context) -> CaseResult:
    import xarray as xr

    name = "open200" if ctx.quick else "open2000"
    res = CaseResult("open", "Open time (metadata only, no payload read)",
                     "`xr.open_dataset` of upstream's 1000-message fixture "
                     "(`remote-parity/thousand-msg.tgm`, 1000 x 4 float32): ours vs upstream "
                     "tensogram-xarray with `merge_objects=True` (both give one variable stacked over "
                     f"the 1000 messages); and of a generated {name[4:]}-field file (10 params x steps x "
                     "10 levels of 73 x 144): ours vs cfgrib on the same fields as GRIB2 "
                     "(`indexpath=\"\"`: cfgrib scans every message, as on a first open). Our handle "
                     "cache is cleared before each open, so the file is mapped and indexed each time.")
    ours_cls = ours_entrypoint()

    def ours(path):
        def run():
            handles.CACHE.clear()
            xr.open_dataset(path, engine=ours_cls).close()
        return run

    contenders: dict[str, Callable[[], Any]] = {"tgm_xarray, thousand-msg.tgm": ours(datagen.THOUSAND)}
    upstream_cls = upstream_xarray_entrypoint()
    if upstream_cls is not None:
        contenders["upstream tensogram-xarray, thousand-msg.tgm"] = lambda: xr.open_dataset(
            datagen.THOUSAND, engine=upstream_cls, merge_objects=True).close()
    else:
        res.notes.append("upstream tensogram-xarray is not installed: its row is skipped")
    if optional("eccodes") is not None:
        datagen.ensure([name], ctx.data)
    tgm, grib = ctx.data / f"{name}.tgm", ctx.data / f"{name}.grib2"
    if tgm.exists():
        contenders[f"tgm_xarray, {name}.tgm"] = ours(tgm)
    if optional("cfgrib") is not None and grib.exists():
        contenders[f"cfgrib, {name}.grib2"] = lambda: xr.open_dataset(grib, engine="cfgrib", indexpath="").close()
    else:
        res.notes.append("cfgrib is not installed in this interpreter: its row is skipped")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        with xr.open_dataset(datagen.THOUSAND, engine=ours_cls) as ds:
            res.notes.append(check(ds["object_0"].shape == (1000, 4), "thousand-msg.tgm opens as (1000, 4)"))
        s = once_each(contenders, ctx.repeats)
    rows = []
    for label, sm in s.items():
        base = f"tgm_xarray, {Path(label.split(', ')[1]).stem}.tgm"
        rows.append([label, f"{fmt_time(sm.min())} / {fmt_time(sm.median())}",
                     "" if label == base or base not in s else fmt_ratio(time_ratio(sm, s[base]))])
    res.tables.append(Table("xr.open_dataset, page cache warm", ["contender", "open (min / median)",
                                                                 "time / tgm_xarray's"], rows))
    res.raw = {k: v.to_json() for k, v in s.items()}
    return res


# --- contention ------------------------------------------------------------------------------

def case_contention(ctx: Context) -> CaseResult:
    res = CaseResult("contention", "Latency of small reads next to a CPU-bound Python thread",
                     "The main thread reads 1,024-element slices (at random offsets) of the 1M float32 "
                     "object, one at a time, timing each; alone, then while another thread spins in a "
                     "pure-Python loop. With the GIL, a call that releases it must win it back from the "
                     "spinner on return, which can take a whole switch interval "
                     f"(`sys.getswitchinterval()` = {sys.getswitchinterval() * 1e3:g} ms): the convoy "
                     "effect. Our 4 KB reads are below the release threshold (see `sizes`) and keep the "
                     "GIL; upstream's `decode_range` releases it. References: a numpy copy of the same "
                     "1,024 floats (numpy releases the GIL for copies above 500 elements, so it suffers "
                     "too) and a bytearray slice copy of the same 4 KB, which keeps the GIL. On a "
                     "free-threaded build there is no GIL to win back.")
    datagen.ensure(["raw"], ctx.data)
    path = ctx.data / "raw1m.tgm"
    f = open_file(path)
    src = datagen.raw_values()
    k = 1024
    offsets = np.random.default_rng(1).integers(0, src.size - k, 4096).tolist()
    buf = np.empty(k, np.float32)
    ops: dict[str, Callable[[int], Any]] = {
        "tgm_xarray read(slice, out)": lambda o: f.read(0, 0, slice(o, o + k), out=buf),
    }
    tensogram = optional("tensogram")
    if tensogram is not None:
        blob = message_bytes(path)
        ops["upstream decode_range(bytes)"] = lambda o: tensogram.decode_range(blob, 0, [(o, k)])
    ops["numpy copyto(buf, src[o:o+1024])"] = lambda o: np.copyto(buf, src[o:o + k])
    # the reference that keeps the GIL: CPython copies a bytearray slice without releasing it
    raw, scratch = memoryview(src.tobytes()), bytearray(4 * k)
    ops["bytearray slice copy, 4 KB (keeps the GIL)"] = lambda o: scratch.__setitem__(slice(None), raw[4 * o:4 * (o + k)])
    duration = 0.15 if ctx.quick else 0.6
    lat: dict[tuple[str, str], list[float]] = {}
    p50s: dict[tuple[str, str], list[float]] = {}
    spins: dict[tuple[str, str], list[float]] = {}

    def sample(name, mode, keep):
        op = ops[name]
        running = [True]
        count = [0]

        def spin():
            n = 0
            while running[0]:
                n += 1
            count[0] = n

        spinner = None
        if mode == "contended":
            spinner = threading.Thread(target=spin, daemon=True)
            spinner.start()
            time.sleep(0.02)
        times = []
        i = 0
        t_end = perf() + duration
        while True:
            o = offsets[i % len(offsets)]
            i += 1
            t0 = time.perf_counter_ns()
            op(o)
            t1 = time.perf_counter_ns()
            times.append((t1 - t0) / 1e3)
            if t1 / 1e9 > t_end:
                break
        if spinner is not None:
            running[0] = False
            spinner.join()
        if keep:
            lat.setdefault((name, mode), []).extend(times)
            p50s.setdefault((name, mode), []).append(percentile(times, 50))
            spins.setdefault((name, mode), []).append(count[0] / duration)

    configs = [(name, mode) for name in ops for mode in ("alone", "contended")]
    rounds(configs, ctx.repeats, lambda c, keep: sample(c[0], c[1], keep))
    rows = []
    for name in ops:
        for mode in ("alone", "contended"):
            v = lat[(name, mode)]
            rows.append([name, mode, f"{percentile(v, 50):.1f}", f"{percentile(v, 99):.1f}",
                         f"{percentile(v, 99.9):.1f}", f"{max(v):.0f}",
                         f"{sum(x > 1000 for x in v) / len(v):.2%}",
                         fmt_rate(len(v) / (ctx.repeats * duration))])
    res.tables.append(Table("1,024-element reads, latency in µs (all rounds pooled)",
                            ["contender", "next to a spinning thread?", "p50", "p99", "p99.9", "max",
                             "reads > 1 ms", "reads/s"], rows))
    res.raw = {f"{n} / {m}": {"p50_us": percentile(v, 50), "p99_us": percentile(v, 99),
                              "p999_us": percentile(v, 99.9), "max_us": max(v), "count": len(v),
                              "p50_per_round": p50s[(n, m)]}
               for (n, m), v in lat.items()}
    return res


# --- zarr ------------------------------------------------------------------------------------

def case_zarr(ctx: Context) -> CaseResult:
    script = HERE / "zarr_codec.py"
    res = CaseResult("zarr", "The zarr codec against zarr's codecs (benchmarks/zarr_codec.py)",
                     "Runs `benchmarks/zarr_codec.py` (a colleague's script) in this interpreter and keeps "
                     "its output: compressed size, codec encode/decode throughput on 1 and 2 threads and "
                     "zarr reads of the real 2t field.")
    if not script.exists():
        raise Skip("benchmarks/zarr_codec.py does not exist")
    runs = max(ctx.repeats, 5)
    proc = subprocess.run([sys.executable, str(script), "--runs", str(runs)], capture_output=True, text=True,
                          cwd=HERE.parent, timeout=1800)
    text = "\n".join(line for line in proc.stdout.splitlines())
    if proc.returncode != 0:
        raise Skip(f"zarr_codec.py failed ({proc.returncode}): {proc.stderr.strip().splitlines()[-1:]}")
    res.tables.append(Table("output of zarr_codec.py", ["text"], [[text]], note="preformatted"))
    res.raw = {"stdout": proc.stdout, "runs": runs}
    return res


CASES = {
    "decode": case_decode,
    "range": case_range,
    "sizes": case_sizes,
    "packed": case_packed,
    "window": case_window,
    "e2e": case_e2e,
    "open": case_open,
    "contention": case_contention,
    "zarr": case_zarr,
    "virtual": lambda ctx: importlib.import_module("virtual").case_virtual(ctx),  # benchmarks/virtual.py
    "archive": lambda ctx: importlib.import_module("archive").case_archive(ctx),  # benchmarks/archive.py
}

# The cases of one field on several threads, async loads and szip windows.
from cases_parallel import CASES as _PARALLEL_CASES  # noqa: E402 - needs the names above

CASES.update(_PARALLEL_CASES)
