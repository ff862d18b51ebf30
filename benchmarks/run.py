#!/usr/bin/env python
"""The benchmark suite: tgm_xarray against upstream tensogram, ecCodes, cfgrib, h5netcdf
and zarr, measured side by side in one run.

    .venv/bin/python benchmarks/run.py [--only CASE ...] [--quick] [--threads 1,2,4] [--out DIR]
    .venv/bin/python benchmarks/run.py --python /opt/venv313t-tgm/bin/python --only contention
    .venv/bin/python benchmarks/run.py --report            # markdown of the saved results
    .venv/bin/python benchmarks/run.py --report --update-doc   # ... written into docs/benchmarks.md
    bash benchmarks/run_all.sh [--quick]                   # both interpreters, then the doc

Cases: decode, range, sizes, packed, window, e2e, open, contention, zarr, virtual, split, split-e2e,
async, window-default, archive, verify, write, write-stream, convert (see docs/benchmarks.md).
Contenders run interleaved (A B C, C B A, ...); every number is a median over rounds, and every
ratio the median of per-round ratios. Results merge into ``benchmarks/results/<python-tag>/
results.json`` (``<python-tag>-quick`` for ``--quick``) with a plot ``throughput.png``; the first
run makes the data once under ``data/bench/`` (about 3 minutes, ~2.5 GB).
"""

from __future__ import annotations

import argparse
import compileall
import importlib.util
import os
import subprocess
import sys
import time
import traceback
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))

import report  # noqa: E402

report.use_checkout()  # measure this checkout's tgm_xarray, whatever the venv's editable install points at

import cases  # noqa: E402  (names only: a case's module is imported when it runs)

CASE_NAMES = tuple(cases.CASES)


def parse_args(argv: list[str]) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    p.add_argument("--only", nargs="+", choices=CASE_NAMES, metavar="CASE",
                   help=f"cases to run (default: all): {', '.join(CASE_NAMES)}")
    p.add_argument("--quick", action="store_true",
                   help="short samples and the small e2e/open data sets (about 2 minutes)")
    p.add_argument("--threads", default="1,2,4", help="thread counts of the threaded cases (default 1,2,4)")
    p.add_argument("--e2e-threads", default=None,
                   help="dask worker threads of the e2e case (default: the number of CPUs, at most 2)")
    p.add_argument("--repeats", type=int, default=None, help="timed rounds (default 7; 5 with --quick)")
    p.add_argument("--out", type=Path, default=None,
                   help="results directory (default benchmarks/results/<python-tag>[-quick])")
    p.add_argument("--python", default=None,
                   help="run the suite under this interpreter instead (same arguments)")
    p.add_argument("--wait-idle", type=float, default=0, metavar="SECONDS",
                   help="before each case, wait up to SECONDS for other work to leave the CPUs "
                        "(Linux CPU pressure < 10%%)")
    p.add_argument("--markdown", action="store_true", help="print the run's results as markdown at the end")
    p.add_argument("--report", nargs="*", type=Path, default=None, metavar="RESULTS_JSON",
                   help="run nothing: print the markdown of saved results (default: "
                        "benchmarks/results/*/results.json, full runs)")
    p.add_argument("--update-doc", action="store_true",
                   help="with --report: replace the results section of docs/benchmarks.md")
    p.add_argument("--plot", type=Path, default=None, metavar="DIR",
                   help="run nothing: redraw DIR/throughput.png from DIR/results.json")
    return p.parse_args(argv)


def reexec(python: str, argv: list[str]) -> int:
    rest, skip = [], False
    for arg in argv:
        if skip:
            skip = False
            continue
        if arg == "--python":
            skip = True
            continue
        if arg.startswith("--python="):
            continue
        rest.append(arg)
    return subprocess.call([python, str(Path(__file__).resolve()), *rest])


def default_result_files() -> list[Path]:
    files = sorted(p for p in report.RESULTS.glob("*/results.json") if not p.parent.name.endswith("-quick"))
    # the GIL build first
    return sorted(files, key=lambda p: ("t" in p.parent.name.split("-")[-1], p.parent.name))


