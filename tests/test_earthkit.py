"""earthkit-data 1.x reads and writes ``.tgm`` files: ``ekd.from_source("tgm", path)``,
``data.to_target("tgm", path)`` (docs/earthkit.md)."""

from __future__ import annotations

import datetime
import os
import shutil
import tomllib

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from tests.helpers.oracle import ENGINE
from tests.helpers.shared import FIXTURES, REAL, REPO, require_entry_point, require_shared

ekd = pytest.importorskip("earthkit.data", reason="earthkit-data is not installed (the `earthkit` extra)")

import tgm_xarray  # noqa: E402
from tgm_xarray import _core  # noqa: E402
from tgm_xarray.earthkit import TgmEncoder, TgmSource, TgmTarget  # noqa: E402

GROUP = "earthkit.data.sources"
PLUGINS = {"earthkit.data.sources": TgmSource, "earthkit.data.targets": TgmTarget,
           "earthkit.data.encoders": TgmEncoder}
GRIB = FIXTURES / "upstream" / "grib"


@pytest.fixture(scope="module")
def from_source():
    """``ekd.from_source("tgm", ...)`` through the installed entry point."""
    require_entry_point(GROUP, "tgm")
    return lambda *args, **kwargs: ekd.from_source("tgm", *args, **kwargs)


def _declared() -> dict[str, dict[str, str]]:
    return tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["entry-points"]


@pytest.mark.parametrize("group", PLUGINS)
def test_entry_points_in_pyproject_are_the_plugins(group):
    module, _, name = _declared()[group]["tgm"].partition(":")
    assert getattr(__import__(module, fromlist=[name]), name) is PLUGINS[group]


def test_ifs_fields_are_the_engines_values(from_source, ifs_file):
    data = from_source(ifs_file)
    fields = data.to_fieldlist()
    assert len(fields) == 4
    assert fields.get("parameter.variable") == ["2t", "lsm", "q", "t"]
    with xr.open_dataset(ifs_file, engine=ENGINE) as ds:
        for field in fields:
            expected = ds[field.get("parameter.variable")]
            if "isobaricInhPa" in expected.dims:
                expected = expected.sel(isobaricInhPa=field.get("vertical.level"))
            np.testing.assert_array_equal(field.to_numpy(), expected.values)
        assert data.to_numpy().shape == fields.to_numpy().shape == (4, 721, 1440)
        lat, lon = fields[0].geography.latlons()
        np.testing.assert_array_equal(lat[:, 0], ds.latitude.values)
        np.testing.assert_array_equal(lon[0], ds.longitude.values)


def test_ifs_mars_keys(from_source, ifs_file):
    fields = from_source(ifs_file).to_fieldlist()
    assert fields.get("vertical.level") == [None, None, 150, 600]
    assert fields.get("vertical.level_type") == ["surface", "surface", "pressure", "pressure"]
    assert fields.get("time.base_datetime") == [datetime.datetime(2026, 4, 4)] * 4
    assert fields.get("time.step") == [datetime.timedelta(0)] * 4
    assert str(fields[0].get("parameter.units")) == "kelvin"
    # Every stored key is a label under its dotted name.
    assert fields.get("labels.mars.param") == ["2t", "lsm", "q", "t"]
    assert fields.get("labels.grib.paramId") == [167, 172, 133, 130]
    assert fields[0].shape == (721, 1440)


def test_fields_are_decoded_when_asked_for(from_source, ifs_file):
    before = _core.decoded_elements()
    fields = from_source(ifs_file).to_fieldlist()
    assert _core.decoded_elements() - before == 721 + 1440  # the grid, read once for all fields
    before = _core.decoded_elements()
    fields.sel({"parameter.variable": "q"})[0].to_numpy()
    assert _core.decoded_elements() - before == 721 * 1440


def test_sel_and_order_by(from_source, ifs_file):
    fields = from_source(ifs_file).to_fieldlist()
    upper = fields.sel({"vertical.level_type": "pressure"})
    assert upper.get("parameter.variable") == ["q", "t"]
    assert fields.sel({"labels.mars.levelist": 600}).get("parameter.variable") == ["t"]
    assert fields.order_by({"vertical.level": "descending"}).get("parameter.variable")[:2] == ["t", "q"]


