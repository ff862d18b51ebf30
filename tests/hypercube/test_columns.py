"""The keys the planner sees per object and its group-by on code columns
(``tgm_xarray.hypercube.columns``): descriptor parameters as metadata, and planning work that
grows linearly with the messages.

Files are read with upstream ``tensogram`` (metadata only, through ``decode_descriptors``) and
written with ``tensogram.encode``; ``_materialize`` decodes the planned fields with upstream too,
so every test that checks values also proves xarray accepts the layout.
"""

from __future__ import annotations

import sys

import numpy as np
import pytest

tensogram = pytest.importorskip("tensogram")

from tests.helpers.hypercube import (  # noqa: E402
    _desc,
    _field,
    _plan,
    _write,
)
from tests.helpers.tables import distinct_steps_table  # noqa: E402
from tgm_xarray.hypercube import (  # noqa: E402  # noqa: E402
    MetadataTable,
    build_hypercube,
)

# --------------------------------------------------------------------------------------------
# Metadata details: descriptor params, attributes, variable names
# --------------------------------------------------------------------------------------------


def test_descriptor_params_as_metadata_fallback(tmp_path):
    messages = []
    for step in (0, 6):
        data = _field(step)
        desc = _desc(data, encoding="simple_packing", sp_bits_per_value=16, step=step)
        messages.append(({"base": [{"name": "t"}]}, [(desc, data)]))
    path = _write(tmp_path / "params.tgm", messages)
    plan = _plan(path)
    var = plan.variables["t"]
    assert var.dims == ("step", "dim_0", "dim_1")
    assert not any(k.startswith("sp_") for k in var.attrs)
    assert var.encoding["bits_per_value"] == 16
    assert "sp_reference_value" not in var.encoding["tensogram_params"]  # differs per field


# --------------------------------------------------------------------------------------------
# Many distinct values: planning work grows linearly with the messages (counted, so a
# quadratic pass fails here, not in a 10^6-message archive)
# --------------------------------------------------------------------------------------------


def _planning_work(table: MetadataTable, monkeypatch) -> tuple[int, int]:
    """What planning ``table`` costs, counted rather than timed: function calls (Python and C),
    and elements of the arrays numpy's constructors allocate."""
    elements = [0]
    for name in ("full", "zeros", "ones", "empty"):
        def counted(shape, *args, _make=getattr(np, name), **kwargs):  # noqa: B008 (binds this name's function)
            array = _make(shape, *args, **kwargs)
            elements[0] += array.size
            return array
        monkeypatch.setattr(np, name, counted)
    calls = [0]

    def profile(frame, event, arg):
        if event in ("call", "c_call"):
            calls[0] += 1

    sys.setprofile(profile)
    try:
        plan = build_hypercube(table, source="steps.tgm", fingerprint=lambda m, o: 0)
    finally:
        sys.setprofile(None)
        monkeypatch.undo()
    assert plan.variables["2t"].shape == (table.n_messages,)
    return calls[0], elements[0]


def test_distinct_steps_plan_in_linear_work(monkeypatch):
    """Ten times the messages, each at a step of its own, cost at most ~ten times the calls and
    the allocated elements (an O(n) array per distinct step made it 100 times)."""
    small = _planning_work(distinct_steps_table(2_000), monkeypatch)
    big = _planning_work(distinct_steps_table(20_000), monkeypatch)
    for what, a, b in zip(("calls", "allocated elements"), small, big):
        assert b <= 11 * a, f"{what}: {a} for 2,000 messages but {b} for 20,000"


def test_distinct_steps_sorted_and_placed():
    """Steps written in reverse order come out ascending, each field at its own step."""
    n = 1_000
    table = distinct_steps_table(n, reverse=True)  # row i's step is n - 1 - i
    plan = build_hypercube(table, source="steps.tgm", fingerprint=lambda m, o: 0)
    step = plan.index_coords["step"][1]
    assert (step == np.arange(n) * np.timedelta64(3600, "s")).all()
    var = plan.variables["2t"]
    assert [var.refs[i][0] for i in var.fields.tolist()] == list(range(n))[::-1]
