"""Thread safety: many threads reading through one shared handle, or through their own handles,
get exactly what serial reads get. These tests manage their own threads (``thread_unsafe`` keeps
pytest-run-parallel from running them in several threads at once)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import tgm_xarray
from tests.helpers.oracle import assert_same_bits
from tests.helpers.selections import core_selection, describe_key, outer_index, random_outer_key
from tgm_xarray import _core

pytestmark = pytest.mark.thread_unsafe(reason="starts its own threads")

N_THREADS = 8


def run_in_threads(n: int, work):
    """Runs ``work(i, barrier)`` in ``n`` threads that start together; returns their results."""
    barrier = threading.Barrier(n)
    with ThreadPoolExecutor(max_workers=n) as pool:
        futures = [pool.submit(work, i, barrier) for i in range(n)]
        return [f.result(timeout=300) for f in futures]


def test_shared_handle_random_reads_equal_serial(ifs_file):
    """8 threads x 500 random outer reads of the real file through one shared ``TgmFile``."""
    f = tgm_xarray.open_file(ifs_file)
    objects = [(m, o) for m in range(len(f)) for o in range(len(f.descriptors(m)))]
    rng = np.random.default_rng(4)
    tasks = []
    for _ in range(N_THREADS):
        mine = []
        for _ in range(500):
            msg, obj = objects[int(rng.integers(len(objects)))]
            shape, _ = f.layout(msg, obj)
            # Small windows somewhere in the field (so the test stays fast), any step.
            key = []
            for n in shape:
                start = int(rng.integers(0, n))
                step = int(rng.choice([1, 1, 2, -1, 5]))
                key.append(slice(start, start + step * int(rng.integers(1, 24)), step))
            if rng.random() < 0.3:
                key[-1] = rng.integers(-shape[-1], shape[-1], size=int(rng.integers(1, 9)))
            mine.append((msg, obj, tuple(key)))
        tasks.append(mine)
    serial = [[f.read(msg, obj, key) for msg, obj, key in mine] for mine in tasks]

    def work(i, barrier):
        barrier.wait()
        return [f.read(msg, obj, key) for msg, obj, key in tasks[i]]

    _core.take_max_concurrent_reads()
    results = run_in_threads(N_THREADS, work)
    overlapped = _core.take_max_concurrent_reads()
    for i, (got, want) in enumerate(zip(results, serial)):
        for j, (g, w) in enumerate(zip(got, want)):
            msg, obj, key = tasks[i][j]
            assert_same_bits(g, w, f"thread {i} read {j}: message {msg} object {obj} {describe_key(key)}")
    assert overlapped >= 2, "the reads never ran at the same time"


def _stress_tasks(codec_matrix, seed: int, per_thread: int):
    """Per thread: ``per_thread`` random hyperslabs over every object of the matrix."""
    objects = sorted(codec_matrix.values(), key=lambda o: (o.path, o.msg, o.obj))
    rng = np.random.default_rng(seed)
    tasks = []
    for _ in range(N_THREADS):
        mine = []
        for _ in range(per_thread):
            o = objects[int(rng.integers(len(objects)))]
            key = random_outer_key(rng, o.shape)
            selection, sizes = core_selection(key, o.shape)
            mine.append((o, key, selection, sizes))
        tasks.append(mine)
    return objects, tasks


@pytest.mark.parametrize("handles", ["shared", "distinct"])
def test_stress_every_codec(codec_matrix, handles):
    """8 threads x 2,000 random hyperslabs over every codec of the matrix, through handles shared
    by all threads (fresh: first parses and szip set-up race too) or one handle per thread per
    file, bit for bit equal to serial reads (and to upstream's decode)."""
    objects, tasks = _stress_tasks(codec_matrix, seed=11 if handles == "shared" else 12, per_thread=2000)
    paths = sorted({o.path for o in objects})
    serial_handles = {p: _core.FileHandle(p) for p in paths}
    serial = []
    for mine in tasks:
        results = []
        for o, _, selection, sizes in mine:
            out = np.empty(sizes, o.dtype)
            serial_handles[o.path].read_into(o.msg, o.obj, selection, out)
            results.append(out)
        serial.append(results)
    # The serial reads themselves against upstream (a sample: test_read checks every codec).
    for (o, key, _, sizes), out in list(zip(tasks[0], serial[0]))[:300]:
        assert_same_bits(out, outer_index(o.upstream(), key).reshape(sizes), o.description)

    shared = {p: _core.FileHandle(p) for p in paths} if handles == "shared" else None

    def work(i, barrier):
        barrier.wait()
        mine_handles = shared if shared is not None else {p: _core.FileHandle(p) for p in paths}
        results = []
        for o, _, selection, sizes in tasks[i]:
            out = np.empty(sizes, o.dtype)
            mine_handles[o.path].read_into(o.msg, o.obj, selection, out)
            results.append(out)
        return results

    _core.take_max_concurrent_reads()
    results = run_in_threads(N_THREADS, work)
    overlapped = _core.take_max_concurrent_reads()
    for i in range(N_THREADS):
        for j, (got, want) in enumerate(zip(results[i], serial[i])):
            o, key, _, _ = tasks[i][j]
            assert_same_bits(got, want, f"thread {i} read {j}: {o.description}[{describe_key(key)}]")
    assert overlapped >= 2, "the reads never ran at the same time"


def test_threads_fill_parts_of_one_output(ifs_file):
    """Threads writing row blocks of one field into views of a shared output array (what the
    backend does when dask splits a field) assemble the full decode."""
    f = tgm_xarray.open_file(ifs_file)
    full = f.read(1, 0)
    out = np.full(full.shape, np.nan)
    bounds = np.linspace(0, full.shape[0], 4 * N_THREADS + 1).astype(int)
    blocks = list(zip(bounds[:-1], bounds[1:]))

    def work(i, barrier):
        barrier.wait()
        for a, b in blocks[i::N_THREADS]:
            f.read(1, 0, (slice(a, b),), out=out[a:b])
        return True

    assert all(run_in_threads(N_THREADS, work))
    assert_same_bits(out, full, "assembled from threads")


def test_concurrent_metadata_and_reads_on_a_fresh_handle(codec_matrix):
    """First parses of every message race with reads and metadata calls."""
    paths = sorted({o.path for o in codec_matrix.values()})
    for path in paths:
        handle = _core.FileHandle(path)
        reference = _core.FileHandle(path)
        expected_meta = [reference.metadata(m) for m in range(len(reference))]
        expected_desc = [reference.descriptors(m) for m in range(len(reference))]

        def work(i, barrier):
            barrier.wait()
            order = list(range(len(handle)))[::(1 if i % 2 else -1)]
            seen = []
            for m in order:
                if i % 3 == 0:
                    handle.parse_all()
                seen.append((m, handle.metadata(m), handle.descriptors(m)))
                for obj, d in enumerate(handle.descriptors(m)):
                    out = np.empty(d["shape"], d["dtype"])
                    handle.read_into(m, obj, None, out)
            return seen

        for seen in run_in_threads(N_THREADS, work):
            for m, meta, desc in seen:
                assert meta == expected_meta[m] and desc == expected_desc[m]