def test_to_xarray_is_the_engines_hypercube(from_source, ifs_file):
    data = from_source(ifs_file)
    with xr.open_dataset(ifs_file, engine=ENGINE) as expected, data.to_xarray() as actual:
        xr.testing.assert_identical(actual, expected)
    with data.to_xarray(filter_by_keys={"levtype": "pl"}) as upper:
        assert sorted(upper.data_vars) == ["q", "t"]


def _ensemble() -> xr.Dataset:
    rng = np.random.default_rng(0)
    lat, lon = np.array([50.0, 49.5, 49.0]), np.array([0.0, 0.5, 1.0, 1.5])
    return xr.Dataset(
        {"t": (("number", "step", "isobaricInhPa", "latitude", "longitude"), rng.normal(250, 5, (2, 2, 2, 3, 4)),
               {"units": "K"}),
         "soil": (("level", "latitude", "longitude"), rng.random((2, 3, 4)))},
        coords={"number": [0, 1], "time": np.datetime64("2026-04-04T12:00", "ns"),
                "step": pd.to_timedelta([0, 6], unit="h"), "isobaricInhPa": [850, 500], "level": [1, 2],
                "latitude": lat, "longitude": lon},
    )


def test_members_steps_and_levels_of_a_written_file(from_source, tmp_path):
    ds = _ensemble()
    tgm_xarray.to_tgm(ds, tmp_path / "ens.tgm")
    fields = from_source(tmp_path / "ens.tgm").to_fieldlist()
    t = fields.sel({"parameter.variable": "t"})
    assert len(t) == 8 and len(fields) == 10
    for field in t:
        expected = ds.t.sel(number=int(field.get("ensemble.member")), step=field.get("time.step"),
                            isobaricInhPa=field.get("vertical.level"))
        np.testing.assert_array_equal(field.to_numpy(), expected.values)
        assert field.get("time.base_datetime") == datetime.datetime(2026, 4, 4, 12)
        assert field.get("vertical.level_type") == "pressure"
    # A level of no MARS level type keeps its value, of an unknown type.
    soil = fields.sel({"parameter.variable": "soil"})
    assert soil.get("vertical.level") == [1, 2]
    assert soil.get("vertical.level_type") == ["unknown", "unknown"]
    np.testing.assert_array_equal(soil.to_numpy(), ds.soil.values)


def test_url(from_source, range_server):
    shutil.copyfile(require_shared(REAL / "ifs-0p25-20260404.tgm"), range_server.root / "ifs.tgm")
    pytest.importorskip("aiohttp")
    fields = from_source(range_server.url("ifs.tgm")).to_fieldlist()
    assert fields.get("parameter.variable") == ["2t", "lsm", "q", "t"]
    with xr.open_dataset(REAL / "ifs-0p25-20260404.tgm", engine=ENGINE) as ds:
        np.testing.assert_array_equal(fields[0].to_numpy(), ds["2t"].values)


def test_bad_input_fails_at_from_source_naming_the_file(from_source, tmp_path):
    with pytest.raises(FileNotFoundError, match="missing.tgm"):
        from_source(tmp_path / "missing.tgm")
    (tmp_path / "text.tgm").write_text("not a tensogram file\n")
    with pytest.raises(tgm_xarray.TgmFormatError, match="text.tgm"):
        from_source(tmp_path / "text.tgm")


# Writing: ``to_target("tgm", path)``.


@pytest.fixture
def declared_plugins(tmp_path, monkeypatch):
    """earthkit's plugin lookup finding pyproject.toml's entry points, as after a reinstall: a
    distribution of that name first on ``sys.path``, holding all of them (the xarray engine's
    too), shadows the installed one."""
    dist = tmp_path / "site" / "tgm_xarray-0.dist-info"
    dist.mkdir(parents=True)
    (dist / "entry_points.txt").write_text("".join(
        f"[{group}]\n" + "".join(f"{k} = {v}\n" for k, v in entries.items()) + "\n"
        for group, entries in _declared().items()))
    # Metadata too: the distribution shadows the installed one for importlib.metadata as well.
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: tgm-xarray\nVersion: {tgm_xarray.__version__}\n")
    monkeypatch.syspath_prepend(str(dist.parent))


