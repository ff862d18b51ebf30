"""One Dataset's plan (``tgm_xarray.hypercube.plan``, through ``build_hypercube``): the real IFS
file's variables, coordinates, attributes and encoding, upstream's guide examples, duplicates,
and every upstream fixture.

Files are read with upstream ``tensogram`` (metadata only, through ``decode_descriptors``) and
written with ``tensogram.encode``; ``_materialize`` decodes the planned fields with upstream too,
so every test that checks values also proves xarray accepts the layout.
"""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

tensogram = pytest.importorskip("tensogram")

from tests.helpers.hypercube import (  # noqa: E402
    IFS,
    MULTI_MESSAGE,
    _assert_no_dict_coordinates,
    _assert_plan_consistent,
    _field,
    _groups,
    _materialize,
    _message,
    _plan,
    _write,
    needs,
)
from tests.helpers.shared import require_shared, shared_files  # noqa: E402
from tgm_xarray.errors import (  # noqa: E402
    TgmConflictError,
    TgmDuplicateError,
)


@needs
def test_ifs_variables_and_shared_coordinates(ifs_plan):
    plan = ifs_plan
    _assert_plan_consistent(plan)
    data = [n for n in plan.variables if n not in plan.coord_names]
    assert data == ["2t", "lsm", "q", "t"]
    assert plan.coord_names == {"latitude", "longitude"}
    assert plan.variables["latitude"].dims == ("latitude",)
    assert plan.variables["latitude"].refs == ((0, 1),)
    assert plan.variables["latitude"].fields.shape == ()
    assert plan.variables["longitude"].shape == (1440,)
    for name in ("2t", "lsm"):
        assert plan.variables[name].dims == ("latitude", "longitude")
    for name in ("q", "t"):
        assert plan.variables[name].dims == ("isobaricInhPa", "latitude", "longitude")
        assert plan.variables[name].shape == (2, 721, 1440)


@needs
def test_ifs_levels_union_with_holes_sorted_descending(ifs_plan):
    dims, levels, attrs = ifs_plan.index_coords["isobaricInhPa"]
    assert dims == ("isobaricInhPa",) and levels.tolist() == [600, 150]
    assert attrs["units"] == "hPa" and attrs["standard_name"] == "air_pressure"
    assert ifs_plan.variables["q"].fields.tolist() == [-1, 0]
    assert ifs_plan.variables["q"].refs == ((2, 0),)
    assert ifs_plan.variables["t"].fields.tolist() == [0, -1]
    assert ifs_plan.variables["t"].refs == ((3, 0),)
    assert ifs_plan.variables["q"].dtype == np.float64


@needs
def test_ifs_time_step_surface_scalars(ifs_plan):
    coords = ifs_plan.index_coords
    assert coords["time"][0] == () and coords["time"][1] == np.datetime64("2026-04-04T00:00", "ns")
    assert coords["time"][1].dtype == np.dtype("datetime64[ns]")
    assert coords["step"][0] == () and coords["step"][1] == np.timedelta64(0, "ns")
    assert coords["step"][1].dtype == np.dtype("timedelta64[ns]")
    assert coords["valid_time"][0] == () and coords["valid_time"][1] == coords["time"][1]
    assert coords["surface"][0] == () and coords["surface"][1] == 0
    assert coords["time"][2]["standard_name"] == "forecast_reference_time"
    assert "number" not in coords


