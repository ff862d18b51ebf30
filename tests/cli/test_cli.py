"""The ``tgm-xarray`` command: convert real GRIB fields (checked against ecCodes), NetCDF and Zarr;
``info`` and ``dump``; the progress bar only on a terminal; errors leave no output behind."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import warnings

import numpy as np
import pytest
import xarray as xr

from tests.helpers.cli import (
    CLI,
    FIELDS,
    GRIB,
    REAL_TGM,
    assert_one_line_error,
    run_cli,
    run_on_terminal,
    site_without,
    small_dataset,
)
from tests.helpers.oracle import ENGINE
from tests.helpers.shared import REPO, require_shared
from tgm_xarray import _core
from tgm_xarray.cli import main
from tgm_xarray.errors import TgmIndexWarning


def eccodes_values(path) -> np.ndarray:
    """The field as ecCodes decodes it (float64), on its (Nj, Ni) grid."""
    import eccodes

    with open(path, "rb") as f:
        gid = eccodes.codes_grib_new_from_file(f)
        try:
            shape = (eccodes.codes_get(gid, "Nj"), eccodes.codes_get(gid, "Ni"))
            return eccodes.codes_get_values(gid).reshape(shape)
        finally:
            eccodes.codes_release(gid)


@pytest.fixture(scope="module")
def grib_tgm(tmp_path_factory):
    """The four real GRIB fields converted once with 16-bit packing."""
    require_shared(GRIB)
    pytest.importorskip("cfgrib")
    out = tmp_path_factory.mktemp("grib") / "fields.tgm"
    inputs = [str(GRIB / f"{name}.grib2") for name in FIELDS]
    assert main(["convert", *inputs, str(out), "--bits", "16", "--no-progress"]) == 0
    return out


def test_convert_grib_matches_eccodes(grib_tgm):
    """Every converted field equals ecCodes' decode within the packing bound (plus the
    float32 rounding of cfgrib's values)."""
    pytest.importorskip("eccodes")
    with xr.open_dataset(grib_tgm, engine=ENGINE) as ds:
        for name, (var, level) in FIELDS.items():
            expected = eccodes_values(GRIB / f"{name}.grib2")
            field = ds[var] if level is None else ds[var].sel(isobaricInhPa=level)
            got = field.values
            assert got.shape == expected.shape == (721, 1440)
            bound = np.ptp(expected) / (2**16 - 1) + np.abs(expected).max() * 2.0**-23
            assert np.abs(got - expected).max() <= bound, name
        # the MARS keys became cfgrib's coordinates
        assert ds.time.values == np.datetime64("2026-04-04T00:00", "ns")
        assert ds.isobaricInhPa.values.tolist() == [600.0, 150.0]
        assert ds.t2m.attrs["GRIB_shortName"] == "2t" and ds.t2m.attrs["units"] == "K"


def test_convert_grib_writes_mars_keys(grib_tgm):
    handle = _core.FileHandle(os.fspath(grib_tgm))
    bases = [handle.metadata(i)["base"][0] for i in range(len(handle))]
    fields = [b for b in bases if b["name"] in ("t2m", "lsm", "q", "t")]
    assert [b["name"] for b in fields] == ["t2m", "lsm", "q", "t"]
    assert fields[1]["mars"] == {"date": "20260404", "time": "0000", "step": 0, "levtype": "sfc"}
    assert fields[2]["mars"]["levtype"] == "pl" and fields[2]["mars"]["levelist"] == 150.0
    assert handle.descriptors(0)[0]["params"]["sp_bits_per_value"] == 16