def test_targets_and_encoders_by_name(declared_plugins, tmp_path):
    target = ekd.create_target("tgm", tmp_path / "named.tgm")
    assert isinstance(target, TgmTarget)
    target.close()
    assert not (tmp_path / "named.tgm").exists()  # a target never written to writes nothing
    from earthkit.data.encoders import create_encoder

    assert isinstance(create_encoder("tgm"), TgmEncoder)
    ds = _ensemble()
    ekd.to_target("tgm", tmp_path / "ens.tgm", data=ds)
    tgm_xarray.to_tgm(ds, tmp_path / "to_tgm.tgm")
    with xr.open_dataset(tmp_path / "ens.tgm", engine=ENGINE) as back, \
            xr.open_dataset(tmp_path / "to_tgm.tgm", engine=ENGINE) as expected:
        xr.testing.assert_identical(back, expected)


def test_installed_target(tmp_path):
    require_entry_point("earthkit.data.targets", "tgm")
    require_entry_point("earthkit.data.encoders", "tgm")
    ekd.from_source("file", require_shared(GRIB / "2t.grib2")).to_target("tgm", tmp_path / "2t.tgm")
    with xr.open_dataset(tmp_path / "2t.tgm", engine=ENGINE) as ds:
        assert list(ds.data_vars) == ["t2m"]


def test_grib_fields_are_what_convert_writes(tmp_path):
    inputs = [require_shared(GRIB / "2t.grib2")]
    ekd.from_source("file", [str(p) for p in inputs]).to_fieldlist().to_target(TgmTarget(tmp_path / "ekd.tgm"))
    assert tgm_xarray.cli.main(["convert", *map(str, inputs), str(tmp_path / "cli.tgm")]) == 0
    with xr.open_dataset(tmp_path / "ekd.tgm", engine=ENGINE) as ours, \
            xr.open_dataset(tmp_path / "cli.tgm", engine=ENGINE) as converted, \
            xr.open_dataset(inputs[0], engine="cfgrib", backend_kwargs={"indexpath": ""}) as grib:
        xr.testing.assert_identical(ours, converted)
        np.testing.assert_array_equal(ours.t2m.values, grib.t2m.values)  # lossless by default
        assert {k: v for k, v in ours.t2m.attrs.items() if k.startswith("GRIB_")} == \
            {k: v for k, v in grib.t2m.attrs.items() if k.startswith("GRIB_")}
        assert ours.t2m.attrs["GRIB_paramId"] == 167
    assert sorted(os.listdir(tmp_path)) == ["cli.tgm", "ekd.tgm"]


def test_tgm_fields_read_back_as_they_were_read(ifs_file, tmp_path):
    data = ekd.from_source("tgm", ifs_file)
    data.to_fieldlist().sel({"vertical.level_type": "pressure"}).to_target(TgmTarget(tmp_path / "pl.tgm"))
    with xr.open_dataset(ifs_file, engine=ENGINE) as ds, xr.open_dataset(tmp_path / "pl.tgm", engine=ENGINE) as back:
        assert sorted(back.data_vars) == ["q", "t"]
        expected = ds[["q", "t"]]
        xr.testing.assert_equal(back, expected.drop_vars(["heightAboveGround", "surface"]))
        for name in ("q", "t"):
            # The file's own attributes (``ds.attrs``) become each field's: a field has no others.
            assert back[name].attrs == {**ds.attrs, **expected[name].attrs}
        assert back.t.attrs["GRIB_paramId"] == 130
        assert back.latitude.attrs == expected.latitude.attrs


