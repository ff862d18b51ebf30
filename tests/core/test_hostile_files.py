"""Hostile files: a read raises an ``Exception`` (a ``TgmError`` or ``MemoryError``) within
bounded memory, never kills the process, never returns values for a payload that cannot hold
them. Each file is upstream ``tensogram``'s output with bytes edited in place (``hostile.py``),
read in a child process under an address-space limit."""

from __future__ import annotations

import json
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import tgm_xarray
from tests.helpers.children import run_pythons
from tests.helpers.hostile import (
    MEMORY_LIMIT,
    PAD,
    data_frames,
    descriptor,
    encode,
    payload_span,
    read_in_child,
    set_shape,
    swap_payload,
    widen_shape,
    zstd_padded,
    zstd_zeros,
)
from tgm_xarray.errors import TgmFormatError

pytestmark = pytest.mark.thread_unsafe(reason="runs subprocesses")

MiB = 1 << 20
#: Address space a read may add in these tests (beyond the imports): far below what the
#: hostile payloads claim, far above what their declared shapes need.
BUDGET = 256 * MiB
#: Windows inside each object as well as the whole object.
KEYS = (None, [[0, 3]], [[10, 12]])


def write(tmp_path, name, message) -> str:
    path = tmp_path / name
    path.write_bytes(bytes(message))
    return str(path)


def assert_raises_in_child(path, expected: str, contains: str = "", budget: int = BUDGET, keys=KEYS):
    run = read_in_child(path, budget, keys)
    assert run["returncode"] == 0, f"the child died with {run['returncode']}: {run['stderr']}"
    assert run["outcomes"], run
    for kind, message in run["outcomes"]:
        assert kind == expected, run["outcomes"]
        assert contains in message and path in message, message
    return run


def test_corrupt_sz3_payload_without_hash_raises_codec_error(tmp_path):
    """SZ3 throws C++ exceptions on corrupt input (they must not cross into Rust: an abort), and
    trusted the sizes in its stream (out-of-bounds writes): each flipped byte of the first 96
    of the payload gives values or a ``TgmCodecError``. One message per flipped byte, all read
    by one child (a child per byte spent a minute starting interpreters)."""
    rng = np.random.default_rng(3)
    values = np.cumsum(rng.standard_normal(4096)).reshape(64, 64)
    good = encode(descriptor((64, 64), compression="sz3", sz3_error_bound_mode="abs", sz3_error_bound=0.01), values)
    start, end = payload_span(good)
    flipped = []
    for pos in range(start, min(end, start + 96)):
        bad = bytearray(good)
        bad[pos] ^= 0xFF
        flipped.append(bytes(bad))
    run = read_in_child(write(tmp_path, "sz3.tgm", b"".join(flipped)), BUDGET, keys=(None,))
    assert run["returncode"] == 0, f"the child died: {run['stderr']}"
    assert len(run["outcomes"]) == len(flipped), run["outcomes"]
    outcomes = {kind for kind, _ in run["outcomes"]}
    assert outcomes <= {"values", "tgm_xarray.errors.TgmCodecError"}, outcomes
    assert "tgm_xarray.errors.TgmCodecError" in outcomes


def test_sz3_zstd_stage_inflating_past_its_element_count(tmp_path):
    """An sz3 payload whose inner zstd stage records 192 MiB (and decodes to it) for 65,536
    values: SZ3 allocated and filled what the stage claims; its limit now follows the element
    count the reader checked against the descriptor (32 bytes an element plus 16 MiB)."""
    values = np.cumsum(np.random.default_rng(4).standard_normal(65536))
    message = encode(descriptor((65536,), compression="sz3", sz3_error_bound_mode="abs", sz3_error_bound=1e-9), values)
    start, end = payload_span(message)
    (stage_size,) = struct.unpack_from("<Q", message, start + 8)  # after SZ3's magic and version
    stage = struct.pack("<Q", 192 * MiB) + zstd_padded(zstd_zeros(192 * 8), stage_size - 8)
    message[start + 16 : start + 16 + stage_size] = stage
    path = write(tmp_path, "sz3-stage-bomb.tgm", message)
    run = assert_raises_in_child(path, "tgm_xarray.errors.TgmCodecError", keys=(None,))
    assert run["rss_growth"] < 64 * MiB, run["rss_growth"]


