"""Timing on a noisy 2-core machine: interleaved contenders, medians, ratios taken per pair.

Every measurement loop here follows one rule: contenders that are compared run next to each other
in time (A B C, then C B A, ...), and a ratio is the median of the ratios of samples taken in the
same round, never the ratio of two medians taken minutes apart.
"""

from __future__ import annotations

import gc
import statistics
import threading
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

perf = time.perf_counter


@dataclass
class Samples:
    """The samples of one contender in one configuration: seconds per operation (one per round)."""

    seconds: list[float] = field(default_factory=list)
    ops: int = 1  # operations per sample (all threads together)
    #: CPU seconds of the whole process (every thread, user and system) per sample, where taken
    cpu: list[float] = field(default_factory=list)

    @property
    def per_op(self) -> list[float]:
        return [s / self.ops for s in self.seconds]

    @property
    def rates(self) -> list[float]:
        return [self.ops / s for s in self.seconds]

    def min(self) -> float:
        return min(self.per_op)

    def median(self) -> float:
        return statistics.median(self.per_op)

    def rate(self) -> float:
        """Median throughput (operations per second)."""
        return statistics.median(self.rates)

    def cpu_median(self) -> float:
        """Median CPU seconds per operation (NaN where not taken)."""
        return statistics.median(c / self.ops for c in self.cpu) if self.cpu else float("nan")

    def cores_busy(self) -> float:
        """Median over samples of CPU time / wall time: how many cores the operation kept busy."""
        return statistics.median(c / s for c, s in zip(self.cpu, self.seconds)) if self.cpu else float("nan")

    def to_json(self) -> dict:
        return {"seconds": self.seconds, "ops": self.ops, "min_s_per_op": self.min(),
                "median_s_per_op": self.median(), "median_ops_per_s": self.rate(),
                **({"cpu_seconds": self.cpu} if self.cpu else {})}


def paired_ratio(a: Samples, b: Samples) -> float:
    """Median over rounds of (throughput of a / throughput of b) in the same round."""
    pairs = [ra / rb for ra, rb in zip(a.rates, b.rates)]
    return statistics.median(pairs) if pairs else float("nan")


def rounds(configs: Sequence, repeats: int, run: Callable[[object], None],
           warmup: int = 1) -> None:
    """Calls ``run(config)`` for every config, ``warmup`` untimed rounds then ``repeats`` rounds;
    odd rounds go in reverse order so no contender always runs first (or right after another)."""
    configs = list(configs)
    for r in range(warmup + repeats):
        order = configs if r % 2 == 0 else configs[::-1]
        for config in order:
            run(config, r >= warmup)


class ThreadBatch:
    """Runs ``k`` calls of an operation on each of ``n`` pool threads, started together."""

    def __init__(self, max_threads: int):
        self.pool = ThreadPoolExecutor(max_workers=max_threads, thread_name_prefix="bench")
        # create every worker now, outside any timing
        barrier = threading.Barrier(max_threads)
        list(self.pool.map(lambda _: barrier.wait(), range(max_threads)))

    def time(self, op: Callable[[int], object], n: int, k: int) -> float:
        """Wall time of ``n`` threads each calling ``op(thread_index)`` ``k`` times: from the first
        thread's start to the last one's end, as the workers clock themselves (the main thread may
        be descheduled at any moment on a busy machine, so it does not hold the stopwatch)."""
        barrier = threading.Barrier(n)
        spans: list[tuple[float, float]] = [(0.0, 0.0)] * n

        def work(i: int) -> None:
            barrier.wait()
            t0 = perf()
            for _ in range(k):
                op(i)
            spans[i] = (t0, perf())

        gc_was = gc.isenabled()
        gc.disable()
        try:
            futures = [self.pool.submit(work, i) for i in range(n)]
            for f in futures:
                f.result()
        finally:
            if gc_was:
                gc.enable()
        return max(end for _, end in spans) - min(start for start, _ in spans)

    def close(self) -> None:
        self.pool.shutdown()


