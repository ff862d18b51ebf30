"""The suite's own layout (docs/testing.md, "The tests mirror the package"): test modules share
code through ``tests.helpers`` and fixtures only, never by importing ``conftest`` or another test
module, and nothing in ``tests/`` imports ``benchmarks/``. Read with ``ast``."""

from __future__ import annotations

import ast
import re

from tests.helpers.shared import REPO

TESTS = REPO / "tests"
BENCHMARKS = {p.stem for p in (REPO / "benchmarks").glob("*.py")}
MODULES = sorted(p for p in TESTS.rglob("*.py") if "golden" not in p.relative_to(TESTS).parts)


def imported(path) -> list[str]:
    """Every module ``path`` imports (absolute names), at any depth."""
    names = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.append(node.module)
    return names


def problems(path) -> list[str]:
    """What ``path`` imports that it must not, and where it puts benchmarks/ on ``sys.path``."""
    found = []
    for name in imported(path):
        first, last = name.split(".")[0], name.split(".")[-1]
        if "conftest" in (first, last):
            found.append(f"{path}: imports {name}")
        elif last.startswith("test_"):
            found.append(f"{path}: imports the test module {name}")
        elif first == "benchmarks" or first in BENCHMARKS:
            found.append(f"{path}: imports {name} of benchmarks/")
    for number, line in enumerate(path.read_text().splitlines(), 1):
        if re.search(r"sys\.path\.(insert|append)\(.*benchmarks", line):
            found.append(f"{path}:{number}: puts benchmarks/ on sys.path")
    return found


def test_no_module_imports_conftest_test_modules_or_benchmarks():
    assert len(MODULES) > 100  # the folders were read
    assert [p for path in MODULES for p in problems(path)] == []


def test_every_folder_of_tests_is_a_package():
    """Modules of the same name in two folders need each folder to be a package."""
    folders = {p.parent for p in MODULES}
    assert all((folder / "__init__.py").is_file() for folder in folders), sorted(
        str(f) for f in folders if not (f / "__init__.py").is_file())


#: Modules tests skip without that the newest lane does not install on purpose: xarray is a
#: dependency, tgm_xarray.zarr_codec needs only zarr, upstream's engine stays out of the lane.
NOT_INSTALLED_BY_THE_LANE = {"xarray", "tgm_xarray.zarr_codec", "tensogram_xarray.backend"}


def test_the_newest_lane_requires_every_module_tests_skip_without():
    """The Makefile's NEWEST_MODULES (the lane fails when one does not import) lists every module
    a test or docstring example skips without, so none of those skips silently there."""
    makefile = (REPO / "Makefile").read_text()
    listed = set(re.search(r"^NEWEST_MODULES := ((?:.*\\\n)*.*)$", makefile, re.M).group(1).replace("\\\n", " ").split())
    skipped = {name for path in [*TESTS.rglob("*.py"), *(REPO / "src").rglob("*.py")]
               for name in re.findall(r'importorskip\("([^"]+)"', path.read_text())}
    covered = {name for name in skipped if any(m == name or m.startswith(name + ".") for m in listed)}
    assert skipped - covered - NOT_INSTALLED_BY_THE_LANE == set(), "add them to NEWEST_MODULES in the Makefile"
    assert NOT_INSTALLED_BY_THE_LANE.isdisjoint(listed)