def test_huge_declared_shape_raises_memory_error(tmp_path):
    """A 4 KB file declaring 65535^3 bytes: the output array cannot be had."""
    message = encode(descriptor((256, 256, 256), dtype="uint8", compression="zstd"), np.zeros((256,) * 3, np.uint8))
    set_shape(message, [256] * 3, [65535] * 3, width=2)
    path = write(tmp_path, "huge-shape.tgm", message)
    assert len(message) < 8192
    run = read_in_child(path, BUDGET, keys=(None,))
    assert run["returncode"] == 0, f"the child died with {run['returncode']}: {run['stderr']}"
    assert [kind for kind, _ in run["outcomes"]] == ["builtins.MemoryError"], run["outcomes"]


def test_field_larger_than_the_memory_limit_raises_memory_error(tmp_path):
    """A valid 2 GiB field (zstd, declared and stored alike) read under a 1 GiB limit."""
    message = encode(descriptor((65536,), compression="zstd"), np.random.default_rng(0).standard_normal(65536))
    start, end = payload_span(message)
    swap_payload(message, zstd_padded(zstd_zeros(2 * 1024**3 // (128 * 1024)), end - start))
    set_shape(message, [65536], [2**28], width=4)
    path = write(tmp_path, "two-gib.tgm", message)
    run = read_in_child(path, 1024 * MiB, keys=(None,))
    assert run["returncode"] == 0, f"the child died with {run['returncode']}: {run['stderr']}"
    assert [kind for kind, _ in run["outcomes"]] == ["builtins.MemoryError"], run["outcomes"]


@pytest.mark.parametrize("compression", ["zstd", "lz4"])
def test_valid_field_read_whole_within_a_limit_numpy_meets(tmp_path, compression):
    """A valid 256 MiB field (zeros) read whole under a 400 MiB limit: the result fits, and the
    decode writes straight into it (upstream's decoders grew buffers of their own past the
    limit, and an infallible allocation aborted the process)."""
    n = 2**25
    message = encode(descriptor((n,), compression=compression), np.zeros(n))
    path = write(tmp_path, f"{compression}-256mib.tgm", message)
    run = read_in_child(path, 400 * MiB, keys=(None,))
    assert run["returncode"] == 0, f"the child died with {run['returncode']}: {run['stderr']}"
    assert [kind for kind, _ in run["outcomes"]] == ["values"], run["outcomes"]


def test_upstream_decoded_field_beyond_a_limit_is_a_memory_error(tmp_path):
    """A valid 256 MiB zstd field with a NaN mask (zeros and one NaN: upstream decodes masked
    objects) read whole under a 400 MiB limit: the result fits, what upstream's decoder
    allocates beside it does not: a MemoryError (its infallible allocation aborted the process)."""
    import tensogram

    n = 2**25
    values = np.zeros(n)
    values[0] = np.nan
    message = tensogram.encode({"base": [{"name": "v"}]}, [(descriptor((n,), compression="zstd"), values)],
                               allow_nan=True)
    path = write(tmp_path, "masked-256mib.tgm", bytearray(message))
    run = read_in_child(path, 400 * MiB, keys=(None,))
    assert run["returncode"] == 0, f"the child died with {run['returncode']}: {run['stderr']}"
    assert [kind for kind, _ in run["outcomes"]] == ["builtins.MemoryError"], run["outcomes"]


FRAME_READ = textwrap.dedent("""
    import json, sys
    from tgm_xarray import _core
    path, budget, start, length = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
""") + MEMORY_LIMIT + textwrap.dedent("""
    frame = open(path, "rb").read()[start:start + length]
    try:
        _core.read_frame(frame, None, None, None, "the referenced frame", expect_shape=[65536])
        print(json.dumps(["values", ""]))
    except Exception as e:
        print(json.dumps([type(e).__name__, str(e)]))
""")


def test_a_frame_chunk_declaring_another_shape_fails_before_it_decodes(tmp_path):
    """A referenced frame (a zarr chunk of the frame codec, 65,536 values) whose descriptor was
    widened to 2^27 float64 (1 GiB): refused on its shape before anything is allocated or
    decoded, within a 64 MiB budget (the 1 GiB result was allocated first)."""
    message = encode(descriptor((65536,), compression="zstd"), np.zeros(65536))
    set_shape(message, [65536], [2**27], width=4)
    path = write(tmp_path, "widened-frame.tgm", message)
    (frame_at, frame_len), = data_frames(bytes(message))
    run = subprocess.run([sys.executable, "-c", FRAME_READ, path, str(64 * MiB), str(frame_at), str(frame_len)],
                         capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stderr[-2000:]
    kind, text = json.loads(run.stdout.strip().splitlines()[-1])
    assert kind == "TgmCodecError" and "shape (134217728,)" in text and "(65536,)" in text, (kind, text)


@pytest.mark.parametrize("where", ["file", "url"])
def test_a_shape_whose_product_overflows_is_refused_naming_the_object(tmp_path, range_server, where):
    """2**32 x 2**32 bytes: a whole read made its array from the shape first, and numpy raised a
    bare ValueError naming nothing. In this process: numpy refuses before allocating."""
    if where == "url":
        pytest.importorskip("aiohttp")
    message = encode(descriptor((2, 3), dtype="uint8", **PAD), np.zeros((2, 3), np.uint8), **PAD)
    widen_shape(message, [2, 3], [2**32, 2**32], width=8)
    path = write(range_server.root if where == "url" else tmp_path, "overflowing.tgm", message)
    source = range_server.url("overflowing.tgm") if where == "url" else path
    with tgm_xarray.open_file(source) as f, pytest.raises(
            TgmFormatError, match=rf"{source}: message 0, object 0 has shape \[4294967296, 4294967296\] of "
                                  r"1-byte elements: 18446744073709551616 bytes, more than any array holds"):
        f.read(0, 0)


def test_a_dimension_past_signed_64_bits_is_refused_not_read_as_empty(tmp_path):
    """Shape [2**63, 1]: indices are signed, and the dimension wrapped negative, so a window read
    gave an empty array without an error."""
    message = encode(descriptor((2, 1), dtype="uint8", **PAD), np.zeros((2, 1), np.uint8), **PAD)
    widen_shape(message, [2, 1], [2**63, 1], width=8)
    path = write(tmp_path, "signed.tgm", message)
    with tgm_xarray.open_file(path) as f:
        for key in [(slice(0, 2), slice(0, 1)), (0, 0)]:
            with pytest.raises(TgmFormatError, match=rf"{path}: message 0, object 0.*dimension of {2**63}"):
                f.read(0, 0, key)


def test_packed_payload_longer_than_its_shape_fails_whole_and_as_a_window(tmp_path):
    """200 packed values under a shape of 100: every read fails alike (a window used to fail
    where the whole object read)."""
    message = encode(descriptor((200,), encoding="simple_packing", sp_bits_per_value=16, sp_reference_value=0.0,
                                sp_binary_scale_factor=0, sp_decimal_scale_factor=0), np.arange(200.0))
    set_shape(message, [200], [100], width=1)
    path = write(tmp_path, "long-packed.tgm", message)
    assert_raises_in_child(path, "tgm_xarray.errors.TgmFormatError", "the payload holds 400 bytes")


@pytest.mark.parametrize("threads", [1, 2, 4])
def test_large_packed_payload_longer_than_its_shape_fails_on_every_thread_count(tmp_path, threads):
    """600,000 packed values under a shape of 300,000: large enough for a whole read to be split
    between threads, which must refuse it as the serial read and upstream do."""
    n = 600_000
    message = encode(descriptor((n,), encoding="simple_packing", sp_bits_per_value=16, sp_reference_value=0.0,
                                sp_binary_scale_factor=0, sp_decimal_scale_factor=0), np.arange(float(n)) % 60000)
    set_shape(message, [n], [n // 2], width=4)
    path = write(tmp_path, "long-packed-large.tgm", message)
    with tgm_xarray.open_file(path) as f, pytest.raises(TgmFormatError, match=f"{path}.*the payload holds {2 * n} bytes"):
        f.read(0, 0, threads=threads)


def test_uncompressed_payload_shorter_than_its_shape(tmp_path):
    """A raw payload of 100 float32 under a shape of 200: whole reads and windows both fail."""
    message = encode(descriptor((100,), dtype="float32"), np.arange(100, dtype=np.float32))
    set_shape(message, [100], [200], width=1)
    path = write(tmp_path, "short.tgm", message)
    assert_raises_in_child(path, "tgm_xarray.errors.TgmFormatError", "the payload holds 400 bytes")


def test_zstd_payload_inflating_past_its_shape(tmp_path):
    """4,096 float64 declared (32 KiB), a zstd payload that inflates to 1 GiB."""
    message = encode(descriptor((4096,), compression="zstd"), np.random.default_rng(1).standard_normal(4096))
    start, end = payload_span(message)
    blocks = min(8192, (end - start - 16) // 4)
    swap_payload(message, zstd_padded(zstd_zeros(blocks), end - start))
    path = write(tmp_path, "zstd-bomb.tgm", message)
    run = assert_raises_in_child(path, "tgm_xarray.errors.TgmCodecError", "the zstd payload decodes to more than")
    assert run["rss_growth"] < 64 * MiB, run["rss_growth"]


def test_lz4_size_prefix_past_its_shape(tmp_path):
    """lz4's size prefix claims 4 GiB for 4,096 float64."""
    message = encode(descriptor((4096,), compression="lz4"), np.random.default_rng(2).standard_normal(4096))
    start, _ = payload_span(message)
    message[start : start + 4] = b"\xff\xff\xff\xff"
    path = write(tmp_path, "lz4-prefix.tgm", message)
    run = assert_raises_in_child(path, "tgm_xarray.errors.TgmCodecError", "the lz4 payload decodes to 4294967295")
    assert run["rss_growth"] < 64 * MiB, run["rss_growth"]


def test_blosc2_frame_claiming_more_than_its_shape(tmp_path):
    """A blosc2 frame of one all-zero chunk whose sizes claim 1.3 GB, for 4,096 float64."""
    message = encode(descriptor((4096,), compression="blosc2", blosc2_codec="lz4", blosc2_clevel=5), np.zeros(4096))
    big = 1_300_000_000
    at = message.find(b"b2frame")
    nbytes = message.find(b"\xd3" + (4096 * 8).to_bytes(8, "big"), at)  # the frame's uncompressed size
    message[nbytes + 1 : nbytes + 9] = big.to_bytes(8, "big")
    sizes = message.find(b"\xd2" + (4096 * 8).to_bytes(4, "big") + b"\xd2" + (4096 * 8).to_bytes(4, "big"), at)
    message[sizes + 6 : sizes + 10] = big.to_bytes(4, "big")  # the chunk size (after the block size)
    path = write(tmp_path, "blosc2-sizes.tgm", message)
    run = read_in_child(path, BUDGET, keys=KEYS)
    assert run["returncode"] == 0, f"the child died with {run['returncode']}: {run['stderr']}"
    assert {kind for kind, _ in run["outcomes"]} == {"tgm_xarray.errors.TgmCodecError"}, run["outcomes"]
    assert run["rss_growth"] < 64 * MiB, run["rss_growth"]


def masked(n: int, method: str, seed: int) -> tuple[bytearray, int]:
    """A real file of ``n`` float64 with NaNs at random positions (about half, so that a
    compressed mask stays about ``n / 8`` bytes), its NaN mask written with ``method``; and
    where its mask starts."""
    import tensogram

    values = np.random.default_rng(seed).standard_normal(n)
    values[values < 0] = np.nan
    message = bytearray(tensogram.encode({"base": [{"name": "v"}]}, [(descriptor((n,)), values)], hash=None,
                                         allow_nan=True, nan_mask_method=method, small_mask_threshold_bytes=0))
    start, _ = payload_span(message)
    return message, start + n * 8  # the mask follows the raw payload


def test_zstd_nan_mask_inflating_past_its_shape(tmp_path):
    """A NaN mask of 2**18 elements (32 KiB of bits) whose zstd stream inflates to 1 GiB."""
    message, mask = masked(2**18, "zstd", seed=4)
    _, end = payload_span(message)
    blocks = min(8192, (end - mask - 16) // 4)
    message[mask:end] = zstd_padded(zstd_zeros(blocks), end - mask)
    path = write(tmp_path, "zstd-mask-bomb.tgm", message)
    run = assert_raises_in_child(path, "tgm_xarray.errors.TgmCodecError", "the zstd nan mask decodes to more than 32768")
    assert run["rss_growth"] < 64 * MiB, run["rss_growth"]


def test_lz4_nan_mask_size_prefix_past_its_shape(tmp_path):
    """An lz4 NaN mask whose size prefix claims 4 GiB for 4,096 elements (512 bytes of bits)."""
    message, mask = masked(4096, "lz4", seed=5)
    message[mask : mask + 4] = b"\xff\xff\xff\xff"
    path = write(tmp_path, "lz4-mask-prefix.tgm", message)
    run = assert_raises_in_child(path, "tgm_xarray.errors.TgmCodecError", "the lz4 nan mask decodes to 4294967295")
    assert run["rss_growth"] < 64 * MiB, run["rss_growth"]


def test_blosc2_nan_mask_claiming_more_than_its_shape(tmp_path):
    """A blosc2 NaN mask whose frame and chunk sizes claim 1.3 GB for 4,096 elements."""
    message, mask = masked(4096, "blosc2", seed=6)
    big, packed = 1_300_000_000, 4096 // 8
    nbytes = message.find(b"\xd3" + packed.to_bytes(8, "big"), mask)  # the frame's uncompressed size
    message[nbytes + 1 : nbytes + 9] = big.to_bytes(8, "big")
    sizes = message.find(b"\xd2" + packed.to_bytes(4, "big") + b"\xd2" + packed.to_bytes(4, "big"), mask)
    message[sizes + 6 : sizes + 10] = big.to_bytes(4, "big")  # the chunk size (after the block size)
    chunk = message.find(b"\x05\x01", sizes)  # the chunk's header: version 5, lz version 1, flags, typesize
    assert message[chunk + 4 : chunk + 8] == packed.to_bytes(4, "little")
    message[chunk + 4 : chunk + 8] = big.to_bytes(4, "little")  # its uncompressed size
    path = write(tmp_path, "blosc2-mask-sizes.tgm", message)
    run = assert_raises_in_child(path, "tgm_xarray.errors.TgmCodecError", "blosc2 nan mask")
    assert run["rss_growth"] < 64 * MiB, run["rss_growth"]


@pytest.mark.parametrize("method", ["none", "rle", "roaring", "lz4", "zstd", "blosc2"])
def test_nan_masks_as_upstream_writes_them_still_read(tmp_path, method):
    """The mask checks pass every method's real masks: NaNs come back where they were written."""
    import tensogram

    message, _ = masked(4096, method, seed=7)
    path = write(tmp_path, f"mask-{method}.tgm", message)
    expected = tensogram.decode(bytes(message)).objects[0][1]
    got = tgm_xarray.open_file(path).read(0, 0)
    np.testing.assert_array_equal(got, expected)
    assert np.isnan(got).sum() == np.isnan(expected).sum() > 1000


# Encodes 16 Mi float64 with sz3 (what the writer and the zarr codec call) in a child whose
# address space may grow by `budget`; prints the outcome as JSON.
SZ3_ENCODE = textwrap.dedent("""
    import json, sys
    import numpy as np
    from tgm_xarray import _core
    budget = int(sys.argv[1])
    values = np.random.default_rng(0).standard_normal(16 * 2**20).cumsum()
    desc = json.loads(sys.argv[2])
""") + MEMORY_LIMIT + textwrap.dedent("""
    try:
        _core.encode_message({}, [(desc, values)], hash=False)
        print(json.dumps(["values", ""]))
    except Exception as e:
        print(json.dumps([type(e).__name__, str(e)]))
""")


def test_sz3_compress_out_of_memory_raises_memory_error():
    """SZ3 throws ``std::bad_alloc`` when its buffers cannot be had: the shim catches it on the
    compress side too (before, the exception crossed ``extern "C"``: ``terminate``, an abort).
    The encode first reserves what it may take (8 times the 128 MiB of values; SZ3 takes about
    7.9): every budget from far below that to past it ends in a ``MemoryError`` (the
    reservation's, or SZ3's caught) or the values, never in an abort."""
    desc = descriptor((16 * 2**20,), compression="sz3", sz3_error_bound_mode="abs", sz3_error_bound=1e-6)
    outcomes = {}
    budgets = [200 * MiB, *range(960 * MiB, 1160 * MiB, 40 * MiB)]
    for budget, run in zip(budgets, run_pythons([(SZ3_ENCODE, [str(b), json.dumps(desc)]) for b in budgets],
                                                timeout=120)):
        assert "std::bad_alloc" not in run.stderr and "terminate called" not in run.stderr, run.stderr[-2000:]
        assert run.returncode == 0, f"budget {budget // MiB} MiB: the child died ({run.returncode}): {run.stderr[-2000:]}"
        outcomes[budget // MiB] = json.loads(run.stdout.strip().splitlines()[-1])
    kinds = {kind for kind, _ in outcomes.values()}
    assert kinds == {"MemoryError", "values"}, outcomes
