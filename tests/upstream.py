"""Upstream's ``tensogram-xarray`` in a place of its own, never in the test environment.

It registers xarray's engine ``"tensogram"`` too: installed beside us, every process would print
xarray's "Found 2 entrypoints" and our ``EngineNameWarning`` (``make demo`` included). So it is
not a dependency of any extra; the tests that compare with it or check living beside it
(``ISOLATED``) run in a subprocess whose ``PYTHONPATH`` starts with a ``pip install --target``
directory holding it, kept (git-ignored) in ``<repo>/.venv-upstream-xarray/<version>``.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from conftest import REPO

VERSION = "0.24.0"
REQUIREMENT = f"tensogram-xarray=={VERSION}"  # pure Python; its dependency `tensogram` is in our `test` extra
CACHE = REPO / ".venv-upstream-xarray" / VERSION
#: Set (to the target directory) in the subprocess that has upstream on its path.
ENV = "TGM_XARRAY_UPSTREAM_SITE"
#: The tests that need upstream's package, run by tests/test_upstream_isolated.py.
ISOLATED = ("tests/test_upstream_compat.py",
            "tests/test_conveniences.py::test_beside_upstream_tensogram_xarray")


def only_in_isolation() -> None:
    """Skips the calling test (or module) outside the subprocess that has upstream on its path."""
    if not os.environ.get(ENV):
        pytest.skip(f"needs {REQUIREMENT}: runs in a subprocess (tests/test_upstream_isolated.py)",
                    allow_module_level=True)


def site() -> Path:
    """The target directory holding upstream's package, installed once (complete or absent: pip
    installs into a temporary directory renamed into place)."""
    if (CACHE / "tensogram_xarray").is_dir():
        return CACHE
    CACHE.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f"{VERSION}.", suffix=".partial", dir=CACHE.parent))
    try:
        result = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--target",
                                 str(partial), REQUIREMENT], capture_output=True, text=True, timeout=600)
        if result.returncode != 0:
            pytest.skip(f"could not install {REQUIREMENT} into {partial}: {result.stderr.strip()[-500:]}")
        try:
            partial.rename(CACHE)
        except OSError:  # another session installed it meanwhile
            if not (CACHE / "tensogram_xarray").is_dir():
                raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return CACHE
