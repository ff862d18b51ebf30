"""What the benchmark cases share: their results (``Table``, ``Target``, ``CaseResult``), the run's
``Context``, optional imports, and the table and scaling helpers.

Contender names start with who does the work: ``tgm_xarray`` (this package), ``upstream``
(ECMWF's ``tensogram`` / ``tensogram-xarray`` 0.24 packages), ``ecCodes``, ``cfgrib``,
``h5netcdf``, ``zarr``, ``numpy``.
"""

from __future__ import annotations

import importlib
import statistics
import sys
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np

import datagen
from harness import Samples, fmt_rate, fmt_ratio, fmt_time, paired_ratio
from tgm_xarray import open_file

HERE = Path(__file__).resolve().parent
#: Packages the shared venv may lack (upstream tensogram-xarray, h5py), installed with
#: ``pip install --no-deps --target data/bench/_pkgs`` (see run_all.sh); searched last.
EXTRA_PACKAGES = datagen.CACHE / "_pkgs"


# --- results ---------------------------------------------------------------------------------

@dataclass
class Table:
    title: str
    columns: list[str]
    rows: list[list[str]]
    note: str = ""


@dataclass
class Target:
    name: str
    value: float
    threshold: float
    op: str  # ">=" or "<="
    detail: str = ""
    control: float | None = None  # the control's 2-thread scaling in the same rounds (scaling targets)

    @property
    def inconclusive(self) -> bool:
        """A scaling target measured while the machine did not offer a second core."""
        return self.control is not None and self.control < INCONCLUSIVE_BELOW

    @property
    def passed(self) -> bool:
        return self.value >= self.threshold if self.op == ">=" else self.value <= self.threshold

    def line(self) -> str:
        return (f"{'PASS' if self.passed else 'FAIL'}{'?' if self.inconclusive else ''}  {self.name}: {self.value:.2f} "
                f"(target {self.op} {self.threshold:g}){'  ' + self.detail if self.detail else ''}")

    def to_json(self) -> dict:
        return {**asdict(self), "passed": self.passed, "inconclusive": self.inconclusive}


@dataclass
class CaseResult:
    name: str
    title: str
    what: str
    tables: list[Table] = field(default_factory=list)
    targets: list[Target] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    series: dict = field(default_factory=dict)  # {contender: {threads: ops/s}} for the plot
    raw: dict = field(default_factory=dict)
    skipped: str = ""

    def to_json(self) -> dict:
        return {"name": self.name, "title": self.title, "what": self.what,
                "tables": [asdict(t) for t in self.tables],
                "targets": [t.to_json() for t in self.targets], "notes": self.notes,
                "series": {k: {str(n): v for n, v in s.items()} for k, s in self.series.items()},
                "raw": self.raw, "skipped": self.skipped}


@dataclass
class Context:
    quick: bool
    threads: list[int]
    repeats: int
    target_s: float  # seconds per throughput sample (one thread)
    e2e_threads: list[int]
    data: Path = datagen.CACHE

    @property
    def free_threaded(self) -> bool:
        return not getattr(sys, "_is_gil_enabled", lambda: True)()


class Skip(Exception):
    """A case (or a contender) cannot run in this interpreter."""


def optional(module: str):
    """Imports ``module`` or returns None (looking in ``data/bench/_pkgs`` too)."""
    try:
        return importlib.import_module(module)
    except ImportError:
        pass
    if EXTRA_PACKAGES.is_dir() and str(EXTRA_PACKAGES) not in sys.path:
        sys.path.append(str(EXTRA_PACKAGES))
        importlib.invalidate_caches()
        try:
            return importlib.import_module(module)
        except ImportError:
            return None
    return None


def upstream_xarray_entrypoint():
    """Upstream's engine class (both packages register ``engine="tensogram"``: pass classes)."""
    module = optional("tensogram_xarray.backend")
    return None if module is None else module.TensogramBackendEntrypoint


