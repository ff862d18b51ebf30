"""A pytest plugin that runs upstream tensogram-xarray's portable tests against our engine.

Loaded (``-p upstream_portable``) in the subprocess tests/package/test_upstream_portable.py starts in
upstream's unpacked source distribution, with upstream's package importable (its test modules
import it) but not installed: no entry point of its own, so xarray's engine ``"tensogram"`` is
ours. A test is portable when it opens files through the engine (``open_dataset``) and uses
nothing of upstream's package; the rest are deselected. ``DIFFERENCES`` are upstream's tests
that fail here on purpose, each a deliberate difference listed in docs/mapping.md (section 10):
they are strict expected failures, so a fixed one fails the run until it leaves the list.
"""

from __future__ import annotations

import ast
import functools
import inspect
import textwrap

import pytest
import xarray as xr

UPSTREAM_PACKAGE = "tensogram_xarray"

#: Upstream test (node id in its source distribution) -> why our engine differs on purpose.
DIFFERENCES: dict[str, str] = {
    "tests/test_backend.py::TestOpenDatasetSimple::test_metadata_in_attrs":
        "no tensogram_wire_version attribute: it would say nothing about the file",
    "tests/test_edge_cases.py::TestPerObjectDimNames::test_coord_match_overrides_per_object_hint":
        "an object's dim_names hint beats a coordinate of the same size",
    "tests/test_issue_67_descriptor_name_fallback.py::TestNestedRootIsAtomic::"
    "test_base_mars_without_param_shadows_descriptor_mars_param":
        "descriptor params fill in the base entry key by key (mars.param), not root key by root key",
    "tests/test_verify_hash.py::TestOpenDatasetVerifyHash::test_verify_hash_true_raises_missing_hash_on_unhashed":
        "TgmHashMismatchError naming file, message and object, not tensogram.MissingHashError",
}


def pytest_configure(config) -> None:
    from tgm_xarray.backend import TensogramBackendEntrypoint

    engine = xr.backends.list_engines().get("tensogram")
    if not isinstance(engine, TensogramBackendEntrypoint):
        raise pytest.UsageError(f'engine="tensogram" is {engine!r}, not tgm-xarray\'s: upstream\'s '
                                f"package is installed here (run these tests where it is not)")


def pytest_collection_modifyitems(config, items) -> None:
    keep, drop = [], []
    for item in items:
        (keep if is_portable(item) else drop).append(item)
    for item in keep:
        if item.nodeid in DIFFERENCES:
            item.add_marker(pytest.mark.xfail(reason=DIFFERENCES[item.nodeid], strict=True))
    config.hook.pytest_deselected(items=drop)
    items[:] = keep


def is_portable(item) -> bool:
    """Whether the test opens files through xarray's engine and uses nothing of upstream's
    package: no name it imports from it, no import of it, no mock."""
    function = getattr(item, "function", None)
    if function is None:
        return False
    source = textwrap.dedent(inspect.getsource(function))
    tree = ast.parse(source)
    names = {node.id for node in ast.walk(tree) if isinstance(node, ast.Name)}
    imported = {name for node in ast.walk(tree) for name in _imported_modules(node)}
    return ("open_dataset(" in source and not names & _imported_from_upstream(item.module)
            and not any(name.startswith((UPSTREAM_PACKAGE, "unittest")) for name in imported))


def _imported_modules(node) -> list[str]:
    if isinstance(node, ast.ImportFrom):
        return [node.module or ""]
    return [alias.name for alias in node.names] if isinstance(node, ast.Import) else []


@functools.cache
def _imported_from_upstream(module) -> frozenset[str]:
    """The names ``module`` imports from upstream's package at its top level."""
    return frozenset(alias.asname or alias.name for node in ast.parse(inspect.getsource(module)).body
                     if isinstance(node, ast.ImportFrom) and (node.module or "").startswith(UPSTREAM_PACKAGE)
                     for alias in node.names)
