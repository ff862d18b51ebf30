"""Archives of many small messages, written by upstream ``tensogram``: the ``archive`` benchmark's
data (``tests/helpers/remote_archive.py`` writes the same archive for the test suite).

Each message holds one 32 x 64 float32 field with MARS keys (param, date, time, step, pl level)
and its latitude and longitude objects; messages go step by step, level by level, param by
param. Every field's values differ (by param, level and step), so two messages swapped in a
file give another Dataset.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

import datagen

PARAMS = ("t", "q", "u", "v", "w", "r", "gh", "vo", "d", "pv")
LEVELS = (1000, 925, 850, 700, 600, 500, 400, 300, 250, 200)
NY, NX = 32, 64


def write_archive(path: str | os.PathLike, steps: Iterable[int], *, params: Sequence[str] = PARAMS,
                  levels: Sequence[int] = LEVELS) -> str:
    """Writes a message per step x level x param (``steps`` are the ``mars.step`` values, in
    hours), to a temporary name first; returns ``path``."""
    import tensogram

    lat, lon = np.linspace(90, -90, NY), np.linspace(0, 360, NX, endpoint=False)
    plain = datagen.PLAIN
    coords = [({"name": "latitude", "standard_name": "latitude", "units": "degrees_north",
                "dim_names": ["latitude"]}, {**plain, "dtype": "float64", "shape": [NY]}, lat),
              ({"name": "longitude", "standard_name": "longitude", "units": "degrees_east",
                "dim_names": ["longitude"]}, {**plain, "dtype": "float64", "shape": [NX]}, lon)]
    field = {**plain, "dtype": "float32", "shape": [NY, NX]}
    base_values = np.add.outer(np.cos(np.radians(lat)), np.sin(np.radians(lon))).astype(np.float32)
    path = Path(path)
    tmp = datagen._atomic(path)
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
    datagen._finish(tmp, path)
    return os.fspath(path)
