"""Child Python processes a test runs side by side: each its own interpreter (memory limits,
crashes and hash seeds stay in it), a few at a time so that a test of many children takes the
time of its slowest few, not of them all."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor

#: Children at once: the machines have two cores, and a child waits on its imports as much as it computes.
AT_ONCE = 3


def run_pythons(scripts: Sequence[tuple[str, Sequence[str]]], timeout: float) -> list[subprocess.CompletedProcess]:
    """``python -c script *args`` for each ``(script, args)``, their outputs captured as text,
    in the order given."""
    def run(script_args: tuple[str, Sequence[str]]) -> subprocess.CompletedProcess:
        script, args = script_args
        return subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True, timeout=timeout)

    with ThreadPoolExecutor(AT_ONCE) as pool:
        return list(pool.map(run, scripts))
