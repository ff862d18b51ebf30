"""What users expect of an xarray package: ``ds.tgm`` after ``import tgm_xarray``,
``show_versions()``, ``with open_file(p) as f:``, signatures type checkers read, and an engine
name that means this package even with upstream's ``tensogram-xarray`` installed beside it."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import tomllib
import typing
from importlib.metadata import entry_points, version

import numpy as np
import pytest
import xarray as xr

import tgm_xarray
from tests.helpers import upstream as upstream_site
from tests.helpers.cli import site_without
from tests.helpers.oracle import ENGINE
from tests.helpers.shared import REAL, REPO, require_shared
from tgm_xarray import _core, installation
from tgm_xarray.backend import TensogramBackendEntrypoint

IFS = REAL / "ifs-0p25-20260404.tgm"


def python(code: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120,
                          env={**os.environ, **env})


# --------------------------------------------------------------------------------------------
# ds.tgm
# --------------------------------------------------------------------------------------------


def test_accessor_is_registered_by_importing_the_package(tmp_path):
    """``ds.tgm`` once existed only after ``import tgm_xarray.writer``."""
    path = tmp_path / "a.tgm"
    result = python(f"""
import sys, numpy as np, xarray as xr
import tgm_xarray
assert "tgm_xarray.writer" not in sys.modules  # the writer still loads on first use
xr.Dataset({{"a": ("x", np.arange(3.0))}}).tgm.to_file({str(path)!r}, encoding={{"a": {{"bits": 16}}}})
""")
    assert result.returncode == 0, result.stderr
    with xr.open_dataset(path, engine=ENGINE) as ds:
        np.testing.assert_allclose(ds["a"].values, [0.0, 1.0, 2.0], atol=2 / (2**16 - 1))


def test_accessor_is_registered_when_xarray_is_imported_after_the_package(tmp_path):
    """``import tgm_xarray`` imports no xarray (``tgm-xarray --version`` once took 1.1 s for
    it), and ``ds.tgm`` is there once xarray is imported, as after importing it first."""
    path = tmp_path / "a.tgm"
    result = python(f"""
import sys
import tgm_xarray
assert "xarray" not in sys.modules
import xarray as xr
xr.Dataset({{"a": ("x", [1.0, 2.0])}}).tgm.to_file({str(path)!r})
""")
    assert result.returncode == 0, result.stderr
    with xr.open_dataset(path, engine=ENGINE) as ds:
        np.testing.assert_array_equal(ds["a"].values, [1.0, 2.0])


# --------------------------------------------------------------------------------------------
# show_versions
# --------------------------------------------------------------------------------------------


def test_show_versions_names_what_a_bug_report_needs():
    import sysconfig

    import numpy

    buffer = io.StringIO()
    tgm_xarray.show_versions(file=buffer)
    lines = dict(line.split(": ", 1) for line in buffer.getvalue().splitlines())
    assert lines["tgm-xarray"] == tgm_xarray.__version__
    assert lines["tensogram crate"] == _core.TENSOGRAM_VERSION
    assert lines["tgm_xarray._core"].startswith("_core")
    assert lines["numpy"] == numpy.__version__ and lines["xarray"] == xr.__version__
    for name in ("dask", "zarr", "python", "GIL enabled"):
        assert lines[name], name
    assert lines["free-threaded build"] == str(bool(sysconfig.get_config_var("Py_GIL_DISABLED")))
    assert "tgm_xarray.backend:TensogramBackendEntrypoint" in lines['engine="tgm"']


def test_tensogram_version_is_the_locked_crate_and_the_oracle_package():
    """``_core.TENSOGRAM_VERSION`` is the crate Cargo.lock resolved (core-rs/build.rs reads it),
    and the upstream Python package the tests check against is the same release."""
    with open(REPO / "Cargo.lock", "rb") as lock:
        (locked,) = [p["version"] for p in tomllib.load(lock)["package"] if p["name"] == "tensogram"]
    assert _core.TENSOGRAM_VERSION == locked
    pytest.importorskip("tensogram")
    assert version("tensogram") == locked


# --------------------------------------------------------------------------------------------
# TgmFile as a context manager
# --------------------------------------------------------------------------------------------


def test_open_file_is_a_context_manager():
    path = require_shared(IFS)
    with tgm_xarray.open_file(path) as f:
        assert len(f) > 0
        values = f.read(0, 0, (slice(0, 2), slice(0, 3)))
        assert values.shape == (2, 3)
    with pytest.raises(ValueError, match="the file is closed"):
        f.read(0, 0)
    with pytest.raises(ValueError, match="the file is closed"):
        f.metadata(0)
    # the handle is the process's, shared: other readers go on
    with tgm_xarray.open_file(path) as again:
        np.testing.assert_array_equal(again.read(0, 0, (slice(0, 2), slice(0, 3))), values)


# --------------------------------------------------------------------------------------------
# Types
# --------------------------------------------------------------------------------------------


def test_modes_are_literal_types_and_the_package_is_typed():
    from tgm_xarray import writer

    hints = typing.get_type_hints(writer.to_tgm)
    assert typing.get_args(hints["mode"]) == ("w", "w-", "a")
    assert typing.get_args(hints["layout"]) == ("field", "variable")
    assert typing.get_args(typing.get_type_hints(writer.TgmWriter.__init__)["mode"]) == ("w", "w-", "a")
    assert typing.get_type_hints(tgm_xarray.TgmFile.__enter__)["return"] is tgm_xarray.TgmFile
    package = os.path.dirname(tgm_xarray.__file__)
    assert os.path.isfile(os.path.join(package, "py.typed"))
    assert os.path.isfile(os.path.join(package, "_core.pyi"))


# --------------------------------------------------------------------------------------------
# The engine names: "tgm" is ours alone, "tensogram" is upstream's too
# --------------------------------------------------------------------------------------------


def test_tgm_engine_is_ours_with_our_url():
    engines = xr.backends.list_engines()
    assert type(engines["tgm"]) is TensogramBackendEntrypoint
    assert engines["tgm"].url.startswith("file://") and engines["tgm"].url.endswith("/docs/mapping.md")
    assert "tgm-xarray" in engines["tgm"].description
    ours = {ep.name for ep in entry_points(group="xarray.backends") if ep.module == "tgm_xarray.backend"}
    assert ours == {"tensogram", "tgm"}
    with xr.open_dataset(require_shared(IFS), engine="tgm") as ds:
        assert set(ds.data_vars) == {"2t", "lsm", "q", "t"}


ENGINES = """
import json, warnings
warnings.simplefilter("always")
with warnings.catch_warnings(record=True) as caught:
    import xarray as xr
    engines = xr.backends.list_engines()
