"""Heterogeneous files cut into groups (``tgm_xarray.hypercube.groups``, ``split_groups``).

Files are read with upstream ``tensogram`` (metadata only, through ``decode_descriptors``) and
written with ``tensogram.encode``; ``_materialize`` decodes the planned fields with upstream too,
so every test that checks values also proves xarray accepts the layout.
"""

from __future__ import annotations

import pytest

tensogram = pytest.importorskip("tensogram")

from tests.helpers.hypercube import (  # noqa: E402
    IFS,
    _field,
    _groups,
    _message,
    _plan,
    _write,
    needs,
)
from tgm_xarray.errors import (  # noqa: E402
    TgmConflictError,
)


@needs
def test_ifs_split_groups():
    groups = _groups(IFS)
    # 2t and lsm, both MARS `sfc`, have other cfgrib dimensions: groups named as cfgrib's levels
    assert list(groups) == ["heightAboveGround", "surface", "isobaricInhPa"]
    height, sfc, pl = groups["heightAboveGround"], groups["surface"], groups["isobaricInhPa"]
    assert [n for n in height.variables if n not in height.coord_names] == ["2t"]
    assert [n for n in sfc.variables if n not in sfc.coord_names] == ["lsm"]
    assert [n for n in pl.variables if n not in pl.coord_names] == ["q", "t"]
    assert height.coord_names == sfc.coord_names == pl.coord_names == {"latitude", "longitude"}
    assert "isobaricInhPa" not in sfc.index_coords and "surface" in sfc.index_coords
    assert height.index_coords["heightAboveGround"][:2] == ((), 2.0) and "surface" not in height.index_coords
    assert pl.index_coords["isobaricInhPa"][1].tolist() == [600, 150]


def test_ensemble_control_and_members_split(tmp_path):
    """cf (no number) and pf (numbers) of one parameter cannot share a hypercube."""
    messages = [_message(({"name": "2t", "mars": {"type": "cf", "levtype": "sfc"}}, _field()))]
    messages += [_message(({"name": "2t", "mars": {"type": "pf", "levtype": "sfc", "number": n}},
                           _field(n))) for n in (1, 2)]
    path = _write(tmp_path / "ens.tgm", messages)
    with pytest.raises(TgmConflictError, match="filter_by_keys=\\{'mars.type': 'cf'\\}"):
        _plan(path)
    pf = _plan(path, filter_by_keys={"type": "pf"})
    assert pf.variables["2t"].dims == ("number", "dim_0", "dim_1")
    groups = _groups(path)
    assert list(groups) == ["surface", "surface_2"]
    assert groups["surface_2"].index_coords["number"][1].tolist() == [1, 2]


def test_level_types_sharing_the_generic_level_dimension(tmp_path):
    path = _write(tmp_path / "levels.tgm", [
        _message(({"name": "a", "mars": {"levtype": "dp", "levelist": 1}}, _field())),
        _message(({"name": "b", "mars": {"levtype": "o2d", "levelist": 2}}, _field())),
    ])
    with pytest.raises(TgmConflictError, match="would share the level dimension 'level'"):
        _plan(path)
    assert list(_groups(path)) == ["dp", "o2d"]  # level types that name no level of their own
    plan = _plan(path, filter_by_keys={"levtype": "dp"})
    assert plan.index_coords["level"][1] == 1


def test_groups_of_one_level_on_several_grids_name_the_grid(tmp_path):
    path = _write(tmp_path / "grids.tgm", [
        _message(({"name": "t", "mars": {"levtype": "pl", "levelist": 500}}, _field())),
        _message(({"name": "t", "mars": {"levtype": "pl", "levelist": 500}}, _field(shape=(2, 2)))),
        _message(({"name": "2t", "mars": {"levtype": "sfc", "param": "2t"}}, _field())),
        _message(({"name": "ml", "mars": {"levtype": "ml", "levelist": 1}}, _field())),
    ])
    assert list(_groups(path)) == ["isobaricInhPa_3x4", "isobaricInhPa_2x2", "heightAboveGround", "hybrid"]
