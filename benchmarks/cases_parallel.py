"""Benchmark cases of one field on several threads, async loads and szip windows (registered in
``cases.CASES``): ``split``, ``split-e2e``, ``async``, ``window-default``."""

from __future__ import annotations

import asyncio
import hashlib
import os
import sys
import tempfile
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import numpy as np

import datagen
from common import (
    INCONCLUSIVE_BELOW,
    CaseResult,
    Context,
    Skip,
    Table,
    Target,
    check,
    optional,
    ours_entrypoint,
    time_ratio,
)
from harness import fmt_ratio, fmt_time, once_each, paired_ratio, timed_calls
from tgm_xarray import _core, open_file
from tgm_xarray.source import handles

HERE = Path(__file__).resolve().parent
CONTROL_BYTES = 1 << 21  # sha256 of 2 MB: ~the time of one field's decode
CONTROL_POOL = ThreadPoolExecutor(1)  # the control's second thread, started once


def _control(block: bytes, parallel: bool) -> None:
    """Two units of CPU work that release the GIL, on one thread or two."""
    if parallel:
        other = CONTROL_POOL.submit(hashlib.sha256, block)
        hashlib.sha256(block).digest()
        other.result()
    else:
        hashlib.sha256(block).digest()
        hashlib.sha256(block).digest()


# --- split -----------------------------------------------------------------------------------

def case_split(ctx: Context) -> CaseResult:
    res = CaseResult("split", "One field on several threads: the real 2 m temperature, 24-bit packing + szip",
                     "One read of the whole 721 x 1440 field (`read(0, 0, out=buf, threads=n)`), split into "
                     "RSI-aligned parts that threads decode straight into the output. `threads=None` is the "
                     "default: the process-wide budget (one thread per core, large reads in flight count). "
                     "The control is two sha256 of 2 MB on one thread or two, in the same rounds: its "
                     "speed-up is what the machine's cores offered at the time.")
    datagen.ensure(["packed"], ctx.data)
    f = open_file(ctx.data / "packed-2t.tgm")
    full = f.read(0, 0, threads=1)
    buf = np.empty_like(full)
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    counts = sorted({1, 2, *(n for n in (4, 8, 16) if n <= cores)})
    contenders: dict[str, Callable[[], Any]] = {f"read threads={n}": (lambda n=n: f.read(0, 0, out=buf, threads=n))
                                                for n in counts}
    contenders["read threads=None (budget)"] = lambda: f.read(0, 0, out=buf)
    for name, call in contenders.items():
        res.notes.append(check(np.array_equal(call(), full), f"{name} == threads=1 (bit for bit)"))
    block = np.random.default_rng(0).bytes(CONTROL_BYTES)
    contenders["control, 1 thread"] = lambda: _control(block, False)
    contenders["control, 2 threads"] = lambda: _control(block, True)
    s = timed_calls(contenders, ctx.repeats, ctx.target_s)
    one = s["read threads=1"]
    rows = [[name, f"{fmt_time(sm.min())} / {fmt_time(sm.median())}",
             fmt_ratio(paired_ratio(sm, one)) if name.startswith("read") else ""] for name, sm in s.items()]
    control = paired_ratio(s["control, 2 threads"], s["control, 1 thread"])
    res.tables.append(Table(f"2t (721 x 1440 float64, sp24 + szip), one read; {cores} cores here",
                            ["contender", "time (min / median)", "speed-up vs threads=1"], rows,
                            note=f"control speed-up on 2 threads: {control:.2f}x"))
    res.raw = {k: v.to_json() for k, v in s.items()}
    two = s["read threads=2"]
    res.targets.append(Target("split: threads=2 / threads=1 speed of one read of the sp24+szip field",
                              paired_ratio(two, one), 1.8, ">=",
                              f"[best samples: {min(one.per_op) / min(two.per_op):.2f}x; control {control:.2f}x]",
                              control=control))
    if control < INCONCLUSIVE_BELOW:
        res.notes.append(f"the control scaled {control:.2f}x on 2 threads: the machine's second core was busy "
                         "(shared VM), so the split target is inconclusive in this run")
    return res


