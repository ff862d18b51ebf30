"""Upstream's ``tensogram-xarray`` in a place of its own, never in the test environment.

It registers xarray's engine ``"tensogram"`` too: installed beside us, every process would print
xarray's "Found 2 entrypoints" and our ``EngineNameWarning`` (``make demo`` included). So it is
not a dependency of any extra; the tests that compare with it or check living beside it
(``ISOLATED``) run in a subprocess whose ``PYTHONPATH`` starts with a ``pip install --target``
directory holding it, kept (git-ignored) in ``<repo>/.venv-upstream-xarray/<version>``.

Upstream's own tests come from its source distribution on PyPI (:func:`sdist`, unpacked beside
it); tests/package/test_upstream_portable.py runs those that use only the engine against ours.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.helpers.shared import REPO

VERSION = "0.24.0"
REQUIREMENT = f"tensogram-xarray=={VERSION}"  # pure Python; its dependency `tensogram` is in our `test` extra
CACHE = REPO / ".venv-upstream-xarray" / VERSION
#: Upstream's source distribution, unpacked: its package under ``src``, its tests under ``tests``.
SDIST = CACHE.with_name(f"{VERSION}-sdist")
#: Set (to the target directory) in the subprocess that has upstream on its path.
ENV = "TGM_XARRAY_UPSTREAM_SITE"
#: The tests that need upstream's package, run by tests/package/test_upstream_isolated.py.
ISOLATED = ("tests/package/test_upstream_compat.py",
            "tests/package/test_conveniences.py::test_beside_upstream_tensogram_xarray")


def only_in_isolation() -> None:
    """Skips the calling test (or module) outside the subprocess that has upstream on its path."""
    if not os.environ.get(ENV):
        pytest.skip(f"needs {REQUIREMENT}: runs in a subprocess (tests/package/test_upstream_isolated.py)",
                    allow_module_level=True)


def site() -> Path:
    """The target directory holding upstream's package, installed once."""
    return _once(CACHE, "tensogram_xarray", lambda partial: _pip(
        "install", "-q", "--no-deps", "--target", str(partial), REQUIREMENT))


def sdist() -> Path:
    """Upstream's source distribution (package and tests), downloaded once from PyPI: its tests
    are not in the wheel."""
    def unpack(partial: Path) -> None:
        _pip("download", "-q", "--no-deps", "--no-binary", ":all:", "-d", str(partial), REQUIREMENT)
        archive = next(partial.glob("*.tar.gz"))
        with tarfile.open(archive) as tar:
            tar.extractall(partial, filter="data")
        archive.unlink()

    return _once(SDIST, f"tensogram_xarray-{VERSION}", unpack) / f"tensogram_xarray-{VERSION}"


def _pip(*args: str) -> None:
    result = subprocess.run([sys.executable, "-m", "pip", *args], capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        pytest.skip(f"could not get {REQUIREMENT} (pip {args[0]}): {result.stderr.strip()[-500:]}")


def _once(target: Path, marker: str, fill: Callable[[Path], None]) -> Path:
    """``target``, filled once by ``fill`` (complete or absent: filled in a temporary directory
    renamed into place), ``target / marker`` telling that it is there."""
    if (target / marker).is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = Path(tempfile.mkdtemp(prefix=f"{target.name}.", suffix=".partial", dir=target.parent))
    try:
        fill(partial)
        try:
            partial.rename(target)
        except OSError:  # another session filled it meanwhile
            if not (target / marker).is_dir():
                raise
    finally:
        shutil.rmtree(partial, ignore_errors=True)
    return target
