"""The engine's keywords: documented in ``open_dataset``'s docstring, checked with errors that
name the keyword and the file; cfgrib's ``backend_kwargs`` accepted; ``show_versions()`` and
the extras; NetCDF output without a NetCDF library."""

from __future__ import annotations

import dataclasses
import inspect
import io
import re
import sys
import tomllib
import warnings

import numpy as np
import pytest
import xarray as xr

import tgm_xarray
from tests.helpers.oracle import ENGINE
from tests.helpers.shared import REPO
from tgm_xarray import export
from tgm_xarray.backend import TensogramBackendEntrypoint
from tgm_xarray.errors import TgmConflictError, TgmIndexError
from tgm_xarray.hypercube import PlanOptions


def documented_parameters(doc: str) -> dict[str, str]:
    """The names of a numpydoc "Parameters" section (``a, b, c`` lines name several), each with
    its description."""
    section = doc.split("Parameters\n----------\n", 1)[1].split("\n\nReturns", 1)[0]
    entries: dict[str, str] = {}
    names: list[str] = []
    for line in section.splitlines():
        if line and not line.startswith(" "):
            names = [name.strip() for name in line.split(",")]
            entries.update({name: "" for name in names})
        else:
            for name in names:
                entries[name] += line.strip() + " "
    return entries


def test_open_dataset_docstring_names_every_keyword():
    """Every keyword of the signature is documented, with its default (filename_or_obj has none)."""
    doc = inspect.getdoc(TensogramBackendEntrypoint.open_dataset)
    assert doc, "open_dataset has no docstring"
    documented = documented_parameters(doc)
    parameters = [p for p in inspect.signature(TensogramBackendEntrypoint.open_dataset).parameters if p != "self"]
    assert sorted(documented) == sorted(parameters)
    assert set(TensogramBackendEntrypoint.open_dataset_parameters) == set(parameters)
    for name in parameters[1:]:
        assert "default" in documented[name].lower(), name


@pytest.mark.parametrize("bad", ["t", ["shortName", "t"], 3])
def test_filter_by_keys_of_another_type_is_a_type_error(ifs_file, bad):
    with pytest.raises(TypeError, match=r"filter_by_keys must be a mapping") as err:
        xr.open_dataset(ifs_file, engine=ENGINE, filter_by_keys=bad)
    assert str(ifs_file) in str(err.value)


def test_unknown_variable_key_warns_and_falls_back(ifs_file):
    """As upstream: the names of the chain, with a warning naming the file (a typo?)."""
    with pytest.warns(UserWarning, match=r"variable_key='nokey' is a key of no object") as record:
        ds = xr.open_dataset(ifs_file, engine=ENGINE, variable_key="nokey", index=False)
    assert str(ifs_file) in str(record[0].message)
    assert sorted(ds.data_vars) == sorted(xr.open_dataset(ifs_file, engine=ENGINE, index=False).data_vars)
    with pytest.warns(UserWarning, match=r"did you mean 'grib.shortName'"):
        xr.open_dataset(ifs_file, engine=ENGINE, variable_key="grib.shortname", index=False)
    with pytest.raises(TypeError, match=r"variable_key must be a metadata key"):
        xr.open_dataset(ifs_file, engine=ENGINE, variable_key=["mars.param"])
    with xr.open_dataset(ifs_file, engine=ENGINE, variable_key="grib.paramId") as ds:
        assert sorted(ds.data_vars) == ["130", "133", "167", "172"]


def test_the_engines_planner_keywords_are_plan_options():
    """``PlanOptions`` holds the planner's keywords: each one is ``open_dataset``'s with the same
    default (``open_datatree`` passes them on to ``PlanOptions`` as they come)."""
    defaults = {f.name: f.default for f in dataclasses.fields(PlanOptions)}
    method = TensogramBackendEntrypoint.open_dataset
    given = {name: p.default for name, p in inspect.signature(method).parameters.items() if name in defaults}
    assert given == defaults


def test_open_datatree_takes_the_planners_keywords_and_names_a_wrong_one(ifs_file):
    tree = xr.open_datatree(ifs_file, engine=ENGINE, index=False, variable_key="grib.paramId", decode_times=False)
    flat = xr.open_dataset(ifs_file, engine=ENGINE, index=False, variable_key="grib.paramId", decode_times=False)
    assert {name for node in tree.subtree for name in node.ds.data_vars} == set(flat.data_vars)
    with pytest.raises(TypeError, match=r"takes no keyword 'variable_keys'") as err:
        xr.open_datatree(ifs_file, engine=ENGINE, variable_keys="grib.paramId")
    assert str(ifs_file) in str(err.value)
    with pytest.raises(ValueError, match="duplicates"):
        xr.open_datatree(ifs_file, engine=ENGINE, duplicates="any")


