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
