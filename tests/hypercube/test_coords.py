"""Coordinates stored as objects (``tgm_xarray.hypercube.coords``): shared, declared by hints,
curvilinear, compared by inline hash without reading payloads.

Files are read with upstream ``tensogram`` (metadata only, through ``decode_descriptors``) and
written with ``tensogram.encode``; ``_materialize`` decodes the planned fields with upstream too,
so every test that checks values also proves xarray accepts the layout.
"""

from __future__ import annotations

import numpy as np
import pytest

tensogram = pytest.importorskip("tensogram")

from tests.helpers.hypercube import (  # noqa: E402
    LAT,
    LON,
    THOUSAND,
    _assert_plan_consistent,
    _field,
    _Fingerprint,
    _groups,
    _materialize,
    _message,
    _plan,
    _table,
    _write,
)
from tests.helpers.shared import require_shared  # noqa: E402
from tgm_xarray.errors import (  # noqa: E402
    TgmConflictError,
)
from tgm_xarray.hypercube import (  # noqa: E402  # noqa: E402
    build_hypercube,
)


def test_differing_coordinates_conflict(tmp_path):
    def msg(name, lat):
        return _message(({"name": name, "dim_names": ["latitude", "longitude"]}, _field()),
                        ({"name": "latitude"}, lat), ({"name": "longitude"}, LON))
    path = _write(tmp_path / "coords.tgm", [msg("a", LAT), msg("b", LAT + 1)])
    with pytest.raises(TgmConflictError, match="coordinate 'latitude' differs between "
                                               "message 0 object 1 and message 1 object 1"):
        _plan(path)
    groups = _groups(path)
    assert list(groups) == ["3x4", "3x4_2"]
    assert [list(g.variables) for g in groups.values()] == [["a", "latitude", "longitude"],
                                                            ["b", "latitude", "longitude"]]


# --------------------------------------------------------------------------------------------
# (5) The 1000-message upstream fixture opens from metadata only
# --------------------------------------------------------------------------------------------


def test_thousand_messages_from_metadata_only():
    require_shared(THOUSAND)
    fingerprint = _Fingerprint(THOUSAND)
    plan = build_hypercube(_table(THOUSAND), source=str(THOUSAND),
                           fingerprint=fingerprint)
    _assert_plan_consistent(plan)
    var = plan.variables["object_0"]
    assert var.dims == ("fixture.msg_index", "dim_0") and var.shape == (1000, 4)
    assert var.fields.tolist() == list(range(1000))
    assert var.refs == tuple((i, 0) for i in range(1000))
    assert var.attrs == {"fixture.shape": [4]}
    assert plan.index_coords["fixture.msg_index"][1].tolist() == list(range(1000))
    assert fingerprint.calls == 0


def test_coordinates_declared_by_hints_and_grid_messages(tmp_path):
    rlat, rlon = np.arange(3.0), np.arange(4.0)
    grid = _message(({"name": "rlat"}, rlat), ({"name": "rlon"}, rlon),
                    ({"name": "other"}, np.arange(7.0)))
    # the grid message names its own dims, so rlat/rlon are coordinates there
    grid[0]["base"][2]["dim_names"] = ["rlat_unused"]
    grid[0]["base"][0]["dim_names"] = ["rlat"]
    grid[0]["base"][1]["dim_names"] = ["rlon"]
    data = [_message(({"name": "t", "mars": {"step": s}}, _field(s))) for s in (0, 6)]
    path = _write(tmp_path / "grid.tgm", [grid] + data)
    plan = _plan(path)
    assert plan.coord_names == {"rlat", "rlon"}
    # no hints on the fields: their axes match the coordinates' sizes
    assert plan.variables["t"].dims == ("step", "rlat", "rlon")
    assert plan.variables["other"].dims == ("rlat_unused",)
    groups = _groups(path)
    assert list(groups) == ["7", "3x4"]
    assert groups["3x4"].coord_names == {"rlat", "rlon"}
    assert groups["3x4"].variables["t"].dims == ("step", "rlat", "rlon")


def test_coordinates_only_file(tmp_path):
    path = _write(tmp_path / "grid_only.tgm", [_message(({"name": "latitude"}, LAT))])
    plan = _plan(path)
    assert list(plan.variables) == ["latitude"] and plan.coord_names == {"latitude"}
    assert list(_groups(path)) == ["coordinates"]


def test_curvilinear_coordinates(tmp_path):
    lat2d, lon2d = np.ones((3, 4)), np.zeros((3, 4))
    path = _write(tmp_path / "curvi.tgm", [_message(
        ({"name": "latitude", "dim_names": ["y", "x"]}, lat2d),
        ({"name": "longitude"}, lon2d),  # no hint: takes the dims of a variable of its shape
        ({"name": "t", "dim_names": ["y", "x"]}, _field()))])
    plan = _plan(path)
    assert plan.variables["latitude"].dims == ("y", "x")
    assert plan.variables["longitude"].dims == ("y", "x")
    ds = _materialize(plan, path)
    assert set(ds["t"].coords) == {"latitude", "longitude"}
