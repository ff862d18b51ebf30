"""The core's own walk of a message (core-rs/src/source/message/walk.rs): szip RSI offsets read by the
CBOR walker, everything else by upstream. Its descriptors are upstream's, and chunks whose
offsets table is damaged read correctly or fail with upstream's clean error, as before."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import zarr

from tests.helpers.shared import shared_files
from tgm_xarray import _core
from tgm_xarray.errors import TgmFormatError, TgmHashMismatchError
from tgm_xarray.zarr_codec import TensogramCodec

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
OFFSETS_KEY = b"\x72szip_block_offsets"  # the key as CBOR text (0x60 + 18 bytes)
OFFSETS_PARAMS = {"szip_block_offsets", "szip_block_offsets_verified"}  # not shown by parse_message


FIXTURE_FILES = ([pytest.param(p, id=f"golden/{p.name}") for p in sorted(GOLDEN.glob("*.tgm"))]
                 + shared_files("real/*.tgm", "upstream/golden/*.tgm", "upstream/remote-parity/*.tgm"))


@pytest.mark.parametrize("path", FIXTURE_FILES)
def test_parsed_descriptors_are_upstreams(path):
    """Every golden fixture (a row of the option table each, writer and codec) and every shared
    fixture's messages: the core's parse gives upstream's descriptors (the Rust unit test
    `walked_messages_equal_upstreams_parse` compares them whole, offsets included)."""
    import tensogram

    data = Path(path).read_bytes()
    for i, (offset, length) in enumerate(tensogram.scan(data)):
        message = data[offset : offset + length]
        _, ours = _core.parse_message(message)
        _, theirs = tensogram.decode_descriptors(message)
        assert len(ours) == len(theirs), i
        for (desc, _, _), up in zip(ours, theirs, strict=True):
            assert (desc["shape"], desc["dtype"], desc["byte_order"]) == (list(up.shape), up.dtype, up.byte_order), i
            assert (desc["encoding"], desc["filter"], desc["compression"]) == (up.encoding, up.filter, up.compression), i
            assert desc["params"] == {k: v for k, v in up.params.items() if k not in OFFSETS_PARAMS}, i


@pytest.fixture(scope="module")
def chunk():
    """One zarr chunk (a whole message) of sp24 + szip at the codec's defaults, and its values."""
    values = np.linspace(250, 310, 64 * 96).reshape(64, 96) + np.sin(np.arange(64 * 96)).reshape(64, 96)
    codec = TensogramCodec(encoding="simple_packing", bits_per_value=24, compression="szip")
    store: dict = {}
    z = zarr.create_array(zarr.storage.MemoryStore(store), shape=values.shape, chunks=values.shape,
                          dtype="float64", fill_value=np.nan, serializer=codec, compressors=None)
    z[:] = values
    message = bytes(store["c/0/0"].to_bytes())
    # 6,144 values in 128-value RSI blocks: an array of 48 offsets, its head 0x98 0x30.
    assert message[message.index(OFFSETS_KEY) + len(OFFSETS_KEY):][:2] == b"\x98\x30"
    return message, z[:]


def edited(message: bytes, at: int, byte: int) -> np.ndarray:
    """`message` with the byte `at` bytes after the offsets key set to `byte`."""
    buf = bytearray(message)
    buf[buf.index(OFFSETS_KEY) + len(OFFSETS_KEY) + at] = byte
    return np.frombuffer(bytes(buf), np.uint8)


def read_box(buf, verify_hash=None) -> np.ndarray:
    out = np.empty((30, 50))
    _core.decode_message_into(buf, 0, (slice(10, 40), slice(20, 70)), out, verify_hash=verify_hash,
                              expect=([64, 96], "float64"))
    return out


def test_a_box_of_a_chunk_reads_through_the_walked_offsets(chunk):
    message, values = chunk
    assert np.array_equal(read_box(np.frombuffer(message, np.uint8)), values[10:40, 20:70])


@pytest.mark.parametrize("what, at, byte", [
    ("an offset changed (the verified mark no longer matches)", 5, None),
    ("an offset as a half float, not an integer", 3, 0xF9),
])
def test_offsets_nobody_vouches_for_are_found_again(chunk, what, at, byte):
    """The walk leaves offsets that are no plain unsigned integers to upstream's parse, and
    offsets whose verified mark does not match are not used: the decoder finds them again."""
    message, values = chunk
    byte = message[message.index(OFFSETS_KEY) + len(OFFSETS_KEY) + at] ^ 1 if byte is None else byte
    with pytest.raises(TgmHashMismatchError):  # by default the edited frame fails its hash
        read_box(edited(message, at, byte))
    # Past the hash, the decoder itself: it finds the offsets again.
    assert np.array_equal(read_box(edited(message, at, byte), verify_hash=False), values[10:40, 20:70]), what


@pytest.mark.parametrize("what, length, error", [
    ("one more offset than stored (runs into the next key)", 0x31, "failed to parse descriptor CBOR"),
    ("one fewer (the last offset becomes a key)", 0x2F, "invalid type: integer"),
    ("far fewer", 0x20, "invalid type: integer"),
    ("255 claimed (runs past the descriptor)", 0xFF, "failed to parse descriptor CBOR"),
])
def test_an_offsets_array_of_the_wrong_length_is_a_format_error(chunk, what, length, error):
    message, _ = chunk
    with pytest.raises(TgmFormatError, match=error):
        read_box(edited(message, 1, length))
