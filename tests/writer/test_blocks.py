"""Writes of dask-backed Datasets compute each dask block once (tgm_xarray.blocks), whatever the
fields it holds, with intermediates shared by all blocks computed once, on dask's threads, with
``compute=False``, in appends and on a dask.distributed cluster of worker processes; the file
holds the same messages as the write of the same Dataset in memory."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import xarray as xr

import tgm_xarray
from tgm_xarray import _core

dask = pytest.importorskip("dask")
da = pytest.importorskip("dask.array")

STEPS, LEVELS, NY, NX = 12, 2, 9, 16


class BlockCounter:
    """A ``map_blocks`` function that makes each block's values from its location and counts
    its calls, here (``path`` None) or, from worker processes, as lines of a file."""

    def __init__(self, path: Path | None = None):
        self.path = os.fspath(path) if path is not None else None
        self._calls = 0
        self._lock = threading.Lock()

    def __call__(self, block_info=None):
        info = block_info[None]
        (s0, s1), (l0, l1), (y0, y1), (x0, x1) = info["array-location"]
        steps, levels = np.arange(s0, s1), np.arange(l0, l1)
        y, x = np.arange(y0, y1), np.arange(x0, x1)
        values = (250 + steps[:, None, None, None] + 10 * levels[None, :, None, None]
                  + 0.1 * y[None, None, :, None] + 0.01 * x[None, None, None, :])
        if self.path is not None:
            with open(self.path, "a") as f:
                f.write(f"{info['chunk-location']}\n")
        else:
            with self._lock:
                self._calls += 1
        return values.astype("float32")

    @property
    def calls(self) -> int:
        if self.path is None:
            return self._calls
        with open(self.path) as f:
            return len(f.read().splitlines())

    def __getstate__(self):  # to worker processes: the file, not the lock
        return {"path": self.path, "_calls": 0}

    def __setstate__(self, state):
        self.__dict__.update(state, _lock=threading.Lock())


def dataset(counter: BlockCounter, chunks: tuple) -> xr.Dataset:
    data = da.map_blocks(counter, chunks=chunks, dtype="float32", meta=np.array((), "float32"))
    return xr.Dataset(
        {"t": (("step", "isobaricInhPa", "latitude", "longitude"), data, {"units": "K"})},
        coords={"time": np.datetime64("2026-04-04T00:00", "ns"),
                "step": pd.to_timedelta(np.arange(STEPS) * 6, unit="h"),
                "isobaricInhPa": [850, 500][:LEVELS], "latitude": np.linspace(80, -80, NY),
                "longitude": np.linspace(0, 337.5, NX)})


def assert_same_messages(a: Path, b: Path) -> None:
    """The same messages, in the same order: metadata (less the time and uuid Tensogram stamps
    on each message), descriptors and stored values bit for bit, and the same sizes."""
    assert a.stat().st_size == b.stat().st_size
    one, other = _core.FileHandle(os.fspath(a)), _core.FileHandle(os.fspath(b))
    assert len(one) == len(other)
    for msg in range(len(one)):
        stamped = [{k: v for k, v in h.metadata(msg).items() if k != "_reserved_"} for h in (one, other)]
        assert stamped[0] == stamped[1]
        assert one.descriptors(msg) == other.descriptors(msg)
        for obj in range(len(one.descriptors(msg))):
            assert one.read(msg, obj).tobytes() == other.read(msg, obj).tobytes()


def blocks_of(chunks: tuple) -> int:
    return int(np.prod([len(c) for c in chunks]))


#: Blocks of 4 steps x 2 levels (8 fields); of 3 steps x 1 level with each field in 2 x 2
#: pieces (rechunked to whole fields); one block of everything.
CHUNKINGS = {
    "8 fields per block": ((4, 4, 4), (2,), (NY,), (NX,)),
    "fields in pieces": ((3, 3, 3, 3), (1, 1), (4, 5), (8, 8)),
    "one block": ((STEPS,), (LEVELS,), (NY,), (NX,)),
}


@pytest.mark.parametrize("chunking", list(CHUNKINGS))
@pytest.mark.parametrize("threads", [1, 2])
def test_each_block_is_computed_once_and_the_bytes_are_those_of_the_dataset_in_memory(
        tmp_path, chunking, threads):
    counter = BlockCounter()
    lazy = dataset(counter, CHUNKINGS[chunking])
    tgm_xarray.to_tgm(lazy, tmp_path / "lazy.tgm", threads=threads, encoding={"t": {"bits": 16}})
    assert counter.calls == blocks_of(CHUNKINGS[chunking])
    tgm_xarray.to_tgm(lazy.load(), tmp_path / "memory.tgm", threads=threads, encoding={"t": {"bits": 16}})
    assert_same_messages(tmp_path / "lazy.tgm", tmp_path / "memory.tgm")
    assert len(_core.FileHandle(os.fspath(tmp_path / "lazy.tgm"))) == STEPS * LEVELS


def test_an_intermediate_all_blocks_share_is_computed_once(tmp_path):
    """Anomalies: every block of ``x - x.mean("step")`` needs the mean of all of ``x``; the
    source blocks are computed once for the whole write, not once per field or per block."""
    counter = BlockCounter()
    chunks = CHUNKINGS["8 fields per block"]
    x = dataset(counter, chunks)
    anomaly = (x - x.mean("step")).assign_attrs(x.attrs)
    tgm_xarray.to_tgm(anomaly, tmp_path / "anomaly.tgm")
    assert counter.calls == blocks_of(chunks)
    with xr.open_dataset(tmp_path / "anomaly.tgm", engine="tgm") as read:
        expected = (x - x.mean("step")).compute()
        np.testing.assert_array_equal(read.t.values, expected.t.values)


def test_blocks_are_computed_on_as_many_threads_as_dask_computes_on(tmp_path):
    """The compute runs on the writer's thread, where dask, given no number of workers, would
    make a pool of Python's default size (cores + 4): as many blocks in memory at once, on the
    same cores. The write names dask's own number, or the one configured."""
    threads: set[int] = set()

    def block(block_info=None):
        threads.add(threading.get_ident())
        return np.ones(block_info[None]["chunk-shape"], "float32")

    x = da.map_blocks(block, chunks=((1,) * 24, (NY,), (NX,)), dtype="float32", meta=np.array((), "float32"))
    ds = xr.Dataset({"t": (("step", "latitude", "longitude"), x)},
                    coords={"step": pd.to_timedelta(np.arange(24) * 6, unit="h")})
    tgm_xarray.to_tgm(ds, tmp_path / "a.tgm")
    assert 1 <= len(threads) <= dask.system.CPU_COUNT
    threads.clear()
    with dask.config.set(num_workers=1):
        tgm_xarray.to_tgm(ds, tmp_path / "b.tgm")
    assert len(threads) == 1


