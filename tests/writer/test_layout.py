"""The writer's plan (``tgm_xarray.layout``): what every message holds, decided from metadata only.

``plan`` is checked directly (its variables, keys and messages), on Datasets built here and on the
real shared files (the IFS ``.tgm`` read back, a CF netCDF file); where a rule exists for the
reader's sake, the plan is also written with ``to_tgm`` and read back.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from tests.helpers.oracle import ENGINE
from tests.helpers.shared import NETCDF, require_shared
from tgm_xarray import _core, layout
from tgm_xarray.errors import TgmCodecError
from tgm_xarray.writer import to_tgm


def _field_bases(p: layout.DatasetPlan) -> list[dict]:
    """The ``base`` metadata of each field message's first object (its data)."""
    return [m.objects[0].base for m in p.messages() if m.field]


def _read(path) -> xr.Dataset:
    with xr.open_dataset(path, engine=ENGINE) as ds:
        return ds.load()


def _forecast() -> xr.Dataset:
    """(number, time, step, isobaricInhPa, y, x), as cfgrib reads an ensemble forecast."""
    return xr.Dataset(
        {"t": (("number", "time", "step", "isobaricInhPa", "y", "x"), np.zeros((2, 2, 3, 2, 3, 4), "float32"),
               {"units": "K", "GRIB.paramId": 130})},
        coords={"number": [0, 1], "time": pd.date_range("2026-04-04", periods=2, freq="12h"),
                "step": pd.to_timedelta([0, 6, 12], unit="h"), "isobaricInhPa": [850.0, 500.0],
                "y": [1.0, 2.0, 3.0]},
        attrs={"Conventions": "CF-1.7", "nested.key": 1})


# --------------------------------------------------------------------------------------------
# The field layout
# --------------------------------------------------------------------------------------------


def test_field_layout_stacks_mars_dimensions_into_keys():
    p = layout.plan(_forecast())
    (t,) = p.variables
    assert (t.stacked, t.inner, t.count, p.count) == (("number", "time", "step", "isobaricInhPa"), ("y", "x"), 24, 24)
    assert t.variable.dims == ("number", "time", "step", "isobaricInhPa", "y", "x")
    assert [o.name for o in t.coordinates] == ["y"]  # `x` has no coordinate
    bases = _field_bases(p)
    assert bases[0] == {"name": "t", "dim_names": ["y", "x"], "units": "K", "GRIB": {"paramId": 130},
                        "mars": {"number": 0, "date": "20260404", "time": "0000", "step": 0,
                                 "levtype": "pl", "levelist": 850.0}}
    # C order over the stacked dimensions: the last one (the level) fastest
    assert [b["mars"]["levelist"] for b in bases[:4]] == [850.0, 500.0, 850.0, 500.0]
    assert bases[-1]["mars"] == {"number": 1, "date": "20260404", "time": "1200", "step": 12,
                                 "levtype": "pl", "levelist": 500.0}
    # coordinates without attributes read back without cfgrib's
    assert p.extra == {"Conventions": "CF-1.7", "nested": {"key": 1}, "coordinate_attrs": dict.fromkeys(
        ("number", "time", "step", "isobaricInhPa"), {})}
    assert [m.at for m in p.messages()][1] == (("", "t"), ("number", '{"mars": {"number": 0}}'),
                                                ("time", '{"mars": {"date": "20260404", "time": "0000"}}'),
                                                ("step", '{"mars": {"step": 0}}'),
                                                ("isobaricInhPa", '{"mars": {"levelist": 500.0, "levtype": "pl"}}'))


def test_variable_layout_writes_one_message_per_variable():
    ds = _forecast().assign(z=(("y", "x"), np.ones((3, 4))))
    p = layout.plan(ds, layout="variable")
    assert [(v.name, v.stacked, v.count) for v in p.variables] == [("t", (), 1), ("z", (), 1)]
    assert p.count == 2 and not p.auxiliary
    t, z = p.messages()
    # each message holds its variable and the coordinates of its dimensions
    assert [o.name for o in t.objects] == ["t", "number", "time", "step", "isobaricInhPa", "y"]
    assert [o.name for o in z.objects] == ["z", "y"]
    assert t.objects[0].variable.dims == ("number", "time", "step", "isobaricInhPa", "y", "x")


