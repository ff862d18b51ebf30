"""The per-process handle cache: one open per file however many threads ask at once, rewritten
files are re-read, the bound on open handles holds, and forked children start afresh."""

from __future__ import annotations

import gc
import os
import subprocess
import sys
import textwrap
import threading
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest

import tgm_xarray
from tests.helpers.matrix import small_file
from tests.helpers.oracle import upstream_decode
from tgm_xarray.source import handles
from tgm_xarray.source.handles import DEFAULT_MAX_OPEN, HandleCache

# Every test here counts opens of, or empties, the process-wide cache.
pytestmark = pytest.mark.thread_unsafe(reason="counts opens of the process-wide handle cache")


def mapped_paths(directory) -> list[str]:
    """Files under ``directory`` mapped into this process right now (from /proc/self/maps)."""
    prefix = os.path.realpath(os.fspath(directory)) + os.sep
    with open("/proc/self/maps") as maps:
        return [line.split(maxsplit=5)[5].strip() for line in maps
                if len(line.split(maxsplit=5)) == 6 and line.split(maxsplit=5)[5].startswith(prefix)]


def test_concurrent_first_opens_open_once(tmp_path):
    path = small_file(tmp_path / "first.tgm", seed=1, messages=20)
    n = 16
    barrier = threading.Barrier(n)
    before = handles.CACHE.opens

    def work(_):
        barrier.wait()
        f = tgm_xarray.open_file(path)
        return f.handle, f.read(7, 0)

    with ThreadPoolExecutor(max_workers=n) as pool:
        results = list(pool.map(work, range(n)))
    assert handles.CACHE.opens - before == 1
    assert len({id(h) for h, _ in results}) == 1
    want = upstream_decode(path, 7)[0]
    for _, values in results:
        np.testing.assert_array_equal(values, want)
    # A private cache behaves the same.
    cache = HandleCache(max_open=4)
    barrier = threading.Barrier(n)

    def work_private(_):
        barrier.wait()
        return cache.acquire(path)

    with ThreadPoolExecutor(max_workers=n) as pool:
        got = list(pool.map(work_private, range(n)))
    assert cache.opens == 1 and len({id(h) for h in got}) == 1


def test_concurrent_first_opens_of_different_files(tmp_path):
    paths = [small_file(tmp_path / f"f{i}.tgm", seed=i) for i in range(8)]
    n = 16
    barrier = threading.Barrier(n)
    cache = HandleCache(max_open=16)

    def work(i):
        barrier.wait()
        return paths[i % 8], cache.acquire(paths[i % 8])

    with ThreadPoolExecutor(max_workers=n) as pool:
        got = list(pool.map(work, range(n)))
    assert cache.opens == 8
    by_path = {}
    for path, handle in got:
        by_path.setdefault(path, set()).add(id(handle))
    assert all(len(ids) == 1 for ids in by_path.values())


def test_file_replaced_with_os_replace_is_reread(tmp_path):
    path = tmp_path / "data.tgm"
    small_file(path, seed=1)
    old = tgm_xarray.open_file(path).read(0, 0)
    np.testing.assert_array_equal(old, upstream_decode(path, 0)[0])
    opens = handles.CACHE.opens
    assert tgm_xarray.open_file(path).handle is tgm_xarray.open_file(path).handle
    assert handles.CACHE.opens == opens  # cached
    small_file(tmp_path / "new.tgm", seed=2, messages=2)
    os.replace(tmp_path / "new.tgm", path)
    f = tgm_xarray.open_file(path)
    assert handles.CACHE.opens == opens + 1
    assert len(f) == 2
    new = f.read(0, 0)
    np.testing.assert_array_equal(new, upstream_decode(path, 0)[0])
    assert not np.array_equal(new, old)


def test_file_rewritten_in_place_is_reread(tmp_path):
    path = tmp_path / "data.tgm"
    small_file(path, seed=1)
    first = tgm_xarray.open_file(path)
    old = first.read(0, 0)
    inode = os.stat(path).st_ino
    # Different size (two messages now), same inode.
    data = open(small_file(tmp_path / "other.tgm", seed=3, messages=2), "rb").read()
    with open(path, "r+b") as f:
        f.write(data)
    assert os.stat(path).st_ino == inode
    second = tgm_xarray.open_file(path)
    assert second.handle is not first.handle and len(second) == 2
    values = second.read(1, 0)
    np.testing.assert_array_equal(values, upstream_decode(path, 1)[0])
    # Same size, new content, a later modification time.
    data = open(small_file(tmp_path / "third.tgm", seed=4, messages=2), "rb").read()
    assert len(data) == os.path.getsize(path)
    st = os.stat(path)
    with open(path, "r+b") as f:
        f.write(data)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 2_000_000_000))
    third = tgm_xarray.open_file(path)
    assert third.handle is not second.handle
    got = third.read(0, 0)
    np.testing.assert_array_equal(got, upstream_decode(path, 0)[0])
    assert not np.array_equal(got, old)
    # Handles of the old versions are not used again (the rewrite invalidated their bytes).
    del first, second
    handles.CACHE.release(path)


