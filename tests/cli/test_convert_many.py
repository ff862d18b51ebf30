"""``tgm-xarray convert INPUT... DIRECTORY/``: one ``.tgm`` per input, converted at once on the
real GRIB fixtures; the values are cfgrib's and those of the one-archive conversion; existing
outputs, shared stems and failing inputs (no output, no litter, the others written)."""

from __future__ import annotations

import os
import re
import shutil

import numpy as np
import pytest
import xarray as xr

from tests.helpers.cli import CLI, FIELDS, GRIB, assert_one_line_error, run_cli, run_on_terminal
from tests.helpers.oracle import ENGINE
from tests.helpers.shared import REAL, require_shared
from tgm_xarray import _core
from tgm_xarray.cli import main
from tgm_xarray.cli.inputs import open_inputs


@pytest.fixture
def grib_dir(tmp_path):
    """The four real GRIB fields, one file each, in a writable directory."""
    require_shared(GRIB)
    pytest.importorskip("cfgrib")
    directory = tmp_path / "grib"
    directory.mkdir()
    for name in FIELDS:
        shutil.copyfile(GRIB / f"{name}.grib2", directory / f"{name}.grib2")
    return directory


def inputs_of(directory) -> list[str]:
    return [str(directory / f"{name}.grib2") for name in FIELDS]


def only_files(directory) -> list[str]:
    """Every entry of ``directory``, hidden ones (temporary files) included."""
    return sorted(os.listdir(directory))


def test_one_output_per_input_with_cfgribs_values(grib_dir, tmp_path, capsys):
    out = tmp_path / "out"
    out.mkdir()
    assert main(["convert", *inputs_of(grib_dir), str(out), "--no-progress"]) == 0
    assert only_files(out) == sorted(f"{name}.tgm" for name in FIELDS)
    printed = capsys.readouterr().out
    archive = tmp_path / "all.tgm"
    assert main(["convert", *inputs_of(grib_dir), str(archive), "--no-progress"]) == 0
    with xr.open_dataset(archive, engine=ENGINE) as one:
        for name, (var, level) in FIELDS.items():
            assert re.search(rf"{re.escape(str(out / name))}\.tgm: wrote \d+ messages? from "
                             rf"{re.escape(str(grib_dir / name))}\.grib2", printed), printed
            [source] = open_inputs(str(grib_dir / f"{name}.grib2"), None, None)
            with xr.open_dataset(out / f"{name}.tgm", engine=ENGINE) as each:
                expected = source[var].values  # lossless by default: exactly cfgrib's float32
                assert each[var].dtype == expected.dtype
                np.testing.assert_array_equal(each[var].values, expected)
                np.testing.assert_array_equal(each.latitude.values, source.latitude.values)
                in_archive = one[var] if level is None else one[var].sel(isobaricInhPa=level)
                np.testing.assert_array_equal(each[var].values, in_archive.values)
                assert each[var].attrs == in_archive.attrs


def test_threads_change_nothing_in_the_outputs(grib_dir, tmp_path):
    """Each input's file holds the same objects (descriptors and values) whether the inputs go
    one at a time or all at once (the bytes differ only by each message's time and uuid)."""
    for threads in ("1", "4"):
        assert main(["convert", *inputs_of(grib_dir), f"{tmp_path / threads}/", "--threads", threads,
                     "--no-progress"]) == 0
    for name in FIELDS:
        one, four = (_core.FileHandle(str(tmp_path / n / f"{name}.tgm")) for n in ("1", "4"))
        assert len(one) == len(four)
        for msg in range(len(one)):
            assert one.descriptors(msg) == four.descriptors(msg)
            for obj in range(len(one.descriptors(msg))):
                np.testing.assert_array_equal(one.read(msg, obj), four.read(msg, obj))


def test_a_directory_input_and_an_output_directory_to_create(grib_dir, tmp_path):
    """OUTPUT ending in a separator is a directory, created; without one, a name that does not
    exist is a file name, as before."""
    assert_one_line_error(run_cli("convert", grib_dir, tmp_path / "new"), r"does not end in \.tgm")
    assert not (tmp_path / "new").exists()
    assert main(["convert", str(grib_dir), f"{tmp_path / 'a' / 'new'}/", "--no-progress"]) == 0
    assert only_files(tmp_path / "a" / "new") == sorted(f"{name}.tgm" for name in FIELDS)


