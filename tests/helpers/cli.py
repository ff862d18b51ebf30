"""Running the ``tgm-xarray`` command in tests: in a subprocess, on a pseudo-terminal, or with
some distributions hidden; the real GRIB fields and a small Dataset to convert."""

from __future__ import annotations

import fcntl
import os
import pty
import re
import struct
import subprocess
import sys
import termios

import numpy as np
import pandas as pd
import xarray as xr

from tests.helpers.shared import FIXTURES

GRIB = FIXTURES / "upstream" / "grib"
FIELDS = {"2t": ("t2m", None), "lsm": ("lsm", None), "q_150": ("q", 150.0), "t_600": ("t", 600.0)}
CLI = [sys.executable, "-m", "tgm_xarray.cli"]


def small_dataset() -> xr.Dataset:
    rng = np.random.default_rng(0)
    return xr.Dataset(
        {"t2m": (("time", "latitude", "longitude"), (280 + rng.standard_normal((4, 6, 8))).astype("float32"),
                 {"units": "K"}),
         "msl": (("time", "latitude", "longitude"), 1e5 + rng.standard_normal((4, 6, 8)), {"units": "Pa"}),
         "count": (("latitude", "longitude"), rng.integers(0, 9, (6, 8)).astype("int16"))},
        coords={"time": ("time", pd.date_range("2026-01-01", periods=4, freq="6h"),
                         {"standard_name": "forecast_reference_time", "long_name": "initial time of forecast"}),
                "latitude": np.linspace(60, 35, 6), "longitude": np.linspace(-10, 25, 8)},
        attrs={"title": "small"})


def run_on_terminal(args: list[str], cwd) -> tuple[int, str]:
    """Runs the command with stdin, stdout and stderr on a pseudo-terminal; returns what it
    printed there."""
    master, slave = pty.openpty()
    # a terminal of 24 x 100 (a new pty has 0 columns, where tqdm draws nothing)
    fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, 100, 0, 0))
    process = subprocess.Popen(args, stdin=slave, stdout=slave, stderr=slave, cwd=cwd)
    os.close(slave)
    output = b""
    while True:
        try:
            chunk = os.read(master, 65536)
        except OSError:  # EIO: the child closed the terminal
            break
        if not chunk:
            break
        output += chunk
    os.close(master)
    return process.wait(timeout=120), output.decode(errors="replace")


REAL_TGM = FIXTURES / "real" / "ifs-0p25-20260404.tgm"


def site_without(tmp_path, names: set[str]) -> str:
    """A site directory of links to this environment's site-packages, less the distributions
    ``names`` (their modules and metadata): to Python they are not installed."""
    import sysconfig

    site = tmp_path / "site-without"
    site.mkdir(exist_ok=True)
    source = sysconfig.get_paths()["purelib"]
    for entry in os.listdir(source):
        if re.split(r"[-.]", entry)[0].lower() not in names and not (site / entry).exists():
            os.symlink(os.path.join(source, entry), site / entry)
    return str(site)


def run_cli(*args, cwd=None) -> subprocess.CompletedProcess:
    command = args[0] if args and isinstance(args[0], list) else [*CLI, *map(str, args)]
    return subprocess.run(command, capture_output=True, text=True, cwd=cwd, timeout=300)


def assert_one_line_error(result: subprocess.CompletedProcess, pattern: str) -> None:
    assert result.returncode == 1, result
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("tgm-xarray: error: "), result.stderr
    assert re.search(pattern, lines[0]), lines[0]
    assert "Traceback" not in result.stderr