@needs
def test_ifs_attributes(ifs_plan):
    q = ifs_plan.variables["q"].attrs
    assert list(q)[:2] == ["units", "long_name"]
    assert q["units"] == "kg kg**-1" and q["long_name"] == "Specific humidity"
    assert q["mars.class"] == "od" and q["GRIB_paramId"] == 133 and q["mars.param"] == "q"
    # keys that became coordinates (the level type names isobaricInhPa) or the variable's name
    # are gone, and so are structural ones
    for key in ("mars.date", "mars.time", "mars.step", "mars.levelist", "mars.levtype", "name",
                "dim_names", "_reserved_"):
        assert key not in q
    assert "mars.levtype" not in ifs_plan.variables["2t"].attrs  # it names `surface`
    assert not any(k.startswith("_reserved_") for k in q)
    # per-message _extra_ entries that differ between messages stay on the variable, as JSON
    assert q["grib_files"].startswith('[{"file": "q_150.grib2"')
    # those common to every message are the Dataset's, not repeated on variables
    assert ifs_plan.attrs["license"] == "CC-BY-4.0"
    assert ifs_plan.attrs["converted_with.eccodes"] == "2.50.0"
    assert "license" not in q and "grib_files" not in ifs_plan.attrs
    lat = ifs_plan.variables["latitude"].attrs
    assert lat == {"units": "degrees_north", "standard_name": "latitude"}


@needs
def test_ifs_encoding(ifs_plan):
    enc = ifs_plan.variables["t"].encoding
    assert enc["source"] == str(IFS)
    assert (enc["message_index"], enc["object_index"]) == (3, 0)
    assert enc["tensogram_encoding"] == "simple_packing"
    assert enc["tensogram_compression"] == "szip"
    assert enc["tensogram_filter"] == "none"
    assert enc["bits_per_value"] == 24
    assert enc["tensogram_params"]["szip_rsi"] == 128
    assert "szip_block_offsets" not in enc["tensogram_params"]
    assert "compression" not in enc  # would be taken for netCDF's own compression setting
    assert enc["preferred_chunks"] == {"isobaricInhPa": 1, "latitude": 721, "longitude": 1440}


@needs
def test_ifs_values_land_in_place():
    plan = _plan(IFS, filter_by_keys={"levtype": "pl"})
    ds = _materialize(plan, IFS)
    assert list(ds.data_vars) == ["q", "t"]
    with tensogram.TensogramFile.open(str(IFS)) as f:
        q150 = tensogram.decode_object(f.read_message(2), 0)[2]
        lat = tensogram.decode_object(f.read_message(2), 1)[2]
    np.testing.assert_array_equal(ds["q"].sel(isobaricInhPa=150).values, q150)
    assert np.isnan(ds["q"].sel(isobaricInhPa=600).values).all()
    assert np.isnan(ds["t"].sel(isobaricInhPa=150).values).all()
    np.testing.assert_array_equal(ds["latitude"].values, lat)
    assert float(ds["latitude"][0]) == 90.0


@needs
def test_ifs_single_level_becomes_scalar_coordinate():
    plan = _plan(IFS, filter_by_keys={"levelist": 600})
    assert plan.index_coords["isobaricInhPa"][0] == ()
    assert plan.index_coords["isobaricInhPa"][1] == 600
    assert plan.variables["t"].dims == ("latitude", "longitude")
    assert "surface" not in plan.index_coords


def test_guide_example_1_single_object(tmp_path):
    data = np.arange(60, dtype=np.float32).reshape(6, 10)
    path = _write(tmp_path / "simple.tgm", [({"version": 2}, [(None, data)])])
    plan = _plan(path)
    assert plan.variables["object_0"].dims == ("dim_0", "dim_1")
    assert plan.attrs == {"version": 2}
    ds = _materialize(plan, path)
    np.testing.assert_array_equal(ds["object_0"].values, data)
    plan = _plan(path, dim_names=["latitude", "longitude"])
    assert plan.variables["object_0"].dims == ("latitude", "longitude")