@pytest.mark.parametrize(("step", "keys"), [
    ("6h", 6), ("30min", "30m"), ("90s", "90.000000000s"), ("1500ms", "1.500000000s"),
])
def test_step_keys_hold_hours_minutes_or_seconds(step, keys, tmp_path):
    """MARS steps are hours; finer steps are written with a unit the reader decodes back."""
    ds = xr.Dataset({"v": (("step", "y", "x"), np.zeros((2, 2, 2)))},
                    coords={"step": pd.to_timedelta(["0h", step])})
    assert [b["mars"]["step"] for b in _field_bases(layout.plan(ds))] == [0, keys]
    to_tgm(ds, tmp_path / "s.tgm")
    assert (_read(tmp_path / "s.tgm").step.values == ds.step.values).all()


def test_times_off_the_minute_are_iso_keys(tmp_path):
    times = np.array(["2026-04-04T00:00", "2026-04-04T00:00:01.5"], dtype="datetime64[ns]")
    ds = xr.Dataset({"v": (("time", "y", "x"), np.zeros((2, 2, 2)))}, coords={"time": times})
    bases = _field_bases(layout.plan(ds))
    assert bases[0]["mars"] == {"date": "20260404", "time": "0000"}
    assert bases[1]["time"] == "2026-04-04T00:00:01.500000000" and "mars" not in bases[1]
    to_tgm(ds, tmp_path / "t.tgm")
    assert (_read(tmp_path / "t.tgm").time.values == ds.time.values).all()


def test_generic_dimensions_are_plain_keys_and_keep_their_attributes():
    ds = xr.Dataset({"v": (("member", "y", "x"), np.zeros((3, 2, 2)))},
                    coords={"member": ("member", ["a", "b", "c"], {"long_name": "ensemble member"})})
    p = layout.plan(ds)
    assert [b["member"] for b in _field_bases(p)] == ["a", "b", "c"]
    assert p.extra == {"coordinate_attrs": {"member": {"long_name": "ensemble member"}}}


def test_scalar_coordinates_become_keys_and_others_go_to_a_trailing_message():
    ds = xr.Dataset({"v": (("y", "x"), np.zeros((2, 3)))},
                    coords={"step": np.timedelta64(6, "h"), "surface": 0, "label_id": 7,
                            "lat2d": (("y", "x"), np.ones((2, 3)))})
    p = layout.plan(ds)
    (base,) = _field_bases(p)
    assert base["mars"] == {"step": 6, "levtype": "sfc"}
    assert base["coordinates"] == "label_id lat2d"  # named for the reader
    assert [o.name for o in p.auxiliary] == ["label_id", "lat2d"]
    assert not list(p.messages())[-1].field


def test_field_dims_pick_the_dimensions_of_a_field(tmp_path):
    """Stacked dimensions come first on read; ``field_dims`` picks the field's dimensions."""
    ds = xr.Dataset({"v": (("y", "x", "member"), np.arange(24.0).reshape(2, 3, 4))},
                    coords={"member": [1, 2, 3, 4]})
    (v,) = layout.plan(ds, field_dims=("y", "x")).variables
    assert (v.stacked, v.inner, v.count) == (("member",), ("y", "x"), 4)
    with pytest.warns(UserWarning, match="dimension 'y' stays inside each field .* it has no coordinate"):
        (default,) = layout.plan(ds).variables  # the last two dimensions that are not MARS ones
    assert (default.stacked, default.inner) == ((), ("y", "x", "member"))
    to_tgm(ds, tmp_path / "t.tgm", field_dims=("y", "x"))
    assert len(_core.FileHandle(str(tmp_path / "t.tgm"))) == 4
    xr.testing.assert_identical(_read(tmp_path / "t.tgm"), ds.transpose("member", "y", "x"))


def test_dimensions_that_cannot_be_stacked_stay_in_the_field(tmp_path):
    """A dimension the reader could not rebuild from keys stays inside every message (with a
    warning, as messages then grow): here durations under a name other than ``step``, and
    values sorted neither way. (Times under any name are stacked as ISO 8601 keys.)"""
    ds = xr.Dataset({"v": (("lead", "level", "y", "x"), np.zeros((2, 3, 3, 4)))},
                    coords={"lead": pd.to_timedelta([0, 6], unit="h"), "level": [850, 1000, 500]})
    with pytest.warns(UserWarning) as record:
        p = layout.plan(ds)
    assert sorted(str(w.message).split("'")[1] for w in record) == ["lead", "level"]
    assert "durations from keys only for 'step'" in str(record[0].message) + str(record[1].message)
    assert p.count == 1 and p.variables[0].inner == ("lead", "level", "y", "x")
    with pytest.warns(UserWarning):
        to_tgm(ds, tmp_path / "t.tgm")
    xr.testing.assert_identical(_read(tmp_path / "t.tgm"), ds)


