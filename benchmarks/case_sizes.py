"""The ``sizes`` case of ``run.py``: Small reads: thread scaling by read size, either side of the release threshold."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import datagen
from common import CaseResult, Context, add_control, check, raw_matrix, series_of, throughput_table
from harness import throughput_matrix
from tgm_xarray import _core, open_file


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
