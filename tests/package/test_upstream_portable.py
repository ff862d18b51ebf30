"""Upstream tensogram-xarray 0.24's own tests that use only the engine, run against ours.

The tests come unchanged from upstream's source distribution on PyPI (tests/helpers/upstream.py); a
plugin (tests/helpers/plugins/upstream_portable.py) selects the portable ones and expects the failures of
``DIFFERENCES``, each documented in docs/mapping.md.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from tests.helpers import upstream
from tests.helpers.plugins import upstream_portable
from tests.helpers.shared import REPO

pytestmark = pytest.mark.thread_unsafe(reason="starts a pytest subprocess")

#: How many of upstream's tests are portable: a change means the selection rule or the pinned
#: version changed, and the differences need a new look.
PORTABLE = 79
#: Upstream's portable tests that may fail here, at most (each a documented difference).
MOST_DIFFERENCES = 4


def test_upstream_portable_tests_pass_on_our_engine():
    pytest.importorskip("tensogram")
    root = upstream.sdist()
    path = os.pathsep.join(p for p in (str(REPO / "tests" / "helpers" / "plugins"), str(root / "src"), str(REPO / "src"),
                                       os.environ.get("PYTHONPATH")) if p)
    result = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "upstream_portable",
         "-rfEX", "tests"],
        cwd=root, capture_output=True, text=True, timeout=900, env={**os.environ, "PYTHONPATH": path})
    report = result.stdout[-6000:] + result.stderr[-2000:]
    assert result.returncode == 0, report
    counts = {outcome: int(n) for n, outcome in re.findall(r"(\d+) (\w+)", result.stdout.splitlines()[-1])}
    assert counts.get("passed", 0) == PORTABLE - len(upstream_portable.DIFFERENCES), report
    assert counts.get("xfailed", 0) == len(upstream_portable.DIFFERENCES), report


def test_differences_are_few_and_documented():
    """The expected failures are those docs/mapping.md lists, with their reasons."""
    assert len(upstream_portable.DIFFERENCES) <= MOST_DIFFERENCES
    section = (REPO / "docs" / "mapping.md").read_text().split("### Upstream's own tests")[1].split("\n#")[0]
    assert set(re.findall(r"`(tests/test_\w+\.py::[\w:]+)`", section)) == set(upstream_portable.DIFFERENCES)
    assert f"({PORTABLE} of them" in section
