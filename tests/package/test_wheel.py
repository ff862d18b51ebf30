"""The package as users install it: ``maturin build --release`` gives a wheel that installs into
a fresh venv (its dependencies from PyPI) and works there without the source tree.

Selected with ``-m wheel``. The wheel is built with the project venv's maturin in the workspace's
cargo target dir (``<repo>/target``, where ``scripts/setup.sh`` built the extension), so only
the extension crate relinks: the C codecs are not compiled again.
"""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
import textwrap
import tomllib
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from tests.helpers.oracle import assert_same_bits
from tests.helpers.shared import REPO

pytestmark = [pytest.mark.wheel, pytest.mark.thread_unsafe(reason="builds and installs a wheel")]

#: Our version, written once: in the Cargo workspace, which maturin gives the package.
VERSION = tomllib.loads((REPO / "Cargo.toml").read_text())["workspace"]["package"]["version"]
VARIABLES = ("2t", "lsm", "q", "t")


def run(cmd: list, what: str, timeout: int, **kw) -> subprocess.CompletedProcess:
    """``cmd`` run to completion; a failure shows its output (a pip or cargo error, not a bare status)."""
    result = subprocess.run([str(c) for c in cmd], capture_output=True, text=True, timeout=timeout, **kw)
    assert result.returncode == 0, f"{what} failed ({result.returncode}):\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return result


@pytest.fixture(scope="module")
def installed(tmp_path_factory) -> Path:
    """The python of a fresh venv with the wheel just built installed in it."""
    if sysconfig.get_config_var("Py_GIL_DISABLED"):
        pytest.skip("the wheel is built and installed on the GIL interpreter: CI's 3.13t extension "
                    "skips PyO3's version check (scripts/free-threaded-python.sh), no wheel to give users")
    maturin = Path(sys.executable).parent / "maturin"
    if not maturin.exists():
        pytest.skip(f"no maturin beside {sys.executable} (scripts/setup.sh installs it)")
    root = tmp_path_factory.mktemp("wheel")
    env = {k: v for k, v in os.environ.items() if k not in ("CONDA_PREFIX", "PYO3_PYTHON", "VIRTUAL_ENV")}
    # The project venv's bin first: cmake >= 3.26 for libaec, as in scripts/setup.sh.
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    run([maturin, "build", "--release", "--interpreter", sys.executable, "--out", root / "dist"],
        "maturin build --release", timeout=1800, cwd=REPO, env=env)
    wheels = sorted((root / "dist").glob("tgm_xarray-*.whl"))
    assert len(wheels) == 1, f"expected one wheel in {root / 'dist'}, found {wheels}"
    venv = root / "venv"
    run([sys.executable, "-m", "venv", venv], "python -m venv", timeout=300)
    python = venv / "bin" / "python"
    run([python, "-m", "pip", "install", "-q", "--prefer-binary", wheels[0]],
        f"pip install {wheels[0].name}", timeout=900, cwd=root)
    return python


def test_cli_version(installed):
    got = run([installed.parent / "tgm-xarray", "--version"], "tgm-xarray --version",
              timeout=120, cwd=installed.parent.parent).stdout
    assert got.startswith(f"tgm-xarray {VERSION} "), got


def test_a_wheel_names_no_page_it_does_not_carry(installed):
    """The engine's ``url`` is the docs of a source tree; a wheel carries none, so it names none
    (the project has no web home yet to point at)."""
    script = "from tgm_xarray.backend import TensogramBackendEntrypoint as E; print(repr(E.url))"
    got = run([installed, "-I", "-c", script], "reading the engine's url", timeout=120).stdout.strip()
    assert got == "''", got


def test_reads_outside_the_source_tree(installed, ifs_file, tmp_path):
    """The installed package (not src/) reads the IFS file to the values our engine gives here."""
    script = textwrap.dedent(f"""
        import sys, numpy as np, xarray as xr, tgm_xarray
        assert tgm_xarray.__file__.startswith(sys.prefix), tgm_xarray.__file__
        with xr.open_dataset({str(ifs_file)!r}, engine="tgm") as ds:
            np.savez("out.npz", **{{name: ds[name].values for name in {VARIABLES!r}}})
    """)
    # -I: no PYTHONPATH, no user site, and the working directory (outside the repo) not on sys.path.
    run([installed, "-I", "-c", script], "reading with the installed wheel", timeout=300, cwd=tmp_path)
    with xr.open_dataset(ifs_file, engine="tgm") as ds, np.load(tmp_path / "out.npz") as got:
        for name in VARIABLES:
            assert_same_bits(got[name], ds[name].values, name)
