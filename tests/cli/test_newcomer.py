"""What a newcomer from cfgrib, earthkit-data and zarr trips on next: option errors in the
command's words, with ranges checked before any advice; a mistyped option answered with the one
meant; ``--chunks`` of a dimension no input has; install hints that work where the package is
installed from a clone; ``index --beside`` saying so when it cannot write."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import PackageNotFoundError

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import tgm_xarray
from tests.helpers.cli import run_cli
from tests.helpers.shared import REPO
from tgm_xarray import installation, versions
from tgm_xarray.cli import main
from tgm_xarray.errors import TgmCodecError


def era5_like() -> xr.Dataset:
    """Fields along ``valid_time``, as new-CDS ERA5 NetCDF files have them (no ``time``)."""
    rng = np.random.default_rng(0)
    return xr.Dataset(
        {"t2m": (("valid_time", "latitude", "longitude"), 280 + rng.standard_normal((2, 3, 4)), {"units": "K"})},
        coords={"valid_time": pd.date_range("2026-01-01", periods=2, freq="6h"),
                "latitude": [50.0, 49.0, 48.0], "longitude": [0.0, 1.0, 2.0, 3.0]})


@pytest.fixture
def written(tmp_path):
    """An ERA5-like ``.tgm`` file written by the package's own writer."""
    path = tmp_path / "era5.tgm"
    tgm_xarray.to_tgm(era5_like(), path)
    return path


def usage_error(result: subprocess.CompletedProcess, command: str = "convert") -> str:
    """The error line of a usage error: status 2, after the command's usage, no traceback."""
    assert result.returncode == 2, result
    assert result.stderr.startswith(f"usage: tgm-xarray {command} "), result.stderr
    assert "Traceback" not in result.stderr and "warning" not in result.stderr, result.stderr
    return result.stderr.strip().splitlines()[-1]


@pytest.mark.parametrize("args, message", [
    # before: advice of --bits 104 and --bits 96 first, then the pipeline's bits_per_value
    (["--bits", "99"], "--bits must be an integer from 1 to 64; got 99"),
    # before: "threads must be None or an integer ...", status 1
    (["--threads", "0"], "--threads must be an integer from 1 to 1024; got 0"),
    # before: status 1
    (["--chunks", "step=a"], "argument --chunks: expected 'auto', '{}' or DIM=N,... (N an integer or auto); "
                             "got 'step=a'"),
    (["--option", "zstd_level"], "--option 'zstd_level': expected KEY=VALUE"),
])
def test_option_errors_are_usage_errors_in_the_commands_words(written, tmp_path, args, message):
    result = run_cli("convert", written, tmp_path / "out.tgm", *args)
    assert usage_error(result) == f"tgm-xarray convert: error: {message}"
    assert not (tmp_path / "out.tgm").exists()


def test_a_mistyped_flag_is_answered_with_the_one_meant(written, tmp_path):
    result = run_cli("convert", written, tmp_path / "out.tgm", "--compresion", "zstd")
    assert usage_error(result) == ("tgm-xarray convert: error: unrecognized arguments: --compresion zstd "
                                   "(did you mean --compression?)")
    result = run_cli("verify", written, "--require-hsh")
    assert usage_error(result, "verify") == ("tgm-xarray verify: error: unrecognized arguments: --require-hsh "
                                             "(did you mean --require-hash?)")
    result = run_cli("convert", written, tmp_path / "out.tgm", "--no-such-thing")
    assert usage_error(result) == "tgm-xarray convert: error: unrecognized arguments: --no-such-thing"


def test_a_mistyped_encoding_option_names_the_one_meant_first(written, tmp_path):
    line = usage_error(run_cli("convert", written, tmp_path / "out.tgm", "--option", "zstd_levl=3"))
    assert line.startswith("tgm-xarray convert: error: --option 'zstd_levl=3': unknown encoding option "
                           "'zstd_levl' (did you mean 'zstd_level'?); valid options are ['bits', ")
    # the rule is the pipeline's: to_tgm and the zarr codec say the same
    with pytest.raises(TgmCodecError, match=r"'zstd_levl' \(did you mean 'zstd_level'\?\)"):
        tgm_xarray.to_tgm(era5_like(), tmp_path / "api.tgm", encoding={"t2m": {"zstd_levl": 3}})


def test_chunks_of_a_dimension_no_input_has_are_refused(written, tmp_path):
    """xarray ignores them: ``time=1`` on an input with ``valid_time`` chunked nothing."""
    result = run_cli("convert", written, tmp_path / "out.tgm", "--chunks", "time=1")
    assert usage_error(result) == ("tgm-xarray convert: error: --chunks: no input has the dimensions "
                                   "['time']; theirs are ['latitude', 'longitude', 'valid_time']")
    assert not (tmp_path / "out.tgm").exists()
    result = run_cli("convert", written, tmp_path / "out.tgm", "--chunks", "valid_time=1", "--no-progress")
    assert result.returncode == 0, result.stderr