def test_plan_reads_no_values():
    """The plan slices fields lazily: building it and walking its messages computes nothing."""
    da = pytest.importorskip("dask.array")
    computed = []

    def block(x):
        computed.append(1)
        return x

    values = da.zeros((4, 3, 5), chunks=(1, 3, 5)).map_blocks(block, dtype="float64")
    ds = xr.Dataset({"v": (("step", "y", "x"), values)}, coords={"step": pd.to_timedelta(range(4), unit="h")})
    before = len(computed)  # (dask may call `block` on an empty array for its meta)
    fields = [m.objects[0].variable for m in layout.plan(ds).messages()]
    assert len(fields) == 4 and len(computed) == before
    assert fields[2].shape == (3, 5) and fields[2].chunks is not None


# --------------------------------------------------------------------------------------------
# Real files
# --------------------------------------------------------------------------------------------


def test_plan_of_the_real_ifs_file_gives_back_its_mars_keys(ifs_file):
    """The IFS file read and planned again: each of its fields is a field of the plan, with the
    file's own MARS keys and GRIB attributes, and its pipeline (24-bit packing, szip)."""
    import tgm_xarray

    with tgm_xarray.open_file(ifs_file) as f:
        original = [f.metadata(m)["base"][0] for m in range(len(f))]
    with xr.open_dataset(ifs_file, engine=ENGINE) as ds:
        p = layout.plan(ds)
        params = {name: ds[name].encoding["tensogram_params"] for name in ds.data_vars}
    # q and t are on a union of levels (600, 150) with a hole each: the plan has 6 fields
    planned = {(b["name"], b["mars"].get("levelist")): b for b in _field_bases(p)}
    assert len(planned) == 6
    for base in original:
        got = planned[base["name"], base["mars"].get("levelist")]
        assert got["mars"] == base["mars"], base["name"]
        assert got["GRIB_paramId"] == base["grib"]["paramId"]
    for v in p.variables:
        szip = {k: params[v.name][k] for k in ("szip_rsi", "szip_block_size", "szip_flags")}
        assert v.codec.pipeline.options() == {"encoding": "simple_packing", "bits_per_value": 24,
                                              "decimal_scale_factor": 0, "filter": "none",
                                              "compression": "szip", **szip}, v.name


def test_plan_of_a_packed_cf_netcdf_file():
    """netCDF int16 scale/offset packing is kept as 16-bit simple packing, CF times become MARS
    date and time keys, and the CF ``time`` attributes travel to the reader."""
    pytest.importorskip("netCDF4")  # no free-threaded wheel
    with xr.open_dataset(require_shared(NETCDF / "cf_temperature.nc")) as ds:
        p = layout.plan(ds)
    (t,) = p.variables
    assert (t.stacked, t.inner, t.codec.pipeline.bits_per_value) == (("time",), ("lat", "lon"), 16)
    assert [b["mars"] for b in _field_bases(p)] == [
        {"date": f"202001{d:02d}", "time": "0000"} for d in (1, 2, 3)]
    assert p.extra["coordinate_attrs"] == {"time": {"standard_name": "time", "axis": "T"}}


# --------------------------------------------------------------------------------------------
# What plan refuses or leaves out
# --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("ds", "options", "message"), [
    (xr.Dataset({"v": ("x", [1.0])}), {"layout": "grib"}, "layout must be one of"),
    (xr.Dataset({"v": ("x", [1.0])}), {"encoding": {"w": {}}}, "encoding names 'w'"),
    (xr.Dataset({1: ("x", [1.0])}), {}, "variable names must be strings"),
    # A dimension without a coordinate too: its name goes in dim_names, and the reader drops a
    # list holding a number (the axes came back as dim_0, dim_1, 'x' lost as well).
    (xr.Dataset({"v": ((0, "x"), [[1.0]])}), {}, "dimension names must be strings to be written, got 0"),
    (xr.Dataset({"v": ((0, "x"), [[1.0]])}), {"layout": "variable"}, "dimension names must be strings"),
    (xr.Dataset(), {}, "the Dataset has no variables"),
])
def test_bad_plans_raise_value_errors(ds, options, message):
    with pytest.raises(ValueError, match=message):
        layout.plan(ds, **options)


