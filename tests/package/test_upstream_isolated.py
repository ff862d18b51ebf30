"""Upstream tensogram-xarray's tests (``tests/helpers/upstream.py``'s ``ISOLATED``), in a subprocess that
has upstream's package on its path: this process, like the environment ``make demo`` builds,
never sees upstream's engine."""

from __future__ import annotations

import os
import subprocess
import sys
from importlib.metadata import entry_points

import pytest

from tests.helpers import upstream
from tests.helpers.shared import REPO

pytestmark = pytest.mark.thread_unsafe(reason="starts a pytest subprocess")


def test_upstream_is_not_in_the_test_environment():
    """Only our package registers xarray's engine names here, so nothing warns."""
    providers = {ep.module for ep in entry_points(group="xarray.backends")
                 if ep.name in ("tensogram", "tgm")}
    assert providers == {"tgm_xarray.backend"}, providers


def test_upstream_tests_in_isolation():
    pytest.importorskip("tensogram")
    site = upstream.site()
    path = os.pathsep.join(p for p in (str(site), str(REPO / "src"), os.environ.get("PYTHONPATH")) if p)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
         "-rs", *upstream.ISOLATED],
        cwd=REPO, capture_output=True, text=True, timeout=900,
        env={**os.environ, "PYTHONPATH": path, upstream.ENV: str(site)})
    report = result.stdout[-6000:] + result.stderr[-2000:]
    assert result.returncode == 0, report
    assert " passed" in report and "needs tensogram-xarray" not in report, report