def test_private_cache_stays_within_its_bound(tmp_path):
    paths = [small_file(tmp_path / f"bound-{i}.tgm", seed=i) for i in range(10)]
    cache = HandleCache(max_open=4)
    for path in paths:
        handle = cache.acquire(path)
        out = np.empty((8, 9), np.float32)
        handle.read_into(0, 0, None, out)
        np.testing.assert_array_equal(out, upstream_decode(path, 0)[0])
        del handle
        assert len(cache) <= 4
    assert cache.opens == 10
    gc.collect()
    mapped = set(mapped_paths(tmp_path))
    assert len(mapped) <= 4, mapped  # evicted handles really unmapped their files
    assert mapped <= {os.path.realpath(p) for p in paths[-4:]}
    cache.acquire(paths[-1])  # most recent: still cached
    assert cache.opens == 10
    cache.acquire(paths[0])  # evicted long ago: opened again
    assert cache.opens == 11 and len(cache) == 4
    cache.clear()
    gc.collect()
    assert mapped_paths(tmp_path) == []
    with pytest.raises(ValueError):
        HandleCache(max_open=0)


def test_global_cache_respects_default_max_open(tmp_path):
    handles.CACHE.clear()
    gc.collect()
    n = DEFAULT_MAX_OPEN + 6
    paths = [small_file(tmp_path / f"g{i}.tgm", seed=i) for i in range(n)]
    for path in paths:
        tgm_xarray.open_file(path).read(0, 0)
        assert len(handles.CACHE) <= DEFAULT_MAX_OPEN
    gc.collect()
    assert len(handles.CACHE) == DEFAULT_MAX_OPEN
    assert len(mapped_paths(tmp_path)) <= DEFAULT_MAX_OPEN
    handles.CACHE.clear()
    gc.collect()
    assert mapped_paths(tmp_path) == []


def test_an_evicted_handle_stays_valid_for_its_holder(tmp_path):
    paths = [small_file(tmp_path / f"held-{i}.tgm", seed=i) for i in range(3)]
    cache = HandleCache(max_open=1)
    held = cache.acquire(paths[0])
    cache.acquire(paths[1])
    cache.acquire(paths[2])
    assert len(cache) == 1
    out = np.empty((8, 9), np.float32)
    held.read_into(0, 0, None, out)
    np.testing.assert_array_equal(out, upstream_decode(paths[0], 0)[0])


FORK_CHILD = textwrap.dedent("""
    import multiprocessing as mp, sys
    import numpy as np, tgm_xarray
    from tgm_xarray.source import handles

    def child(path, queue):
        try:
            queue.put(("cache", len(handles.CACHE), handles.CACHE.opens))
            f = tgm_xarray.open_file(path)
            queue.put(("read", f.read(1, 0).tolist(), len(handles.CACHE)))
        except BaseException as e:
            queue.put(("error", repr(e), None))

    if __name__ == "__main__":
        path = sys.argv[1]
        parent = tgm_xarray.open_file(path)
        parent.read(0, 0)
        assert len(handles.CACHE) == 1
        ctx = mp.get_context("fork")
        queue = ctx.Queue()
        p = ctx.Process(target=child, args=(path, queue))
        p.start()
        kind, n, _ = queue.get(timeout=60)
        assert kind == "cache" and n == 0, (kind, n)
        kind, values, n = queue.get(timeout=60)
        assert kind == "read", values
        p.join(timeout=60)
        assert p.exitcode == 0, p.exitcode
        assert values == parent.read(1, 0).tolist()
        assert n == 1
        assert len(handles.CACHE) == 1  # the parent's cache is untouched
        print("ok")
""")


def test_forked_child_starts_with_an_empty_cache_and_reads(tmp_path):
    path = small_file(tmp_path / "fork.tgm", seed=5, messages=2)
    run = subprocess.run([sys.executable, "-c", FORK_CHILD, path], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip() == "ok"
