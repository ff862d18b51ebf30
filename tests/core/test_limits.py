"""The core under limits an HPC login node or a busy machine sets: a write that cannot have its
memory raises ``MemoryError`` and leaves no file, a read whose helper threads cannot start
reads on fewer threads, and an encode's inputs stay alive whatever other threads do to the list
they came in. Each runs in a child process (a crash there fails the test, not the suite)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from tests.helpers.children import run_pythons
from tests.helpers.hostile import MEMORY_LIMIT

pytestmark = pytest.mark.thread_unsafe(reason="runs child processes")


def run_child(code: str, *args: str) -> dict:
    run = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    return json.loads(run.stdout.strip().splitlines()[-1])


# A 32 MB float64 field written with each kind of codec after RLIMIT_AS leaves `budget` bytes of
# address space: far less than an encode takes, so each write must fail, as a MemoryError.
WRITE_CHILD = textwrap.dedent("""
    import json, os, sys
    import numpy as np, xarray as xr, tgm_xarray
    directory, budget = sys.argv[1], int(sys.argv[2])
    ds = xr.Dataset({"t": (("y", "x"), np.random.default_rng(0).random((2000, 2000)))})
    encodings = {"blosc2": None, "lz4": {"compression": "lz4"}, "zstd": {"compression": "zstd"},
                 "szip": {"bits": 16, "compression": "szip"}, "packed": {"bits": 16}, "none": {"compression": "none"}}
""") + MEMORY_LIMIT + textwrap.dedent("""
    outcomes = {}
    for name, encoding in encodings.items():
        try:
            tgm_xarray.to_tgm(ds, os.path.join(directory, name + ".tgm"), threads=1,
                              encoding=None if encoding is None else {"t": encoding})
            outcomes[name] = "written"
        except Exception as e:
            outcomes[name] = type(e).__name__
    print(json.dumps({"outcomes": outcomes, "left": sorted(os.listdir(directory))}))
""")


def test_a_write_without_the_memory_it_needs_raises_memory_error_and_leaves_no_file(tmp_path):
    found = run_child(WRITE_CHILD, str(tmp_path), str(48 * 2**20))
    assert set(found["outcomes"].values()) == {"MemoryError"}, found
    assert found["left"] == []


# The same field written with the defaults (blosc2) under budgets about the address space the
# encode reserves first (8 times the field): each one writes or raises, never aborts.
BOUNDARY_CHILD = textwrap.dedent("""
    import os, sys
    import numpy as np, xarray as xr, tgm_xarray
    directory, budget = sys.argv[1], int(sys.argv[2])
    ds = xr.Dataset({"t": (("y", "x"), np.random.default_rng(0).random((2000, 2000)))})
""") + MEMORY_LIMIT + textwrap.dedent("""
    try:
        tgm_xarray.to_tgm(ds, os.path.join(directory, "a.tgm"), threads=1)
        print("written")
    except MemoryError:
        print("MemoryError")
""")


def test_a_default_write_about_its_reserve_writes_or_raises_and_never_aborts(tmp_path):
    """A direct blosc2 encode that held the values' raw frame while compressing needed more
    than its reserve: between 7.75 and 8.6 times the field the process ended in SIGABRT and left
    its temporary file."""
    field = 2000 * 2000 * 8
    every = range(56, 76, 2)  # 7 to 9.25 times the field
    for eighths in every:
        (tmp_path / str(eighths)).mkdir()
    runs = run_pythons([(BOUNDARY_CHILD, [str(tmp_path / str(e)), str(field * e // 8)]) for e in every], timeout=300)
    for eighths, run in zip(every, runs):
        directory = tmp_path / str(eighths)
        assert run.returncode == 0, f"{eighths / 8} x the field: {run.returncode} {run.stderr[-2000:]}"
        outcome = run.stdout.split()
        assert outcome in (["written"], ["MemoryError"]), outcome
        assert sorted(os.listdir(directory)) == (["a.tgm"] if outcome == ["written"] else [])


# A large szip-packed field read once, then read again on 4 threads once RLIMIT_AS leaves no
# room for a thread's stack: the read goes on without its helpers, the same values.
READ_CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np, xarray as xr, tgm_xarray
    path = sys.argv[1]
    values = np.random.default_rng(1).random((1000, 1500))
    tgm_xarray.to_tgm(xr.Dataset({"t": (("y", "x"), values)}), path,
                      encoding={"t": {"bits": 24, "compression": "szip"}})
    f = tgm_xarray.open_file(path)
    first, again = np.empty(values.shape), np.empty(values.shape)
    f.read(0, 0, None, out=first, threads=1)
    budget = 2**20
""") + MEMORY_LIMIT + textwrap.dedent("""
    try:
        f.read(0, 0, None, out=again, threads=4)
        outcome = "values" if np.array_equal(first, again) else "other values"
    except BaseException as e:
        outcome = type(e).__name__
    print(json.dumps({"outcome": outcome}))
""")


def test_a_read_whose_threads_cannot_start_reads_on_fewer(tmp_path):
    assert run_child(READ_CHILD, str(tmp_path / "large.tgm")) == {"outcome": "values"}


# Threads encode messages while another empties the list their arrays came in (the only
# reference to them): the encoder keeps each array alive until it is done.
ENCODE_CHILD = textwrap.dedent("""
    import json, threading
    import numpy as np
    from tgm_xarray import _core
    descriptor = {"type": "ntensor", "shape": [4_000_000], "dtype": "float64", "byte_order": "little",
                  "encoding": "none", "filter": "none", "compression": "lz4"}
    sizes = []
    for round in range(20):
        objects = [(descriptor, np.full(4_000_000, float(round)))]
        start = threading.Event()
        def encode():
            start.set()
            sizes.append(len(_core.encode_message({}, objects)))
        t = threading.Thread(target=encode)
        t.start()
        start.wait()
        objects.clear()  # the array's last reference, but the encoder's
        t.join()
    print(json.dumps({"encoded": len(sizes)}))
""")


def test_an_encode_keeps_its_inputs_alive_when_another_thread_drops_them():
    assert run_child(ENCODE_CHILD) == {"encoded": 20}
