"""The ``verify`` case of ``run.py``: what the default hash check (``verify_hash=None``) costs
against none (``False``), on a raw object and on the packed + szip field (docs/errors.md,
"Integrity")."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

import datagen
from common import CaseResult, Context, Table, Target, check
from harness import fmt_ratio, fmt_time, paired_ratio, timed_calls
from tgm_xarray import open_file
from tgm_xarray.source import handles

#: verify_hash values compared, as the table labels them.
MODES = {"False": False, "None": None}


def case_verify(ctx: Context) -> CaseResult:
    res = CaseResult("verify", "Hash checks: verify_hash=None (the default) vs False",
                     "Whole-object reads into a buffer (`read(0, 0, out=buf, verify_hash=...)`), one "
                     "thread, of the 1M-element float32 raw object (4 MB, encoding none) and of the "
                     "real 2 m temperature (24-bit packing + szip, 8.3 MB decoded from 2.2 MB). "
                     "First read: the handle is dropped from the process's cache "
                     "(`handles.CACHE.release`) and the file opened again before each read, so "
                     "`None` hashes the whole frame every time (the open's cost is in both). "
                     "Repeated reads: one handle, which checks each object once. numpy copying the "
                     "raw object's bytes is the floor.")
    datagen.ensure(["raw", "packed"], ctx.data)
    fields = {"raw float32, 4 MB": ctx.data / "raw1m.tgm",
              "sp24 + szip 2t, 2.2 MB stored": ctx.data / "packed-2t.tgm"}
    contenders: dict[str, Callable[[], Any]] = {}
    for label, path in fields.items():
        f = open_file(path)
        buf = np.empty(*f.layout(0, 0))
        res.notes.append(check(np.array_equal(f.read(0, 0, verify_hash=True),
                                              f.read(0, 0, verify_hash=False)),
                               f"{label}: verify_hash=True and False read the same values"))
        for mode, flag in MODES.items():
            contenders[f"{label} | first read | {mode}"] = \
                lambda path=path, buf=buf, flag=flag: _first_read(path, buf, flag)
            contenders[f"{label} | repeated reads | {mode}"] = \
                lambda f=f, buf=buf, flag=flag: f.read(0, 0, out=buf, verify_hash=flag, threads=1)
    src = datagen.raw_values()
    copy = np.empty_like(src)
    contenders["numpy copyto (memcpy) of the raw 4 MB"] = lambda: np.copyto(copy, src)

    m = timed_calls(contenders, ctx.repeats, ctx.target_s)
    rows = []
    for label in fields:
        for read in ("first read", "repeated reads"):
            off, on = (m[f"{label} | {read} | {mode}"] for mode in MODES)
            ratio = 1 / paired_ratio(on, off)  # time with the check / time without, per round
            rows.append([label, read, fmt_time(off.median()), fmt_time(on.median()), fmt_ratio(ratio)])
            if read == "repeated reads" or label.startswith("sp24"):
                res.targets.append(Target(f"verify: {label}, {read}: time None / False", ratio, 1.1, "<="))
    memcpy = m["numpy copyto (memcpy) of the raw 4 MB"]
    rows.append(["numpy copyto (memcpy) of the raw 4 MB", "", fmt_time(memcpy.median()), "", ""])
    res.tables.append(Table("one thread, median time per read", ["object", "read", "verify_hash=False",
                                                                  "verify_hash=None", "None / False"], rows))
    res.raw = {name: s.to_json() for name, s in m.items()}
    return res


def _first_read(path, buf: np.ndarray, verify_hash: bool | None) -> None:
    """A read on a handle of its own: opening it again parses the file afresh, hash state included."""
    handles.CACHE.release(path)
    open_file(path).read(0, 0, out=buf, verify_hash=verify_hash, threads=1)
