"""The ``open`` case of ``run.py``: Open time (metadata only, no payload read)."""

from __future__ import annotations

import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import datagen
from common import CaseResult, Context, Table, check, optional, ours_entrypoint, time_ratio, upstream_xarray_entrypoint
from harness import fmt_ratio, fmt_time, once_each
from tgm_xarray import handles


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