@pytest.mark.parametrize("keyword, bad, error", [
    ("variable_key", 3, TypeError), ("dim_names", "xy", TypeError), ("dim_names", 2, TypeError),
    ("filter_by_keys", {1: "t"}, TypeError), ("duplicates", "any", ValueError), ("merge_objects", "no", TypeError),
    ("message_index", 1.5, TypeError), ("message_index", -1, TgmIndexError), ("squeeze", None, TypeError),
])
def test_a_bad_planner_keyword_fails_before_the_file_is_read(tmp_path, keyword, bad, error):
    """Checked once, in ``PlanOptions``: the error names the keyword and the file, which is not
    even opened (it does not exist here)."""
    missing = tmp_path / "missing.tgm"
    with pytest.raises(error, match=keyword) as err:
        xr.open_dataset(missing, engine=ENGINE, **{keyword: bad})
    assert str(missing) in str(err.value)


def test_plan_options_are_one_frozen_value():
    """A sequence of names is kept as a tuple and numpy's integers as ints, so that equal
    options are equal values (and one plan in an index); ``as_dict`` rebuilds them."""
    options = PlanOptions(variable_key="mars.param", dim_names=["y", "x"], filter_by_keys={"levtype": "pl"},
                          message_index=np.int64(2), squeeze=False, time_dims=["valid_time"])
    assert options == PlanOptions(variable_key="mars.param", dim_names=("y", "x"), filter_by_keys={"levtype": "pl"},
                                  message_index=2, squeeze=False, time_dims=("valid_time",))
    assert type(options.message_index) is int
    assert PlanOptions(**options.as_dict()) == options
    assert PlanOptions().as_dict() == {} == PlanOptions(duplicates="error", squeeze=True).as_dict()
    with pytest.raises(dataclasses.FrozenInstanceError):
        options.squeeze = True  # type: ignore[misc]


def test_errors_of_a_list_open_name_the_file(tmp_path):
    """The planner numbers messages across the files of a list: its errors name the file and
    the message's number in that file."""
    paths = []
    for i, size in enumerate([3, 3, 4]):
        path = tmp_path / f"part{i}.tgm"
        tgm_xarray.to_tgm(xr.Dataset({"a": ("x", np.arange(size, dtype="f4"))},
                                     attrs={"part": i}), path)
        paths.append(str(path))
    with pytest.raises(TgmConflictError) as err:
        xr.open_dataset(paths, engine=ENGINE)
    message = str(err.value)
    assert f"message 0 object 0 of {paths[2]}" in message, message
    assert "message 2 object" not in message


def test_cfgrib_backend_kwargs_are_accepted(ifs_file, tmp_path, monkeypatch):
    monkeypatch.setenv("TGM_XARRAY_CACHE_DIR", str(tmp_path / "cache"))
    cfgrib_defaults = {"indexpath": "", "read_keys": ["centre"], "squeeze": True, "time_dims": ("time", "step"),
                       "encode_cf": ("parameter", "time", "geography", "vertical"), "cache_geo_coords": True}
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with xr.open_dataset(ifs_file, engine=ENGINE, backend_kwargs=cfgrib_defaults) as ds:
            assert sorted(ds.data_vars) == ["2t", "lsm", "q", "t"]
    assert not (tmp_path / "cache").exists()  # indexpath="": no index written, as with cfgrib
    with pytest.warns(UserWarning, match=r"keyword\(s\) extra_coords=\{'x': 'y'\} mean nothing") as caught:
        with xr.open_dataset(ifs_file, engine=ENGINE, backend_kwargs={"errors": "ignore", "extra_coords": {"x": "y"}},
                             filter_by_keys={"shortName": "t"}) as ds:
            assert list(ds.data_vars) == ["t"]
    assert str(ifs_file) in str(caught[0].message)


def test_show_versions_lists_every_optional_dependency():
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    wanted = {re.split(r"[\[<>=!~ ]", requirement)[0] for name, requirements in extras.items()
              if not name.startswith("test") for requirement in requirements}
    buffer = io.StringIO()
    tgm_xarray.show_versions(file=buffer)
    shown = {line.split(": ", 1)[0] for line in buffer.getvalue().splitlines()}
    assert wanted <= shown, wanted - shown
    assert {"aiohttp", "s3fs", "virtualizarr", "icechunk", "obstore", "netCDF4", "h5netcdf"} <= shown


def test_netcdf_output_without_a_netcdf_library(tmp_path, monkeypatch):
    """h5netcdf without h5py imports, then fails at the first write in words of its own: our
    error names the output and the package to install, and nothing is written."""
    for module in ("netCDF4", "h5py"):
        monkeypatch.setitem(sys.modules, module, None)  # `import` raises ImportError
    output = tmp_path / "out.nc"
    ds = xr.Dataset({"a": ("x", np.arange(3.0))})
    with pytest.raises(ImportError, match=r"writing NetCDF needs netCDF4, or h5netcdf with h5py") as err:
        export.export(ds, str(output), "netcdf", warnings.warn)
    assert str(output) in str(err.value) and "pip install netCDF4" in str(err.value)
    assert list(tmp_path.iterdir()) == []
    assert "netCDF4" in tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]["netcdf"]
