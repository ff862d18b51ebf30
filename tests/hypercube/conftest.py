"""Fixtures of the hypercube tests: the real IFS file's plan and the generated cube, once per
module."""

from __future__ import annotations

import itertools
import random

import numpy as np
import pytest


@pytest.fixture(scope="module")
def ifs_plan(ifs_file):
    """The plan of the real IFS file (2t sfc, lsm sfc, q pl 150, t pl 600)."""
    pytest.importorskip("tensogram")
    from tests.helpers.hypercube import _plan

    return _plan(ifs_file)


@pytest.fixture(scope="module")
def cube_file(tmp_path_factory):
    """2 params x 4 dates x 3 steps x 5 levels x 2 members, written shuffled."""
    pytest.importorskip("tensogram")
    from tests.helpers.hypercube import DATES, LAT, LEVELS, LON, MEMBERS, PARAMS, STEPS, _code, _message, _write

    sorted_dates, sorted_steps = sorted(DATES), sorted(STEPS)
    sorted_levels, sorted_members = sorted(LEVELS, reverse=True), sorted(MEMBERS)
    messages = []
    for p, date, step, level, member in itertools.product(PARAMS, DATES, STEPS, LEVELS, MEMBERS):
        code = _code(PARAMS.index(p), sorted_dates.index(date), sorted_steps.index(step),
                     sorted_levels.index(level), sorted_members.index(member))
        values = code + np.arange(12, dtype=np.float64).reshape(3, 4) / 100
        field_meta = {
            "name": p, "units": "K" if p == "t" else "kg kg**-1",
            "dim_names": ["latitude", "longitude"],
            "mars": {"class": "od", "stream": "enfo", "type": "pf", "expver": "0001",
                     "param": p, "date": date, "time": "1200", "step": step,
                     "levtype": "pl", "levelist": level, "number": member},
        }
        messages.append(_message(
            (field_meta, values),
            ({"name": "latitude", "units": "degrees_north", "dim_names": ["latitude"]}, LAT),
            ({"name": "longitude", "units": "degrees_east", "dim_names": ["longitude"]}, LON),
            extra={"producer": "test-suite"},
        ))
    random.Random(7).shuffle(messages)
    return _write(tmp_path_factory.mktemp("cube") / "cube.tgm", messages)