@pytest.mark.thread_unsafe(reason="runs a subprocess")
def test_a_write_on_dask_s_threads_does_not_import_dask_distributed(tmp_path):
    """dask looks a scheduler given by name up after importing dask.distributed, to find no
    client: 0.15 s of a process's first write, spent for nothing. The write gives dask its
    threaded scheduler itself."""
    script = textwrap.dedent("""
        import sys
        import dask.array as da, numpy as np, pandas as pd, xarray as xr, tgm_xarray
        x = da.ones((4, 3, 5), chunks=(2, 3, 5), dtype="float32")
        ds = xr.Dataset({"t": (("step", "y", "x"), x)}, coords={"step": pd.to_timedelta([0, 6, 12, 18], unit="h")})
        tgm_xarray.to_tgm(ds, sys.argv[1])
        print("distributed" in sys.modules)
    """)
    run = subprocess.run([sys.executable, "-c", script, str(tmp_path / "a.tgm")], capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split() == ["False"]
    assert len(_core.FileHandle(os.fspath(tmp_path / "a.tgm"))) == 4


FORKED_WRITE = textwrap.dedent("""
    import os, signal, sys
    import dask.array as da, numpy as np, pandas as pd, xarray as xr, tgm_xarray
    x = da.ones((4, 3, 5), chunks=(2, 3, 5), dtype="float32")
    ds = xr.Dataset({"t": (("step", "y", "x"), x)}, coords={"step": pd.to_timedelta([0, 6, 12, 18], unit="h")})
    tgm_xarray.to_tgm(ds, sys.argv[1] + ".parent")  # leaves the compute threads idle, to be reused
    child = os.fork()
    if child == 0:
        signal.alarm(60)  # a child that hangs ends here, and the test with it
        tgm_xarray.to_tgm(ds, sys.argv[1] + ".child")
        os._exit(0)
    _, status = os.waitpid(child, 0)
    print(os.waitstatus_to_exitcode(status))
""")


@pytest.mark.thread_unsafe(reason="forks")
def test_a_child_forked_after_a_dask_write_writes_too(tmp_path):
    """The writes' compute threads are kept for the process; a forked child has none of them,
    and a pool that believed its idle threads were there would never run the child's compute."""
    run = subprocess.run([sys.executable, "-c", FORKED_WRITE, str(tmp_path / "a")], capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split() == ["0"], f"the forked child's write ended with {run.stdout!r} (-14: it hung)"
    assert len(_core.FileHandle(os.fspath(tmp_path / "a.child"))) == 4


def test_compute_false_computes_each_block_once_when_computed(tmp_path):
    counter = BlockCounter()
    chunks = CHUNKINGS["8 fields per block"]
    write = tgm_xarray.to_tgm(dataset(counter, chunks), tmp_path / "delayed.tgm", compute=False)
    assert counter.calls == 0
    write.compute()
    assert counter.calls == blocks_of(chunks)
    assert len(_core.FileHandle(os.fspath(tmp_path / "delayed.tgm"))) == STEPS * LEVELS


def test_an_append_computes_each_block_once(tmp_path):
    counter = BlockCounter()
    chunks = CHUNKINGS["8 fields per block"]
    ds = dataset(counter, chunks)
    path = tmp_path / "appended.tgm"
    tgm_xarray.to_tgm(ds.isel(step=slice(0, 4)), path)
    first = counter.calls
    tgm_xarray.to_tgm(ds.isel(step=slice(4, None)), path, mode="a")
    assert (first, counter.calls) == (1, blocks_of(chunks))
    with xr.open_dataset(path, engine="tgm") as read:
        np.testing.assert_array_equal(read.t.values, ds.t.values)


def test_all_nan_fields_of_a_block_are_holes_written_back_without_computing_it_again(tmp_path):
    """Every field of one level all NaN: they are left out but one, which keeps the level (its
    values made again, not computed), and the file reads back as the Dataset."""
    counter = BlockCounter()
    ds = dataset(counter, CHUNKINGS["8 fields per block"])
    ds["t"] = ds.t.where(ds.isobaricInhPa == 850)
    tgm_xarray.to_tgm(ds, tmp_path / "holes.tgm")
    assert counter.calls == 3
    assert len(_core.FileHandle(os.fspath(tmp_path / "holes.tgm"))) == STEPS + 1
    with xr.open_dataset(tmp_path / "holes.tgm", engine="tgm") as read:
        xr.testing.assert_equal(read.t.drop_vars("valid_time"), ds.t.compute())


def test_an_error_in_a_block_raises_it_and_leaves_no_file(tmp_path):
    def failing(block_info=None):
        if block_info[None]["chunk-location"][0] == 2:
            raise ZeroDivisionError("block 2")
        return np.zeros(block_info[None]["chunk-shape"], "float32")

    data = da.map_blocks(failing, chunks=((4, 4, 4), (NY,), (NX,)), dtype="float32",
                         meta=np.array((), "float32"))
    ds = xr.Dataset({"t": (("step", "y", "x"), data)},
                    coords={"step": pd.to_timedelta(np.arange(STEPS), unit="h")})
    with pytest.raises(ZeroDivisionError, match="block 2"):
        tgm_xarray.to_tgm(ds, tmp_path / "failed.tgm", threads=2)
    assert os.listdir(tmp_path) == []


@pytest.mark.thread_unsafe(reason="starts a cluster of worker processes")
def test_on_a_cluster_each_block_is_computed_once_on_the_workers(tmp_path, dask_client):
    """With a distributed client as the scheduler, the blocks are computed on the workers (the
    counter's lines come from their processes), each once; fields are encoded and written here,
    in order: the bytes of the write in memory."""
    counter = BlockCounter(tmp_path / "calls.txt")
    chunks = CHUNKINGS["8 fields per block"]
    x = dataset(counter, chunks)
    anomaly = x - x.mean("step")
    with dask.config.set(scheduler=dask_client):
        tgm_xarray.to_tgm(anomaly, tmp_path / "cluster.tgm", threads=2)
    assert counter.calls == blocks_of(chunks)
    tgm_xarray.to_tgm(anomaly.compute(scheduler="threads"), tmp_path / "memory.tgm")
    assert_same_messages(tmp_path / "cluster.tgm", tmp_path / "memory.tgm")


# A client process of the test's cluster writes `n` fields of 500 x 500 float32 (1 MB each,
# seeded by their step), `per_block` to a dask block, packed to 8 bits on 2 threads, and prints
# how far its resident memory rose above what it was before the write (its peak reset there).
CLUSTER_CLIENT_CHILD = textwrap.dedent("""
    import sys
    import dask, dask.array as da, distributed, numpy as np, pandas as pd, xarray as xr
    import tgm_xarray
    address, path, n, per_block = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])

    def field(block_info=None):
        (t0, t1), _, _ = block_info[None]["array-location"]
        return np.stack([np.random.default_rng(t).random((500, 500), "float32") for t in range(t0, t1)])

    data = da.map_blocks(field, chunks=((per_block,) * (n // per_block), (500,), (500,)), dtype="float32",
                         meta=np.array((), "float32"))
    ds = xr.Dataset({"t": (("step", "y", "x"), data)}, coords={"step": pd.to_timedelta(np.arange(n), unit="h")})

    def status(key):
        return next(int(line.split()[1]) * 1024 for line in open("/proc/self/status") if line.startswith(key))

    with distributed.Client(address) as client, dask.config.set(scheduler=client):
        # A first write of one block: what any write costs once (imports, the allocator's pools)
        # is not what this one holds.
        tgm_xarray.to_tgm(ds.isel(step=slice(0, per_block)), path + ".first", threads=2, encoding={"t": {"bits": 4}})
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")  # VmHWM from here on
        before = status("VmRSS:")
        tgm_xarray.to_tgm(ds, path, threads=2, encoding={"t": {"bits": 4}})
        print(status("VmHWM:") - before)
""")


@pytest.mark.thread_unsafe(reason="runs a client process of a cluster of worker processes")
def test_on_a_cluster_the_writing_process_holds_a_few_messages_not_blocks(tmp_path, dask_client):
    """The fields are encoded on the workers and only their messages come to the writing process,
    a block's at a time (an eighth of its values, at 4 bits): its memory rises by far less than one
    dask block (24 fields) of a write of 96 fields, and the file holds every field."""
    n, per_block, field = 96, 24, 500 * 500 * 4
    path = tmp_path / "cluster.tgm"
    run = subprocess.run([sys.executable, "-c", CLUSTER_CLIENT_CHILD, dask_client.scheduler.address, str(path),
                          str(n), str(per_block)], capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr[-3000:]
    risen = int(run.stdout.split()[-1])
    assert risen < 12 * field, f"the writing process rose by {risen / field:.1f} fields"
    with xr.open_dataset(path, engine="tgm") as read:
        assert read.t.shape == (n, 500, 500)
        for step in (0, n - 1):
            expected = np.random.default_rng(step).random((500, 500), "float32")
            np.testing.assert_allclose(read.t[step].values, expected, atol=1 / 2**4)


def _threads_by_another_name(dsk, keys, **kwargs):
    """A scheduler the writer does not know (as "processes" would be): dask's threads."""
    import dask.threaded

    return dask.threaded.get(dsk, keys, **kwargs)


def test_another_scheduler_computes_each_block_by_itself_once(tmp_path):
    """A scheduler the writer does not know: each block computed when the file first needs it,
    once, fetched by one of the writer's threads while the others encode; the bytes of the write
    in memory."""
    counter = BlockCounter()
    chunks = CHUNKINGS["8 fields per block"]
    x = dataset(counter, chunks)
    with dask.config.set(scheduler=_threads_by_another_name):
        tgm_xarray.to_tgm(x, tmp_path / "other.tgm", threads=2)
    assert counter.calls == blocks_of(chunks)
    tgm_xarray.to_tgm(x.compute(scheduler="threads"), tmp_path / "memory.tgm")
    assert_same_messages(tmp_path / "other.tgm", tmp_path / "memory.tgm")


@pytest.mark.parametrize("in_memory", [0, 1])
def test_messages_encoded_before_their_turn_wait_in_a_spill_file_past_the_bound(tmp_path, in_memory):
    """With no message (or one) allowed to wait in memory, the others go through the spill file
    and come back whole, in the order asked; the file leaves nothing in its directory."""
    from tgm_xarray.blocks import block_fields
    from tgm_xarray.layout import plan

    ds = dataset(BlockCounter(), CHUNKINGS["8 fields per block"])
    specs = list(plan(ds).messages())

    def encode(spec, values):
        return memoryview(np.ascontiguousarray(values).tobytes() + spec.label.encode())

    fields = block_fields(specs, encode, 2, spill_dir=os.fspath(tmp_path), in_memory=in_memory)
    try:
        taken = [bytes(fields.message((id(s.origin[0]), s.origin[1]))) for s in reversed(specs)]
    finally:
        fields.close()
    expected = [ds.t.values[s.origin[1]].tobytes() + s.label.encode() for s in reversed(specs)]
    assert taken == expected
    assert os.listdir(tmp_path) == []
