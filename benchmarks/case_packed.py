"""The ``packed`` case of ``run.py``: The real 2 m temperature field, 24-bit simple packing + szip (721 x 1440)."""

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


def eccodes_decoder(eccodes, message: bytes) -> Callable[[], np.ndarray]:
    def decode():
        handle = eccodes.codes_new_from_message(message)
        try:
            return eccodes.codes_get_values(handle)
        finally:
            eccodes.codes_release(handle)

    return decode


def case_packed(ctx: Context) -> CaseResult:
    res = CaseResult("packed", "The real 2 m temperature field, 24-bit simple packing + szip (721 x 1440)",
                     "Full decode of one real field to float64: ours from the `.tgm` file "
                     "(`read(0, 0, out=buf, threads=1)`: one core per read, as the others decode; the "
                     "`split` case measures one read on several cores), upstream `tensogram.decode_object(bytes, 0)`, and ecCodes "
                     "(`codes_new_from_message` + `codes_get_values`) on the original GRIB2 message "
                     "(CCSDS, 12 bits, as ECMWF distributes it) and on the same field repacked at 24 "
                     "bits (the same quantisation as the `.tgm`).")
    datagen.ensure(["packed"], ctx.data)
    path = ctx.data / "packed-2t.tgm"
    f = open_file(path)
    shape = f.layout(0, 0)[0]
    threads = [n for n in ctx.threads if n <= 2]
    bufs = [np.empty(shape) for _ in range(max(threads))]
    contenders: dict[str, Callable[[int], Any]] = {"tgm_xarray read(out=buf)": lambda i: f.read(0, 0, out=bufs[i], threads=1)}
    ours = f.read(0, 0)
    tensogram = optional("tensogram")
    if tensogram is not None:
        blob = message_bytes(path)
        contenders["upstream decode_object(bytes, 0)"] = lambda i: tensogram.decode_object(blob, 0)
        up = tensogram.decode_object(blob, 0)[2]
        res.notes.append(check(np.array_equal(up, ours), "upstream decode == tgm_xarray read (bit for bit)"))
    else:
        res.notes.append("upstream tensogram is not installed in this interpreter: its rows are skipped")
    eccodes = optional("eccodes")
    baseline = None
    if eccodes is not None:
        original = datagen.GRIB_2T.read_bytes()
        repacked = (ctx.data / "packed-2t-24bit.grib2").read_bytes()
        dec12, dec24 = eccodes_decoder(eccodes, original), eccodes_decoder(eccodes, repacked)
        baseline = "ecCodes, original GRIB2 (CCSDS 12-bit)"
        contenders[baseline] = lambda i: dec12()
        contenders["ecCodes, GRIB2 repacked at 24 bits"] = lambda i: dec24()
        grib = dec12().reshape(shape)
        res.notes.append(check(np.array_equal(grib, ours),
                               "tgm_xarray read == ecCodes values of the original GRIB2 (exact)"))
        err24 = float(np.abs(dec24().reshape(shape) - ours).max())
        res.notes.append(check(err24 < 1e-4, f"ecCodes 24-bit GRIB2 within {err24:.1e} K of the field"))
    else:
        res.notes.append("ecCodes is not installed in this interpreter: its rows are skipped")
    add_control(contenders)

    m = throughput_matrix(contenders, threads, ctx.repeats, ctx.target_s)
    baselines = [b for b in (baseline, "upstream decode_object(bytes, 0)") if b in contenders]
    res.tables.append(throughput_table("2t, 721 x 1440 float64 (8.3 MB decoded), sp24 + szip", m,
                                       threads, baselines, mb_per_op=ours.nbytes / 1e6, unit="decodes"))
    res.series, res.raw = series_of(m), raw_matrix(m)
    mine = m["tgm_xarray read(out=buf)"]
    t1 = threads[0]
    if baseline:
        res.targets.append(Target("packed: 1-thread sp24+szip decode vs ecCodes (original GRIB2), speed ratio",
                                  paired_ratio(mine[t1], m[baseline][t1]), 1.0, ">=",
                                  f"[best samples: {best_ratio(mine[t1], m[baseline][t1]):.2f}; vs ecCodes 24-bit GRIB2: "
                                  f"{paired_ratio(mine[t1], m['ecCodes, GRIB2 repacked at 24 bits'][t1]):.2f}x]"))
    if 2 in threads:
        res.targets.append(Target("packed: 2-thread scaling of read(out=buf), sp24+szip field",
                                  paired_ratio(mine[2], mine[t1]), 1.8, ">=",
                                  scaling_detail(m, t1, "tgm_xarray read(out=buf)", baseline or "",
                                                 "upstream decode_object(bytes, 0)"),
                                  control=paired_ratio(m[CONTROL][2], m[CONTROL][t1])))
    return res
