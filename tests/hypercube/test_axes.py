"""cfgrib dimensions and coordinates from metadata values (``tgm_xarray.hypercube.axes``): a
generated cube written shuffled, unions of levels, times, NaN among coordinate values.

Files are read with upstream ``tensogram`` (metadata only, through ``decode_descriptors``) and
written with ``tensogram.encode``; ``_materialize`` decodes the planned fields with upstream too,
so every test that checks values also proves xarray accepts the layout.
"""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

tensogram = pytest.importorskip("tensogram")

from tests.helpers.hypercube import (  # noqa: E402
    LAT,
    PARAMS,
    _assert_plan_consistent,
    _code,
    _field,
    _Fingerprint,
    _materialize,
    _message,
    _plan,
    _table,
    _write,
)
from tgm_xarray.hypercube import (  # noqa: E402  # noqa: E402
    build_hypercube,
)


def test_cube_dims_and_coordinates(cube_file):
    fingerprint = _Fingerprint(cube_file)
    plan = build_hypercube(_table(cube_file), source=str(cube_file),
                           fingerprint=fingerprint)
    _assert_plan_consistent(plan)
    dims = ("number", "time", "step", "isobaricInhPa", "latitude", "longitude")
    for p in PARAMS:
        var = plan.variables[p]
        assert var.dims == dims and var.shape == (2, 4, 3, 5, 3, 4)
        assert (var.fields >= 0).all() and len(var.refs) == 120
        assert "message_index" not in var.encoding
        assert var.encoding["preferred_chunks"] == dict(zip(dims, (1, 1, 1, 1, 3, 4)))
        assert var.attrs["mars.type"] == "pf" and "mars.number" not in var.attrs
    c = plan.index_coords
    assert c["number"][0] == ("number",) and c["number"][1].tolist() == [1, 2]
    assert c["time"][1].tolist() == [np.datetime64(f"2026-04-0{d}T12:00", "ns").item()
                                     for d in range(1, 5)]
    assert c["step"][1].astype("timedelta64[h]").astype(int).tolist() == [0, 6, 12]
    assert c["isobaricInhPa"][1].tolist() == [1000, 850, 500, 300, 100]
    vt_dims, vt, vt_attrs = c["valid_time"]
    assert vt_dims == ("time", "step") and vt.shape == (4, 3) and vt_attrs["standard_name"] == "time"
    assert vt[1, 2] == np.datetime64("2026-04-03T00:00", "ns")
    assert plan.coord_names == {"latitude", "longitude"}
    # every message carries the same latitude/longitude: shared once, compared by fingerprint
    assert fingerprint.calls == 2 * 240
    assert plan.attrs == {"producer": "test-suite"}


def test_cube_every_value_in_place(cube_file):
    plan = _plan(cube_file)
    ds = _materialize(plan, cube_file)
    grid = np.arange(12).reshape(3, 4) / 100
    for p_index, p in enumerate(PARAMS):
        codes = np.zeros((2, 4, 3, 5))
        for idx in np.ndindex(codes.shape):
            m, d, s, lev = idx
            codes[idx] = _code(p_index, d, s, lev, m)
        np.testing.assert_array_equal(ds[p].values, codes[..., None, None] + grid)
    # label-based selection agrees with the metadata of the selected message
    value = ds["q"].sel(number=2, time="2026-04-02T12:00", step=np.timedelta64(6, "h"),
                        isobaricInhPa=300, latitude=0.0, longitude=90.0)
    assert float(value) == _code(1, 1, 1, 3, 1) + 0.05
    np.testing.assert_array_equal(ds["latitude"].values, LAT)


def test_cube_is_independent_of_message_order(cube_file, tmp_path):
    with tensogram.TensogramFile.open(str(cube_file)) as f:
        raw = [f.read_message(i) for i in range(len(f))]
    reordered = tmp_path / "reordered.tgm"
    reordered.write_bytes(b"".join(reversed(raw)))
    a, b = _plan(cube_file), _plan(reordered)
    assert a.variables["t"].dims == b.variables["t"].dims
    for name, (dims, values, _) in a.index_coords.items():
        assert b.index_coords[name][0] == dims
        np.testing.assert_array_equal(b.index_coords[name][1], values)
    n = len(raw)
    assert [(n - 1 - m, o) for m, o in a.variables["t"].refs] == list(b.variables["t"].refs)


