"""What the commands answer: ``info`` summarises every file and writes nothing;
``convert`` warns of outputs that do not open as one Dataset and of ``--bits`` that do not
shrink; one overwrite rule for every output; directories of inputs; ``--storage-options``;
counts in the singular and the plural."""

from __future__ import annotations

import functools
import importlib.util
import json
import os
import threading
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

import numpy as np
import pytest
import xarray as xr

import tgm_xarray
from tests.helpers.cli import GRIB, REAL_TGM, assert_one_line_error, run_cli, small_dataset
from tests.helpers.oracle import ENGINE
from tests.helpers.shared import require_shared
from tgm_xarray.cli import main


def field_2t() -> xr.Dataset:
    rng = np.random.default_rng(1)
    return xr.Dataset(
        {"2t": (("latitude", "longitude"), 280 + rng.standard_normal((3, 4)),
                {"units": "K", "long_name": "2 metre temperature"})},
        coords={"latitude": [50.0, 49.0, 48.0], "longitude": [0.0, 1.0, 2.0, 3.0]},
        attrs={"institution": "tests"})


@pytest.fixture
def three_2t(tmp_path):
    """Three ``2t`` fields at one place, as ``convert 2t.grib2 2t_ieee.grib2 2t_simple.grib2``
    writes them: no Dataset with open_dataset's defaults."""
    path = tmp_path / "three.tgm"
    for mode in ("w", "a", "a"):
        tgm_xarray.to_tgm(field_2t(), path, mode=mode)
    return path


