"""The pool that recycles big blocks of the extension's memory (read results from
``_core.empty``, an encode's buffers): reused memory, views that keep it alive, the limit, an
address-space limit, and many threads reading and freeing at once."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import threading

import numpy as np
import pytest
import xarray as xr

import tgm_xarray
from tests.helpers.hostile import MEMORY_LIMIT
from tests.helpers.oracle import ENGINE, assert_same_bits, upstream_decode
from tgm_xarray import _core

BIG = (721, 1440)  # 8 MB of float64: pooled
T2M, LSM, Q, T = range(4)  # the messages of the real file


def empty_the_pool() -> int:
    """Frees every block the pool keeps, leaving its limit as it was (returned)."""
    _, _, limit = _core.buffer_pool()
    _core.buffer_pool(0)
    _core.buffer_pool(limit)
    return limit


@pytest.fixture
def pool():
    """The pool emptied before the test and its limit restored after."""
    limit = empty_the_pool()
    yield
    _core.buffer_pool(0)
    _core.buffer_pool(limit)


def test_big_arrays_come_from_the_pool_and_small_ones_from_numpy(pool):
    big = _core.empty(BIG, np.float64)
    assert type(big.base).__name__ == "PooledBuffer"
    assert big.shape == BIG and big.dtype == np.float64 and big.flags.c_contiguous and big.flags.writeable
    assert big.ctypes.data % 64 == 0
    small = _core.empty((3, 4), "f4")
    assert small.base is None and small.dtype == np.float32 and small.shape == (3, 4)
    assert _core.empty((0, 1440), np.float64).size == 0


def test_freed_memory_is_handed_to_the_next_read_of_that_size(pool, ifs_file):
    f = tgm_xarray.open_file(ifs_file)
    # A message's first read in the process finds its szip block offsets on the way, decoding
    # into a packed buffer of its own; the handle is shared with earlier tests, so both messages
    # are read once first, whatever ran before.
    f.read(T2M, 0), f.read(Q, 0)
    empty_the_pool()
    first = f.read(T2M, 0)
    address = first.ctypes.data
    del first
    assert _core.buffer_pool()[:2] == (1, 721 * 1440 * 8)  # the array's memory, and only it
    second = f.read(Q, 0)
    assert second.ctypes.data == address
    assert _core.buffer_pool()[:2] == (0, 0)
    assert_same_bits(second, upstream_decode(ifs_file, Q)[0], "recycled memory")


def test_a_view_keeps_the_memory_from_being_reused(pool, ifs_file):
    f = tgm_xarray.open_file(ifs_file)
    field = f.read(T2M, 0)
    view = field[100:110]
    expected = view.copy()
    kept = _core.buffer_pool()[:2]
    del field
    assert _core.buffer_pool()[:2] == kept  # the view holds the field's memory
    other = f.read(Q, 0)
    assert other.ctypes.data != view.ctypes.data
    np.testing.assert_array_equal(view, expected)


def test_the_limit_bounds_what_the_pool_keeps(pool):
    size = 721 * 1440 * 8
    _core.buffer_pool(2 * size)
    arrays = [_core.empty(BIG, np.float64) for _ in range(5)]
    del arrays
    count, kept, limit = _core.buffer_pool()
    assert (count, kept, limit) == (2, 2 * size, 2 * size)
    _core.buffer_pool(size)
    assert _core.buffer_pool()[:2] == (1, size)
    _core.buffer_pool(0)
    assert _core.buffer_pool()[:2] == (0, 0)
    assert _core.empty(BIG, np.float64).base is None  # limit 0: the pool is off


def test_a_buffer_much_bigger_than_the_request_is_not_used(pool):
    big = _core.empty((4, 721, 1440), np.float64)
    del big
    small = _core.empty(BIG, np.float64)
    assert _core.buffer_pool()[0] == 1  # the 33 MB block stays for a read its size
    del small


def test_an_encode_takes_its_buffers_from_the_pool_and_gives_them_back(pool):
    values = 250.0 + 40.0 * np.random.default_rng(3).random(BIG)
    desc = {"shape": list(BIG), "dtype": "float64", "encoding": "simple_packing", "sp_bits_per_value": 24,
            "compression": "szip", "szip_rsi": 128, "szip_block_size": 32, "szip_flags": 8}
    message = _core.encode_message({}, [(desc, values)], threads=1)
    kept = _core.buffer_pool()[:2]
    # The packed pieces, their szip streams, upstream's copy of the payload, its frame, the message.
    assert kept[1] > 2 * len(message)
    _core.encode_message({}, [(desc, values)], threads=1)
    assert _core.buffer_pool()[:2] == kept  # the same blocks, taken and given back
    out = np.empty(BIG)
    _core.decode_message_into(message, 0, None, out)
    assert np.abs(out - values).max() <= 40.0 / (2**24 - 1)  # within one packing step


def test_a_message_not_copied_is_a_view_of_the_encoder_s_memory(pool):
    """``copy=False`` (the writer's) hands over the pooled block the message was framed in."""
    values = 250.0 + 40.0 * np.random.default_rng(4).random(BIG)
    desc = {"shape": list(BIG), "dtype": "float64", "encoding": "simple_packing", "sp_bits_per_value": 24,
            "compression": "szip", "szip_rsi": 128, "szip_block_size": 32, "szip_flags": 8}
    copied = _core.encode_message({}, [(desc, values)], threads=1)
    view = _core.encode_message({}, [(desc, values)], threads=1, copy=False)
    assert isinstance(view, memoryview) and view.c_contiguous and view.format == "B"
    assert len(view) == len(copied) and view[:8] == copied[:8]
    decoded = np.empty(BIG), np.empty(BIG)
    _core.decode_message_into(copied, 0, None, decoded[0])
    _core.decode_message_into(view, 0, None, decoded[1])
    np.testing.assert_array_equal(*decoded)
    count, kept, _ = _core.buffer_pool()
    del view  # its memory was the encoder's: the pool gets the block back
    now_count, now_kept, _ = _core.buffer_pool()
    assert now_count == count + 1 and now_kept >= kept + len(copied)


# A child fills the pool, then limits its address space to what it has plus 64 MiB: an array of
# 96 MiB fits only once the pool has given its blocks back.
POOL_UNDER_LIMIT = textwrap.dedent("""
    import numpy as np
    from tgm_xarray import _core
    _core.buffer_pool(1 << 30)
    blocks = [_core.empty((64 << 20,), np.uint8) for _ in range(3)]
    del blocks
    assert _core.buffer_pool()[:2] == (3, 192 << 20), _core.buffer_pool()
    budget = 64 << 20
""") + MEMORY_LIMIT + textwrap.dedent("""
    big = _core.empty((96 << 20,), np.uint8)
    big[:] = 1
    print(_core.buffer_pool()[:2])
""")


def test_an_allocation_the_address_space_limit_refuses_empties_the_pool_first():
    run = subprocess.run([sys.executable, "-c", POOL_UNDER_LIMIT], capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-3000:]
    assert run.stdout.strip() == "(0, 0)"


@pytest.mark.parametrize("value, limit, warning", [("3", 3 << 20, ""), ("0", 0, ""),
                                                  ("lots", 128 << 20, "not a whole number of megabytes")])
def test_the_environment_sets_the_limit(value, limit, warning):
    code = "from tgm_xarray import _core; print(_core.buffer_pool()[2])"
    env = {"TGM_XARRAY_BUFFER_POOL_MB": value}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, check=True)
    assert int(out.stdout) == limit
    assert (warning in out.stderr) if warning else "Warning" not in out.stderr


