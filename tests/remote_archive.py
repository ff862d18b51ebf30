"""Archives of many small messages for the remote-opening tests and measurements, written by
upstream ``tensogram``: one 32 x 64 float32 field per message with its latitude and longitude
objects and MARS metadata (param, step, level), like ``benchmarks/datagen.py``'s open sets."""

from __future__ import annotations

import os

import numpy as np

PARAMS = ("t", "q", "u", "v", "w", "r", "gh", "vo", "d", "pv")
LEVELS = (1000, 925, 850, 700, 600, 500, 400, 300, 250, 200)


def write_archive(path, messages: int = 10_000) -> str:
    """Writes ``messages`` messages (10 params x 10 levels x as many steps as it takes)."""
    import tensogram

    lat, lon = np.linspace(90, -90, 32), np.linspace(0, 354.375, 64)
    plain = {"type": "ntensor", "byte_order": "little", "encoding": "none", "filter": "none", "compression": "none"}
    coords = [({"name": "latitude", "standard_name": "latitude", "units": "degrees_north", "dim_names": ["latitude"]},
               {**plain, "dtype": "float64", "shape": [32]}, lat),
              ({"name": "longitude", "standard_name": "longitude", "units": "degrees_east",
                "dim_names": ["longitude"]}, {**plain, "dtype": "float64", "shape": [64]}, lon)]
    field = {**plain, "dtype": "float32", "shape": [32, 64]}
    base_values = np.add.outer(np.cos(np.radians(lat)), np.sin(np.radians(lon))).astype(np.float32)
    with open(path, "wb") as f:
        for i in range(messages):
            param, level, step = PARAMS[i % 10], LEVELS[i // 10 % 10], 6 * (i // 100)
            base = {"name": param, "dim_names": ["latitude", "longitude"],
                    "mars": {"class": "od", "stream": "oper", "type": "fc", "date": "20260404", "time": "0000",
                             "param": param, "step": step, "levtype": "pl", "levelist": level}}
            values = base_values + np.float32(i % 10 + 0.01 * level + 0.1 * step)
            f.write(tensogram.encode({"base": [base] + [b for b, _, _ in coords]},
                                     [(field, values)] + [(d, a) for _, d, a in coords], hash="xxh3"))
    return os.fspath(path)


def measure(path, url_of, server) -> tuple[int, int, float]:
    """``(requests, bytes, seconds)`` of ``xr.open_dataset`` on ``path`` served by ``server``."""
    import time

    import xarray as xr

    from tgm_xarray import handles

    handles.CACHE.clear()
    server.reset()
    began = time.perf_counter()
    with xr.open_dataset(url_of(path), engine="tensogram") as ds:
        ds.data_vars  # noqa: B018 - opened: every message's metadata read
    return server.count(), server.sent_bytes(), time.perf_counter() - began


if __name__ == "__main__":  # python tests/remote_archive.py: what opening over loopback HTTP costs
    import shutil
    import sys
    import tempfile
    from pathlib import Path

    sys.path.insert(0, os.path.dirname(__file__))
    from range_server import RangeServer

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_archive(root / "archive.tgm", 10_000)
        thousand = Path(__file__).resolve().parents[1].parent / "shared/fixtures/upstream/remote-parity/thousand-msg.tgm"
        shutil.copyfile(thousand, root / thousand.name)
        server = RangeServer(root).start()
        for name in ("archive.tgm", thousand.name):
            size = (root / name).stat().st_size
            requests, sent, seconds = measure(root / name, lambda p: server.url(p.name), server)
            print(f"{name}: {size:,} bytes, open_dataset: {requests:,} requests, {sent:,} bytes, {seconds:.2f} s")
        server.stop()