def test_union_of_levels_and_dtype_promotion(tmp_path):
    """t on 500/850, q on 850/1000 (int32 with a hole -> float64), t mixing float32/float64."""
    messages = []
    for name, level, dtype in [("t", 500, "float32"), ("t", 850, "float64"),
                               ("q", 850, "int32"), ("q", 1000, "int32")]:
        meta = {"name": name, "mars": {"levtype": "pl", "levelist": level}}
        messages.append(_message((meta, _field(level, dtype=dtype))))
    path = _write(tmp_path / "union.tgm", messages)
    plan = _plan(path)
    _assert_plan_consistent(plan)
    assert plan.index_coords["isobaricInhPa"][1].tolist() == [1000, 850, 500]
    # refs are numbered in grid order
    assert plan.variables["t"].fields.tolist() == [-1, 0, 1]
    assert plan.variables["t"].refs == ((1, 0), (0, 0))
    assert plan.variables["q"].fields.tolist() == [0, 1, -1]
    assert plan.variables["q"].refs == ((3, 0), (2, 0))
    assert plan.variables["t"].dtype == np.float64
    assert plan.variables["q"].dtype == np.float64  # int with a hole
    assert plan.variables["q"].encoding["tensogram_dtype"] == "int32"
    assert "tensogram_dtype" not in plan.variables["t"].encoding
    ds = _materialize(plan, path)
    assert ds["q"].sel(isobaricInhPa=1000).values.tolist()[0][0] == 1000.0
    assert np.isnan(ds["q"].sel(isobaricInhPa=500)).all()
    # without a hole an int variable stays int
    plan = _plan(path, filter_by_keys={"name": "q"})
    assert plan.variables["q"].dtype == np.int32


def test_undecodable_time_falls_back_to_plain_keys(tmp_path):
    """Dates MARS conventions cannot decode (test_mars) leave the keys plain keys."""
    path = _write(tmp_path / "rel.tgm", [
        _message(({"name": "t", "mars": {"date": d}}, _field())) for d in ("-1", "-2")])
    plan = _plan(path)
    assert plan.variables["t"].dims == ("mars.date", "dim_0", "dim_1")
    assert plan.index_coords["mars.date"][1].tolist() == ["-1", "-2"]


# --------------------------------------------------------------------------------------------
# NaN among coordinate values: one label, last, the same in every process and from an index
# --------------------------------------------------------------------------------------------


_NAN = float("nan")

# Prints the coordinates and values of a file opened cold (`False`) or through the index cache.
_OPEN_AND_PRINT = """
import sys, warnings
import xarray as xr
warnings.simplefilter("ignore")
index = {"False": False}.get(sys.argv[2], sys.argv[2])
for path in sys.argv[1].split(","):
    ds = xr.open_dataset(path, engine="tgm", index=index)
    for name in sorted(ds.variables):
        print(name, ds[name].dims, ds[name].values.tolist())
"""


@pytest.fixture(scope="module")
def nan_files(tmp_path_factory):
    """A level NaN among 850, 500, 700 hPa, and a generic key ``band`` NaN among 2.0, 1.0."""
    d = tmp_path_factory.mktemp("nan")
    levels = _write(d / "levels.tgm", [_message(
        ({"mars": {"param": "t", "levtype": "pl", "levelist": level}}, np.full(2, float(i))))
        for i, level in enumerate([850, _NAN, 500, 700])])
    bands = _write(d / "bands.tgm", [_message(({"name": "x", "band": band}, np.full(2, float(i))))
                                     for i, band in enumerate([2.0, _NAN, 1.0])])
    return levels, bands


def test_nan_coordinate_value_sorts_last(nan_files):
    levels, bands = nan_files
    t = _plan(levels)
    np.testing.assert_array_equal(t.index_coords["isobaricInhPa"][1], [850.0, 700.0, 500.0, _NAN])
    assert [t.variables["t"].refs[i][0] for i in t.variables["t"].fields.tolist()] == [0, 3, 2, 1]
    x = _plan(bands)
    np.testing.assert_array_equal(x.index_coords["band"][1], [1.0, 2.0, _NAN])
    assert [x.variables["x"].refs[i][0] for i in x.variables["x"].fields.tolist()] == [2, 0, 1]


def test_nan_coordinate_order_is_the_same_in_every_process_and_from_an_index(nan_files, tmp_path):
    """8 processes with different hash seeds (NaN's hash is its address), cold and through the
    index each wrote or read: one output."""
    paths = ",".join(str(p) for p in nan_files)

    def start(seed: int) -> subprocess.Popen:
        env = {**os.environ, "PYTHONHASHSEED": str(seed), "TGM_XARRAY_CACHE_DIR": str(tmp_path)}
        index = "False" if seed % 2 else "auto"
        return subprocess.Popen([sys.executable, "-c", _OPEN_AND_PRINT, paths, index], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)

    def output(child: subprocess.Popen) -> str:
        out, err = child.communicate(timeout=300)
        assert child.returncode == 0, err
        return out

    outputs = {output(start(0))}  # writes the index the other indexed opens read; they run at once
    outputs |= {output(child) for child in [start(seed) for seed in range(1, 8)]}
    assert len(list(tmp_path.glob("*.tgmidx"))) == 2  # the indexed opens had an index to read
    (output,) = outputs
    assert "isobaricInhPa ('isobaricInhPa',) [850.0, 700.0, 500.0, nan]" in output
    assert "t ('isobaricInhPa', 'dim_0') [[0.0, 0.0], [3.0, 3.0], [2.0, 2.0], [1.0, 1.0]]" in output
    assert "band ('band',) [1.0, 2.0, nan]" in output