def test_guide_example_2_coordinate_objects(tmp_path):
    lat = np.linspace(-90, 90, 5)
    lon = np.linspace(0, 360, 8, endpoint=False)
    temp = np.random.default_rng(42).random((5, 8)).astype(np.float32)
    path = _write(tmp_path / "with_coords.tgm", [_message(
        ({"name": "latitude"}, lat), ({"name": "longitude"}, lon), ({"name": "temperature"}, temp))])
    plan = _plan(path)
    assert plan.coord_names == {"latitude", "longitude"}
    assert plan.variables["temperature"].dims == ("latitude", "longitude")
    ds = _materialize(plan, path)
    _assert_no_dict_coordinates(ds)
    np.testing.assert_array_equal(ds["longitude"].values, lon)
    assert float(ds["temperature"].sel(latitude=45.0, longitude=90.0)) == temp[3, 2]


def test_guide_example_3_variable_key(tmp_path):
    meta = {"mars": {"class": "od", "date": "20260401", "type": "fc"},
            "base": [{"mars": {"param": "2t", "levtype": "sfc"}},
                     {"mars": {"param": "10u", "levtype": "sfc"}}]}
    path = _write(tmp_path / "mars.tgm", [(meta, [(None, _field(273.15, dtype="float32")),
                                                  (None, _field(5.0, dtype="float32"))])])
    for options in ({}, {"variable_key": "mars.param"}):
        plan = _plan(path, **options)
        assert list(plan.variables) == ["2t", "10u"]
        assert plan.attrs == {"mars.class": "od", "mars.type": "fc"}
        assert plan.index_coords["time"][1] == np.datetime64("2026-04-01", "ns")
        # 2t at 2 m and 10u at 10 m (ecCodes' heights of these surface parameters) share
        # cfgrib's `heightAboveGround`, each with a hole where the other is
        dims, values, _ = plan.index_coords["heightAboveGround"]
        assert dims == ("heightAboveGround",) and values.tolist() == [2.0, 10.0]
        assert plan.variables["2t"].fields.tolist() == [0, -1] and plan.variables["10u"].fields.tolist() == [-1, 0]
        # mars.param named the variable, mars.levtype (with the param) names `heightAboveGround`
        assert plan.variables["2t"].attrs == {}
        _assert_no_dict_coordinates(_materialize(plan, path))


def test_guide_example_4_many_messages(tmp_path):
    rng = np.random.default_rng(99)
    messages, expected = [], {}
    for param in ["2t", "10u"]:
        for date in ["20260401", "20260402"]:
            data = rng.random((3, 4), dtype=np.float32)
            expected[param, date] = data
            messages.append(_message(({"mars": {"param": param, "date": date}}, data)))
    path = _write(tmp_path / "multi.tgm", messages)
    for options in ({}, {"variable_key": "mars.param"}):
        plan = _plan(path, **options)
        assert list(plan.variables) == ["2t", "10u"]
        assert plan.variables["2t"].dims == ("time", "dim_0", "dim_1")
        ds = _materialize(plan, path)
        _assert_no_dict_coordinates(ds)
        np.testing.assert_array_equal(ds["10u"].sel(time="2026-04-02").values,
                                      expected["10u", "20260402"])


def test_guide_example_5_heterogeneous_file(tmp_path):
    path = _write(tmp_path / "hetero.tgm", [
        _message(({"name": "temp"}, np.ones((3, 4), dtype=np.float32))),
        _message(({"name": "wind"}, np.ones((3, 4), dtype=np.float32) * 2)),
        _message(({"name": "counts"}, np.array([1, 2, 3, 4, 5], dtype=np.int32))),
    ])
    plan = _plan(path)  # one Dataset: dim_0 at two sizes names neither (obj_0 taken: the variable's name)
    assert plan.variables["temp"].dims == plan.variables["wind"].dims == ("obj_0_dim_0", "dim_1")
    assert plan.variables["counts"].dims == ("counts_dim_0",)
    assert plan.variables["counts"].dtype == np.int32
    ds = _materialize(plan, path)
    assert ds["counts"].values.tolist() == [1, 2, 3, 4, 5]
    groups = _groups(path)
    assert list(groups) == ["3x4", "5"]
    assert list(groups["3x4"].variables) == ["temp", "wind"]
    assert groups["5"].variables["counts"].dims == ("dim_0",)


