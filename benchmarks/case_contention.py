"""The ``contention`` case of ``run.py``: Latency of small reads next to a CPU-bound Python thread."""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from typing import Any

import numpy as np

import datagen
from common import CaseResult, Context, Table, message_bytes, optional
from harness import fmt_rate, percentile, perf, rounds
from tgm_xarray import open_file


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