def test_pooled_results_survive_pickling_and_dask(pool, ifs_file):
    import pickle

    f = tgm_xarray.open_file(ifs_file)
    field = f.read(T2M, 0)
    again = pickle.loads(pickle.dumps(field, protocol=5))
    assert_same_bits(again, field, "pickled")
    with xr.open_dataset(ifs_file, engine=ENGINE, chunks={}) as ds:
        name = next(v for v in ds.data_vars if ds[v].shape[-2:] == BIG)
        values = ds[name].values
    with xr.open_dataset(ifs_file, engine=ENGINE) as ds:
        assert_same_bits(values, ds[name].values, "dask read through pooled memory")


def test_threads_reading_and_freeing_get_the_right_bits(pool, ifs_file):
    """Eight threads each read the four fields in turn and drop them, so buffers pass from
    thread to thread through the pool: every read must still be the serial result."""
    f = tgm_xarray.open_file(ifs_file)
    expected = [f.read(msg, 0).copy() for msg in range(4)]
    _core.buffer_pool(4 * 721 * 1440 * 8)
    errors = []
    barrier = threading.Barrier(8)

    def work(seed):
        rng = np.random.default_rng(seed)
        barrier.wait()
        for _ in range(25):
            msg = int(rng.integers(4))
            got = f.read(msg, 0)
            if not np.array_equal(got.view(np.uint64), expected[msg].view(np.uint64)):
                errors.append(msg)
            del got

    threads = [threading.Thread(target=work, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    assert _core.buffer_pool()[1] <= 4 * 721 * 1440 * 8


def test_children_forked_while_threads_encode_can_allocate():
    """A child forked while another thread holds the pool's lock would wait on it for ever: the
    fork handlers take the lock around the fork. A thread encodes big fields (its buffers go
    through the pool) while the main thread forks children that encode one each."""
    script = textwrap.dedent("""
        import os, threading, time, warnings
        import numpy as np
        from tgm_xarray import _core
        field = {"type": "ntensor", "shape": [1 << 17], "dtype": "float64", "encoding": "none",
                 "filter": "none", "compression": "none"}
        values = np.arange(1 << 17, dtype=np.float64)
        encode = lambda: _core.encode_message({}, [(field, values)], hash=False)
        stop = threading.Event()
        def hammer():
            while not stop.is_set():
                encode()
        thread = threading.Thread(target=hammer)
        thread.start()
        hung = 0
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)  # fork() of a threaded process
            for _ in range(200):
                pid = os.fork()
                if pid == 0:
                    encode()
                    os._exit(0)
                deadline = time.monotonic() + 60  # a correct child takes milliseconds
                while os.waitpid(pid, os.WNOHANG) == (0, 0):
                    if time.monotonic() > deadline:
                        os.kill(pid, 9)
                        os.waitpid(pid, 0)
                        hung += 1
                        break
                    time.sleep(0.001)
        stop.set()
        thread.join()
        print("hung", hung)
    """)
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["hung", "0"], run.stdout + run.stderr
