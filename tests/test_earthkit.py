"""earthkit-data 1.x reads ``.tgm`` files: ``ekd.from_source("tgm", path)`` (docs/earthkit.md)."""

from __future__ import annotations

import datetime
import shutil
import tomllib

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from conftest import ENGINE, REAL, REPO, require_entry_point, require_shared

ekd = pytest.importorskip("earthkit.data", reason="earthkit-data is not installed (the `earthkit` extra)")

import tgm_xarray  # noqa: E402
from tgm_xarray import _core  # noqa: E402
from tgm_xarray.earthkit import TgmSource  # noqa: E402

GROUP = "earthkit.data.sources"


@pytest.fixture(scope="module")
def from_source():
    """``ekd.from_source("tgm", ...)`` through the installed entry point."""
    require_entry_point(GROUP, "tgm")
    return lambda *args, **kwargs: ekd.from_source("tgm", *args, **kwargs)


def test_entry_point_in_pyproject_is_the_source():
    declared = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["entry-points"][GROUP]
    module, _, name = declared["tgm"].partition(":")
    assert getattr(__import__(module, fromlist=[name]), name) is TgmSource


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
