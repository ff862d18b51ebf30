"""The ``write-peak`` case of ``run.py``: the memory one field's write takes, to_tgm beside to_zarr.

One 4000 x 4000 float32 field (64 MB) written from numpy, each write in a child process of its own:
the child's peak resident memory (VmHWM, reset just before the write) less its resident memory
before it, in fields. docs/writer.md ("Memory of one packed field") states the bound.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from common import CaseResult, Context, Table, Target
from harness import fmt_time

# argv: writer (tgm|zarr), bits (0: unpacked), compression ("" for the writer's default), output
# path. Prints one JSON line: the write's seconds and its peak less the memory before it, in fields.
CHILD = """
import json, sys, time
import numpy as np, xarray as xr
import tgm_xarray, tgm_xarray.writer, zarr  # both writers loaded before the memory is read

writer, bits, compression, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
values = (250 + 60 * np.random.default_rng(0).random((4000, 4000), dtype=np.float32)).astype(np.float32)
ds = xr.Dataset({"t": (("latitude", "longitude"), values)})
if writer == "tgm":
    encoding = {"t": ({"bits": bits} if bits else {}) | ({"compression": compression} if compression else {})}
else:  # zarr's 16-bit form: CF int16 scale/offset over the values' range
    encoding = {"t": {"dtype": "int16", "scale_factor": 60 / 65000, "add_offset": 280.0}} if bits else {}

def status(key):
    return next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith(key))

before = status("VmRSS:")
with open("/proc/self/clear_refs", "w") as refs:
    refs.write("5")  # the peak (VmHWM) from here on
t0 = time.perf_counter()
if writer == "tgm":
    tgm_xarray.to_tgm(ds, out, encoding=encoding)
else:
    ds.to_zarr(out, mode="w", encoding=encoding, consolidated=False, zarr_format=3)
seconds = time.perf_counter() - t0
print(json.dumps({"seconds": seconds, "fields": (status("VmHWM:") - before) / values.nbytes}))
"""

#: (what, writer, bits, compression)
WRITES = [
    ("to_tgm, 16 bits (blosc2, the default)", "tgm", 16, ""),
    ("to_tgm, 16 bits + szip", "tgm", 16, "szip"),
    ("to_tgm, 16 bits, uncompressed", "tgm", 16, "none"),
    ("to_tgm, 24 bits + szip", "tgm", 24, "szip"),
    ("to_tgm, defaults (float32, blosc2)", "tgm", 0, ""),
    ("to_zarr, int16 scale/offset (zstd, its default)", "zarr", 16, ""),
    ("to_zarr, defaults (float32, zstd)", "zarr", 0, ""),
]
BOUND = 3.0  # fields: docs/writer.md's bound of a packed write


def _run(writer: str, bits: int, compression: str, out: Path) -> dict:
    proc = subprocess.run([sys.executable, "-c", CHILD, writer, str(bits), compression, str(out)],
                          capture_output=True, text=True, timeout=600)
    if proc.returncode != 0:
        raise RuntimeError(f"the {writer} child failed: {proc.stderr[-2000:]}")
    subprocess.run(["rm", "-rf", str(out)], check=True)
    return json.loads(proc.stdout.strip().splitlines()[-1])


def case_write_peak(ctx: Context) -> CaseResult:
    res = CaseResult("write-peak", "One 4000 x 4000 float32 field: memory of its write, to_tgm vs to_zarr",
                     "Each write of the field (64 MB) from numpy in a child process of its own, the writes "
                     "in turn, each repeated; 'peak - before' is the child's VmHWM (reset just before the "
                     "write) less its resident memory before it, in fields, the median of the repeats.")
    repeats = 1 if ctx.quick else 3
    runs: dict[str, list[dict]] = {what: [] for what, *_ in WRITES}
    with tempfile.TemporaryDirectory(prefix="tgm-write-peak-") as tmp:
        for _ in range(repeats):
            for what, writer, bits, compression in WRITES:
                runs[what].append(_run(writer, bits, compression, Path(tmp) / f"out.{writer}"))
    med = {what: {k: statistics.median(r[k] for r in rs) for k in rs[0]} for what, rs in runs.items()}
    res.tables.append(Table("one 4000 x 4000 float32 field written from numpy", ["write", "time", "peak - before (fields)"],
                            [[what, fmt_time(m["seconds"]), f"{m['fields']:.2f}"] for what, m in med.items()]))
    res.raw = {what: m["fields"] for what, m in med.items()}
    res.targets.append(Target("write-peak: a 16-bit packed write of one field, peak over the process, fields",
                              med[WRITES[0][0]]["fields"], BOUND, "<="))
    return res
