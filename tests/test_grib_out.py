"""``.tgm`` -> GRIB 2 (``tgm_xarray.grib.to_grib``, ``convert x.tgm out.grib2``): cfgrib reads the
output back as it reads the GRIB the ``.tgm`` came from, values within the packing's bound;
fields without GRIB/MARS metadata are refused before anything is written.

Inputs: the shared GRIB 2 fields converted to ``.tgm`` by the command, windows of them written
by our writer, and the real IFS fixture (MARS and upstream's ``grib.`` keys)."""

from __future__ import annotations

import os

import numpy as np
import pytest
import xarray as xr

from tests.helpers.oracle import ENGINE
from tests.helpers.shared import FIXTURES, require_shared
from tgm_xarray.cli import main
from tgm_xarray.grib import to_grib
from tgm_xarray.writer import to_tgm

eccodes = pytest.importorskip("eccodes")
cfgrib = pytest.importorskip("cfgrib")

GRIB = FIXTURES / "upstream" / "grib"
WINDOW = {"latitude": slice(100, 140), "longitude": slice(600, 680)}
NO_INDEX = {"indexpath": ""}


def open_grib(path) -> xr.Dataset:
    return xr.open_dataset(path, engine="cfgrib", backend_kwargs=NO_INDEX).load()


def grib_keys(path, *keys: str, values: bool = False) -> list[dict]:
    """ecCodes' ``keys`` of each message (and its float64 ``values``: cfgrib gives float32)."""
    out = []
    with open(path, "rb") as f:
        while (handle := eccodes.codes_grib_new_from_file(f)) is not None:
            out.append({k: eccodes.codes_get(handle, k) for k in keys})
            if values:
                out[-1]["values"] = eccodes.codes_get_values(handle)
            eccodes.codes_release(handle)
    return out


def bound(values: np.ndarray, bits: int) -> float:
    """Simple packing's bound: (max - min) / (2**bits - 1)."""
    return float((np.nanmax(values) - np.nanmin(values)) / (2**bits - 1))


@pytest.fixture(scope="module")
def t2m_tgm(tmp_path_factory):
    """2t.grib2 (CCSDS, 12 bits) converted by the command with --bits 12."""
    require_shared(GRIB)
    path = tmp_path_factory.mktemp("grib_out") / "2t.tgm"
    assert main(["convert", str(GRIB / "2t.grib2"), str(path), "--bits", "12", "--no-progress"]) == 0
    return path


def test_round_trip_reads_back_in_cfgrib_as_the_original(t2m_tgm, tmp_path):
    out = tmp_path / "2t.grib2"
    assert to_grib(t2m_tgm, out) == 1
    original, back = open_grib(GRIB / "2t.grib2"), open_grib(out)
    assert list(back.data_vars) == list(original.data_vars) == ["t2m"]
    assert back.t2m.dims == original.t2m.dims
    assert back.t2m.attrs == original.t2m.attrs  # every GRIB_ key cfgrib reads
    assert {k: v for k, v in back.attrs.items() if k != "history"} == \
        {k: v for k, v in original.attrs.items() if k != "history"}
    for name, coord in original.coords.items():
        xr.testing.assert_identical(back[name], coord)
    with xr.open_dataset(t2m_tgm, engine=ENGINE) as tgm:
        values = tgm.t2m.values
    assert np.abs(back.t2m.values - values).max() <= bound(values, 12)
    assert grib_keys(out, "packingType", "bitsPerValue") == [{"packingType": "grid_ccsds", "bitsPerValue": 12}]


def test_upstream_mars_file_writes_every_field_with_its_level(ifs_file, tmp_path):
    """The real IFS fixture (MARS keys, upstream's ``grib.`` keys, 24-bit packing): 2t at 2 m,
    lsm on the surface, q at 150 hPa and t at 600 hPa (the hypercube's holes, q at 600 and t
    at 150, are not fields); a window of the grid."""
    out = tmp_path / "ifs.grib2"
    with xr.open_dataset(ifs_file, engine=ENGINE) as ds:
        window = ds.isel(WINDOW)
        assert to_grib(window, out) == 4
        tgm = window.load()
    keys = grib_keys(out, "shortName", "typeOfLevel", "level", "bitsPerValue", "Ni", "Nj", "dataDate", "dataType",
                     values=True)
    assert [(k["shortName"], k["typeOfLevel"], k["level"]) for k in keys] == [
        ("2t", "heightAboveGround", 2), ("lsm", "surface", 0), ("q", "isobaricInhPa", 150),
        ("t", "isobaricInhPa", 600)]
    assert {(k["bitsPerValue"], k["Ni"], k["Nj"], k["dataDate"], k["dataType"]) for k in keys} == {(24, 80, 40, 20260404, "fc")}
    for k in keys:
        source = tgm[k["shortName"]]
        if "isobaricInhPa" in source.dims:
            source = source.sel(isobaricInhPa=k["level"])
        assert np.abs(k["values"] - source.values.ravel()).max() <= bound(source.values, 24), k["shortName"]
    for back in cfgrib.open_datasets(str(out), backend_kwargs=NO_INDEX):
        np.testing.assert_array_equal(back.latitude, tgm.latitude)
        # GRIB stores 0..360; a reader may give -30 or 330 (earthkit-data, once imported, changes cfgrib's)
        np.testing.assert_array_equal(back.longitude % 360, tgm.longitude % 360)
        np.testing.assert_array_equal(back.time, tgm.time)