def calibrate(op: Callable[[int], object], target_s: float, max_ops: int = 100_000,
              batch: ThreadBatch | None = None) -> int:
    """How many calls of ``op`` take about ``target_s`` on one thread (at least 1); on a pool
    thread of ``batch`` if given (where the timed calls will run: on a free-threaded build some
    calls cost more there than on the main thread)."""
    def run(n: int) -> float:
        if batch is not None:
            return batch.time(op, 1, n)
        t0 = perf()
        for _ in range(n):
            op(0)
        return perf() - t0

    run(1)
    n = 1
    while True:
        elapsed = run(n)
        if elapsed > target_s / 4 or n >= max_ops:
            break
        n *= 4
    return max(1, min(max_ops, round(n * target_s / max(elapsed, 1e-9))))


def throughput_matrix(contenders: dict[str, Callable[[int], object]], threads: Sequence[int],
                      repeats: int, target_s: float) -> dict[str, dict[int, Samples]]:
    """Samples of every contender at every thread count, all interleaved.

    Each sample is the wall time of ``n`` threads each doing ``k`` calls (``k`` calibrated per
    contender so one thread takes ``target_s``); throughput is ``n * k / wall``.
    """
    batch = ThreadBatch(max(threads))
    try:
        ks = {name: calibrate(op, target_s, batch=batch) for name, op in contenders.items()}
        results = {name: {n: Samples(ops=n * ks[name]) for n in threads} for name in contenders}

        def run(config, keep):
            name, n = config
            seconds = batch.time(contenders[name], n, ks[name])
            if keep:
                results[name][n].seconds.append(seconds)

        configs = [(name, n) for n in threads for name in contenders]
        rounds(configs, repeats, run)
    finally:
        batch.close()
    return results


def timed_calls(contenders: dict[str, Callable[[], object]], repeats: int,
                target_s: float, warmup: int = 1) -> dict[str, Samples]:
    """Single-thread samples: each sample is ``k`` calls in a row (``k`` calibrated), with the
    process's CPU time (the threads a call starts count too)."""
    ks = {name: calibrate(lambda _i, f=f: f(), target_s) for name, f in contenders.items()}
    results = {name: Samples(ops=ks[name]) for name in contenders}

    def run(name, keep):
        f, k = contenders[name], ks[name]
        gc_was = gc.isenabled()
        gc.disable()
        try:
            t0, c0 = perf(), time.process_time()
            for _ in range(k):
                f()
            seconds, cpu = perf() - t0, time.process_time() - c0
        finally:
            if gc_was:
                gc.enable()
        if keep:
            results[name].seconds.append(seconds)
            results[name].cpu.append(cpu)

    rounds(list(contenders), repeats, run, warmup)
    return results


def once_each(contenders: dict[str, Callable[[], object]], repeats: int,
              warmup: int = 1) -> dict[str, Samples]:
    """One call per sample (for slow operations: opening files, whole workflows)."""
    results = {name: Samples(ops=1) for name in contenders}

    def run(name, keep):
        t0 = perf()
        contenders[name]()
        seconds = perf() - t0
        if keep:
            results[name].seconds.append(seconds)

    rounds(list(contenders), repeats, run, warmup)
    return results


# --- formatting ------------------------------------------------------------------------------

def fmt_time(seconds: float) -> str:
    if seconds != seconds:
        return "-"
    if seconds >= 1:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.1f} µs"


def fmt_rate(rate: float) -> str:
    if rate >= 100:
        return f"{rate:,.0f}"
    return f"{rate:.1f}"


def fmt_ratio(x: float) -> str:
    return "-" if x != x else f"{x:.2f}x"


def percentile(values: Sequence[float], q: float) -> float:
    ordered = sorted(values)
    if not ordered:
        return float("nan")
    i = min(len(ordered) - 1, max(0, round(q / 100 * (len(ordered) - 1))))
    return ordered[i]
