"""The benchmark cases of ``run.py``, by name, in the order they run: each is a function of the
run's ``Context`` returning a ``CaseResult`` (``common.py``), in a module of its own
(``case_<name>.py``, a dash of the name an underscore, and ``virtual.py``, ``archive.py``,
``cases_parallel.py``).

Importing this module imports no case (nor numpy, nor the extension): a case's module is
imported when the case runs, so ``run.py --help`` and ``--report`` stay light.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from typing import Any

#: case name -> its module, in the order reports list the cases. A module's ``CASES`` names its
#: cases where it holds several (cases_parallel.py); otherwise the case is ``case_<name>``.
_MODULES = {
    **{name: f"case_{name}" for name in
       ("decode", "range", "sizes", "packed", "window", "e2e", "open", "contention", "zarr")},
    "virtual": "virtual",
    "archive": "archive",
    **dict.fromkeys(("split", "split-e2e", "async", "window-default"), "cases_parallel"),
    "verify": "case_verify",
    "write": "case_write",
    "write-stream": "case_write_stream",
    "write-dask": "case_write_dask",
    "write-peak": "case_write_peak",
    "convert": "case_convert",
}


def _case(name: str, module: str) -> Callable[[Any], Any]:
    def run(ctx):
        found = importlib.import_module(module)
        case = found.CASES[name] if hasattr(found, "CASES") else getattr(found, f"case_{name.replace('-', '_')}")
        return case(ctx)

    return run


CASES: dict[str, Callable[[Any], Any]] = {name: _case(name, module) for name, module in _MODULES.items()}
