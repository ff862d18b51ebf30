"""The ``write-dask`` case of ``run.py``: ``to_tgm`` against ``to_zarr`` on the same dask graph.

Each write runs in a child process of its own (time and peak resident memory of the write alone),
the two writers in turn, A B A B, so that a ratio compares runs made side by side.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from common import CaseResult, Context, Table, Target
from harness import fmt_ratio, fmt_time

# argv: writer (tgm|zarr), graph (anomaly|random), fields, fields per dask chunk, packed (0|1),
# scheduler (threads|cluster, or threads-warm: three untimed writes first), output path. Prints one JSON line: the write's seconds, resident
# memory before it and the process's peak (VmHWM), and the field's size in bytes.
CHILD = """
import json, sys, time
import dask, dask.array as da, numpy as np, pandas as pd, xarray as xr
import tgm_xarray, tgm_xarray.writer, zarr  # both writers loaded before the memory is read

writer, graph, n, per_chunk, packed, scheduler, out = sys.argv[1:]
n, per_chunk, packed = int(n), int(per_chunk), packed == "1"
shape = (361, 720) if graph == "anomaly" else (721, 1440)
chunks = ((per_chunk,) * (n // per_chunk) + ((n % per_chunk,) if n % per_chunk else ()), (shape[0],), (shape[1],))

def field(block_info=None):
    (t0, t1), _, _ = block_info[None]["array-location"]
    rng = np.random.default_rng(t0)
    return (250 + 30 * rng.random((t1 - t0, *shape))).astype("float32")

x = da.map_blocks(field, chunks=chunks, dtype="float32", meta=np.array((), "float32"))
ds = xr.Dataset({"t": (("step", "latitude", "longitude"), x)},
                coords={"step": pd.to_timedelta(np.arange(n) * 6, unit="h"),
                        "latitude": np.linspace(90, -90, shape[0]), "longitude": np.linspace(0, 360, shape[1], endpoint=False)})
if graph == "anomaly":
    ds = (ds - ds.mean("step")).astype("float32")

def status(key):
    return next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith(key))

def write():
    if writer == "tgm":
        tgm_xarray.to_tgm(ds, out, encoding={"t": {"bits": 16}} if packed else None)
    else:
        # zarr's 16-bit form: CF int16 scale/offset over the values' range
        enc = {"t": {"dtype": "int16", "scale_factor": 60 / 65000, "add_offset": 250.0 if graph == "random" else 0.0,
                     "_FillValue": -32768}} if packed else None
        ds.to_zarr(out, mode="w", encoding=enc, consolidated=False, zarr_format=3)

client = None
if scheduler == "cluster":
    import distributed
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    client = distributed.Client(cluster)
if scheduler == "threads-warm":  # what a process's first write pays once left out
    for _ in range(3):
        write()
rss = status("VmRSS:")
t0 = time.perf_counter()
write()
seconds = time.perf_counter() - t0
print(json.dumps({"seconds": seconds, "rss_before": rss, "peak": status("VmHWM:"), "field": 4 * shape[0] * shape[1]}))
if client is not None:
    client.close(); cluster.close()
"""

# argv: reader (tgm|zarr), path, repeats. Prints one JSON line: the seconds of each mean over
# time of the store's float32 variable, on dask's threads, one chunk per field, and its dtype.
READ_CHILD = """
import json, sys, time
import xarray as xr, tgm_xarray
reader, path, repeats = sys.argv[1], sys.argv[2], int(sys.argv[3])
times = []
for _ in range(repeats):
    t0 = time.perf_counter()
    with (xr.open_dataset(path, engine="tgm", chunks={}) if reader == "tgm" else
          xr.open_zarr(path, consolidated=False)) as ds:
        ds.t.mean("step").compute(scheduler="threads")
        dtype = str(ds.t.dtype)
    times.append(time.perf_counter() - t0)
print(json.dumps({"seconds": times, "dtype": dtype}))
"""

#: (what, graph, fields, fields per chunk (0: all), packed, scheduler); titled with the fields run
WORKLOADS = [
    ("anomalies of 361 x 720, 8 per chunk, defaults", "anomaly", 48, 8, False, "threads"),
    ("anomalies of 361 x 720, 8 per chunk, 16 bits", "anomaly", 48, 8, True, "threads"),
    ("random 721 x 1440, 1 per chunk, 16 bits", "random", 96, 1, True, "threads"),
    ("random 721 x 1440, 8 per chunk, 16 bits", "random", 96, 8, True, "threads"),
    ("random 721 x 1440, all in one chunk, 16 bits", "random", 96, 0, True, "threads"),
    ("anomalies of 361 x 720, 8 per chunk, 16 bits, LocalCluster", "anomaly", 48, 8, True, "cluster"),
    ("anomalies of 361 x 720, 8 per chunk, defaults, a process's 4th write", "anomaly", 48, 8, False, "threads-warm"),
    ("anomalies of 361 x 720, 8 per chunk, 16 bits, a process's 4th write", "anomaly", 48, 8, True, "threads-warm"),
]
QUICK = {"anomaly": 24, "random": 24}
GROWTH = ("anomaly", 8, True)  # anomalies, 8 per chunk, packed: 48 and 480 fields


def _run(writer: str, graph: str, n: int, per_chunk: int, packed: bool, scheduler: str, tmp: Path,
         keep: bool = False) -> dict:
    out = _out(tmp, writer)
    proc = subprocess.run([sys.executable, "-c", CHILD, writer, graph, str(n), str(per_chunk), str(int(packed)),
                           scheduler, str(out)], capture_output=True, text=True, timeout=1800)
    if proc.returncode != 0:
        raise RuntimeError(f"the {writer} child failed: {proc.stderr[-2000:]}")
    if not keep:
        subprocess.run(["rm", "-rf", str(out)], check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def _out(tmp: Path, writer: str) -> Path:
    return tmp / f"out.{'tgm' if writer == 'tgm' else 'zarr'}"


def _read_table(tmp: Path, n: int, repeats: int) -> tuple[Table, float]:
    """A mean over time of the same 16-bit float32 fields in a .tgm file and a float32 Zarr
    store (zarr's defaults), one chunk per field, each reader in a child of its own."""
    for writer in ("tgm", "zarr"):
        _run(writer, "random", n, 1, writer == "tgm", "threads", tmp, keep=True)
    found = {}
    for reader in ("tgm", "zarr"):
        proc = subprocess.run([sys.executable, "-c", READ_CHILD, reader, str(_out(tmp, reader)), str(repeats + 1)],
                              capture_output=True, text=True, timeout=1800)
        if proc.returncode != 0:
            raise RuntimeError(f"the {reader} reader failed: {proc.stderr[-2000:]}")
        found[reader] = json.loads(proc.stdout.strip().splitlines()[-1])
        subprocess.run(["rm", "-rf", str(_out(tmp, reader))], check=True)
    median = {r: statistics.median(f["seconds"][1:]) for r, f in found.items()}  # the first warms the cache
    ratio = median["zarr"] / median["tgm"]
    rows = [[f"tgm_xarray open_dataset(chunks={{}}), bits=16 ({found['tgm']['dtype']})", fmt_time(median["tgm"]),
             fmt_ratio(ratio)],
            [f"zarr open_zarr, float32 written by to_zarr's defaults ({found['zarr']['dtype']})",
             fmt_time(median["zarr"]), "1.00x"]]
    return Table(f"reading {n} random float32 fields of 721 x 1440: mean over time, dask threads, a chunk per field",
                 ["reader", "time", "speed vs zarr"], rows), ratio


def _pair(graph: str, n: int, per_chunk: int, packed: bool, scheduler: str, repeats: int, tmp: Path):
    """Medians of to_tgm and to_zarr, run in turn, and the median of their paired ratios."""
    runs: dict[str, list[dict]] = {"tgm": [], "zarr": []}
    for _ in range(repeats):
        for writer in runs:
            runs[writer].append(_run(writer, graph, n, per_chunk, packed, scheduler, tmp))
    ratio = statistics.median(z["seconds"] / t["seconds"] for t, z in zip(runs["tgm"], runs["zarr"]))
    med = {w: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for w, rs in runs.items()}
    return med, ratio


def case_write_dask(ctx: Context) -> CaseResult:
    res = CaseResult("write-dask", "Writing dask graphs: to_tgm vs to_zarr on the same graph",
                     "Each write in a child process of its own, to_tgm and to_zarr (zarr v3) in turn: "
                     "anomalies x - x.mean('step') of random float32 fields, and random float32 fields "
                     "with 1, 8 or all fields per dask chunk, with each writer's defaults or 16-bit "
                     "packing on both (to_tgm bits=16; zarr int16 scale/offset), on dask's threads or a "
                     "LocalCluster of 2 worker processes; a process's 4th write follows three untimed ones "
                     "(a first write also pays one-off costs: dask, given its scheduler by name, imports "
                     "dask.distributed to look for a client, ~0.15 s). 'peak - before' is the child's VmHWM less its "
                     "resident memory before the write, in fields of float32. Speed-up is to_zarr's time "
                     "/ to_tgm's, the median of the pairs.")
    repeats = 1 if ctx.quick else 3  # pairs of child processes: medians of three
    rows, ratios, extra = [], {}, {}
    with tempfile.TemporaryDirectory(prefix="tgm-write-dask-") as tmp_dir:
        tmp = Path(tmp_dir)
        for what, graph, n, per_chunk, packed, scheduler in WORKLOADS:
            n = QUICK[graph] if ctx.quick else n
            title = f"{n} {what}"
            med, ratio = _pair(graph, n, per_chunk or n, packed, scheduler, repeats, tmp)
            field = med["tgm"]["field"]
            over = {w: (m["peak"] - m["rss_before"]) / field for w, m in med.items()}
            ratios[title], extra[title] = ratio, over["tgm"] - over["zarr"]
            rows.append([title, fmt_time(med["tgm"]["seconds"]), fmt_time(med["zarr"]["seconds"]), fmt_ratio(ratio),
                         f"{over['tgm']:.1f}", f"{over['zarr']:.1f}"])
        read_table, read_ratio = _read_table(tmp, QUICK["random"] if ctx.quick else 96, repeats)
        graph, per_chunk, packed = GROWTH
        n = QUICK[graph] if ctx.quick else 48
        small = _pair(graph, n, per_chunk, packed, "threads", repeats, tmp)[0]
        large = _pair(graph, 10 * n, per_chunk, packed, "threads", repeats, tmp)[0]
    res.tables.append(Table("to_tgm vs to_zarr, same graph", ["workload", "to_tgm", "to_zarr", "speed-up",
                                                               "to_tgm peak - before (fields)",
                                                               "to_zarr peak - before (fields)"], rows))
    res.tables.append(read_table)
    growth = {w: large[w]["seconds"] / small[w]["seconds"] for w in ("tgm", "zarr")}
    res.tables.append(Table(f"10x the fields (anomalies, 8 per chunk, 16 bits: {n} and {10 * n} fields)",
                            ["writer", f"{n} fields", f"{10 * n} fields", "growth"],
                            [[w, fmt_time(small[w]["seconds"]), fmt_time(large[w]["seconds"]), f"{growth[w]:.2f}x"]
                             for w in ("tgm", "zarr")]))
    res.raw = {"speedup": ratios, "extra_fields_over_zarr": extra, "growth": growth, "float32_read": read_ratio}
    if not ctx.quick:
        for title in list(ratios)[:2]:  # the anomalies, each writer's defaults and 16 bits
            res.targets.append(Target(f"write-dask: {title}: to_tgm speed vs to_zarr", ratios[title], 1.2, ">="))
            res.targets.append(Target(f"write-dask: {title}: to_tgm peak memory over to_zarr's, fields",
                                      extra[title], 2.0, "<="))
        res.targets.append(Target("write-dask: growth with 10x the fields", growth["tgm"], 10.0 * 1.1, "<="))
        res.targets.append(Target("write-dask: packed float32 read (mean over time) vs a float32 Zarr store",
                                  read_ratio, 1.2, ">="))
    return res