def test_members_steps_and_levels_come_back(tmp_path):
    ds = _ensemble()
    tgm_xarray.to_tgm(ds, tmp_path / "ens.tgm")
    fields = ekd.from_source("tgm", tmp_path / "ens.tgm").to_fieldlist()
    fields.to_target(TgmTarget(tmp_path / "again.tgm"))
    with xr.open_dataset(tmp_path / "ens.tgm", engine=ENGINE) as before, \
            xr.open_dataset(tmp_path / "again.tgm", engine=ENGINE) as after:
        xr.testing.assert_equal(after, before)
        for name in before.data_vars:
            assert after[name].attrs == before[name].attrs
        # Coordinates made of keys get the engine's attributes: a field's labels hold no others.
        assert after.isobaricInhPa.attrs["units"] == "hPa" and before.isobaricInhPa.attrs == {}


def test_source_data_is_the_engines_dataset(ifs_file, tmp_path):
    ekd.from_source("tgm", ifs_file).to_target(TgmTarget(tmp_path / "copy.tgm"))
    with xr.open_dataset(ifs_file, engine=ENGINE) as ds, xr.open_dataset(tmp_path / "copy.tgm", engine=ENGINE) as copy:
        xr.testing.assert_identical(copy, ds)


def test_append_and_several_writes_make_one_file(tmp_path):
    fields = ekd.from_source("file", [str(require_shared(GRIB / "2t.grib2")), str(GRIB / "lsm.grib2")]).to_fieldlist()
    with TgmTarget(tmp_path / "two.tgm") as target:
        target.write(fields.sel({"parameter.variable": "2t"}))
        assert not (tmp_path / "two.tgm").exists()  # in place when the target closes
        target.write(fields.sel({"parameter.variable": "lsm"}))
    fields.sel({"parameter.variable": "2t"}).to_target(TgmTarget(tmp_path / "one.tgm"))
    fields.sel({"parameter.variable": "lsm"}).to_target(TgmTarget(tmp_path / "one.tgm", append=True))
    with xr.open_dataset(tmp_path / "two.tgm", engine=ENGINE) as two, \
            xr.open_dataset(tmp_path / "one.tgm", engine=ENGINE) as one:
        assert sorted(two.data_vars) == ["lsm", "t2m"]
        xr.testing.assert_identical(one, two)


def test_a_failed_write_leaves_the_target_as_it_was(tmp_path):
    target = tmp_path / "kept.tgm"
    target.write_bytes(b"old")
    fields = ekd.from_source("file", str(require_shared(GRIB / "2t.grib2"))).to_fieldlist()
    with pytest.raises(tgm_xarray.TgmCodecError):
        fields.to_target(TgmTarget(target, encoding={"t2m": {"bits_per_value": 99}}))
    with pytest.raises(RuntimeError, match="stop"), TgmTarget(target) as t:
        t.write(fields)
        raise RuntimeError("stop")
    assert target.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["kept.tgm"]


def test_the_file_target_never_writes_tgm_fields_as_grib(ifs_file, tmp_path):
    fields = ekd.from_source("tgm", ifs_file).to_fieldlist()
    # earthkit's file target finds no encoder for fields that are not GRIB, and refuses.
    with pytest.raises(ValueError, match="Cannot determine encoder type"):
        fields.to_target("file", tmp_path / "x.tgm")
    # Ours serves its own target only: the file target writes in place.
    with pytest.raises(ValueError, match=r"to_target\('tgm', path\)"):
        fields.to_target("file", tmp_path / "x.tgm", encoder=TgmEncoder())
    assert os.listdir(tmp_path) == []


def test_the_file_target_writes_grib_fields_as_grib_whatever_the_name(tmp_path):
    # earthkit picks the encoder of a file name from a table of its own (docs/earthkit.md): a
    # GRIB field list gets GRIB bytes under any other name. Were it to change, the docs must.
    ekd.from_source("file", str(require_shared(GRIB / "2t.grib2"))).to_target("file", tmp_path / "x.tgm")
    assert (tmp_path / "x.tgm").read_bytes()[:4] == b"GRIB"
    # What no plugin can refuse at the write is refused at the open, saying what happened.
    with pytest.raises(tgm_xarray.TgmFormatError, match=r"x\.tgm: not a Tensogram file: it is GRIB .*"
                                                      r"write \.tgm with to_target\(\"tgm\", \.\.\.\)"):
        xr.open_dataset(tmp_path / "x.tgm", engine=ENGINE)