def test_info_reports_sizes_codecs_and_ratio(grib_tgm, capsys):
    assert main(["info", str(grib_tgm)]) == 0
    text = capsys.readouterr().out
    handle = _core.FileHandle(os.fspath(grib_tgm))
    decoded = sum(int(np.prod(d["shape"])) * np.dtype(d["dtype"]).itemsize
                  for i in range(len(handle)) for d in handle.descriptors(i))
    ratio = decoded / os.path.getsize(grib_tgm)
    assert f"compression ratio {ratio:.2f}" in text
    assert f"{len(handle)} messages" in text
    assert "packing16+blosc2(zstd)" in text
    assert "t2m" in text and "(isobaricInhPa, latitude, longitude)" in text
    assert main(["info", "--json", str(grib_tgm)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["decoded_bytes"] == decoded and summary["ratio"] == pytest.approx(ratio)
    assert summary["groups"]["/"]["data_vars"]["q"]["dims"] == ["isobaricInhPa", "latitude", "longitude"]


def test_dump_prints_metadata_as_json(grib_tgm, capsys):
    handle = _core.FileHandle(os.fspath(grib_tgm))
    lsm = next(i for i in range(len(handle)) if handle.metadata(i)["base"][0]["name"] == "lsm")
    assert main(["dump", str(grib_tgm), "--message", str(lsm)]) == 0
    (entry,) = json.loads(capsys.readouterr().out)
    assert entry["message"] == lsm
    assert entry["metadata"]["base"][0]["mars"]["levtype"] == "sfc"
    assert entry["descriptors"][0]["shape"] == [721, 1440]
    assert (entry["offset"], entry["length"]) == handle.message_span(lsm)
    assert main(["dump", str(grib_tgm)]) == 0
    assert len(json.loads(capsys.readouterr().out)) == len(_core.FileHandle(os.fspath(grib_tgm)))


@pytest.mark.parametrize("suffix, chunks", [(".nc", "time=1"), (".zarr", "{}")])
def test_convert_netcdf_and_zarr(tmp_path, suffix, chunks):
    ds = small_dataset()
    source = tmp_path / f"in{suffix}"
    if suffix == ".nc":
        ds.to_netcdf(source)
    else:
        pytest.importorskip("zarr")
        ds.to_zarr(source, zarr_format=2, consolidated=True)
    out = tmp_path / "out.tgm"
    assert main(["convert", str(source), str(out), "--variables", "t2m,count", "--chunks", chunks,
                 "--no-progress"]) == 0
    with xr.open_dataset(out, engine=ENGINE) as read:
        expected = ds[["t2m", "count"]]
        for name in expected.variables:
            np.testing.assert_array_equal(read[name].values, expected[name].values)
            if expected[name].dtype.kind in "iuf":
                assert read[name].dtype == expected[name].dtype
        assert read.attrs["title"] == "small" and "msl" not in read


def test_convert_options_apply_to_the_right_variables(tmp_path):
    """--bits packs floating-point variables only; codec options go to every variable."""
    source = tmp_path / "in.nc"
    small_dataset().to_netcdf(source)
    out = tmp_path / "out.tgm"
    assert main(["convert", str(source), str(out), "--bits", "24", "--compression", "szip",
                 "--option", "szip_rsi=64", "--layout", "variable", "--no-progress"]) == 0
    handle = _core.FileHandle(os.fspath(out))
    by_name = {handle.metadata(i)["base"][0]["name"]: handle.descriptors(i)[0] for i in range(len(handle))}
    assert by_name["t2m"]["encoding"] == "simple_packing" and by_name["t2m"]["params"]["szip_rsi"] == 64
    assert by_name["count"]["encoding"] == "none" and by_name["count"]["filter"] == "none"
    assert by_name["count"]["compression"] == "szip"


def test_convert_append(tmp_path):
    ds = small_dataset()
    first, second = tmp_path / "a.nc", tmp_path / "b.nc"
    ds.isel(time=slice(0, 2)).to_netcdf(first)
    ds.isel(time=slice(2, 4)).drop_vars("count").to_netcdf(second)
    out = tmp_path / "out.tgm"
    assert main(["convert", str(first), str(out), "--no-progress"]) == 0
    xr.open_dataset(out, engine=ENGINE).close()  # writes an index to the cache
    assert main(["convert", str(second), str(out), "--append", "--no-progress"]) == 0
    with warnings.catch_warnings():
        warnings.simplefilter("error", TgmIndexWarning)  # the append dropped that index
        read = xr.open_dataset(out, engine=ENGINE)
    with read:
        np.testing.assert_array_equal(read.t2m.values, ds.t2m.values)
        assert read.time.size == 4


@pytest.mark.parametrize("args, message, status", [
    (["--bits", "12", "--compression", "szip"], r"^tgm-xarray: error: bits_per_value must be one of \(8, 16, 24, 32\)", 1),
    # usage errors: argparse's status and wording, after the command's usage
    (["--variables", "nope"], r"tgm-xarray convert: error: --variables: no input has \['nope'\]; theirs are", 2),
    (["--option", "zstd_level"], "tgm-xarray convert: error: .*expected KEY=VALUE", 2),
    (["--option", "level=3"], "tgm-xarray convert: error: .*unknown encoding option 'level'", 2),
    (["--chunks", "time"], "tgm-xarray convert: error: argument --chunks: expected", 2),
    (["--chunks", "step=1"], r"tgm-xarray convert: error: --chunks: no input has the dimensions \['step'\]", 2),
])
def test_convert_errors_leave_no_output(tmp_path, capsys, args, message, status):
    source = tmp_path / "in.nc"
    small_dataset().to_netcdf(source)
    out = tmp_path / "out.tgm"
    try:
        code = main(["convert", str(source), str(out), *args])
    except SystemExit as usage:  # argparse's way out of usage errors
        code = usage.code
    assert code == status
    err = capsys.readouterr().err
    assert re.search(message, err, re.MULTILINE), err
    assert not out.exists() and not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]


def test_missing_input_and_bad_file(tmp_path, capsys):
    assert main(["convert", str(tmp_path / "nope.nc"), str(tmp_path / "o.tgm")]) == 1
    assert "does not exist" in capsys.readouterr().err
    bad = tmp_path / "bad.tgm"
    bad.write_bytes(b"TENSOGRM not really")
    assert main(["info", str(bad)]) == 1
    assert "tgm-xarray: error:" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        main(["frobnicate"])
    assert exit_info.value.code == 2


# --------------------------------------------------------------------------------------------
# The progress bar: on a terminal only
# --------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def netcdf_input(tmp_path_factory):
    path = tmp_path_factory.mktemp("progress") / "in.nc"
    small_dataset().to_netcdf(path)
    return path


def test_progress_bar_on_a_terminal(netcdf_input, tmp_path):
    code, output = run_on_terminal([*CLI, "convert", str(netcdf_input), str(tmp_path / "o.tgm")], tmp_path)
    assert code == 0, output
    assert "writing: 100%" in output and "9/9" in output  # 4 + 4 fields and `count`


def test_no_progress_bar_without_a_terminal(netcdf_input, tmp_path):
    result = subprocess.run([*CLI, "convert", str(netcdf_input), str(tmp_path / "o.tgm")],
                            capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert result.returncode == 0, result.stderr
    assert "writing" not in result.stderr and "%" not in result.stderr
    assert "wrote 9 messages" in result.stdout
    forced = subprocess.run([*CLI, "convert", str(netcdf_input), str(tmp_path / "p.tgm"), "--progress"],
                            capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert "writing: 100%" in forced.stderr


def test_console_script_and_example(tmp_path):
    """The installed ``tgm-xarray`` script runs; the GRIB example writes its map outside the
    repository."""
    script = os.path.join(os.path.dirname(sys.executable), "tgm-xarray")
    result = subprocess.run([script, "--help"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "convert" in result.stdout
    require_shared(GRIB)
    pytest.importorskip("matplotlib")
    pytest.importorskip("cfgrib")
    result = subprocess.run([sys.executable, str(REPO / "examples" / "grib_to_tgm.py"),
                             "--output", str(tmp_path / "out")], capture_output=True, text=True,
                            cwd=tmp_path, timeout=300)
    assert result.returncode == 0, result.stderr
    png = tmp_path / "out" / "2t.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert (tmp_path / "out" / "fields.tgm").exists()


# --------------------------------------------------------------------------------------------
# What newcomers hit first: the command never destroys input, every failure is one line
# --------------------------------------------------------------------------------------------


# Runs the command in a fresh interpreter that sees site-packages without some distributions,
# as after `pip install .` without extras: `python -S -c WITHOUT SITE convert ...`.
WITHOUT = """
import site, sys
site.addsitedir(sys.argv[1])
from tgm_xarray.cli import main
sys.exit(main(sys.argv[2:]))
"""


def without(tmp_path, names: str, *args) -> list[str]:
    return [sys.executable, "-S", "-c", WITHOUT, site_without(tmp_path, set(names.split(","))),
            *map(str, args)]


@pytest.fixture
def grib_copy(tmp_path):
    """Two real GRIB files in a writable directory."""
    require_shared(GRIB)
    for name in ("2t", "lsm"):
        (tmp_path / f"{name}.grib2").write_bytes((GRIB / f"{name}.grib2").read_bytes())
    return tmp_path


def test_forgotten_output_leaves_the_last_input_intact(grib_copy):
    """``convert 2t.grib2 lsm.grib2`` once replaced lsm.grib2 with Tensogram bytes (exit 0)."""
    before = (grib_copy / "lsm.grib2").read_bytes()
    result = run_cli("convert", "2t.grib2", "lsm.grib2", cwd=grib_copy)
    assert_one_line_error(result, r"OUTPUT 'lsm.grib2' is a GRIB name: convert writes GRIB from one .tgm INPUT")
    assert (grib_copy / "lsm.grib2").read_bytes() == before
    assert sorted(p.name for p in grib_copy.iterdir()) == ["2t.grib2", "lsm.grib2"]


@pytest.mark.parametrize("name, kind", [("back.h5", "HDF5")])
def test_tgm_to_another_format_is_refused(tmp_path, name, kind):
    """``convert x.tgm back.h5`` once wrote Tensogram bytes into a .h5; --force does not help
    (.nc and .zarr outputs are written by xarray: test_conversions; GRIB by ecCodes: test_grib_out)."""
    require_shared(REAL_TGM)
    for force in ([], ["--force"]):
        result = run_cli("convert", REAL_TGM, tmp_path / name, *force)
        assert_one_line_error(result, f"is a {kind} file name: .*writing {kind} is not supported yet")
        assert not (tmp_path / name).exists()


def test_forgotten_output_after_netcdf_inputs_leaves_them_intact(tmp_path):
    """``convert a.nc b.nc``: b.nc is an input taken for OUTPUT, never overwritten, --force or not."""
    for name in ("a.nc", "b.nc"):
        xr.Dataset({"v": ("x", np.arange(3.0))}).to_netcdf(tmp_path / name)
    before = (tmp_path / "b.nc").read_bytes()
    for force in ([], ["--force"]):
        result = run_cli("convert", "a.nc", "b.nc", *force, cwd=tmp_path)
        assert_one_line_error(result, r"convert writes NetCDF from one .tgm INPUT")
        assert (tmp_path / "b.nc").read_bytes() == before


def test_output_that_is_an_input_is_refused_even_with_force(tmp_path):
    """convert never replaces its input: re-encoding a .tgm in place is refused, --force or not
    (write the new file beside it, then move it yourself)."""
    require_shared(REAL_TGM)
    path = tmp_path / "f.tgm"
    path.write_bytes(REAL_TGM.read_bytes())
    before = path.read_bytes()
    assert_one_line_error(run_cli("convert", path, path, "--bits", "12"), "is also an input")
    assert_one_line_error(run_cli("convert", path, tmp_path / "." / "f.tgm"), "is also an input")
    assert_one_line_error(run_cli("convert", path, path, "--bits", "12", "--force"), "not even with --force")
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["f.tgm"]


def test_existing_non_tensogram_output_and_other_names_need_force(tmp_path):
    require_shared(REAL_TGM)
    notes = tmp_path / "notes.tgm"
    notes.write_text("my notes")
    assert_one_line_error(run_cli("convert", REAL_TGM, notes), "exists and is not a Tensogram file")
    assert notes.read_text() == "my notes"
    assert_one_line_error(run_cli("convert", REAL_TGM, tmp_path / "out"), "does not end in .tgm")
    assert not (tmp_path / "out").exists()
    assert run_cli("convert", REAL_TGM, tmp_path / "out", "--force").returncode == 0
    assert (tmp_path / "out").read_bytes()[:8] == b"TENSOGRM"
    # a directory OUTPUT gets one .tgm per input (tests/cli/test_convert_many.py)
    assert run_cli("convert", REAL_TGM, tmp_path).returncode == 0
    assert (tmp_path / REAL_TGM.name).read_bytes()[:8] == b"TENSOGRM"


def test_convert_works_without_the_optional_extras(tmp_path, netcdf_input):
    """``pip install .`` gives numpy and xarray only: converting must not need tqdm (nor dask,
    zarr, fsspec, cfgrib); --progress without tqdm says so and writes anyway."""
    require_shared(REAL_TGM)
    extras = "tqdm,dask,distributed,zarr,fsspec,aiohttp,s3fs,cfgrib"
    result = run_cli(without(tmp_path, extras, "convert", REAL_TGM, tmp_path / "a.tgm"))
    assert result.returncode == 0, result.stderr
    # (numpy warns of all-NaN fields: warnings too are one line each)
    assert all(line.startswith("tgm-xarray: warning: ") for line in result.stderr.splitlines())
    with xr.open_dataset(REAL_TGM, engine=ENGINE) as old, xr.open_dataset(tmp_path / "a.tgm", engine=ENGINE) as new:
        xr.testing.assert_identical(new.load(), old.load())
    result = run_cli(without(tmp_path, "tqdm", "convert", netcdf_input, tmp_path / "b.tgm", "--progress"))
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == ("tgm-xarray: --progress needs tqdm (pip install tqdm); "
                                     "writing without a progress bar")
    assert "wrote 9 messages" in result.stdout
    code, output = run_on_terminal(without(tmp_path, "tqdm", "convert", netcdf_input, tmp_path / "c.tgm"),
                                   tmp_path)
    assert code == 0 and "wrote 9 messages" in output and "%" not in output, output


def test_a_grib_without_cfgrib_says_what_to_install(grib_copy, tmp_path):
    result = run_cli(without(tmp_path, "cfgrib", "convert", "2t.grib2", "o.tgm"), cwd=grib_copy)
    assert_one_line_error(result, r"input '2t.grib2': .*need cfgrib and eccodes")


def test_truncated_grib_is_one_line_and_no_output(grib_copy):
    """A cut GRIB once gave three tracebacks (cfgrib logs each bad message) and, when the cut
    fell in a later message, quietly left that field out."""
    pytest.importorskip("cfgrib")
    whole = (grib_copy / "2t.grib2").read_bytes() + (grib_copy / "lsm.grib2").read_bytes()
    (grib_copy / "cut.grib2").write_bytes(whole[: len(whole) - 80_000])  # lsm loses its end
    result = run_cli("convert", "cut.grib2", "o.tgm", cwd=grib_copy)
    assert_one_line_error(result, r"input 'cut.grib2': .*(end|End)")
    assert not (grib_copy / "o.tgm").exists()


def test_every_failure_is_one_line(tmp_path):
    """Whatever fails (a missing file, a directory, bad bytes, an error of a library), the
    user reads one line and gets a non-zero status; --traceback shows the whole story."""
    bad = tmp_path / "bad.tgm"
    bad.write_bytes(b"TENSOGRM not really")
    (tmp_path / "text.nc").write_text("not netcdf")
    for args, pattern in [
        (["info", tmp_path / "nope.tgm"], r"nope.tgm: no such file"),
        (["info", tmp_path], r"is a directory, not a \.tgm file"),  # was "os error 19"
        (["dump", tmp_path], r"is a directory, not a \.tgm file"),
        (["dump", bad], r"bad.tgm"),
        (["convert", tmp_path / "text.nc", tmp_path / "o.tgm"], r"input '.*text.nc': "),
    ]:
        assert_one_line_error(run_cli(*args), pattern)
    full = run_cli("--traceback", "info", bad)
    assert full.returncode == 1 and "Traceback" in full.stderr
    assert full.stderr.strip().splitlines()[-1].startswith("tgm-xarray: error: ")


def test_version_and_help_without_markup():
    from tgm_xarray import __version__

    result = run_cli("--version")
    assert result.returncode == 0
    assert result.stdout.strip() == f"tgm-xarray {__version__} (tensogram crate {_core.TENSOGRAM_VERSION})"
    for command in ([], ["convert"], ["info"], ["dump"], ["verify"]):
        text = run_cli(*command, "--help").stdout
        assert "usage: tgm-xarray" in text
        assert "``" not in text and ":func:" not in text and ":class:" not in text, text


def test_info_and_dump_of_a_url(range_server, capsys):
    """The Python API opens URLs; so do ``info`` and ``dump`` (they once refused them)."""
    import shutil

    require_shared(REAL_TGM)
    shutil.copyfile(REAL_TGM, range_server.root / REAL_TGM.name)
    url = range_server.url(REAL_TGM.name)
    assert main(["info", "--json", url]) == 0
    remote = json.loads(capsys.readouterr().out)
    assert main(["info", "--json", str(REAL_TGM)]) == 0
    local = json.loads(capsys.readouterr().out)
    assert remote["file"] == url and {**remote, "file": None} == {**local, "file": None}
    assert main(["dump", url, "--message", "1"]) == 0
    remote = json.loads(capsys.readouterr().out)
    assert main(["dump", str(REAL_TGM), "--message", "1"]) == 0
    assert remote == json.loads(capsys.readouterr().out)
    missing = range_server.url("missing.tgm")
    assert main(["info", missing]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith(f"tgm-xarray: error: {missing}: not found") and "\n" not in err, err


def test_progress_total_is_fixed_from_the_start(tmp_path):
    """Several inputs: the bar shows the total of all of them from its first drawing (it used
    to start at the first input's count and grow)."""
    ds = small_dataset()
    first, second = tmp_path / "a.nc", tmp_path / "b.nc"
    ds.isel(time=slice(0, 2)).to_netcdf(first)
    ds.isel(time=slice(2, 4)).drop_vars("count").to_netcdf(second)
    code, output = run_on_terminal([*CLI, "convert", str(first), str(second), str(tmp_path / "o.tgm")],
                                   tmp_path)
    assert code == 0, output
    totals = {int(total) for _, total in re.findall(r"(\d+)/(\d+) \[", output)}
    written = int(re.search(r"wrote (\d+) messages", output)[1])
    assert totals == {written}, output
    assert "writing: 100%" in output
