"""The ``range`` case of ``run.py``: Decode-range: 2 x 1K-element slices of the 1M float32 object."""

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
