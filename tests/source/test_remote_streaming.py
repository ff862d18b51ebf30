"""Remote files written in streaming mode (no length in the preambles) over HTTP range requests:
opening walks each message's frame headers and fetches its footer, never its payloads; values
equal local reads; forged and truncated files fail naming the URL and the message, in few
requests. Every request goes to a server on loopback, which counts the bytes it sends."""

from __future__ import annotations

import numpy as np
import pytest
import xarray as xr

pytest.importorskip("fsspec")
pytest.importorskip("aiohttp")
tensogram = pytest.importorskip("tensogram")

import tgm_xarray  # noqa: E402
from tgm_xarray.errors import TgmFormatError  # noqa: E402
from tgm_xarray.source import handles  # noqa: E402

pytestmark = pytest.mark.thread_unsafe

PARAMS = ("2t", "msl")


@pytest.fixture(autouse=True)
def fresh_cache():
    """Each test opens its URLs afresh (the servers' ports are reused between tests)."""
    handles.CACHE.clear()
    yield
    handles.CACHE.clear()


def descriptor(n: int) -> dict:
    return {"type": "ntensor", "shape": [n], "dtype": "float32", "byte_order": "little", "encoding": "none",
            "filter": "none", "compression": "none"}


def values(step: int, obj: int, n: int) -> np.ndarray:
    return np.arange(n, dtype=np.float32) * (obj + 1) + step


def streamed(step: int, n: int) -> bytes:
    """A message of one object per parameter, written by upstream's streaming encoder into a
    pipe: length 0 in its preamble, its metadata and index after the objects."""
    enc = tensogram.StreamingEncoder({"base": [{"mars": {"param": p, "step": step}} for p in PARAMS]})
    for obj in range(len(PARAMS)):
        enc.write_object(descriptor(n), values(step, obj, n))
    message = enc.finish()
    assert message[16:24] == bytes(8)  # streaming mode: no length
    return message


def buffered(step: int, n: int) -> bytes:
    """The same message written normally (lengths, metadata and index first)."""
    meta = {"base": [{"mars": {"param": p, "step": step}} for p in PARAMS]}
    return tensogram.encode(meta, [(descriptor(n), values(step, obj, n)) for obj in range(len(PARAMS))])


def serve(server, name: str, data: bytes) -> tuple[str, object]:
    path = server.root / name
    path.write_bytes(data)
    return server.url(name), path


def test_a_streaming_mode_file_opens_by_its_metadata(range_server):
    """It was downloaded whole at open: now its frame headers and footers are fetched, and the
    first read fetches one object's bytes."""
    n = 250_000  # 1 MB objects, 6 MB in all
    url, path = serve(range_server, "streamed.tgm", b"".join(streamed(step, n) for step in range(3)))
    size = path.stat().st_size
    f = tgm_xarray.open_file(url)
    assert len(f) == 3
    opened = range_server.sent_bytes()
    assert opened < 0.03 * size, f"{opened} of {size} bytes fetched at open"
    range_server.reset()
    np.testing.assert_array_equal(f.read(1, 1), values(1, 1, n))
    assert range_server.sent_bytes() < 1.05 * 4 * n  # the object's frame, its descriptors' tails
    local = tgm_xarray.open_file(path)
    for msg in range(3):
        assert f.handle.message_span(msg) == local.handle.message_span(msg)
        assert f.metadata(msg) == local.metadata(msg)
        for obj in range(len(PARAMS)):
            assert f.read(msg, obj).tobytes() == local.read(msg, obj).tobytes()


@pytest.mark.parametrize("layout", ["streamed", "mixed"])
def test_open_dataset_of_a_streaming_mode_file_is_the_local_one(range_server, layout):
    n = 100_000
    pieces = [streamed(0, n), buffered(1, n), streamed(2, n)] if layout == "mixed" else \
        [streamed(step, n) for step in range(3)]
    url, path = serve(range_server, f"{layout}.tgm", b"".join(pieces))
    with xr.open_dataset(url, engine="tgm") as remote_ds, xr.open_dataset(path, engine="tgm") as local_ds:
        assert range_server.sent_bytes() < 0.1 * path.stat().st_size
        xr.testing.assert_identical(remote_ds.load(), local_ds.load())


def test_small_streaming_mode_messages_come_whole_in_few_requests(range_server):
    url, path = serve(range_server, "small.tgm", b"".join(streamed(step, 16) for step in range(300)))
    f = tgm_xarray.open_file(url)
    f.handle.parse_all()
    assert len(f) == 300
    assert range_server.count() <= 12
    np.testing.assert_array_equal(f.read(299, 1), values(299, 1, 16))


def frame_length_slot(message: bytes, frame: int) -> int:
    """Where the length of the message's ``frame``-th frame (0: the header metadata) is stored."""
    at = 24
    for _ in range(frame):
        at += -(-int.from_bytes(message[at + 8 : at + 16], "big") // 8) * 8
    assert message[at : at + 2] == b"FR"
    return at + 8


@pytest.mark.parametrize("forgery", ["past-the-end", "zero-length", "inside-a-payload", "truncated", "no-postamble"])
def test_a_forged_streaming_mode_file_fails_naming_it_in_few_requests(range_server, forgery):
    n = 50_000
    good = streamed(0, n)
    data = bytearray(good + streamed(1, n))
    slot = frame_length_slot(good, 1)  # the first data-object frame
    length = int.from_bytes(data[slot : slot + 8], "big")
    if forgery == "past-the-end":
        data[slot : slot + 8] = (2**63).to_bytes(8, "big")
    elif forgery == "zero-length":
        data[slot : slot + 8] = bytes(8)
    elif forgery == "inside-a-payload":
        data[slot : slot + 8] = (length - 4096).to_bytes(8, "big")
    elif forgery == "truncated":
        data = data[: len(good) + len(good) // 2]
    else:
        data = data[: len(good) + 24] + bytes(2**20)  # a preamble, then zeros
    url, path = serve(range_server, f"{forgery}.tgm", bytes(data))
    with pytest.raises(TgmFormatError) as remote_err:
        tgm_xarray.open_file(url)
    message = str(remote_err.value)
    assert url in message and "streaming-mode message" in message, message
    assert "(after 0 complete message(s))" in message or "(after 1 complete message(s))" in message, message
    assert range_server.count() < 30
    with pytest.raises(TgmFormatError):
        tgm_xarray.open_file(path)  # the local read refuses it too
