"""The ``threads=`` option of reads: checked once, the same way, wherever it is taken.

>>> check_threads(4), check_threads(None)
(4, None)
>>> check_threads(0, "a.tgm")
Traceback (most recent call last):
...
ValueError: a.tgm: threads must be None or an integer from 1 to 1024; got 0
"""

from __future__ import annotations

import numbers
from typing import Any

#: The most threads one read may ask for. Each is an OS thread of the core's decode pool, and a
#: decode splits into bands far fewer than this on any machine, so more only costs stacks (and
#: past the OS's limit, a failed thread spawn in the core). A constant, not the machine's core
#: count, so that a setting that works on one machine works on every other.
MAX_THREADS = 1024


def check_threads(threads: Any, source: str = "") -> int | None:
    """``threads`` as an ``int`` (or ``None``: the core's process-wide budget decides), or a
    ``ValueError`` naming the option, ``source`` (the file) and what is allowed."""
    if threads is None:
        return None
    if isinstance(threads, numbers.Integral) and not isinstance(threads, bool) \
            and 1 <= int(threads) <= MAX_THREADS:
        return int(threads)
    where = f"{source}: " if source else ""
    raise ValueError(f"{where}threads must be None or an integer from 1 to {MAX_THREADS}; "
                     f"got {threads!r}")