def test_info_summarises_fields_that_do_not_form_one_dataset(three_2t, tmp_path, monkeypatch, capsys):
    """The summary names the variables, their dimensions and attributes (units, long_name),
    says why the file is not one Dataset and the keyword that opens it; nothing is written
    (no index in the cache, none beside the file)."""
    cache = tmp_path / "cache"
    cache.mkdir()
    monkeypatch.setenv("TGM_XARRAY_CACHE_DIR", str(cache))
    before = sorted(os.listdir(tmp_path))
    assert main(["info", str(three_2t)]) == 0
    out = capsys.readouterr().out
    assert "3 messages" in out
    assert "dataset: none (" in out and "has 3 fields at the same place" in out
    assert "duplicates='first'" in out
    assert f"as xr.open_dataset({str(three_2t)!r}, engine='tgm', duplicates='first') opens it:" in out
    assert "2t                   (latitude, longitude) float64" in out
    assert 'units = "K"' in out and 'long_name = "2 metre temperature"' in out
    assert 'institution = "tests"' in out
    assert main(["info", "--json", str(three_2t)]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert "duplicates=" in summary["dataset_error"]
    assert summary["opened_as"] == {"function": "xr.open_dataset",
                                    "keywords": {"engine": "tgm", "duplicates": "first"}}
    assert summary["groups"]["/"]["data_vars"]["2t"]["attrs"]["units"] == "K"
    # a file that opens as one Dataset (its index would be written by an open): none either
    require_shared(REAL_TGM)
    assert main(["info", str(REAL_TGM)]) == 0
    out = capsys.readouterr().out
    assert "dataset: none" not in out and 'units = "K"' in out
    assert os.listdir(cache) == [] and sorted(os.listdir(tmp_path)) == before


def test_convert_warns_when_the_output_is_not_one_dataset(tmp_path):
    """Two copies of one field: written, with a warning saying why and the way out."""
    tgm_xarray.to_tgm(field_2t(), tmp_path / "a.tgm")
    tgm_xarray.to_tgm(field_2t(), tmp_path / "b.tgm")
    result = run_cli("convert", "a.tgm", "b.tgm", "both.tgm", cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    [warning] = result.stderr.strip().splitlines()
    assert warning.startswith("tgm-xarray: warning: both.tgm will not open as one Dataset: ")
    assert "duplicates='first'" in warning
    one = run_cli("convert", "a.tgm", "one.tgm", cwd=tmp_path)
    assert one.returncode == 0 and one.stderr == ""


def test_convert_warns_when_fewer_bits_make_no_smaller_file(tmp_path):
    """--bits 12 writes a larger file than --bits 16 with the default compression: the warning
    says so and what to use instead; whole-byte widths and --compression none are quiet."""
    require_shared(REAL_TGM)
    sizes = {}
    for bits in ("12", "16"):
        out = tmp_path / f"b{bits}.tgm"
        result = run_cli("convert", REAL_TGM, out, "--bits", bits, "--drop-variables", "lsm")
        assert result.returncode == 0, result.stderr
        sizes[bits] = os.path.getsize(out)
        warnings = [line for line in result.stderr.splitlines() if "--bits" in line]
        if bits == "12":
            assert warnings == [
                "tgm-xarray: warning: --bits 12 will not make a file smaller than --bits 16 does: "
                "blosc2 compresses whole bytes and 12-bit values straddle them (and szip takes "
                "8, 16, 24 or 32 bits only). Use --bits 16 (smaller and more precise), or "
                "--bits 8 for a smaller file"]
        else:
            assert warnings == []
    assert sizes["12"] > sizes["16"]  # what the warning claims
    source = tmp_path / "in.nc"
    small_dataset().to_netcdf(source)
    quiet = run_cli("convert", source, tmp_path / "none.tgm", "--bits", "12", "--compression", "none")
    assert quiet.returncode == 0 and "--bits" not in quiet.stderr


def needs_netcdf_writer() -> None:
    """NetCDF output needs netCDF4, or h5netcdf with h5py (neither has free-threaded wheels)."""
    if importlib.util.find_spec("netCDF4") is None and importlib.util.find_spec("h5py") is None:
        pytest.skip("writing NetCDF needs netCDF4, or h5netcdf with h5py")


@pytest.mark.parametrize("name", ["out.tgm", "out.nc", "out.zarr"])
def test_every_existing_output_needs_force(tmp_path, name):
    """One rule: an existing OUTPUT is refused without --force (a .tgm was once replaced
    silently); --force replaces it; --append adds to a .tgm."""
    if name.endswith(".nc"):
        needs_netcdf_writer()
    source = tmp_path / "in.tgm"
    tgm_xarray.to_tgm(small_dataset(), source)
    out = tmp_path / name
    assert run_cli("convert", source, out).returncode == 0
    stamp = os.stat(out).st_mtime_ns, sorted(os.listdir(tmp_path))
    result = run_cli("convert", source, out)
    assert_one_line_error(result, f"{name}: exists: --force replaces it")
    assert (os.stat(out).st_mtime_ns, sorted(os.listdir(tmp_path))) == stamp
    result = run_cli("convert", source, out, "--force")
    assert result.returncode == 0, result.stderr
    if name.endswith(".tgm"):
        assert "--append adds to it" in run_cli("convert", source, out).stderr
        assert run_cli("convert", source, out, "--append").returncode == 0
        assert len(tgm_xarray.open_file(out)) == 2 * len(tgm_xarray.open_file(source))


def test_a_directory_of_grib_files_is_its_files(tmp_path):
    """A directory that is not a Zarr store stands for its files, in sorted order, the others
    named as skipped; a Zarr store is one input whatever its name; no input is an error."""
    require_shared(GRIB)
    pytest.importorskip("cfgrib")
    grib = tmp_path / "grib"
    (grib / "notes").mkdir(parents=True)
    for name in ("lsm", "2t"):
        (grib / f"{name}.grib2").write_bytes((GRIB / f"{name}.grib2").read_bytes())
    (grib / "README.txt").write_text("fields of 2026-04-04")
    result = run_cli("convert", grib, tmp_path / "dir.tgm")
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip() == (f"tgm-xarray: warning: input {str(grib)!r}: skipped 2 entries "
                                     f"not GRIB, NetCDF, Zarr or .tgm: README.txt, notes/")
    assert "from 2 inputs" in result.stdout
    files = run_cli("convert", grib / "2t.grib2", grib / "lsm.grib2", tmp_path / "files.tgm")
    assert files.returncode == 0, files.stderr
    with xr.open_dataset(tmp_path / "dir.tgm", engine=ENGINE) as a, \
            xr.open_dataset(tmp_path / "files.tgm", engine=ENGINE) as b:
        xr.testing.assert_identical(a.load(), b.load())
    pytest.importorskip("zarr")
    store = tmp_path / "store"  # a Zarr store without the .zarr suffix
    small_dataset().to_zarr(store, zarr_format=3, consolidated=False)
    result = run_cli("convert", store, tmp_path / "zarr.tgm")
    assert result.returncode == 0 and "from 1 input;" in result.stdout, result.stderr
    (tmp_path / "empty").mkdir()
    assert_one_line_error(run_cli("convert", tmp_path / "empty", tmp_path / "e.tgm"),
                          r"a directory without GRIB, NetCDF, Zarr or .tgm files, and not a Zarr store")


class TokenServer:
    """An HTTP server on loopback that answers only requests carrying ``X-Token: secret``
    (403 otherwise), as a private bucket behind a token does."""

    def __init__(self, root):
        class Handler(SimpleHTTPRequestHandler):
            def log_message(self, *args):  # quiet
                pass

            def send_head(self):
                if self.headers.get("X-Token") != "secret":
                    self.send_error(403)
                    return None
                return super().send_head()

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), functools.partial(Handler, directory=os.fspath(root)))
        self._httpd.daemon_threads = True
        threading.Thread(target=self._httpd.serve_forever, daemon=True).start()

    def url(self, name: str) -> str:
        return f"http://127.0.0.1:{self._httpd.server_address[1]}/{name}"

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()