def ours_entrypoint():
    from tgm_xarray.backend import TensogramBackendEntrypoint

    return TensogramBackendEntrypoint


def message_bytes(path: Path, msg: int = 0) -> bytes:
    offset, length = open_file(path).handle.message_span(msg)
    with open(path, "rb") as f:
        f.seek(offset)
        return f.read(length)


# --- table helpers ---------------------------------------------------------------------------

def throughput_table(title: str, matrix: dict[str, dict[int, Samples]], threads: list[int],
                     baselines: list[str], mb_per_op: float | None = None, unit: str = "reads") -> Table:
    columns = ["contender", "threads", f"wall time / {unit[:-1]} (min / median)", f"{unit}/s"]
    if mb_per_op:
        columns.append("MB/s")
    columns.append("scaling vs 1 thread")
    columns += [f"vs {b}" for b in baselines]
    rows = []
    for name, per_threads in matrix.items():
        one = per_threads.get(threads[0])
        for n in threads:
            s = per_threads[n]
            row = [name, str(n), f"{fmt_time(s.min())} / {fmt_time(s.median())}", fmt_rate(s.rate())]
            if mb_per_op:
                row.append(fmt_rate(s.rate() * mb_per_op))
            row.append(fmt_ratio(paired_ratio(s, one)) if n != threads[0] else "1.00x")
            for b in baselines:
                row.append("" if b == name else fmt_ratio(paired_ratio(s, matrix[b][n])))
            rows.append(row)
    return Table(title, columns, rows)


def best_ratio(a: Samples, b: Samples) -> float:
    """Throughput of a's best sample / b's best sample (noise only ever slows a sample down)."""
    return max(a.rates) / max(b.rates)


def time_ratio(a: Samples, b: Samples) -> float:
    """Median over rounds of (time of a / time of b)."""
    return 1 / paired_ratio(a, b)


def raw_matrix(matrix: dict[str, dict[int, Samples]]) -> dict:
    return {name: {str(n): s.to_json() for n, s in per.items()} for name, per in matrix.items()}


def series_of(matrix: dict[str, dict[int, Samples]]) -> dict:
    return {name: {n: s.rate() for n, s in per.items()} for name, per in matrix.items()}


def check(condition: bool, text: str) -> str:
    line = f"check {'ok' if condition else 'FAILED'}: {text}"
    print("  " + line, flush=True)
    if not condition:
        raise AssertionError(line)
    return line


CONTROL = "control: sha256 of 256 KB"
#: Below this 2-thread scaling of the control, the machine was too busy to judge a scaling target.
INCONCLUSIVE_BELOW = 1.6


def add_control(contenders: dict) -> str:
    """A CPU-bound call that releases the GIL and touches little memory: the 2-thread scaling it
    gets in the same rounds is what the machine offered at the time (the cores are shared)."""
    import hashlib

    block = np.random.default_rng(0).bytes(256 * 1024)
    contenders[CONTROL] = lambda i: hashlib.sha256(block).digest()
    return CONTROL


def scaling_detail(m: dict, t1: int, ours: str, *names: str) -> str:
    """The 2-thread scaling of the other contenders of the same rounds, and ours relative to the
    control's (1.00 = ours scaled as well as the machine allowed at the time)."""
    parts = [f"{n}: {paired_ratio(m[n][2], m[n][t1]):.2f}x" for n in names if n in m]
    control = paired_ratio(m[CONTROL][2], m[CONTROL][t1])
    ratios = [ra2 / ra1 / (rc2 / rc1) for ra1, ra2, rc1, rc2 in
              zip(m[ours][t1].rates, m[ours][2].rates, m[CONTROL][t1].rates, m[CONTROL][2].rates)]
    best = max(m[ours][2].rates) / max(m[ours][t1].rates)
    return (f"[best samples: {best:.2f}x; {CONTROL}: {control:.2f}x, so relative to the control "
            f"{statistics.median(ratios):.2f}; " + ", ".join(parts) + "]")