@pytest.fixture(scope="module")
def t2m_window():
    require_shared(GRIB)
    return open_grib(GRIB / "2t.grib2").isel(WINDOW)


@pytest.mark.parametrize("encoding, packing", [
    ({"bits": 12}, {"packingType": "grid_ccsds", "bitsPerValue": 12}),  # blosc2, the default
    ({"bits": 16, "compression": "szip"}, {"packingType": "grid_ccsds", "bitsPerValue": 16}),
    ({"bits": 16, "compression": "none"}, {"packingType": "grid_simple", "bitsPerValue": 16}),
    ({}, {"packingType": "grid_ieee", "precision": 1}),  # 32-bit floats
])
def test_packing_follows_the_tgm_field(t2m_window, tmp_path, encoding, packing):
    """Packed fields keep their bits (CCSDS, or simple where the .tgm's are uncompressed);
    others are IEEE floats, exact."""
    tgm, out = tmp_path / "w.tgm", tmp_path / "w.grib2"
    to_tgm(t2m_window, tgm, encoding={"t2m": encoding})
    to_grib(tgm, out)
    assert grib_keys(out, *packing) == [packing]
    with xr.open_dataset(tgm, engine=ENGINE) as ds:
        values = ds.t2m.values
    back = open_grib(out)
    error = np.abs(back.t2m.values - values).max()
    assert error == 0 if not encoding else error <= bound(values, encoding["bits"])
    assert back.t2m.attrs["GRIB_Nx"] == 80 and back.t2m.attrs["GRIB_paramId"] == 167


def test_nan_become_missing_points(t2m_window, tmp_path):
    ds = t2m_window.copy(deep=True)
    ds.t2m[:5, :7] = np.nan
    out = tmp_path / "holes.grib2"
    to_grib(ds, out, bits=16)
    back = open_grib(out)
    np.testing.assert_array_equal(np.isnan(back.t2m.values), np.isnan(ds.t2m.values))
    assert np.nanmax(np.abs(back.t2m.values - ds.t2m.values)) <= bound(ds.t2m.values, 16)
    assert grib_keys(out, "bitmapPresent") == [{"bitmapPresent": 1}]


def test_fields_without_metadata_are_refused_naming_what_is_missing(tmp_path):
    path = require_shared(FIXTURES / "upstream" / "golden" / "mars_metadata.tgm")
    out = tmp_path / "x.grib2"
    with pytest.raises(ValueError, match="mars_metadata.tgm: variable 'object_0' cannot be written as GRIB, "
                                         r"missing the parameter .*reference time.*level type.*latitude/longitude grid"):
        to_grib(path, out)
    assert os.listdir(tmp_path) == []  # nothing written, no temporary left


def test_one_variable_without_metadata_writes_nothing(t2m_window, tmp_path):
    ds = t2m_window.assign(other=t2m_window.t2m.drop_attrs())
    out = tmp_path / "x.grib2"
    with pytest.raises(ValueError, match="variable 'other' cannot be written as GRIB, missing the parameter"):
        to_grib(ds, out)
    assert os.listdir(tmp_path) == []


def test_cli_writes_grib_and_keeps_the_output_rules(t2m_tgm, tmp_path, capsys):
    out = tmp_path / "2t.grib2"
    assert main(["convert", str(t2m_tgm), str(out)]) == 0
    assert "wrote 1 message of 1 variable" in capsys.readouterr().out
    before = out.read_bytes()
    assert main(["convert", str(t2m_tgm), str(out)]) == 1  # exists: --force replaces it
    assert "exists: --force replaces it" in capsys.readouterr().err
    assert out.read_bytes() == before
    assert main(["convert", str(t2m_tgm), str(out), "--force", "--bits", "16"]) == 0
    assert grib_keys(out, "bitsPerValue") == [{"bitsPerValue": 16}]
    assert sorted(os.listdir(tmp_path)) == ["2t.grib2"]


def test_cli_writes_grib_from_tgm_inputs_only(tmp_path, capsys):
    """A GRIB OUTPUT after GRIB inputs is a forgotten OUTPUT.tgm: refused, the file untouched."""
    require_shared(GRIB)
    target = tmp_path / "lsm.grib2"
    target.write_bytes((GRIB / "lsm.grib2").read_bytes())
    assert main(["convert", str(GRIB / "2t.grib2"), str(target), "--force"]) == 1
    assert "convert writes GRIB from one .tgm INPUT" in capsys.readouterr().err
    assert target.read_bytes() == (GRIB / "lsm.grib2").read_bytes()


def test_without_eccodes_the_error_says_what_to_install(t2m_window, tmp_path, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "eccodes", None)  # as if not installed
    with pytest.raises(ImportError, match="writing GRIB needs ecCodes .pip install eccodes"):
        to_grib(t2m_window, tmp_path / "x.grib2")
    assert os.listdir(tmp_path) == []