def test_text_variables_are_left_out_with_a_warning():
    ds = xr.Dataset({"v": ("x", [1.0, 2.0]), "station": ("x", ["a", "b"])})
    with pytest.warns(UserWarning, match=r"\['station'\] hold text"):
        p = layout.plan(ds)
    assert [v.name for v in p.variables] == ["v"]
    with pytest.warns(UserWarning), pytest.raises(ValueError, match="only text variables"):
        layout.plan(xr.Dataset({"station": ("x", ["a", "b"])}))


def test_unstorable_values_and_encodings_raise_codec_errors():
    with pytest.raises(TgmCodecError, match="Tensogram stores numbers, not object values"):
        layout.plan(xr.Dataset({"v": ("x", np.array([{"a": 1}, None], dtype=object))}))
    with pytest.raises(TgmCodecError, match="zstd_level must be an integer from -131072 to 22; got 99") as info:
        layout.plan(xr.Dataset({"v": ("x", [1.0])}), encoding={"v": {"zstd_level": 99}})
    assert info.value.__notes__ == ["in the encoding of variable 'v'"]


def test_times_and_booleans_are_cf_encoded_numbers():
    ds = xr.Dataset({"when": ("x", pd.date_range("2026-01-01", periods=3)), "ok": ("x", [True, False, True])})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        p = layout.plan(ds, layout="variable")
    when, ok = p.variables
    assert when.variable.dtype.kind in "iu" and when.variable.attrs["units"].startswith("days since 2026-01-01")
    assert ok.variable.dtype == np.dtype("int8") and ok.variable.attrs["dtype"] == "bool"


# --------------------------------------------------------------------------------------------
# Metadata helpers
# --------------------------------------------------------------------------------------------


def test_merge_nests_one_level():
    base = {"name": "t", "mars": {"class": "od"}}
    assert layout.merge(base, {"mars": {"step": 6}, "units": "K"}) == \
        {"name": "t", "mars": {"class": "od", "step": 6}, "units": "K"}
    assert layout.merge(base, {"mars": "flat"}) == {"name": "t", "mars": "flat"}
    assert base == {"name": "t", "mars": {"class": "od"}}  # not changed


def test_to_metadata_gives_cbor_friendly_values():
    got = layout.to_metadata({"a": np.arange(3, dtype="int16"), 5: np.float32(0.25), "b": (np.int8(1), "x"),
                              "raw": b"\x01", "none": None, "other": 1j})
    assert got == {"a": [0, 1, 2], "5": 0.25, "b": [1, "x"], "raw": b"\x01", "none": None, "other": "1j"}
    assert type(got["a"][0]) is int and type(got["5"]) is float


def test_date_and_duration_attributes_are_written_as_iso_text(tmp_path):
    """Attributes holding numpy dates: a day-resolution one used to fail the write (a
    ``datetime.date`` is not CBOR), a nanosecond one came back as a bare integer."""
    attrs = {"analysis": np.datetime64("2026-04-04", "D"), "valid": np.datetime64("2026-04-04T06", "ns"),
             "steps": np.array([0, 6], "m8[h]")}
    ds = xr.Dataset({"t": (("y", "x"), np.zeros((2, 3)), attrs)})
    to_tgm(ds, tmp_path / "t.tgm")
    with xr.open_dataset(tmp_path / "t.tgm", engine=ENGINE) as back:
        got = {k: back["t"].attrs[k] for k in attrs}
    assert got == {"analysis": "2026-04-04", "valid": "2026-04-04T06:00:00.000000000",
                   "steps": ["0 hours", "6 hours"]}


def test_unflatten_nests_dotted_keys_unless_they_clash():
    assert layout.unflatten({"mars.class": "od", "mars.step": 6, "units": "K"}) == \
        {"mars": {"class": "od", "step": 6}, "units": "K"}
    # `a` is a value and a map: the dotted key stays as it is; empty parts are not split
    assert layout.unflatten({"a": 1, "a.b": 2, "x..y": 3, ".z": 4}) == {"a": 1, "a.b": 2, "x..y": 3, ".z": 4}
    assert layout.unflatten({"g.a": 1, "g": {"b": 2}}) == {"g": {"a": 1, "b": 2}}
