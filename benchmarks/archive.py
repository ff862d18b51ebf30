"""The ``archive`` case: opening archives of many messages and many files (metadata only).

Data (written by upstream ``tensogram`` 0.24, cached under ``data/bench/archive/``): 32 x 64 float32
fields with latitude/longitude objects and MARS keys (10 params x 5 levels x steps):

- ``a10k.tgm``: 10,000 messages; ``mf40/part-NN.tgm``: the same fields in 40 files of 5 steps;
- ``a100k.tgm``: 100,000 messages (10 params x 5 levels x 2,000 steps, 1 GB);
- ``--quick``: 1,000 and 10,000 messages, and 4 files.

Contenders, each open with the handle cache cleared and without an index (``index=False``: the
file is mapped and scanned every time): ``xr.open_dataset(path)`` and ``xr.open_dataset([paths])`` (the files planned as one Dataset) with
our engine, ``xr.open_mfdataset(combine="by_coords")`` for reference (a Dataset per file, then
xarray's combine), and upstream ``tensogram_xarray.open_datasets`` (per file); then the warm open
of the 10,000-message file from its index (docs/archives.md), in a temporary cache directory. Peak memory is measured in a child process
(``ru_maxrss``) that opens the largest file and nothing else.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

import numpy as np

import datagen
from common import CaseResult, Context, Table, Target, check, optional, ours_entrypoint
from harness import fmt_time, once_each
from tests.helpers.remote_archive import NX, NY, write_steps
from tgm_xarray import _core
from tgm_xarray.source import handles

PARAMS, LEVELS = 10, 5


def ensure(directory: Path, quick: bool) -> tuple[Path, list[Path], Path]:
    """(the small single file, its fields split into files, the large single file)."""
    per_step = PARAMS * LEVELS
    small, large, parts = (1_000, 10_000, 4) if quick else (10_000, 100_000, 40)
    directory.mkdir(parents=True, exist_ok=True)
    one, big = directory / f"a{small // 1000}k.tgm", directory / f"a{large // 1000}k.tgm"
    split = directory / f"mf{parts}-{small // 1000}k"
    steps = small // per_step
    files = [split / f"part-{i:02d}.tgm" for i in range(parts)]
    for path, step_range in [(one, range(steps)), (big, range(large // per_step))] + [
            (f, range(i * steps // parts, (i + 1) * steps // parts)) for i, f in enumerate(files)]:
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            datagen.say(f"writing {path} ({len(step_range) * per_step} messages)")
            write_steps(path, step_range, params=[f"p{p}" for p in range(PARAMS)],
                          levels=[1000 - 100 * level for level in range(LEVELS)])
    return one, files, big


def _peak_rss_mb(path: Path) -> float:
    """Peak resident memory of a child that imports everything, then opens ``path``."""
    code = ("import resource, sys, xarray as xr\n"
            "from tgm_xarray.backend import TensogramBackendEntrypoint as E\n"
            "base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
            "xr.open_dataset(sys.argv[1], engine=E, index=False).close()\n"
            "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, base / 1024)\n")
    out = subprocess.run([sys.executable, "-c", code, str(path)], capture_output=True, text=True, check=True)
    return float(out.stdout.split()[0])


def case_archive(ctx: Context) -> CaseResult:
    import xarray as xr

    res = CaseResult("archive", "Opening archives: 10^4-10^5 messages, tens of files", __doc__.split("\n\n", 1)[1])
    one, files, big = ensure(ctx.data / "archive", ctx.quick)
    ours_cls = ours_entrypoint()
    upstream = optional("tensogram_xarray")

    def ours(path, index=False):
        def run():
            handles.CACHE.clear()
            xr.open_dataset(path, engine=ours_cls, index=index).close()
        return run

    def ours_mf():
        handles.CACHE.clear()
        xr.open_mfdataset(files, engine=ours_cls, combine="by_coords", chunks={}, index=False).close()

    def ours_list():
        handles.CACHE.clear()
        xr.open_dataset(files, engine=ours_cls).close()

    def upstream_open(paths):
        def run():
            for path in paths:
                for ds in upstream.open_datasets(str(path)):
                    ds.close()
        return run

    n_one, n_big = len(_core.FileHandle(str(one))), len(_core.FileHandle(str(big)))
    contenders = {f"tgm_xarray, {one.name}": ours(one), f"tgm_xarray, {len(files)} files": ours_list,
                  f"tgm_xarray open_mfdataset, {len(files)} files": ours_mf, f"tgm_xarray, {big.name}": ours(big),
                  f"tgm_xarray warm (index), {one.name}": ours(one, index="auto")}
    if upstream is not None:
        contenders[f"upstream open_datasets, {one.name}"] = upstream_open([one])
        contenders[f"upstream open_datasets, {len(files)} files"] = upstream_open(files)
    else:
        res.notes.append("upstream tensogram-xarray is not installed: its rows are skipped")

    cache = tempfile.TemporaryDirectory()
    os.environ["TGM_XARRAY_CACHE_DIR"] = cache.name  # the warm open's index, not the user's cache
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        ours(one, index="auto")()  # writes the index the warm open reads
        before = _core.decoded_elements()
        for run in (ours(one), ours_list, ours(big)):
            run()
        # xarray loads the dimension coordinates it indexes (latitude, longitude): nothing else.
        decoded = _core.decoded_elements() - before - 3 * (NY + NX)
        with xr.open_dataset(one, engine=ours_cls) as a, xr.open_dataset(files, engine=ours_cls) as b:
            res.notes.append(check(a["p0"].shape == b["p0"].shape == (n_one // (PARAMS * LEVELS), LEVELS, NY, NX),
                                   f"{one.name} and the {len(files)} files open as the same (step, level, lat, lon)"))
            res.notes.append(check(bool((a["p3"][-1, 2] == b["p3"][-1, 2]).all()), "same values either way"))
        s = once_each(contenders, ctx.repeats)
    del os.environ["TGM_XARRAY_CACHE_DIR"]
    cache.cleanup()
    peak = _peak_rss_mb(big)

    def median(label):
        return float(np.median(s[label].seconds))

    rows = [[label, f"{fmt_time(min(sm.seconds))} / {fmt_time(median(label))}",
             f"{median(label) / (n_big if big.name in label else n_one) * 1e6:.1f} us"] for label, sm in s.items()]
    warm = median(f"tgm_xarray warm (index), {one.name}") / median(f"tgm_xarray, {one.name}")
    res.tables.append(Table("open, page cache warm (min / median), and per message",
                            ["contender", "open", "per message"], rows))
    res.tables.append(Table(f"peak memory of a process that opens {big.name}", ["", "MB"],
                            [["ru_maxrss (imports included)", f"{peak:.0f}"]]))
    if upstream is not None:
        for what in (one.name, f"{len(files)} files"):
            ratio = median(f"upstream open_datasets, {what}") / median(f"tgm_xarray, {what}")
            res.targets.append(Target(f"archive: open {what}, speed vs upstream open_datasets", ratio, 5, ">="))
    growth = median(f"tgm_xarray, {big.name}") / median(f"tgm_xarray, {one.name}")
    res.targets.append(Target(f"archive: open {big.name} / open {one.name} ({n_big // n_one}x the messages)",
                              growth, 12 * n_big / n_one / 10, "<="))
    res.targets.append(Target(f"archive: warm open of {one.name} from its index / cold open", warm, 0.1, "<="))
    if not ctx.quick:
        res.targets.append(Target(f"archive: peak memory opening {big.name}, MB", peak, 300, "<="))
    res.targets.append(Target("archive: field elements decoded while opening (beyond lat/lon)", decoded, 0, "<="))
    res.raw = {"seconds": {k: v.seconds for k, v in s.items()}, "peak_mb": peak, "decoded": decoded}
    return res


if __name__ == "__main__":  # a quick look without the runner: python benchmarks/archive.py [--quick]
    quick = "--quick" in sys.argv
    result = case_archive(Context(quick=quick, threads=[1], repeats=3, target_s=0.1, e2e_threads=[1]))
    for table in result.tables:
        print(table.title)
        for row in table.rows:
            print("  ", " | ".join(row))
    for t in result.targets:
        print(f"{t.name}: {t.value:.3g} {t.op} {t.threshold:g}: {'PASS' if t.passed else 'FAIL'}")
    print("\n".join(result.notes))