def test_existing_outputs_need_force(grib_dir, tmp_path):
    require_shared(REAL)
    out = tmp_path / "out"
    out.mkdir()
    kept = out / "lsm.tgm"
    shutil.copyfile(REAL / "lsm-bitmap-nan.tgm", kept)
    before = kept.read_bytes()
    result = run_cli("convert", *inputs_of(grib_dir), out)
    assert_one_line_error(result, r"lsm\.tgm: exists: --force replaces it")
    assert only_files(out) == ["lsm.tgm"] and kept.read_bytes() == before  # nothing written at all
    assert run_cli("convert", *inputs_of(grib_dir), out, "--force").returncode == 0
    assert only_files(out) == sorted(f"{name}.tgm" for name in FIELDS)
    with xr.open_dataset(kept, engine=ENGINE) as ds:
        assert list(ds.data_vars) == ["lsm"]


def test_an_input_is_never_its_own_output(tmp_path):
    """A .tgm input converted into its own directory would be replaced: refused, --force or not,
    as with one OUTPUT.tgm, and the input stays as it was."""
    require_shared(REAL)
    source = tmp_path / "lsm.tgm"
    shutil.copyfile(REAL / "lsm-seamask-nan.tgm", source)
    before = source.read_bytes()
    assert_one_line_error(run_cli("convert", source, tmp_path), r"is also an input")
    assert source.read_bytes() == before
    assert_one_line_error(run_cli("convert", source, tmp_path, "--bits", "8", "--force"), r"is also an input")
    assert source.read_bytes() == before and only_files(tmp_path) == ["lsm.tgm"]


def test_two_inputs_of_one_stem_are_refused(grib_dir, tmp_path):
    other = tmp_path / "other"
    other.mkdir()
    shutil.copyfile(grib_dir / "2t.grib2", other / "2t.grib2")
    result = run_cli("convert", grib_dir / "2t.grib2", grib_dir / "lsm.grib2", other / "2t.grib2",
                     f"{tmp_path / 'out'}/")
    assert_one_line_error(result, r"inputs '.*grib/2t.grib2' and '.*other/2t.grib2' would both be "
                                  r"written to '.*out/2t.tgm'")
    assert not (tmp_path / "out").exists()


def test_a_failing_input_gets_no_output_and_the_others_are_written(grib_dir, tmp_path):
    """A truncated GRIB file fails alone: no output nor temporary file for it, the others are
    written, and the status and the last line name it."""
    whole = (grib_dir / "2t.grib2").read_bytes()
    (grib_dir / "cut.grib2").write_bytes(whole[: len(whole) // 2])
    (grib_dir / "text.grib2").write_text("not GRIB")
    out = tmp_path / "out"
    result = run_cli("convert", grib_dir, f"{out}/")
    assert result.returncode == 1, result
    errors = result.stderr.strip().splitlines()
    assert len(errors) == 3 and all(line.startswith("tgm-xarray: error: ") for line in errors), result.stderr
    assert re.search(r"input '.*cut\.grib2': .*; no output written$", errors[0]), errors
    assert re.search(r"input '.*text\.grib2': .*; no output written$", errors[1]), errors
    assert re.search(r"2 inputs of 6 failed: .*cut\.grib2, .*text\.grib2$", errors[2]), errors
    assert "Traceback" not in result.stderr
    assert only_files(out) == sorted(f"{name}.tgm" for name in FIELDS)
    for name, (var, _) in FIELDS.items():
        with xr.open_dataset(out / f"{name}.tgm", engine=ENGINE) as ds:
            assert ds[var].shape == (721, 1440)


def test_one_progress_bar_over_every_inputs_fields(grib_dir, tmp_path):
    code, output = run_on_terminal([*CLI, "convert", *inputs_of(grib_dir), f"{tmp_path / 'out'}/"], tmp_path)
    assert code == 0, output
    written = sum(int(n) for n in re.findall(r"wrote (\d+) messages?", output))
    totals = {int(total) for _, total in re.findall(r"(\d+)/(\d+) \[", output)}
    # one bar (a bar per input would count to 1), its total every input's messages from the start
    assert written == len(FIELDS) and totals == {written}, output
    assert "writing: 100%" in output, output


def test_bad_threads_and_variables_fail_before_anything_is_written(grib_dir, tmp_path):
    out = tmp_path / "out"
    result = run_cli("convert", grib_dir, f"{out}/", "--threads", "0")  # a usage error: status 2
    assert result.returncode == 2 and result.stderr.endswith("error: --threads must be an integer from 1 to 1024; got 0\n")
    result = run_cli("convert", grib_dir, f"{out}/", "--variables", "nope")  # a usage error too
    assert result.returncode == 2 and "error: --variables: no input has ['nope']; theirs are " in result.stderr
    assert only_files(out) == []
    result = run_cli("convert", grib_dir, f"{out}/", "--variables", "t2m,lsm")
    assert result.returncode == 0, result.stderr
    assert only_files(out) == ["2t.tgm", "lsm.tgm"]
    assert "has none of --variables: no output written" in result.stderr