print(json.dumps({"tensogram": type(engines["tensogram"]).__module__,
                  "tgm": type(engines["tgm"]).__module__,
                  "warnings": [f"{w.category.__name__}: {w.message}" for w in caught]}))
"""


def test_beside_upstream_tensogram_xarray():
    """With upstream's ``tensogram-xarray`` really installed, xarray maps ``"tensogram"`` to
    either package depending on the process's hash seed; ``"tgm"`` is always ours, and a
    warning names both packages and the way out. Runs where upstream is on the path
    (tests/helpers/upstream.py)."""
    upstream_site.only_in_isolation()
    try:
        upstream = [ep for ep in entry_points(group="xarray.backends", name="tensogram")
                    if ep.module.startswith("tensogram_xarray")]
    except Exception:  # pragma: no cover
        upstream = []
    assert upstream, "tensogram-xarray is not on the path"
    seen = set()
    for seed in range(6):
        result = python(ENGINES, PYTHONHASHSEED=str(seed))
        assert result.returncode == 0, result.stderr
        report = json.loads(result.stdout)
        assert report["tgm"] == "tgm_xarray.backend", report
        seen.add(report["tensogram"])
        ours = [w for w in report["warnings"] if w.startswith("EngineNameWarning")]
        assert len(ours) == 1, report["warnings"]
        assert "tgm-xarray (tgm_xarray.backend)" in ours[0]
        assert "tensogram-xarray (tensogram_xarray.backend)" in ours[0]
        assert 'engine="tgm"' in ours[0]
    assert seen <= {"tgm_xarray.backend", "tensogram_xarray.backend"}
    assert installation.other_providers() == ["tensogram-xarray (tensogram_xarray.backend)"]


def test_no_warning_without_another_provider(tmp_path):
    """Only another package's "tensogram" entry point warns: alone, this one is silent."""
    site = site_without(tmp_path, {"tensogram_xarray"})
    result = subprocess.run([sys.executable, "-S", "-c", f"""
import site, warnings
site.addsitedir({site!r})
{ENGINES}"""], capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["tensogram"] == report["tgm"] == "tgm_xarray.backend"
    assert not [w for w in report["warnings"] if "tensogram" in w], report["warnings"]


def test_docs_name_the_way_out():
    text = (REPO / "docs" / "cli.md").read_text() + (REPO / "README.md").read_text()
    assert 'engine="tgm"' in text and "tensogram-xarray" in text
