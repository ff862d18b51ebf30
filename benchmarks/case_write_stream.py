"""The ``write-stream`` case of ``run.py``: ``to_tgm`` of a dask-backed Dataset far larger than
the writer may hold (4 GB; 415 MB with ``--quick``), in a child process whose peak resident memory
is measured."""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

import datagen
from common import CaseResult, Context, Table, Target, check
from harness import fmt_time

#: Fields of the 2t grid (721 x 1440 float64, 8.3 MB each): 4.0 GB, or 415 MB with --quick.
FIELDS = {False: 482, True: 50}
PEAK_LIMIT_MB = 1000

# Builds a Dataset of `n` fields, one dask chunk each, every field the 2t field plus its index
# times 0.01 (computed when the writer asks for it, never held), writes it with 24-bit packing +
# szip, and prints one JSON line: time, resident memory before the write and the process's peak
# (VmHWM, imports included), the Dataset's and the file's sizes, and the fields dask computed.
CHILD = """
import json, os, sys, threading, time
import dask.array as da, numpy as np, pandas as pd, xarray as xr
import tgm_xarray

base_path, out, n, threads = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
base = np.load(base_path)
computed, lock = [], threading.Lock()

def field(block_info=None):
    t = block_info[None]["array-location"][0][0]
    with lock:
        computed.append(t)
    return (base + 0.01 * t)[None]

data = da.map_blocks(field, chunks=((1,) * n, (base.shape[0],), (base.shape[1],)), dtype="float64",
                     meta=np.array((), "float64"))
ds = xr.Dataset({"t2m": (("time", "latitude", "longitude"), data)},
                coords={"time": pd.date_range("2026-01-01", periods=n, freq="6h")})
encoding = {"t2m": {"bits": 24, "compression": "szip"}}

def status(key):
    return next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith(key))

rss = status("VmRSS:")
t0 = time.perf_counter()
tgm_xarray.to_tgm(ds, out, encoding=encoding, threads=threads)
seconds = time.perf_counter() - t0
print(json.dumps({"seconds": seconds, "rss_before": rss, "peak": status("VmHWM:"), "nbytes": ds.nbytes,
                  "file": os.path.getsize(out), "computed": len(computed), "distinct": len(set(computed))}))
"""


def case_write_stream(ctx: Context) -> CaseResult:
    n = FIELDS[ctx.quick]
    values = np.ascontiguousarray(datagen.grib_values("2t"))
    size_gb = n * values.nbytes / 1e9
    res = CaseResult("write-stream", f"Streaming write: to_tgm of a {size_gb:.1f} GB dask Dataset, peak memory",
                     f"A child process builds a dask-backed Dataset of {n} float64 fields of 721 x 1440 (one "
                     "chunk per field, each the real 2 m temperature plus its index x 0.01, computed only "
                     "when the writer reads it) and writes it with `to_tgm` (24-bit packing + szip) on "
                     "1, 2, ... threads, once each. Peak RSS is the child's VmHWM (imports included); "
                     "'before' is its resident memory once the Dataset is built; MB/s counts the "
                     "Dataset's float64 bytes.")
    rows = []
    peaks = {}
    with tempfile.TemporaryDirectory(prefix="tgm-write-stream-") as tmp:
        base = Path(tmp) / "2t.npy"
        np.save(base, values)
        for threads in ctx.threads:
            out = Path(tmp) / f"stream{threads}.tgm"
            proc = subprocess.run([sys.executable, "-c", CHILD, str(base), str(out), str(n), str(threads)],
                                  capture_output=True, text=True, timeout=3600)
            if proc.returncode != 0:
                raise RuntimeError(f"the writing child failed: {proc.stderr[-2000:]}")
            r = json.loads(proc.stdout.strip().splitlines()[-1])
            res.notes.append(check(r["computed"] == r["distinct"] == n,
                                   f"threads={threads}: dask computed each of the {n} fields once"))
            _check_file(out, values, n)
            out.unlink()
            peaks[threads] = r["peak"] / 1e6
            rows.append([f"tgm_xarray to_tgm(threads={threads})", f"{r['nbytes'] / 1e9:.2f} GB",
                         f"{r['peak'] / 1e6:,.0f} MB", f"{r['rss_before'] / 1e6:,.0f} MB",
                         f"{(r['peak'] - r['rss_before']) / 1e6:,.0f} MB "
                         f"({(r['peak'] - r['rss_before']) / values.nbytes:.1f} fields)",
                         f"{r['file'] / 1e6:,.0f} MB", fmt_time(r["seconds"]),
                         f"{r['nbytes'] / 1e6 / r['seconds']:,.0f}"])
    res.tables.append(Table(f"{n} fields of 8.3 MB, one child process per row",
                            ["writer", "Dataset", "peak RSS", "RSS before the write",
                             "peak - before", "file", "time", "MB/s"], rows))
    res.raw = {"fields": n, "peak_mb": peaks}
    if not ctx.quick:
        res.targets.append(Target(f"write-stream: peak RSS writing a {size_gb:.1f} GB dask Dataset, MB "
                                  f"(threads={max(peaks)})", peaks[max(peaks)], PEAK_LIMIT_MB, "<="))
    return res


def _check_file(path: Path, values: np.ndarray, n: int) -> None:
    """The file holds the n fields in order, each within one packing step of what was written."""
    import xarray as xr

    step = (values.max() - values.min()) / (2**24 - 1)
    with xr.open_dataset(path, engine="tgm", chunks={}) as ds:
        read = ds["t2m"]
        check(read.shape == (n, *values.shape), f"{path.name} holds {n} fields")
        worst = max(float(np.abs(read[t].values - (values + 0.01 * t)).max()) for t in (0, n // 2, n - 1))
        check(worst <= step, f"{path.name}: first, middle and last fields within one packing step")
