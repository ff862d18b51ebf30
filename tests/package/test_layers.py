"""The package's layers, enforced (docs/architecture.md, "Layers"): every import inside
``src/tgm_xarray`` (module-level, function-level and ``TYPE_CHECKING`` ones alike) goes to the
importer's own layer or one below it, and no two top-level modules or packages import each other,
directly or round a loop; inside ``plans/index/`` each module imports only those its package's
docstring lists before it, and the modules of ``cli/`` import each other without a loop. No
module is over ``MAX_LINES`` lines. Read with ``ast`` from the sources: nothing is imported, so
this runs in ``make lint`` in well under a second.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "src" / "tgm_xarray"
#: The package's own ``__init__``: ``from tgm_xarray import __version__`` imports it.
TOP = "tgm_xarray"
#: The most lines a module may have: a longer one holds more than one concern, to split.
MAX_LINES = 600

#: Bottom to top (docs/architecture.md draws it: change both). A name is a top-level module or
#: package of ``tgm_xarray``; a new one must be placed here (test_every_module_has_a_layer).
LAYERS: list[set[str]] = [
    {"_core"},                                         # the Rust binding: every rule about the bytes
    {"errors", "threads", "installation", "params", "atomic"},  # no format knowledge
    {"attrs", "table", "selection", "mars", "vocabulary", "cf", "pipeline"},  # the core's views, conventions
    {"source"},                                        # where bytes come from: files, URLs, handles
    {"hypercube"},                                     # the planner: a table in, a Dataset's layout out
    {"plans"},                                         # a source's plans, cached (the index) and run
    {"layout", "blocks", "frame_fetches", "zarr_codec", "backend", "writer", "export", "grib", "virtual"},
    # the engine, the writers, the integrations
    # the package's faces; earthkit's plugin writes GRIB fields the way convert does (cli.inputs)
    {"accessor", "versions", "tutorial", "cli", "earthkit", TOP},
]


def _unit(path: Path) -> str:
    """The layer unit of a source file: its top-level module or package (``TOP`` for the
    package's own ``__init__``)."""
    parts = path.relative_to(PACKAGE).with_suffix("").parts
    return TOP if parts == ("__init__",) else parts[0]


def _module(path: Path) -> list[str]:
    """The dotted name of a source file, as a list (a package's ``__init__`` is the package)."""
    parts = [TOP, *path.relative_to(PACKAGE).with_suffix("").parts]
    return parts[:-1] if parts[-1] == "__init__" else parts


def _exists(dotted: str) -> bool:
    """Whether ``dotted`` (a full name below ``tgm_xarray``) is a module or package of the package."""
    *parents, name = dotted.split(".")[1:]
    where = PACKAGE.joinpath(*parents)
    return (where / f"{name}.py").exists() or (where / name).is_dir() or any(where.glob(f"{name}.*.so"))


def _target(dotted: str) -> str | None:
    """The layer unit ``dotted`` (a module's full name) belongs to, ``None`` outside the package."""
    parts = dotted.split(".")
    if parts[0] != TOP:
        return None
    return parts[1] if len(parts) > 1 else TOP


def imported(path: Path) -> set[str]:
    """The full names of the modules that the file at ``path`` imports, anywhere in it: for
    ``from a import b``, ``a.b`` where that is a module of the package (``from tgm_xarray import
    cf``), else ``a`` (``from tgm_xarray import __version__``)."""
    module = _module(path)
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: from the importer's package
                package = module if path.name == "__init__.py" else module[:-1]
                base = ".".join(package[:len(package) - node.level + 1] + ([node.module] if node.module else []))
            found.update(f"{base}.{a.name}" if _exists(f"{base}.{a.name}") else base for a in node.names)
    return found


def imports(path: Path) -> set[str]:
    """The units (other than its own) that the file at ``path`` imports, anywhere in it."""
    units = {_target(name) for name in imported(path)}
    return {unit for unit in units if unit is not None and unit != _unit(path)}


def graph() -> dict[str, set[str]]:
    """``{unit: the units it imports}`` over every source file of the package."""
    edges: dict[str, set[str]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        edges.setdefault(_unit(path), set()).update(imports(path))
    return edges


def _layer_of() -> dict[str, int]:
    return {unit: i for i, units in enumerate(LAYERS) for unit in units}


def test_every_module_has_a_layer():
    units = set(graph()) | {"_core"}
    placed = set(_layer_of())
    assert units - placed == set(), "place these in LAYERS"
    assert placed - units == set(), "LAYERS names modules that do not exist"
    assert sum(map(len, LAYERS)) == len(placed), "a module is in two layers"


def test_no_import_upwards():
    layer = _layer_of()
    upwards = sorted(f"{unit} ({layer[unit]}) imports {to} ({layer[to]})"
                     for unit, targets in graph().items() for to in targets if layer[to] > layer[unit])
    assert upwards == []


def cycles(edges: dict[str, set[str]]) -> list[str]:
    """The loops of the import graph ``edges`` (``{node: the nodes it imports}``), each as
    ``a -> b -> a``."""
    found = []
    done: set[str] = set()

    def walk(unit: str, path: list[str]) -> None:
        if unit in path:
            found.append(" -> ".join(path[path.index(unit):] + [unit]))
            return
        if unit in done:
            return
        for to in sorted(edges.get(unit, ())):
            walk(to, [*path, unit])
        done.add(unit)

    for unit in sorted(edges):
        walk(unit, [])
    return found


def test_no_cycle_between_modules():
    assert cycles(graph()) == []


def test_no_cycle_inside_the_cli():
    """``cli/`` is one unit above, so its modules' imports of each other need their own check:
    a loop between commands' modules would make their import order matter."""
    package = PACKAGE / "cli"
    name = ".".join(_module(package / "__init__.py"))
    edges = {".".join(_module(path)): {to for to in imported(path) if to == name or to.startswith(name + ".")}
             for path in sorted(package.glob("*.py"))}
    assert cycles(edges) == []


def test_no_module_is_too_long():
    long = [f"{path.relative_to(PACKAGE)} ({n} lines)" for path in sorted(PACKAGE.rglob("*.py"))
            if (n := len(path.read_text().splitlines())) > MAX_LINES]
    assert long == [], f"over {MAX_LINES} lines, split by concern: {', '.join(long)}"


def test_the_index_modules_import_only_those_before_them():
    """``plans/index/``: its docstring lists its modules in order; each imports only those before
    it, and none the package's ``__init__``, which imports them all."""
    package, name = PACKAGE / "plans" / "index", "tgm_xarray.plans.index"
    docstring = ast.get_docstring(ast.parse((package / "__init__.py").read_text())) or ""
    order = re.findall(r"^- :mod:`\.(\w+)`", docstring, re.MULTILINE)
    assert sorted(order) == sorted(p.stem for p in package.glob("*.py") if p.stem != "__init__")
    later = sorted(f"{module} imports {to}" for i, module in enumerate(order)
                   for to in imported(package / f"{module}.py")
                   if (to == name or to.startswith(name + ".")) and to.removeprefix(name + ".") not in order[:i])
    assert later == []


def test_the_walk_sees_every_kind_of_import(tmp_path, monkeypatch):
    """Module-level, function-level, ``TYPE_CHECKING`` and relative imports all count."""
    package = tmp_path / "tgm_xarray"
    (package / "source").mkdir(parents=True)
    (package / "cf.py").write_text("")
    (package / "source" / "file.py").write_text(
        "from typing import TYPE_CHECKING\n"
        "import numpy\n"
        "from . import handles\n"
        "from ..errors import TgmError\n"
        "if TYPE_CHECKING:\n    from tgm_xarray.hypercube import plan\n"
        "def later():\n    import tgm_xarray.plans.index\n    from tgm_xarray import cf, __version__\n")
    monkeypatch.setattr(sys.modules[__name__], "PACKAGE", package)
    assert imports(package / "source" / "file.py") == {"errors", "hypercube", "plans", "cf", TOP}