def test_verify_require_hash_speaks_of_the_option(tmp_path):
    path = tmp_path / "unhashed.tgm"
    tgm_xarray.to_tgm(era5_like(), path, hash=False)
    result = run_cli("verify", "--require-hash", path)
    assert result.returncode == 1, result
    problems = result.stdout.splitlines()[:-1]
    assert problems and all(line.endswith(": written without a hash (--require-hash)") for line in problems)
    assert problems[0] == f"{path}: message 0, object 0: written without a hash (--require-hash)"
    assert "verify_hash" not in result.stdout


def test_install_hints_name_packages_an_index_has():
    """The package is installed from a clone (README.md): no index has ``tgm-xarray[...]``."""
    texts = [*(REPO / "src").rglob("*.py"), *(REPO / "docs").glob("*.md"), *(REPO / "examples").glob("*.py")]
    found = [f"{path.relative_to(REPO)}:{number}" for path in texts
             for number, line in enumerate(path.read_text().splitlines(), 1) if "tgm-xarray[" in line]
    assert found == []
    assert installation.install_hint("netCDF4") == "pip install netCDF4"


def test_show_versions_says_h5netcdf_without_h5py_writes_no_netcdf(monkeypatch):
    installed = {"h5netcdf": "1.8.2", "h5py": None, "netCDF4": None}

    def version(name: str) -> str:
        if name not in installed:
            return "1.0"
        if installed[name] is None:
            raise PackageNotFoundError(name)
        return installed[name]

    monkeypatch.setattr(versions, "version", version)
    info = versions.versions()
    assert info["h5netcdf"] == "1.8.2 (cannot write NetCDF without h5py)" and info["h5py"] == "not installed"
    installed["h5py"] = "3.12.0"
    assert versions.versions()["h5netcdf"] == "1.8.2"


def test_index_beside_that_cannot_be_written_fails_naming_it(written):
    """A fresh index in the cache once stood for the one ``--beside`` asked for: the command
    said it indexed beside the file, wrote nothing there, and exited 0."""
    assert run_cli("index", written, "--no-progress").returncode == 0  # the cache's index
    beside = f"{written}.tgmidx"
    os.mkdir(beside)  # no index can be written there (for root too, unlike a read-only directory)
    result = run_cli("index", "--beside", written, "--no-progress")
    assert result.returncode == 1, result
    assert "indexed in" not in result.stdout
    error = result.stderr.strip().splitlines()[-1]
    assert error.startswith(f"tgm-xarray: error: {beside}: the index could not be written"), result.stderr
    os.rmdir(beside)
    result = run_cli("index", "--beside", written, "--no-progress")
    assert result.stdout == f"{written}: indexed in {beside}\n" and os.path.isfile(beside)


@pytest.mark.skipif(os.name != "posix" or os.geteuid() == 0, reason="root writes in read-only directories")
def test_index_beside_in_a_read_only_directory_fails(written):
    os.chmod(written.parent, 0o555)
    try:
        result = run_cli("index", "--beside", written, "--no-progress")
    finally:
        os.chmod(written.parent, 0o755)
    assert result.returncode == 1 and "indexed in" not in result.stdout, result
    assert f"{written}.tgmidx: the index could not be written" in result.stderr


@pytest.mark.parametrize("args, message", [
    # before: status 1, and no word of what the inputs have
    (["--variables", "t2m,nope"], "--variables: no input has ['nope']; theirs are ['t2m']"),
    (["--drop-variables", "nope"],
     "--drop-variables: no input has ['nope']; theirs are ['latitude', 'longitude', 't2m', 'valid_time']"),
])
@pytest.mark.parametrize("output", ["out.tgm", "out.nc"])
def test_a_variable_no_input_has_is_a_usage_error(written, tmp_path, capsys, args, message, output):
    with pytest.raises(SystemExit) as exited:
        main(["convert", str(written), str(tmp_path / output), *args])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert err.startswith("usage: tgm-xarray convert ") and err.endswith(f"tgm-xarray convert: error: {message}\n")
    assert sorted(os.listdir(tmp_path)) == ["era5.tgm"]  # nothing written, no temporary left


def test_version_imports_no_xarray():
    """``tgm-xarray --version`` took 1.1 s, most of it importing xarray for the accessor."""
    result = subprocess.run([sys.executable, "-X", "importtime", "-m", "tgm_xarray.cli", "--version"],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stdout.startswith(f"tgm-xarray {tgm_xarray.__version__} ")
    imported = {line.rpartition("|")[2].strip() for line in result.stderr.splitlines() if "|" in line}
    assert "tgm_xarray" in imported  # the list is of this process's imports
    assert not {name for name in imported if name.split(".")[0] in ("xarray", "pandas")}
