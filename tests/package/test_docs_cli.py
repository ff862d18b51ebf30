"""docs/cli.md's examples run as written (docs/testing.md, "Docs as tests").

Every line after a ``$`` prompt in a ```` ```console ```` block of the page is a command; the
lines after it, up to the next prompt, are its output (stdout and stderr, as on a terminal),
checked as a doctest checks output: ``...`` stands for any text. A command shown without output
is run and its status checked only. The status is 0, or 1 where the output shown has an error
line or counts problems. The commands run in the page's order, in one directory where the page's
names stand for real files: the shared fixtures, or files built here (``stand_ins``); ``/home/me``
is that directory, which holds the index cache (``.cache/tgm-xarray``). They run in this process
(``tgm_xarray.cli.main``): one interpreter start-up for the page, not one per command.
"""

from __future__ import annotations

import contextlib
import doctest
import glob
import importlib.util
import io
import re
import shlex
import shutil
import tempfile
import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr

from tests.helpers.shared import FIXTURES, REAL, REPO, require_shared
from tgm_xarray.cli import main

PAGE = REPO / "docs" / "cli.md"
HOME = "/home/me"
GRIB = FIXTURES / "upstream" / "grib"


@dataclass(frozen=True)
class Example:
    line: int  # of the command, 1-based
    command: str
    output: str | None  # None: none shown, none checked

    @property
    def status(self) -> int:
        if self.output and re.search(r"^tgm-xarray: error:|\b[1-9][\d,]* problems?$", self.output, re.MULTILINE):
            return 1
        return 0


def examples(page: Path) -> list[Example]:
    """The commands of the ```console blocks of ``page``, each with the output shown after it."""
    lines = page.read_text().splitlines()
    found: list[tuple[int, str, list[str]]] = []
    i = 0
    while i < len(lines):
        if lines[i] != "```console":
            i += 1
            continue
        end = lines.index("```", i + 1)
        for number in range(i + 1, end):
            if lines[number].startswith("$ "):
                found.append((number + 1, lines[number][2:], []))
            else:
                assert found and found[-1][0] > i, f"{page}:{number + 1}: output before any $ command"
                found[-1][2].append(lines[number])
        i = end + 1
    return [Example(line, command, "\n".join(output) + "\n" if output else None) for line, command, output in found]


def stand_ins(workdir: Path) -> None:
    """The files the page names: the GRIB and IFS fixtures, and small NetCDF, Zarr and GRIB
    files built here."""
    import eccodes

    for name in ("2t", "lsm", "q_150", "t_600", "2t_simple"):
        (workdir / f"{name}.grib2").symlink_to(require_shared(GRIB / f"{name}.grib2"))
    for directory in ("a", "grib"):  # two inputs each
        (workdir / directory).mkdir()
        for name in ("2t", "lsm"):
            (workdir / directory / f"{name}.grib2").symlink_to(GRIB / f"{name}.grib2")
    with open(GRIB / "2t.grib2", "rb") as f, open(workdir / "next-step.grib2", "wb") as out:
        field = eccodes.codes_grib_new_from_file(f)  # the next step of 2t
        eccodes.codes_set(field, "step", 6)
        eccodes.codes_write(field, out)
        eccodes.codes_release(field)
    rng = np.random.default_rng(0)
    era5 = xr.Dataset({name: (("time", "latitude", "longitude"), rng.normal(280, 5, (4, 19, 36)).astype("f4"))
                       for name in ("t2m", "msl", "u10")},
                      coords={"time": pd.date_range("2026-01-01", periods=4, freq="6h"),
                              "latitude": np.linspace(90.0, -90.0, 19), "longitude": np.arange(0.0, 360.0, 10.0)})
    era5.to_netcdf(workdir / "era5.nc")
    with warnings.catch_warnings():  # that zarr 3's specification has no consolidated metadata
        warnings.simplefilter("ignore", UserWarning)
        era5.to_zarr(workdir / "store.zarr")
    ifs = (workdir / "ifs-0p25-20260404.tgm")
    ifs.symlink_to(require_shared(REAL / "ifs-0p25-20260404.tgm"))
    damaged = bytearray(ifs.read_bytes())
    damaged[1_000_000] ^= 1  # in message 0's first object
    (workdir / "damaged.tgm").write_bytes(damaged)


def run(example: Example, workdir: str) -> tuple[int, str]:
    """The command's status and what it printed, its arguments expanded as a shell does."""
    argv = shlex.split(example.command, comments=True)
    assert argv[0] == "tgm-xarray", example
    args = [arg for word in argv[1:] for arg in (sorted(glob.glob(word)) if "*" in word else [word])]
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
        try:
            status = main([arg.replace(HOME, workdir) for arg in args])
        except SystemExit as usage:  # argparse's way out
            status = int(usage.code or 0)
    return status, printed.getvalue()


@pytest.fixture
def workdir(monkeypatch):
    for module in ("cfgrib", "eccodes", "zarr"):
        pytest.importorskip(module)
    if importlib.util.find_spec("netCDF4") is None and importlib.util.find_spec("h5py") is None:
        pytest.skip("writing NetCDF needs netCDF4, or h5netcdf with h5py")
    # An index holds the file's absolute path: a directory name of one length keeps the sizes
    # the page shows.
    directory = tempfile.mkdtemp(prefix="tgm-cli-docs-", dir="/tmp")
    try:
        stand_ins(Path(directory))
        monkeypatch.chdir(directory)
        monkeypatch.setenv("TGM_XARRAY_CACHE_DIR", f"{directory}/.cache/tgm-xarray")
        monkeypatch.delenv("TGM_XARRAY_CACHE_MB", raising=False)
        yield directory
    finally:
        shutil.rmtree(directory, ignore_errors=True)


@pytest.mark.thread_unsafe  # changes the working directory and the environment
def test_cli_page_examples_run_as_written(workdir):
    checker = doctest.OutputChecker()
    for example in examples(PAGE):
        status, printed = run(example, workdir)
        where = f"docs/cli.md:{example.line}: $ {example.command}"
        assert status == example.status, f"{where}\nexit status {status}, the page says {example.status}:\n{printed}"
        if example.output is None:
            continue
        wanted = example.output.replace(HOME, workdir)
        if not checker.check_output(wanted, printed, doctest.ELLIPSIS):
            shown = doctest.Example(example.command, wanted)
            pytest.fail(f"{where}\n" + checker.output_difference(shown, printed, doctest.ELLIPSIS), pytrace=False)


def test_the_page_has_its_examples(tmp_path):
    found = examples(PAGE)
    assert len(found) >= 15 and sum(e.output is not None for e in found) >= 10
    page = tmp_path / "page.md"
    page.write_text("```console\n$ tgm-xarray verify a.tgm   # a\na.tgm: bad\n1 problem\n$ tgm-xarray info a.tgm\n```\n"
                    "```\n$ not a console block\n```\n")
    assert examples(page) == [Example(2, "tgm-xarray verify a.tgm   # a", "a.tgm: bad\n1 problem\n"),
                              Example(5, "tgm-xarray info a.tgm", None)]
    assert [e.status for e in examples(page)] == [1, 0]
