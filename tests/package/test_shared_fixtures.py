"""The real-data tests need ``<repo>/../shared/fixtures``: without them a local run skips those
tests, saying where the fixtures were looked for, and a CI run (``CI`` set) fails at once."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.helpers.shared import REPO

TESTS = REPO / "tests"


@pytest.fixture
def checkout_without_shared(tmp_path) -> Path:
    """``tmp_path/repo/tests`` holding the real conftest and helpers and one real-data test, and no
    ``tmp_path/shared`` beside the repo."""
    tests = tmp_path / "repo" / "tests"
    tests.mkdir(parents=True)
    shutil.copyfile(TESTS / "conftest.py", tests / "conftest.py")
    shutil.copyfile(TESTS / "__init__.py", tests / "__init__.py")
    shutil.copytree(TESTS / "helpers", tests / "helpers", ignore=shutil.ignore_patterns("__pycache__"))
    (tests / "test_needs_shared.py").write_text(
        "def test_ifs(ifs_file):\n    assert ifs_file.is_file()\n\n"
        "def test_plain():\n    assert True\n")
    return tests


def _pytest(tests: Path, ci: str | None) -> subprocess.CompletedProcess:
    env = {k: v for k, v in os.environ.items() if k != "CI"}
    if ci is not None:
        env["CI"] = ci
    return subprocess.run([sys.executable, "-m", "pytest", "-q", "-rs", "-p", "no:cacheprovider", str(tests)],
                          cwd=tests.parent, env=env, capture_output=True, text=True, timeout=300)


def test_missing_fixtures_skip_locally_with_where_they_were_looked_for(checkout_without_shared):
    result = _pytest(checkout_without_shared, None)
    assert result.returncode == 0, result.stdout + result.stderr
    where = checkout_without_shared.parent.parent / "shared" / "fixtures"
    assert "1 passed, 1 skipped" in result.stdout
    assert f"the shared fixtures are not at {where}" in result.stdout


def test_missing_fixtures_fail_the_run_in_ci(checkout_without_shared):
    result = _pytest(checkout_without_shared, "true")
    assert result.returncode == pytest.ExitCode.USAGE_ERROR, result.stdout + result.stderr
    where = checkout_without_shared.parent.parent / "shared" / "fixtures"
    assert f"the shared fixtures are not at {where}" in result.stderr
    assert "passed" not in result.stdout  # nothing ran


def test_ci_set_to_false_still_skips(checkout_without_shared):
    assert _pytest(checkout_without_shared, "false").returncode == 0


def test_a_parametrization_over_no_shared_file_skips_locally_and_stops_ci(checkout_without_shared):
    """``shared_files`` patterns that match nothing in the fixtures folder: one skip saying so
    locally (not pytest's quiet empty parameter set), a stopped run in CI."""
    fixtures = checkout_without_shared.parent.parent / "shared" / "fixtures"
    fixtures.mkdir(parents=True)
    (checkout_without_shared / "test_needs_shared.py").write_text(
        "import pytest\n\nfrom tests.helpers.shared import shared_files\n\n"
        "@pytest.mark.parametrize('path', shared_files('real/*.tgm'))\n"
        "def test_each(path):\n    assert path.is_file()\n")
    local = _pytest(checkout_without_shared, None)
    assert local.returncode == 0, local.stdout + local.stderr
    assert "1 skipped" in local.stdout
    assert f"no shared fixture under {fixtures} matches real/*.tgm" in local.stdout
    ci = _pytest(checkout_without_shared, "true")
    assert ci.returncode != 0 and "passed" not in ci.stdout and "skipped" not in ci.stdout, ci.stdout + ci.stderr
    assert f"no shared fixture under {fixtures} matches real/*.tgm" in ci.stdout + ci.stderr