@pytest.fixture
def token_server(tmp_path):
    root = tmp_path / "served"
    root.mkdir()
    tgm_xarray.to_tgm(small_dataset(), root / "small.tgm")
    server = TokenServer(root)
    yield server
    server.stop()


def test_storage_options_reach_remote_inputs(token_server, tmp_path, capsys):
    """info, dump, verify, index and convert pass --storage-options to the store: without the
    token's header the server refuses, with it every command reads the file."""
    url = token_server.url("small.tgm")
    token = ["--storage-options", '{"headers": {"X-Token": "secret"}}']
    assert main(["info", url]) == 1
    assert f"{url}: access denied (HTTP 403" in capsys.readouterr().err
    assert main(["info", url, *token]) == 0
    assert "t2m" in capsys.readouterr().out
    assert main(["dump", url, "--message", "0", *token]) == 0
    assert json.loads(capsys.readouterr().out)[0]["message"] == 0
    assert main(["verify", url, *token]) == 0
    assert capsys.readouterr().out.strip().endswith("0 problems")
    assert main(["index", url, "--no-progress", *token]) == 0
    capsys.readouterr()
    out = tmp_path / "copy.tgm"
    assert main(["convert", url, str(out), "--no-progress", *token]) == 0
    with xr.open_dataset(out, engine=ENGINE) as copy:
        xr.testing.assert_identical(copy.load(), small_dataset().drop_encoding())
    with pytest.raises(SystemExit) as usage:
        main(["info", url, "--storage-options", "anon"])
    assert usage.value.code == 2 and "expected a JSON object" in capsys.readouterr().err


def test_counts_are_singular_or_plural(tmp_path, capsys):
    """One helper words every count: "1 message", "1 variable", "2 variables"."""
    one = xr.Dataset({"v": ("x", np.arange(3.0))})
    tgm_xarray.to_tgm(one, tmp_path / "one.tgm", layout="variable")
    assert main(["info", str(tmp_path / "one.tgm")]) == 0
    assert "1 message, " in capsys.readouterr().out
    assert main(["convert", str(tmp_path / "one.tgm"), str(tmp_path / "one.zarr")]) == 0
    assert "wrote 1 variable from" in capsys.readouterr().out
    assert main(["convert", str(tmp_path / "one.tgm"), str(tmp_path / "again.tgm"), "--no-progress"]) == 0
    assert "from 1 input;" in capsys.readouterr().out
    two = one.assign(w=one.v * 2)
    tgm_xarray.to_tgm(two, tmp_path / "two.tgm")
    assert main(["convert", str(tmp_path / "two.tgm"), str(tmp_path / "two.zarr")]) == 0
    assert "wrote 2 variables from" in capsys.readouterr().out
