"""The ``write`` case of ``run.py``: one write of the real 2 m temperature field, 24-bit simple
packing + szip, against ecCodes (GRIB2 CCSDS, same bits) and upstream ``tensogram.encode``."""

from __future__ import annotations

import contextlib
import tempfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import xarray as xr

import datagen
from common import CaseResult, Context, Table, Target, check, optional
from harness import fmt_ratio, fmt_time, paired_ratio, timed_calls
from tgm_xarray import _core, to_tgm

ECCODES = "ecCodes GRIB2 CCSDS 24-bit (codes_set_values + codes_get_message)"
OURS = "tgm_xarray to_tgm(threads=1)"


def case_write(ctx: Context) -> CaseResult:
    with contextlib.ExitStack() as stack:  # the files written go with their directories
        def directory(**where) -> Path:
            return Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="tgm-write-", **where)))

        # tmpfs: where fsync costs nothing, the write without the disk's sync
        return _case_write(ctx, directory(), directory(dir="/dev/shm") if Path("/dev/shm").is_dir() else None)


def _case_write(ctx: Context, disk: Path, tmpfs: Path | None) -> CaseResult:
    res = CaseResult("write", "One write of the real 2 m temperature, 24-bit packing + szip (721 x 1440)",
                     "One thread, the same float64 values and the same quantisation (24 bits, szip "
                     "RSI 128, blocks of 32, as GRIB2's CCSDS packing): `to_tgm` of a one-variable "
                     "Dataset to a file (`threads=1`; packing parameters, encoding, hashes, framing "
                     "and the file write, made durable: the file and its directory are fsynced), the "
                     "same to tmpfs (`/dev/shm`, where fsync costs nothing), `_core.encode_message` "
                     "(the message alone), upstream `tensogram.encode`, and ecCodes setting the "
                     "values of a 24-bit GRIB2 handle and taking its message. Ratios are speed vs "
                     "ecCodes (>= 1: faster).")
    values = np.ascontiguousarray(datagen.grib_values("2t"))
    desc = {"type": "ntensor", "shape": list(values.shape), "dtype": "float64", "byte_order": "little",
            **datagen.PACKING}
    meta = {"base": [{"name": "2t"}]}
    lat, lon = datagen.coordinates()
    ds = xr.Dataset({"t2m": (("latitude", "longitude"), values)}, coords={"latitude": lat, "longitude": lon})
    encoding = {"t2m": {"bits": 24, "compression": "szip", "szip_rsi": datagen.PACKING["szip_rsi"],
                        "szip_block_size": datagen.PACKING["szip_block_size"]}}
    out = disk / "2t.tgm"
    contenders: dict[str, Callable[[], Any]] = {
        OURS: lambda: to_tgm(ds, out, encoding=encoding, threads=1),
        "tgm_xarray _core.encode_message": lambda: _core.encode_message(meta, [(desc, values)], threads=1),
    }
    if tmpfs is not None:
        in_memory = tmpfs / "2t.tgm"
        contenders[f"{OURS} to tmpfs"] = lambda: to_tgm(ds, in_memory, encoding=encoding, threads=1)
    sizes = {"tgm_xarray message": len(_core.encode_message(meta, [(desc, values)]))}
    to_tgm(ds, out, encoding=encoding, threads=1)
    written = xr.open_dataset(out, engine="tgm")["t2m"].values
    step = (values.max() - values.min()) / (2**24 - 1)
    res.notes.append(check(float(np.abs(written - values).max()) <= step,
                           "to_tgm's file reads back within one packing step"))
    tensogram = optional("tensogram")
    if tensogram is not None:
        contenders["upstream tensogram.encode"] = lambda: tensogram.encode(meta, [(desc, values)])
        sizes["upstream message"] = len(tensogram.encode(meta, [(desc, values)]))
        up = tensogram.decode_object(out.read_bytes(), 0)[2]
        res.notes.append(check(np.array_equal(up, written), "upstream decodes to_tgm's file to the same values"))
    eccodes = optional("eccodes")
    if eccodes is not None:
        with open(datagen.GRIB_2T, "rb") as f:
            handle = eccodes.codes_new_from_message(f.read())
        eccodes.codes_set(handle, "bitsPerValue", 24)
        flat = values.ravel()

        def grib() -> bytes:
            eccodes.codes_set_values(handle, flat)
            return eccodes.codes_get_message(handle)

        contenders[ECCODES] = grib
        sizes["ecCodes GRIB2 message"] = len(grib())
    else:
        res.notes.append("ecCodes is not installed in this interpreter: its row and target are skipped")

    m = timed_calls(contenders, ctx.repeats, ctx.target_s)
    rows = []
    for name, samples in m.items():
        vs = fmt_ratio(paired_ratio(samples, m[ECCODES])) if ECCODES in m else "-"
        rows.append([name, fmt_time(samples.median()), vs])
    res.tables.append(Table("one thread, median time per field", ["writer", "time", "speed vs ecCodes"], rows))
    res.tables.append(Table("sizes", ["output", "bytes"], [[k, f"{v:,}"] for k, v in sizes.items()]))
    if ECCODES in m:
        res.targets.append(Target("write: to_tgm of the 2t field, sp24+szip, 1 thread vs ecCodes, speed ratio",
                                  paired_ratio(m[OURS], m[ECCODES]), 1.0, ">="))
    res.raw = {name: s.to_json() for name, s in m.items()}
    res.tables.append(_large_field_table(ctx, disk, encoding))
    return res


def _large_field_table(ctx: Context, disk: Path, encoding: dict) -> Table:
    """One 1442 x 2880 field (the 2t field tiled 2 x 2) written with threads=1 and threads=2:
    the field is packed and szip-encoded in pieces on the threads it is given (the same bytes)."""
    values = np.ascontiguousarray(np.tile(datagen.grib_values("2t"), (2, 2)))
    ds = xr.Dataset({"t2m": (("y", "x"), values)})
    contenders = {f"to_tgm(threads={n})": (lambda n=n: to_tgm(ds, disk / f"large{n}.tgm", encoding=encoding, threads=n))
                  for n in (1, 2)}
    m = timed_calls(contenders, ctx.repeats, ctx.target_s)
    one = m["to_tgm(threads=1)"]
    rows = [[name, fmt_time(s.median()), fmt_ratio(paired_ratio(s, one))] for name, s in m.items()]
    return Table("one 1442 x 2880 field, median time", ["writer", "time", "speed vs threads=1"], rows)
