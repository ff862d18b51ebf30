"""Where the shared fixtures are (``<repo>/../shared``) and the one rule for tests that need them:
``require_shared`` (and ``shared_files`` for parametrizations) skips a local run without them and
fails a CI run (the ``CI`` environment variable set)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
#: Read-only fixtures shared by every developer and CI (``<repo>/../shared``).
SHARED = REPO.parent / "shared"
FIXTURES = SHARED / "fixtures"
REAL = FIXTURES / "real"
GOLDEN = FIXTURES / "upstream" / "golden"
REMOTE_PARITY = FIXTURES / "upstream" / "remote-parity"
NETCDF = FIXTURES / "upstream" / "netcdf"
SHARED_MISSING = f"the shared fixtures are not at {FIXTURES} (expected at <repo>/../shared/fixtures)"
#: In CI (the ``CI`` environment variable set) missing fixtures fail the run instead of skipping
#: every real-data test: a green run must have read the real files.
IN_CI = os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def shared_files(*patterns: str) -> list:
    """Paths under ``fixtures/`` matching ``patterns``, as pytest params (one skip if absent or
    if none matches; in CI, a pattern matching nothing stops the run)."""
    if not FIXTURES.is_dir():
        return [pytest.param(None, marks=pytest.mark.skip(reason=SHARED_MISSING), id="no-shared")]
    paths = sorted({p for pattern in patterns for p in FIXTURES.glob(pattern)})
    if not paths:  # an empty parametrization would skip quietly, in CI too
        missing = f"no shared fixture under {FIXTURES} matches {', '.join(patterns)}"
        if IN_CI:
            raise pytest.UsageError(missing)
        return [pytest.param(None, marks=pytest.mark.skip(reason=missing), id="no-shared")]
    return [pytest.param(p, id=f"{p.parent.name}/{p.name}") for p in paths]


def require_shared(path: Path | None = None) -> Path:
    """Skips the test when the shared fixtures (or ``path`` in them) are missing; fails it in CI."""
    target = path if path is not None else FIXTURES
    if not target.exists():
        (pytest.fail if IN_CI else pytest.skip)(
            SHARED_MISSING if not FIXTURES.is_dir() else f"missing shared fixture {target}")
    return target


def optional_shared(path: Path) -> Path | None:
    """``path`` in the shared fixtures for a test that also runs without it: ``None`` when it is
    missing, but in CI, where a missing fixture fails the test as ``require_shared`` does."""
    if IN_CI or path.exists():
        return require_shared(path)
    return None


def require_entry_point(group: str, name: str) -> None:
    """Skips the test when the installed tgm-xarray lacks an entry point of pyproject.toml (a
    source tree newer than the install); fails it in CI, where the install is the tree's."""
    from importlib.metadata import entry_points

    if not entry_points(group=group, name=name):
        (pytest.fail if IN_CI else pytest.skip)(
            f"no {group} entry point {name!r} is installed: reinstall tgm-xarray (make setup)")

