"""Archives of many small messages for the remote-opening and index tests and measurements, written
by upstream ``tensogram``: one 32 x 64 float32 field per message with its latitude and longitude
objects and MARS metadata, 10 params x 10 levels x steps of 6 hours. Every field's values differ
(by param, level and step), so two messages swapped in a file give another Dataset.

The benchmarks write their archives with it too (``benchmarks/archive.py``)."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

PARAMS = ("t", "q", "u", "v", "w", "r", "gh", "vo", "d", "pv")
LEVELS = (1000, 925, 850, 700, 600, 500, 400, 300, 250, 200)
NY, NX = 32, 64
PLAIN = {"type": "ntensor", "byte_order": "little", "encoding": "none", "filter": "none", "compression": "none"}


def write_steps(path, steps, *, params=PARAMS, levels=LEVELS) -> str:
    """Writes a message per step x level x param (``steps`` are the ``mars.step`` values, in
    hours), to a temporary name first; returns ``path``."""
    import tensogram

    lat, lon = np.linspace(90, -90, NY), np.linspace(0, 360, NX, endpoint=False)
    coords = [({"name": "latitude", "standard_name": "latitude", "units": "degrees_north",
                "dim_names": ["latitude"]}, {**PLAIN, "dtype": "float64", "shape": [NY]}, lat),
              ({"name": "longitude", "standard_name": "longitude", "units": "degrees_east",
                "dim_names": ["longitude"]}, {**PLAIN, "dtype": "float64", "shape": [NX]}, lon)]
    field = {**PLAIN, "dtype": "float32", "shape": [NY, NX]}
    base_values = np.add.outer(np.cos(np.radians(lat)), np.sin(np.radians(lon))).astype(np.float32)
    path = Path(path)
    tmp = path.with_name(path.name + ".part")
    with open(tmp, "wb") as out:
        for step in steps:
            for level in levels:
                for number, param in enumerate(params):
                    base = {"name": param, "units": "K", "dim_names": ["latitude", "longitude"],
                            "mars": {"class": "od", "stream": "oper", "type": "fc", "date": "20260404",
                                     "time": "0000", "param": param, "step": step, "levtype": "pl",
                                     "levelist": level}}
                    values = base_values + np.float32(number + 0.01 * level + 0.1 * step)
                    out.write(tensogram.encode({"base": [base] + [b for b, _, _ in coords]},
                                               [(field, values)] + [(d, a) for _, d, a in coords]))
    os.replace(tmp, path)
    return os.fspath(path)


def write_archive(path, messages: int = 10_000, first_step: int = 0) -> str:
    """Writes ``messages`` messages (a multiple of 100: 10 params x 10 levels per step), steps
    6 hours apart from ``first_step``."""
    per_step = len(PARAMS) * len(LEVELS)
    if messages % per_step:
        raise ValueError(f"messages must be a multiple of {per_step}; got {messages}")
    return write_steps(path, range(first_step, first_step + 6 * messages // per_step, 6))


def measure(path, url_of, server) -> tuple[int, int, float]:
    """``(requests, bytes, seconds)`` of ``xr.open_dataset`` on ``path`` served by ``server``."""
    import time

    import xarray as xr

    from tgm_xarray.source import handles

    handles.CACHE.clear()
    server.reset()
    began = time.perf_counter()
    with xr.open_dataset(url_of(path), engine="tgm") as ds:
        ds.data_vars  # noqa: B018 - opened: every message's metadata read
    return server.count(), server.sent_bytes(), time.perf_counter() - began


# python -m tests.helpers.remote_archive (in the repository): what opening over loopback HTTP costs
if __name__ == "__main__":
    import shutil
    import tempfile

    from tests.helpers.range_server import RangeServer
    from tests.helpers.shared import REMOTE_PARITY

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_archive(root / "archive.tgm", 10_000)
        thousand = REMOTE_PARITY / "thousand-msg.tgm"
        shutil.copyfile(thousand, root / thousand.name)
        server = RangeServer(root).start()
        for name in ("archive.tgm", thousand.name):
            size = (root / name).stat().st_size
            requests, sent, seconds = measure(root / name, lambda p: server.url(p.name), server)
            print(f"{name}: {size:,} bytes, open_dataset: {requests:,} requests, {sent:,} bytes, {seconds:.2f} s")
        server.stop()