# --- split-e2e -------------------------------------------------------------------------------

def case_split_e2e(ctx: Context) -> CaseResult:
    import dask
    import xarray as xr

    res = CaseResult("split-e2e", "Many fields under dask threads: the default budget against threads=1",
                     "`xr.open_dataset(e2e-quick.tgm, chunks={})` then the global mean of every field with "
                     "dask's threaded scheduler (as many workers as `--e2e-threads`), the engine's "
                     "`threads=None` (the default budget) against `threads=1` (never split), in the same "
                     "rounds. Dask's threads already keep the cores busy: the budget must not add threads.")
    if optional("eccodes") is None and not (ctx.data / "e2e-quick.tgm").exists():
        raise Skip("e2e-quick.tgm is missing and ecCodes (to make it) is not installed here")
    datagen.ensure(["e2e-quick-tgm-grib"], ctx.data)
    path = ctx.data / "e2e-quick.tgm"
    engine = ours_entrypoint()

    def means(threads):
        def run():
            handles.CACHE.clear()
            with xr.open_dataset(path, engine=engine, chunks={}, threads=threads) as ds:
                return ds.mean(("latitude", "longitude")).compute()
        return run

    rows, raw = [], {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for n in ctx.e2e_threads:
            with dask.config.set(scheduler="threads", num_workers=n):
                flows = {"threads=1": means(1), "threads=None (budget)": means(None)}
                a, b = (flows[k]() for k in flows)
                res.notes.append(check(a.identical(b), f"the same means either way ({n} dask threads)"))
                s = once_each(flows, ctx.repeats)
            for label, sm in s.items():
                rows.append([label, str(n), f"{fmt_time(sm.min())} / {fmt_time(sm.median())}",
                             fmt_ratio(time_ratio(sm, s["threads=1"]))])
                raw[f"{label} @{n}"] = sm.to_json()
            res.targets.append(Target(f"split-e2e ({n} dask threads): time with the budget / time with threads=1",
                                      time_ratio(s["threads=None (budget)"], s["threads=1"]), 1.05, "<="))
    res.tables.append(Table("e2e-quick: open + global mean of every field", ["engine threads", "dask threads",
                            "total (min / median)", "time / threads=1"], rows))
    res.raw = raw
    return res


# --- async -----------------------------------------------------------------------------------

FIELDS = 48
LATENCY = 0.05


def _members(path: Path) -> None:
    import xarray as xr

    from tgm_xarray import to_tgm

    base = datagen.grib_values("2t")[::10, ::10]
    values = np.stack([base + 0.1 * i for i in range(FIELDS)])
    ds = xr.Dataset({"t": (("member", "latitude", "longitude"), values)},
                    coords={"member": np.arange(FIELDS)})
    to_tgm(ds, path, encoding={"t": {"bits": 24, "compression": "szip"}})


def case_async(ctx: Context) -> CaseResult:
    import xarray as xr

    res = CaseResult("async", f"load_async of {FIELDS} fields over a link with {LATENCY * 1e3:.0f} ms of latency",
                     f"A loopback HTTP server (tests/helpers/range_server.py) that answers every request after "
                     f"{LATENCY * 1e3:.0f} ms serves {FIELDS} fields (73 x 144, sp24 + szip, one message each; "
                     "opening fetches their headers). `await ds['t'].load_async()` of every field against "
                     "`await ds['t'].isel(member=-1).load_async()` of one (the last: the first came with the "
                     "opening request), each sample a fresh event loop; the "
                     "synchronous `load()` of every field for comparison.")
    sys.path.insert(0, str(HERE.parent / "tests"))
    from range_server import RangeServer

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        _members(root / "members.tgm")
        local = xr.open_dataset(root / "members.tgm", engine=ours_entrypoint())["t"]
        got = asyncio.run(local.load_async())
        res.notes.append(check(got.identical(local.load()), "local load_async == load()"))
        server = RangeServer(root).start()
        try:
            url = server.url("members.tgm")
            ds = xr.open_dataset(url, engine=ours_entrypoint())
            server.latency = LATENCY

            # A shallow copy per call: a load keeps the values in the object it loads.
            def load_async(select):
                return lambda: asyncio.run(select(ds["t"].copy(deep=False)).load_async())

            flows = {"one field, load_async": load_async(lambda t: t.isel(member=-1)),
                     f"{FIELDS} fields, load_async": load_async(lambda t: t),
                     f"{FIELDS} fields, load()": lambda: ds["t"].copy(deep=False).load()}
            res.notes.append(check(np.array_equal(flows[f"{FIELDS} fields, load_async"]().values, local.values),
                                   "remote load_async == local values"))
            s = once_each(flows, ctx.repeats)
            one = s["one field, load_async"]
            res.tables.append(Table(f"{FIELDS} fields, {LATENCY * 1e3:.0f} ms per request",
                                    ["contender", "time (min / median)", "time / one field's"],
                                    [[k, f"{fmt_time(v.min())} / {fmt_time(v.median())}",
                                      fmt_ratio(time_ratio(v, one))] for k, v in s.items()]))
            res.raw = {k: v.to_json() for k, v in s.items()}
            res.targets.append(Target(f"async: load_async of {FIELDS} remote fields / one field's, time",
                                      time_ratio(s[f"{FIELDS} fields, load_async"], one), 4.0, "<="))
        finally:
            server.stop()
    return res


# --- window-default --------------------------------------------------------------------------

def case_window_default(ctx: Context) -> CaseResult:
    import xarray as xr
    import zarr

    from tgm_xarray import to_tgm
    from tgm_xarray.pipeline import Pipeline
    from tgm_xarray.zarr_codec import TensogramCodec

    res = CaseResult("window-default", "A 1/4 x 1/4 box of the 2 m temperature field as our writer stores it",
                     "One thread. `to_tgm(..., encoding={'t2m': {'bits': 24, 'compression': 'szip'}})` with "
                     "the writer's default szip parameters "
                     f"({Pipeline.from_options({'compression': 'szip'}).params}) and with the old default "
                     "(RSI 128 blocks): a box of rows 180:360 and columns 360:720 (1/16 of the points) "
                     "against a full decode of the same file, and the files' sizes. Then the zarr codec "
                     "(sp24 + szip, chunks of 361 x 720; its default szip parameters, which are the "
                     "writer's, and szip_rsi=128): a 90 x 180 box of a chunk (1/16) through "
                     "`_core.decode_message_into`, as the codec decodes a partial chunk, against the "
                     "whole chunk's decode.")
    values = np.ascontiguousarray(datagen.grib_values("2t"))
    ds = xr.Dataset({"t2m": (("latitude", "longitude"), values)})
    box = (slice(180, 360), slice(360, 720))
    rows, s_all, sizes = [], {}, {}
    with tempfile.TemporaryDirectory() as tmp:
        for label, extra in (("default", {}), ("old default (szip_rsi=128)", {"szip_rsi": 128})):
            path = Path(tmp) / f"{len(sizes)}.tgm"
            to_tgm(ds, path, encoding={"t2m": {"bits": 24, "compression": "szip", **extra}})
            sizes[label] = path.stat().st_size
            f = open_file(path)
            obj = next(i for i, d in enumerate(f.descriptors(0)) if d["shape"] == [721, 1440])
            full, part = np.empty((721, 1440)), np.empty((180, 360))
            res.notes.append(check(np.array_equal(f.read(0, obj, box), f.read(0, obj)[box]),
                                   f"{label}: box == slice of the full read"))
            s = timed_calls({"full": lambda: f.read(0, obj, out=full, threads=1),
                             "box": lambda: f.read(0, obj, box, out=part)}, ctx.repeats, ctx.target_s)
            s_all[label] = s
            rows.append([label, f"{sizes[label]:,}", f"{fmt_time(s['full'].min())} / {fmt_time(s['full'].median())}",
                         f"{fmt_time(s['box'].min())} / {fmt_time(s['box'].median())}",
                         f"{time_ratio(s['box'], s['full']):.3f}"])
    res.tables.append(Table("box 1/4 x 1/4 of 2t, our writer's file", ["szip setting", "file bytes",
                            "full decode (min / median)", "box (min / median)", "box / full"], rows))
    d = s_all["default"]
    growth = sizes["default"] / sizes["old default (szip_rsi=128)"] - 1
    res.targets.append(Target("window-default: box 1/4 x 1/4 / full decode, time (writer's default szip)",
                              time_ratio(d["box"], d["full"]), 0.125, "<=",
                              f"[best samples: {d['box'].min() / d['full'].min():.3f}]"))
    res.targets.append(Target("window-default: file size of the default vs szip_rsi=128, growth (%)",
                              100 * growth, 3.0, "<="))

    zrows = []
    # The codec's own default (no szip parameter given: the writer's) is the target; RSI 128
    # (upstream's usual setting, 4096 values: 5.7 rows of the chunk) is for information.
    for label, extra in (("codec default", {}), ("szip_rsi=128", {"szip_rsi": 128})):
        codec = TensogramCodec(encoding="simple_packing", bits_per_value=24, compression="szip", **extra)
        szip = f"{label} (RSI {codec.szip_rsi} x {codec.szip_block_size})"
        store: dict = {}
        z = zarr.create_array(zarr.storage.MemoryStore(store), shape=values.shape, chunks=(361, 720),
                              dtype="float64", fill_value=np.nan, serializer=codec, compressors=None)
        z[:] = values
        chunk = np.frombuffer(store["c/0/0"].to_bytes(), np.uint8)
        whole, part = np.empty((361, 720)), np.empty((90, 180))
        sel = (slice(90, 180), slice(180, 360))
        _core.decode_message_into(chunk, 0, sel, part)
        res.notes.append(check(np.array_equal(part, values[90:180, 180:360]) or
                               np.allclose(part, values[90:180, 180:360], atol=1e-4), f"{szip}: box values"))
        s = timed_calls({"chunk": lambda: _core.decode_message_into(chunk, 0, None, whole, threads=1),
                         "box": lambda: _core.decode_message_into(chunk, 0, sel, part)}, ctx.repeats, ctx.target_s)
        ratio = time_ratio(s["box"], s["chunk"])
        zrows.append([szip, f"{len(chunk):,}",
                      f"{fmt_time(s['chunk'].min())} / {fmt_time(s['chunk'].median())}",
                      f"{fmt_time(s['box'].min())} / {fmt_time(s['box'].median())}", f"{ratio:.3f}"])
        s_all[f"zarr {label}"] = s
        if not extra:
            res.targets.append(Target("window-default: zarr codec, 1/16 box of a chunk / the chunk's decode "
                                      "(codec default szip)", ratio, 0.125, "<=",
                                      f"[best samples: {s['box'].min() / s['chunk'].min():.3f}]"))
    res.tables.append(Table("zarr codec: 1/16 box of a 361 x 720 chunk", ["codec szip", "chunk bytes",
                            "chunk decode (min / median)", "box (min / median)", "box / chunk"], zrows))
    res.raw = {f"{label} {k}": v.to_json() for label, s in s_all.items() for k, v in s.items()}
    return res


CASES = {"split": case_split, "split-e2e": case_split_e2e, "async": case_async,
         "window-default": case_window_default}
