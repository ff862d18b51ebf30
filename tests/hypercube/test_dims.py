"""The objects' own dimensions (``tgm_xarray.hypercube.dims``): names for every axis, one size
per name.

Files are read with upstream ``tensogram`` (metadata only, through ``decode_descriptors``) and
written with ``tensogram.encode``; ``_materialize`` decodes the planned fields with upstream too,
so every test that checks values also proves xarray accepts the layout.
"""

from __future__ import annotations

import logging

import numpy as np
import pytest

tensogram = pytest.importorskip("tensogram")

from tests.helpers.hypercube import (  # noqa: E402
    _field,
    _groups,
    _materialize,
    _message,
    _plan,
    _write,
)

# --------------------------------------------------------------------------------------------
# Dimension names of the objects' own axes
# --------------------------------------------------------------------------------------------


def test_dim_names_sources_and_priority(tmp_path, caplog):
    path = _write(tmp_path / "dims.tgm", [
        _message(({"name": "hinted", "dim_names": ["y", "x"]}, _field()),
                 ({"name": "plain"}, _field(shape=(3, 5))),
                 extra={"dim_names": {"3": "rows", "5": "cols"}}),
    ])
    plan = _plan(path)
    assert plan.variables["hinted"].dims == ("y", "x")
    assert plan.variables["plain"].dims == ("rows", "cols")
    assert "dim_names" not in plan.attrs and "dim_names.3" not in plan.attrs
    plan = _plan(path, dim_names={"plain": ["a", "b"], 4: "four"})
    assert plan.variables["plain"].dims == ("a", "b")
    assert plan.variables["hinted"].dims == ("y", "four")
    # b is 4 in one variable and 5 in the other: upstream's fallback names neither, with a warning
    with caplog.at_level(logging.WARNING, logger="tgm_xarray"):
        plan = _plan(path, dim_names=["a", "b"])
    assert plan.variables["hinted"].dims == ("a", "obj_0_dim_1") and plan.variables["plain"].dims == ("a", "obj_1_dim_1")
    assert "dimension 'b' is given the sizes [4, 5]; its axes in the variables ['hinted', 'plain']" in caplog.text
    with pytest.raises(ValueError, match="does not fit variable"):
        _plan(path, dim_names=["a"])
    with pytest.raises(TypeError):
        _plan(path, dim_names="ab")


def test_message_level_list_hint(tmp_path):
    path = _write(tmp_path / "extra.tgm", [_message(({"name": "t"}, _field()),
                                                    extra={"dim_names": ["lat", "lon"]})])
    assert _plan(path).variables["t"].dims == ("lat", "lon")


def test_generic_dim_conflicts_fall_back_to_variable_names(tmp_path):
    path = _write(tmp_path / "generic.tgm", [
        _message(({"name": "a"}, _field(shape=(3,)))),
        _message(({"name": "b"}, _field(shape=(4,)))),
        _message(({"name": "c"}, _field(shape=(5,)))),
    ])
    plan = _plan(path)
    assert [plan.variables[n].dims for n in "abc"] == [("obj_0_dim_0",), ("b_dim_0",), ("c_dim_0",)]


def test_scalar_objects(tmp_path):
    path = _write(tmp_path / "scalar.tgm", [
        _message(({"name": "co2", "mars": {"step": s}}, np.array(400.0 + s))) for s in (0, 6)])
    plan = _plan(path)
    assert plan.variables["co2"].dims == ("step",) and plan.variables["co2"].shape == (2,)
    assert _materialize(plan, path)["co2"].values.tolist() == [400.0, 406.0]
    assert list(_groups(path)) == ["scalar"]


def test_dimension_twice_in_one_variable(tmp_path, caplog):
    path = _write(tmp_path / "twice.tgm", [
        _message(({"name": "t", "dim_names": ["step", "x"], "mars": {"step": s}}, _field()))
        for s in (0, 6)])
    # the hinted 'step' axis (size 3) collides with the stacked step (size 2): upstream's fallback
    with caplog.at_level(logging.WARNING, logger="tgm_xarray"):
        plan = _plan(path)
    assert "dimension 'step' is given the sizes [2, 3]; its axes in the variables ['t']" in caplog.text
    assert plan.variables["t"].dims == ("step", "obj_0_dim_0", "x")
