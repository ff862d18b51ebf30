"""The ``decode`` case of ``run.py``: Decode of one 1M-element float32 object, uncompressed (4 MB)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import datagen
from common import (
    CONTROL,
    CaseResult,
    Context,
    Target,
    add_control,
    best_ratio,
    check,
    message_bytes,
    optional,
    raw_matrix,
    scaling_detail,
    series_of,
    throughput_table,
)
from harness import paired_ratio, throughput_matrix
from tgm_xarray import open_file


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