def test_duplicates(tmp_path):
    meta = {"name": "t", "mars": {"step": 6}}
    path = _write(tmp_path / "dup.tgm", [
        _message((meta, _field(1))), _message((meta, _field(1))), _message((meta, _field(1))),
    ])
    with pytest.raises(TgmDuplicateError) as info:
        _plan(path)
    text = str(info.value)
    assert "variable 't' has 3 fields at the same place" in text
    assert "message 0 object 0 and message 1 object 0" in text and "duplicates='first'" in text
    assert isinstance(info.value, TgmConflictError)
    assert _plan(path, duplicates="first").variables["t"].refs == ((0, 0),)
    assert _plan(path, duplicates="last").variables["t"].refs == ((2, 0),)
    with pytest.raises(ValueError, match="duplicates must be one of"):
        _plan(path, duplicates="any")


def test_duplicates_name_their_coordinates(tmp_path):
    path = _write(tmp_path / "dup.tgm", [
        _message(({"name": "t", "mars": {"step": s}}, _field())) for s in (0, 6, 6)])
    with pytest.raises(TgmDuplicateError, match=r"2 fields at \(step=.*6"):
        _plan(path)


def test_duplicates_name_only_the_clashing_fields(tmp_path):
    # two fields clash at step 0; the field at step 6 (next on the grid) is not one of them
    path = _write(tmp_path / "dup.tgm", [
        _message(({"name": "t", "mars": {"step": s}}, _field())) for s in (0, 0, 6)])
    with pytest.raises(TgmDuplicateError) as info:
        _plan(path)
    text = str(info.value)
    assert "message 0 object 0 and message 1 object 0 have the same metadata" in text
    assert "message 2" not in text


def test_same_metadata_different_contents_stack_by_message(tmp_path):
    meta = {"name": "t", "mars": {"step": 6}}
    path = _write(tmp_path / "unlabelled.tgm", [
        _message((meta, _field(1))), _message((meta, _field(2))), _message((meta, _field(3))),
    ])
    var = _plan(path).variables["t"]
    assert var.dims[0] == "message" and var.refs == ((0, 0), (1, 0), (2, 0))
    # one byte-identical copy among them is a duplicate again
    path = _write(tmp_path / "mixed.tgm", [
        _message((meta, _field(1))), _message((meta, _field(2))), _message((meta, _field(1))),
    ])
    with pytest.raises(TgmDuplicateError):
        _plan(path)


def test_upstream_golden_multi_message_stacks_by_message():
    # Two messages with identical metadata but different values ([1, 2] and [3, 4]).
    plan = _plan(require_shared(MULTI_MESSAGE))
    var = plan.variables["object_0"]
    assert var.dims == ("message", "dim_0") and var.refs == ((0, 0), (1, 0))
    assert plan.index_coords["message"][1].tolist() == [0, 1]
    assert var.attrs == {"parameter": "pressure", "product": "efi"}


@pytest.mark.parametrize("path", shared_files("upstream/*/*.tgm"))
def test_every_upstream_fixture_opens(path):
    """Any file opens somehow: as one Dataset (keeping the first of duplicates) and as groups."""
    plan = _plan(path, duplicates="first")
    _assert_plan_consistent(plan)
    assert plan.variables
    for group in _groups(path, duplicates="first").values():
        _assert_plan_consistent(group)


def test_attributes_survive_to_netcdf(cube_file, tmp_path):
    pytest.importorskip("netCDF4")  # no wheel for free-threaded 3.13
    ds = _materialize(_plan(cube_file, filter_by_keys={"number": 1, "step": 0}), cube_file)
    for var in ds.variables.values():
        var.encoding = {}
    ds.to_netcdf(tmp_path / "cube.nc", engine="netcdf4")
    back = xr.open_dataset(tmp_path / "cube.nc", engine="netcdf4")
    assert back["t"].attrs["mars.stream"] == "enfo"
    back.close()
