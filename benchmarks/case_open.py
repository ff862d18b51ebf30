"""The ``open`` case of ``run.py``: Open time (metadata only, no payload read)."""

from __future__ import annotations

import statistics
import subprocess
import sys
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import datagen
from common import CaseResult, Context, Table, check, optional, ours_entrypoint, time_ratio, upstream_xarray_entrypoint
from harness import fmt_ratio, fmt_time, once_each
from tgm_xarray.source import handles


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
    res.tables.append(_own_keys_table(ctx))
    return res


# One child per measurement, so that nothing is cached from one open to the next. The peak
# resident memory is reset after the imports (clear_refs 5), so "added" is the open's own peak.
_OWN_KEYS_CHILD = """
import resource, sys, time
import dask.array, xarray as xr, tensogram
from xarray.backends.plugins import list_engines
list_engines()
def status(field):
    return next(int(line.split()[1]) for line in open("/proc/self/status") if line.startswith(field))
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")
rss0 = status("VmRSS:")
t0 = time.perf_counter()
if sys.argv[2] == "ours":
    xr.open_dataset(sys.argv[1], engine="tgm", index=False).close()
else:
    sum(1 for _ in tensogram.TensogramFile.open(sys.argv[1]))
print(time.perf_counter() - t0, rss0, status("VmHWM:"))
"""


def _own_keys_table(ctx: Context) -> Table:
    """Messages that each bring 100 metadata keys of their own (issue: 3,000 of them aborted the
    open): open time and peak memory at 300 and 3,000 messages, ours against upstream iterating
    the same file, and how the cost grows with 10x the messages."""
    sizes = (300, 3000)
    paths = {n: datagen.own_keys_file(ctx.data, n) for n in sizes}
    runs: dict[tuple[int, str], list[tuple[float, int, int]]] = {}
    for _ in range(max(3, ctx.repeats // 2)):
        for n in sizes:
            for who in ("ours", "upstream"):
                out = subprocess.run([sys.executable, "-c", _OWN_KEYS_CHILD, str(paths[n]), who],
                                     capture_output=True, text=True, check=True).stdout.split()
                runs.setdefault((n, who), []).append((float(out[0]), int(out[1]), int(out[2])))
    median = {k: (statistics.median(t for t, _, _ in v), statistics.median(r for _, _, r in v),
                  statistics.median(r - r0 for _, r0, r in v)) for k, v in runs.items()}
    rows = []
    for n in sizes:
        for who, label in (("ours", "tgm_xarray open_dataset"), ("upstream", "upstream TensogramFile iteration")):
            t, peak, added = median[(n, who)]
            growth = "" if n == sizes[0] else fmt_ratio(t / median[(sizes[0], who)][0])
            rows.append([f"{label}, {n} messages", fmt_time(t), f"{peak / 1024:.0f} MB", f"{added / 1024:.0f} MB",
                         fmt_ratio(t / median[(n, "upstream")][0]) if who == "ours" else "", growth])
    return Table("100 metadata keys of their own per message (one child process per run, medians)",
                 ["contender", "time", "peak RSS", "added by the open", "time / upstream's", "time / 300's"], rows)