def main(argv: list[str] | None = None) -> int:
    argv = sys.argv[1:] if argv is None else argv
    args = parse_args(argv)
    if args.python:
        return reexec(args.python, argv)
    if args.plot is not None:
        path = report.plot(args.plot / "results.json")
        print(path or "nothing plotted")
        return 0
    if args.report is not None:
        files = args.report or default_result_files()
        if not files:
            print("no results yet: run benchmarks/run.py first", file=sys.stderr)
            return 1
        if args.update_doc:
            report.update_doc(files)
        else:
            print(report.markdown(files))
        return 0

    warnings.filterwarnings("ignore", message="Found 2 entrypoints")
    warnings.filterwarnings("ignore", category=FutureWarning)
    warnings.filterwarnings("ignore", message=".*google-crc32c.*")
    from common import CaseResult, Context, Skip  # noqa: E402  (imports tgm_xarray, numpy, ...)

    # Child processes import the package as an installed one is imported, from bytecode: where
    # PYTHONDONTWRITEBYTECODE is set (these machines), every child would compile it again.
    compileall.compile_dir(importlib.util.find_spec("tgm_xarray").submodule_search_locations[0], quiet=1)

    threads = sorted({int(t) for t in args.threads.split(",")})
    e2e_threads = ([int(t) for t in args.e2e_threads.split(",")] if args.e2e_threads
                   else [min(2, os.cpu_count() or 1)])
    ctx = Context(quick=args.quick, threads=threads, repeats=args.repeats or (5 if args.quick else 7),
                  target_s=0.04 if args.quick else 0.2, e2e_threads=e2e_threads)
    out = args.out or report.RESULTS / (report.python_tag() + ("-quick" if args.quick else ""))
    env = report.environment()
    print(f"tgm_xarray benchmarks: {report.env_line(env)}")
    print(f"tgm_xarray from {env['tgm_xarray_path']}, core built {env['core_built']}")
    if env.get("core_stale"):
        print(f"WARNING: {env['core_stale']}")
    if sysconfig_free_threaded() and env["gil"] == "enabled":
        print("WARNING: a free-threaded build running with the GIL enabled (an extension asked for it?): "
              "set PYTHON_GIL=0 to measure without it")
    print(f"rounds {ctx.repeats}, threads {threads}, e2e dask threads {e2e_threads}, results in {out}")
    options = {"quick": args.quick, "repeats": ctx.repeats, "threads": threads, "e2e_threads": e2e_threads}
    selected = args.only or list(CASE_NAMES)
    done, failed = [], []
    t_start = time.perf_counter()
    for name in selected:
        print(f"\n-- {name} ...", flush=True)
        if args.wait_idle:
            report.wait_idle(args.wait_idle)
        pressure = report.cpu_pressure()
        t0 = time.perf_counter()
        try:
            result = cases.CASES[name](ctx)
        except Skip as e:
            result = CaseResult(name, name, "", skipped=str(e))
        except Exception as e:  # keep going: one broken case must not lose the others
            traceback.print_exc()
            failed.append(name)
            result = CaseResult(name, name, "", skipped=f"error: {type(e).__name__}: {e}")
        case = result.to_json()
        case["seconds"] = time.perf_counter() - t0
        report.print_case(case)
        print(f"  ({case['seconds']:.0f} s)")
        done.append(case)
        case_env = {**env, "date": time.strftime("%Y-%m-%d %H:%M:%S %Z"), "loadavg": list(os.getloadavg()),
                    "cpu_pressure": report.cpu_pressure(), "cpu_pressure_before": pressure}
        path = report.save(out, case_env, [case], options)
    print(f"\n== targets ({report.python_tag()}, GIL {env['gil']}; {time.perf_counter() - t_start:.0f} s in all)")
    for case in done:
        for t in case["targets"]:
            print(report.target_line(t))
    if failed:
        print(f"cases that raised: {', '.join(failed)}")
    print(f"results: {path}")
    png = report.plot(path)
    if png:
        print(f"plot: {png}")
    if args.markdown:
        print()
        print(report.markdown([path]))
    return 1 if failed else 0


def sysconfig_free_threaded() -> bool:
    import sysconfig

    return bool(sysconfig.get_config_var("Py_GIL_DISABLED"))


if __name__ == "__main__":
    sys.exit(main())
