"""Remote ``.tgm`` over HTTP range requests (and S3 where moto runs): what opening and reading
transfer, values equal to local reads, errors naming the URL, retries, concurrency, the handle
cache and pickling to distributed workers. Every request goes to a server on loopback."""

from __future__ import annotations

import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

pytest.importorskip("fsspec")
pytest.importorskip("aiohttp")

import tgm_xarray  # noqa: E402
from tests.helpers.matrix import Spec, write_message_file
from tests.helpers.oracle import ENGINE
from tests.helpers.range_server import Fault  # noqa: E402
from tests.helpers.selections import describe_key, random_outer_key
from tests.helpers.shared import GOLDEN, REAL, REMOTE_PARITY, require_shared
from tgm_xarray import _core  # noqa: E402
from tgm_xarray.errors import (  # noqa: E402
    RemoteConnectionError,
    RemoteHTTPError,
    RemoteRangeError,
    RemoteRedirectError,
    RemoteTimeoutError,
    TgmFormatError,
    TgmIndexError,
)
from tgm_xarray.source import (  # noqa: E402
    fetcher,
    handles,
    remote,
)
from tgm_xarray.table import MetadataTable  # noqa: E402

# Environment variables and module settings are patched: not for pytest-run-parallel.
pytestmark = pytest.mark.thread_unsafe


def serve(server, path, name=None):
    """Copies ``path`` into the server's root; returns its URL and its path there."""
    require_shared(path)
    target = server.root / (name or path.name)
    shutil.copyfile(path, target)
    return server.url(target.name), target


@pytest.fixture(autouse=True)
def fresh_cache():
    """Each test opens its URLs afresh (the servers' ports are reused between tests)."""
    handles.CACHE.clear()
    yield
    handles.CACHE.clear()


@pytest.fixture
def quick_retries(monkeypatch):
    monkeypatch.setattr(fetcher, "BACKOFF", 0.01)


def read_as_large_files(monkeypatch):
    """Small test files read as large ones are: the first request no longer holds them whole,
    and opening reads their messages' headers only."""
    monkeypatch.setattr(fetcher, "FIRST_BLOCK", 1024)
    monkeypatch.setattr(remote, "WHOLE_MESSAGE_MAX", 256)


@pytest.fixture
def read_as_large(monkeypatch):
    read_as_large_files(monkeypatch)


def assert_same_file(url, local_path):
    """Messages, metadata, descriptors and every object's values equal the local file's."""
    rf, lf = tgm_xarray.open_file(url), tgm_xarray.open_file(local_path)
    assert len(rf) == len(lf)
    for msg in range(len(lf)):
        assert rf.handle.message_span(msg) == lf.handle.message_span(msg)
        assert rf.metadata(msg) == lf.metadata(msg)
        assert rf.descriptors(msg) == lf.descriptors(msg)
        for obj in range(len(lf.descriptors(msg))):
            assert rf.handle.fingerprint(msg, obj) == lf.handle.fingerprint(msg, obj)
            expected = lf.read(msg, obj)
            assert rf.read(msg, obj).tobytes() == expected.tobytes(), f"message {msg}, object {obj}"


# --------------------------------------------------------------------------------------------
# What opening and reading transfer


def test_opening_many_small_messages_reads_them_in_blocks(range_server):
    url, path = serve(range_server, REMOTE_PARITY / "thousand-msg.tgm")
    size = path.stat().st_size
    # After the first block (which gives the size), answers wait for a second request in flight:
    # the read-ahead overlaps by construction, not by the luck of a quiet machine.
    range_server.gather, range_server.gather_after = 2, 1
    f = tgm_xarray.open_file(url)
    assert len(f) == 1000
    f.handle.parse_all()  # what open_dataset does: nothing left to fetch
    # These 592-byte messages are read whole, in contiguous blocks: the first 64 KiB (which
    # also give the size), then blocks doubling in size, READ_AHEAD of them in flight at once.
    # Upstream needs 3,502 requests for this file.
    assert range_server.count() <= 7
    assert range_server.max_in_flight >= 2
    assert range_server.sent_bytes() == size
    ranges = sorted(range_server.ranges(f"/{path.name}"))
    assert ranges[0] == (0, fetcher.FIRST_BLOCK)
    assert all(a[1] == b[0] for a, b in zip(ranges, ranges[1:]))  # no byte twice


def test_opening_a_real_file_transfers_a_small_fraction(range_server, ifs_file):
    url, path = serve(range_server, ifs_file)
    with xr.open_dataset(url, engine=ENGINE, chunks={}) as ds:
        assert len(ds.data_vars) == 4
    assert range_server.sent_bytes() < 0.025 * path.stat().st_size
    # The first 64 KiB (the first header, and the size); per further message its preamble and
    # header, with the postamble before it; the last postamble; 3 descriptors (head and tail)
    # per message; the latitudes and longitudes.
    assert range_server.count() <= 1 + 3 + 1 + 4 * 2 * 3 + 2


@pytest.mark.parametrize("msg, index", [(1, None), (0, (slice(100, 200), slice(300, 500)))],
                         ids=["whole field", "window"])
def test_a_read_fetches_its_frame_only(range_server, ifs_file, msg, index):
    url, path = serve(range_server, ifs_file)
    f, local = tgm_xarray.open_file(url), tgm_xarray.open_file(path)
    field = next(i for i, d in enumerate(local.descriptors(msg)) if d["shape"] == [721, 1440])
    f.handle.parse_all()
    range_server.reset()
    np.testing.assert_array_equal(f.read(msg, field, index), local.read(msg, field, index))
    # One request, for the object's frame: its payload plus a few hundred bytes, not the message.
    (served,) = range_server.ranges(f"/{path.name}")
    offset, length = local.handle.message_span(msg)
    assert offset <= served[0] < served[1] <= offset + length
    assert served[1] - served[0] < length
    assert range_server.count() == 1


def test_fingerprints_of_hashed_frames_fetch_nothing(range_server, ifs_file):
    """Shared coordinates are recognised by fingerprint: for frames with an inline hash that
    needs no payload, and it is the local handle's fingerprint."""
    url, path = serve(range_server, ifs_file)
    rf, lf = tgm_xarray.open_file(url), tgm_xarray.open_file(path)
    rf.handle.parse_all()
    range_server.reset()
    prints = [[rf.handle.fingerprint(m, o) for o in range(len(rf.descriptors(m)))] for m in range(len(rf))]
    every = rf.fingerprints(rf.table())  # in one call, as an index records them
    assert range_server.count() == 0
    assert prints == [[lf.handle.fingerprint(m, o) for o in range(len(lf.descriptors(m)))] for m in range(len(lf))]
    assert every.tolist() == [p for row in prints for p in row] == lf.fingerprints(lf.table()).tolist()
    assert len({row[1] for row in prints}) == 1  # every message's latitude is the same object
    assert len({row[0] for row in prints}) == len(prints)  # each message's field is its own


def test_a_tables_fingerprints_are_each_objects_hashed_frames_or_not(range_server, tmp_path):
    """One call gives every object's fingerprint: the table's where the frame carries its hash,
    the others hashed (read locally, fetched remotely), each the object's own ``fingerprint``."""
    field = {"type": "ntensor", "shape": [64], "dtype": "float32", "encoding": "none",
             "filter": "none", "compression": "none"}
    messages = [_core.encode_message({"base": [{"name": "t", "step": step}]}, [(field, np.full(64, step, "float32"))],
                                     hash=step % 2 == 0) for step in range(4)]
    path, other = tmp_path / "mixed.tgm", tmp_path / "other.tgm"
    path.write_bytes(b"".join(messages))
    other.write_bytes(b"".join(messages[:2]))
    url, _ = serve(range_server, path)
    with tgm_xarray.open_file(path) as lf, tgm_xarray.open_file(url) as rf:
        one_by_one = [lf.fingerprint(m, 0) for m in range(4)]
        assert lf.fingerprints(lf.table()).tolist() == one_by_one == rf.fingerprints(rf.table()).tolist()
        assert lf.table().has_frame_hash.tolist() == [True, False, True, False]
        assert len(set(one_by_one)) == 4
        with tgm_xarray.open_file(other) as shorter, pytest.raises(TgmFormatError, match="other.tgm.*not of this file"):
            shorter.fingerprints(lf.table())


#: Objects whose values sit at fixed byte positions (a window fetches only its bytes), and two
#: that do not (fetched whole). Big enough that a window is a small part of each.
BYTE_ADDRESSABLE = [
    Spec("none-f32", "float32", (300, 400), {}),
    Spec("be-none-f64", "float64", (120, 50, 40), {}, big_endian=True),
    Spec("none-c64", "complex64", (200, 300), {}),
    Spec("sp24-f64", "float64", (300, 400), {"encoding": "simple_packing", "sp_bits_per_value": 24}),
    Spec("sp16-f64", "float64", (40, 30, 100), {"encoding": "simple_packing", "sp_bits_per_value": 16}),
]
FETCHED_WHOLE = [
    Spec("sp12-f64", "float64", (300, 400), {"encoding": "simple_packing", "sp_bits_per_value": 12}),
    Spec("zstd-f32", "float32", (300, 400), {"compression": "zstd"}),
]


def test_windows_of_byte_addressable_objects_fetch_only_their_bytes(range_server, tmp_path, read_as_large):
    """Random outer selections of raw and whole-byte packed objects read as locally, fetching
    only the byte ranges they need (one request for nearby rows); other codecs fetch the frame."""
    path = write_message_file(tmp_path / "addressable.tgm", [BYTE_ADDRESSABLE + FETCHED_WHOLE])
    url, path = serve(range_server, Path(path))
    rf, lf = tgm_xarray.open_file(url), tgm_xarray.open_file(path)
    rf.handle.parse_all()
    rng = np.random.default_rng(11)
    for obj, spec in enumerate(BYTE_ADDRESSABLE + FETCHED_WHOLE):
        start, length = rf.handle.frame_spans(0)[obj]
        stop = start + length
        for _ in range(12):
            key = random_outer_key(rng, spec.shape)
            expected = lf.read(0, obj, key)
            range_server.reset()
            got = rf.read(0, obj, key)
            assert got.dtype == expected.dtype and got.shape == expected.shape, describe_key(key)
            assert got.tobytes() == expected.tobytes(), f"{spec.id} {describe_key(key)}"
            if spec in FETCHED_WHOLE:
                assert range_server.sent_bytes() == stop - start, spec.id
        # A window of a few rows: one request, a small part of the frame.
        window = (slice(5, 9),) + (slice(None),) * (len(spec.shape) - 1)
        range_server.reset()
        np.testing.assert_array_equal(rf.read(0, obj, window), lf.read(0, obj, window))
        if spec in BYTE_ADDRESSABLE:
            assert range_server.count() == 1
            assert range_server.sent_bytes() < 0.1 * (stop - start), spec.id
        # The whole object, and verify_hash (which hashes the frame), fetch the frame.
        for kwargs in ({}, {"verify_hash": True}):
            range_server.reset()
            np.testing.assert_array_equal(rf.read(0, obj, **kwargs), lf.read(0, obj))
            assert range_server.ranges(f"/{path.name}") == [(start, stop)]


def test_windows_of_szip_fields_we_wrote_fetch_only_their_blocks(range_server, tmp_path, ifs_file):
    """Packed + szip fields written by our writer carry checked RSI offsets: a window fetches the
    RSI blocks that hold it, one request per run of blocks, and reads as locally. The same
    field written by upstream (offsets unchecked) fetches its frame."""
    field = tgm_xarray.open_file(ifs_file).read(0, 0)  # the real 2 m temperature, 721 x 1440
    ds = xr.Dataset({"t2m": (("latitude", "longitude"), field)},
                    coords={"latitude": np.linspace(90, -90, 721), "longitude": np.arange(1440) * 0.25})
    ours = tmp_path / "ours.tgm"
    tgm_xarray.to_tgm(ds, ours, encoding={"t2m": {"bits": 24, "compression": "szip"}})
    url, path = serve(range_server, ours)
    rf, lf = tgm_xarray.open_file(url), tgm_xarray.open_file(path)
    msg, obj = 0, next(i for i, d in enumerate(lf.descriptors(0)) if d["shape"] == [721, 1440])
    start, length = rf.handle.frame_spans(msg)[obj]
    stop = start + length
    rng = np.random.default_rng(3)
    keys = [(slice(100, 110), slice(200, 230)), (slice(180, 360), slice(360, 720)), (np.array([700, 3, 3]), slice(None)),
            (slice(None, None, 97), 5)] + [random_outer_key(rng, (721, 1440)) for _ in range(8)]
    for key in keys:
        range_server.reset()
        got = rf.read(msg, obj, key)
        assert got.tobytes() == lf.read(msg, obj, key).tobytes(), describe_key(key)
    range_server.reset()
    rf.read(msg, obj, (slice(180, 360), slice(360, 720)))  # a 1/16 box: a quarter of the blocks
    assert range_server.count() == 1
    assert range_server.sent_bytes() < 0.3 * (stop - start)
    upstream = serve(range_server, REAL / "ifs-0p25-20260404.tgm")[0]
    uf = tgm_xarray.open_file(upstream)
    u_start, u_length = uf.handle.frame_spans(0)[0]
    u_stop = u_start + u_length
    uf.handle.parse_all()  # its descriptors: fetched before the read, not counted with it
    range_server.reset()
    uf.read(0, 0, (slice(100, 110), slice(200, 230)))
    assert range_server.ranges("/ifs-0p25-20260404.tgm") == [(u_start, u_stop)]


def test_a_window_read_into_out(range_server, tmp_path):
    path = write_message_file(tmp_path / "addressable.tgm", [BYTE_ADDRESSABLE[:1]])
    url, path = serve(range_server, Path(path))
    out = np.full((3, 400), -1, np.float32)
    result = tgm_xarray.open_file(url).read(0, 0, (np.array([7, 2, 250]), slice(None)), out=out)
    assert result is out
    np.testing.assert_array_equal(out, tgm_xarray.open_file(path).read(0, 0)[[7, 2, 250]])


# --------------------------------------------------------------------------------------------
# Values equal local reads


@pytest.mark.parametrize("name", ["single-msg.tgm", "two-msg.tgm", "ten-msg.tgm", "ten-msg-footer.tgm",
                                  "hundred-msg-footer.tgm", "streaming-tail.tgm", "metadata_parity.tgm"])
@pytest.mark.parametrize("large", [False, True], ids=["read-whole", "read-by-header-or-footer"])
def test_upstream_layouts_read_as_locally(range_server, monkeypatch, name, large):
    if large:
        read_as_large_files(monkeypatch)
    url, path = serve(range_server, REMOTE_PARITY / name)
    assert_same_file(url, path)


@pytest.mark.parametrize("name", ["multi_message.tgm", "multi_object_xxh3.tgm", "mars_metadata.tgm"])
@pytest.mark.parametrize("large", [False, True], ids=["read-whole", "read-by-header-or-footer"])
def test_golden_files_read_as_locally(range_server, monkeypatch, name, large):
    if large:
        read_as_large_files(monkeypatch)
    url, path = serve(range_server, GOLDEN / name)
    assert_same_file(url, path)


@pytest.mark.parametrize("name", ["ifs-0p25-20260404.tgm", "2t-codecs.tgm", "lsm-seamask-nan.tgm"])
def test_real_files_read_as_locally(range_server, name):
    url, path = serve(range_server, REAL / name)
    assert_same_file(url, path)


def test_open_dataset_over_http_is_identical(range_server, ifs_file):
    url, path = serve(range_server, ifs_file)
    with xr.open_dataset(url, engine=ENGINE, chunks={}) as remote_ds, \
            xr.open_dataset(path, engine=ENGINE) as local_ds:
        assert remote_ds["t2m" if "t2m" in remote_ds else next(iter(remote_ds.data_vars))].chunks
        xr.testing.assert_identical(remote_ds.load(), local_ds.load())


def test_the_engine_name_opens_urls(range_server, ifs_file):
    url, _ = serve(range_server, ifs_file)
    with xr.open_dataset(url, engine="tgm") as ds:
        assert set(ds.data_vars)


def test_our_writer_over_http(range_server, tmp_path):
    """A file written by our own writer (several steps and levels) opens remotely as locally."""
    rng = np.random.default_rng(5)
    ds = xr.Dataset(
        {"t": (("step", "latitude", "longitude"), rng.normal(280, 5, (3, 30, 40)))},
        coords={"step": np.array([0, 6, 12], "timedelta64[h]"), "latitude": np.linspace(60, 30, 30),
                "longitude": np.linspace(-20, 19.5, 40)},
    )
    local = tmp_path / "ours.tgm"
    tgm_xarray.to_tgm(ds, local)
    url, path = serve(range_server, local)
    with xr.open_dataset(url, engine=ENGINE) as remote_ds, xr.open_dataset(path, engine=ENGINE) as local_ds:
        xr.testing.assert_identical(remote_ds.load(), local_ds.load())


# --------------------------------------------------------------------------------------------
# Errors name the URL; transient failures are retried


def test_missing_object_is_file_not_found(range_server):
    url = range_server.url("nowhere.tgm")
    with pytest.raises(FileNotFoundError, match="nowhere.tgm"):
        tgm_xarray.open_file(url)


def test_forbidden_is_permission_error(range_server, ifs_file):
    url, _ = serve(range_server, ifs_file)
    range_server.faults[f"/{ifs_file.name}"] = Fault(status=403)
    with pytest.raises(PermissionError, match="access denied.*HTTP 403") as err:
        tgm_xarray.open_file(url)
    assert url in str(err.value)


@pytest.mark.parametrize("fault, requests", [(Fault(status=503, times=2), 3), (Fault(truncate=1000, times=1), 2)],
                         ids=["503 twice", "cut short once"])
def test_transient_failures_are_retried(range_server, ifs_file, quick_retries, fault, requests):
    url, path = serve(range_server, ifs_file)
    f = tgm_xarray.open_file(url)
    f.handle.parse_all()
    range_server.reset()
    range_server.faults[f"/{path.name}"] = fault
    np.testing.assert_array_equal(f.read(2, 2), tgm_xarray.open_file(path).read(2, 2))
    assert range_server.count() == requests  # the failures, then the frame


def test_persistent_503_raises_naming_the_url(range_server, ifs_file, quick_retries):
    url, _ = serve(range_server, ifs_file)
    f = tgm_xarray.open_file(url)
    f.handle.parse_all()
    range_server.reset()
    range_server.faults[f"/{ifs_file.name}"] = Fault(status=503)
    with pytest.raises(OSError, match=rf"{url}: reading bytes \d+-\d+ failed after {fetcher.RETRIES} tries: HTTP 503"):
        f.read(0, 2)
    assert range_server.count() == fetcher.RETRIES


def test_always_cut_short_raises(range_server, ifs_file, quick_retries):
    url, _ = serve(range_server, ifs_file)
    f = tgm_xarray.open_file(url)
    range_server.faults[f"/{ifs_file.name}"] = Fault(truncate=1000)
    with pytest.raises(OSError, match=rf"{url}: reading bytes .* failed after"):
        f.read(3, 2)


def test_timeouts_raise_naming_the_url(range_server, ifs_file, quick_retries, monkeypatch):
    aiohttp = pytest.importorskip("aiohttp")
    monkeypatch.setattr(fetcher, "RETRIES", 2)
    url, _ = serve(range_server, ifs_file)
    options = {"client_kwargs": {"timeout": aiohttp.ClientTimeout(total=0.3)}}
    f = tgm_xarray.open_file(url, storage_options=options)
    range_server.faults[f"/{ifs_file.name}"] = Fault(delay=1.0)
    with pytest.raises(TimeoutError, match=rf"{url}: reading bytes .* failed after 2 tries"):
        f.read(0, 2)


def test_truncated_file_is_a_format_error(range_server, ifs_file, tmp_path):
    data = ifs_file.read_bytes()
    cut = tmp_path / "cut.tgm"
    cut.write_bytes(data[: len(data) - 5000])
    url, _ = serve(range_server, cut)
    with pytest.raises(TgmFormatError, match=rf"{url}: .*truncated message"):
        tgm_xarray.open_file(url)


@pytest.mark.parametrize("large", [False, True], ids=["read-whole", "read-by-header"])
def test_a_header_frame_running_past_its_message_is_a_format_error(range_server, tmp_path, monkeypatch, large):
    data = bytearray(require_shared(REMOTE_PARITY / "ten-msg.tgm").read_bytes())
    assert data[24:26] == b"FR"  # the first message's metadata frame, after the preamble
    data[32:40] = (1 << 16).to_bytes(8, "big")  # its length: far past the 592-byte message
    bad = tmp_path / "bad.tgm"
    bad.write_bytes(bytes(data))
    if large:
        read_as_large_files(monkeypatch)
    url, _ = serve(range_server, bad)
    reason = "a header frame runs past the message end" if large else "frame total_length 65536 exceeds buffer"
    f = tgm_xarray.open_file(url)  # the other messages open and read
    assert f.read(1, 0).tobytes() == tgm_xarray.open_file(bad).read(1, 0).tobytes()
    with pytest.raises(TgmFormatError, match=rf"{url}: message at byte 0: .*{reason}"):
        f.metadata(0)


def test_trailing_garbage_is_a_format_error(range_server, tmp_path):
    data = require_shared(REMOTE_PARITY / "ten-msg.tgm").read_bytes()
    bad = tmp_path / "garbage.tgm"
    bad.write_bytes(data + b"x" * 100)
    url, _ = serve(range_server, bad)
    with pytest.raises(TgmFormatError, match=rf"{url}: bytes {len(data)}\.\.{len(data) + 100} .* are not a message"):
        tgm_xarray.open_file(url)


def test_a_misleading_postamble_does_not_mislead_the_walk(range_server, tmp_path):
    """The last message's postamble claims 8 bytes more than the message: the messages are
    found from their preambles, as locally."""
    data = bytearray(require_shared(REMOTE_PARITY / "ten-msg.tgm").read_bytes())
    length = int.from_bytes(data[-16:-8], "big")
    data[-16:-8] = (length + 8).to_bytes(8, "big")
    odd = tmp_path / "odd.tgm"
    odd.write_bytes(bytes(data))
    url, path = serve(range_server, odd)
    remote_file, local = tgm_xarray.open_file(url), tgm_xarray.open_file(path)
    assert [remote_file.handle.message_span(m) for m in range(len(local))] == \
        [local.handle.message_span(m) for m in range(len(local))]
    for msg in range(len(local) - 1):  # the last one's postamble is corrupt
        assert remote_file.read(msg, 0).tobytes() == local.read(msg, 0).tobytes()


@pytest.mark.parametrize("large", [False, True], ids=["read-whole", "read-by-header-or-footer"])
@pytest.mark.parametrize("bad", [2, 9])
@pytest.mark.parametrize("name", ["ten-msg.tgm", "ten-msg-footer.tgm"])
def test_a_postamble_that_disagrees_fails_that_message_as_locally(range_server, tmp_path, monkeypatch, name, bad,
                                                                   large):
    """Reading the bad message fails as a local read does and the others read as locally,
    whether messages are read whole or by their header or footer."""
    if large:
        read_as_large_files(monkeypatch)
    source = require_shared(REMOTE_PARITY / name)
    spans = [tgm_xarray.open_file(source).handle.message_span(m) for m in range(10)]
    data = bytearray(source.read_bytes())
    end = sum(spans[bad])
    data[end - 16 : end - 8] = (spans[bad][1] + 8).to_bytes(8, "big")  # the postamble's length
    odd = tmp_path / "odd.tgm"
    odd.write_bytes(bytes(data))
    url, path = serve(range_server, odd)
    remote_file, local = tgm_xarray.open_file(url), tgm_xarray.open_file(path)
    assert [remote_file.handle.message_span(m) for m in range(10)] == spans
    with pytest.raises(TgmFormatError):
        local.read(bad, 0)
    reason = "its postamble does not match its preamble" if large else "postamble"
    with pytest.raises(TgmFormatError, match=rf"{url}: message at byte {spans[bad][0]}: .*{reason}"):
        remote_file.read(bad, 0)
    for msg in set(range(10)) - {bad}:
        assert remote_file.read(msg, 0).tobytes() == local.read(msg, 0).tobytes()


def test_not_a_tgm_file(range_server, tmp_path):
    other = tmp_path / "x.tgm"
    other.write_bytes(b"GRIB" + bytes(200))
    url, _ = serve(range_server, other)
    with pytest.raises(TgmFormatError, match=rf"{url}: not a Tensogram file: it is GRIB \(open it with engine=\"cfgrib\""):
        tgm_xarray.open_file(url)


def test_bad_indices_name_the_url(range_server, ifs_file):
    url, _ = serve(range_server, ifs_file)
    f = tgm_xarray.open_file(url)
    with pytest.raises(TgmIndexError, match=rf"{url}: message 9 is out of range"):
        f.read(9, 0)
    with pytest.raises(TgmIndexError, match=rf"{url}: message 0: object 7 is out of range"):
        f.read(0, 7)


# --------------------------------------------------------------------------------------------
# Concurrency, the handle cache, pickling


def test_concurrent_chunk_reads_fetch_concurrently(range_server, ifs_file):
    url, path = serve(range_server, ifs_file)
    with xr.open_dataset(url, engine=ENGINE, chunks={}) as ds:
        range_server.reset()
        range_server.gather = 2  # the first answers wait for a second request: overlap, not luck
        means = {name: float(v) for name, v in ds.mean().compute(scheduler="threads", num_workers=4).items()}
    assert range_server.max_in_flight >= 2
    with xr.open_dataset(path, engine=ENGINE) as local:
        assert means == pytest.approx({name: float(v) for name, v in local.mean().items()})


def test_threads_reading_a_freshly_opened_url(range_server, ifs_file):
    """Eight threads read every object of a remote file whose messages nobody parsed yet: each
    message is parsed once (under the handle's lock) and every read equals the local one."""
    from concurrent.futures import ThreadPoolExecutor

    url, path = serve(range_server, ifs_file)
    local = tgm_xarray.open_file(path)
    jobs = [(m, o) for m in range(len(local)) for o in range(len(local.descriptors(m)))] * 4
    serial = tgm_xarray.open_file(url)
    for m, o in jobs:
        serial.read(m, o)
    requests = range_server.count()
    handles.CACHE.clear()
    range_server.reset()
    f = tgm_xarray.open_file(url)
    with ThreadPoolExecutor(8) as pool:
        results = list(pool.map(lambda job: f.read(*job), jobs))
    for (m, o), values in zip(jobs, results):
        assert values.tobytes() == local.read(m, o).tobytes(), (m, o)
    assert range_server.count() == requests  # as many as serially: no message parsed twice


def test_one_index_per_url_and_options(range_server, ifs_file):
    url, _ = serve(range_server, ifs_file)
    a = tgm_xarray.open_file(url)
    walked = range_server.count()
    b = tgm_xarray.open_file(url)
    assert a.handle is b.handle and range_server.count() == walked
    c = tgm_xarray.open_file(url, storage_options={"headers": {"X-Test": "1"}})
    assert c.handle is not a.handle
    handles.CACHE.release(url)
    assert tgm_xarray.open_file(url).handle is not a.handle


def test_remote_datasets_pickle_small(range_server, ifs_file):
    url, _ = serve(range_server, ifs_file)
    with xr.open_dataset(url, engine=ENGINE, chunks={}) as ds:
        blob = pickle.dumps(ds)
        # Dimension coordinates are in memory (pandas indexes); everything else stays lazy.
        assert len(blob) - sum(ds[d].values.nbytes for d in ds.indexes) < 20_000
        handles.CACHE.clear()
        range_server.reset()
        again = pickle.loads(blob)
        xr.testing.assert_identical(again.load(), ds.load())
    assert range_server.count() > 0  # the unpickled copy reopened the URL itself


def test_distributed_workers_read_remote_chunks(range_server, ifs_file):
    distributed = pytest.importorskip("distributed")
    url, path = serve(range_server, ifs_file)
    with distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True,
                                  dashboard_address=None) as cluster, distributed.Client(cluster) as client:
        with xr.open_dataset(url, engine=ENGINE, chunks={}) as ds:
            before = _core.decoded_elements()
            means = ds.mean().compute()
            assert _core.decoded_elements() == before  # nothing decoded here: the workers did it
        decoded = client.run(_core.decoded_elements)
        assert sum(decoded.values()) >= 4 * 721 * 1440
    with xr.open_dataset(path, engine=ENGINE) as local:
        xr.testing.assert_allclose(means, local.mean())


def test_any_fsspec_filesystem_even_a_synchronous_one(ifs_file):
    """fsspec's in-memory filesystem has no async batches: ranges are fetched in turn."""
    import fsspec

    fs = fsspec.filesystem("memory")
    fs.pipe("/tgm-xarray-test/ifs.tgm", require_shared(ifs_file).read_bytes())
    try:
        assert_same_file("memory://tgm-xarray-test/ifs.tgm", ifs_file)
    finally:
        fs.rm("/tgm-xarray-test", recursive=True)


# --------------------------------------------------------------------------------------------
# S3, against moto's S3 server on loopback


def test_s3_urls(s3_endpoint, ifs_file, monkeypatch):
    require_shared(ifs_file)
    s3fs = pytest.importorskip("s3fs")

    for key in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"):
        monkeypatch.setenv(key, "testing")
    options = {"endpoint_url": s3_endpoint, "key": "testing", "secret": "testing"}
    fs = s3fs.S3FileSystem(**options)
    fs.mkdir("forecasts")
    fs.put(str(ifs_file), "forecasts/ifs.tgm")
    url = "s3://forecasts/ifs.tgm"
    assert_same_file_with_options(url, ifs_file, options)
    with xr.open_dataset(url, engine=ENGINE, storage_options=options, chunks={}) as remote_ds, \
            xr.open_dataset(ifs_file, engine=ENGINE) as local_ds:
        xr.testing.assert_identical(remote_ds.load(), local_ds.load())
    with pytest.raises(FileNotFoundError, match="s3://forecasts/missing.tgm"):
        tgm_xarray.open_file("s3://forecasts/missing.tgm", storage_options=options)


def assert_same_file_with_options(url, local_path, options):
    rf, lf = tgm_xarray.open_file(url, options), tgm_xarray.open_file(local_path)
    assert len(rf) == len(lf)
    for msg in range(len(lf)):
        for obj in range(len(lf.descriptors(msg))):
            assert rf.read(msg, obj).tobytes() == lf.read(msg, obj).tobytes()


# --------------------------------------------------------------------------------------------
# Hostile files and servers: never another object's bytes, never a hang, errors that say what


def write_bytes(path, data: bytes) -> Path:
    path.write_bytes(data)
    return path


def swap_index_entries(data: bytearray) -> bytearray:
    """Swaps the two offsets of the index frame's CBOR (``[off_a, off_b]``, both ``0x19 hi lo``)."""
    frame = data.index(b"FR\x00\x02")  # the header index frame
    at = data.index(b"\x82\x19", data.index(b"offsets", frame))
    first, second = data[at + 1 : at + 4], data[at + 4 : at + 7]
    assert second[0] == 0x19
    data[at + 1 : at + 7] = second + first
    return data


@pytest.mark.parametrize("whole", [True, False], ids=["read-whole", "read-by-header"])
def test_a_swapped_index_never_reads_another_object(range_server, tmp_path, monkeypatch, whole):
    import tensogram

    desc = {"type": "ntensor", "shape": [64, 64], "dtype": "float32", "byte_order": "little",
            "encoding": "none", "filter": "none", "compression": "none"}
    data = bytearray(tensogram.encode({"base": [{"name": "a"}, {"name": "b"}]},
                                      [(desc, np.ones((64, 64), np.float32)), (desc, np.full((64, 64), 2, np.float32))]))
    bad = write_bytes(tmp_path / "swapped.tgm", bytes(swap_index_entries(data)))
    if not whole:  # this 32 KB message is then read by its header and index, as large ones are
        monkeypatch.setattr(remote, "WHOLE_MESSAGE_MAX", 1024)
    url, _ = serve(range_server, bad)
    local = tgm_xarray.open_file(bad)
    assert local.read(0, 0)[0, 0] == 1  # locally, the frames are walked
    if whole:  # walked too: the index is not needed
        assert tgm_xarray.open_file(url).read(0, 0)[0, 0] == 1
    else:
        with pytest.raises(TgmFormatError, match=rf"{url}: .*index does not list the data-object frames in order"):
            tgm_xarray.open_file(url).read(0, 0)


def test_an_index_entry_of_the_wrong_length_is_a_format_error(range_server, tmp_path, monkeypatch):
    import tensogram

    desc = {"type": "ntensor", "shape": [64, 64], "dtype": "float32", "byte_order": "little",
            "encoding": "none", "filter": "none", "compression": "none"}
    data = bytearray(tensogram.encode({"base": [{"name": "a"}]}, [(desc, np.ones((64, 64), np.float32))]))
    frame = data.index(b"FR\x00\x02")
    at = data.index(b"\x81\x19", data.index(b"lengths", frame))  # [0x19 hi lo]
    data[at + 3] ^= 8  # 8 bytes more or less
    bad = write_bytes(tmp_path / "length.tgm", bytes(data))
    monkeypatch.setattr(remote, "WHOLE_MESSAGE_MAX", 1024)
    url, _ = serve(range_server, bad)
    with pytest.raises(TgmFormatError, match=rf"{url}: message at byte 0, object 0: the index gives"):
        tgm_xarray.open_file(url).read(0, 0)


def test_an_answer_from_the_wrong_offset_is_an_error(range_server, ifs_file):
    url, path = serve(range_server, ifs_file)
    f = tgm_xarray.open_file(url)
    f.handle.parse_all()
    range_server.reset()
    range_server.faults[f"/{path.name}"] = Fault(shift=4)  # the right length, 4 bytes further
    with pytest.raises(RemoteRangeError, match=rf"{url}: asked for bytes (\d+)-(\d+), the server answered "
                                               r"'bytes \d+-\d+/\d+'") as err:
        f.read(0, 2)
    assert err.value.url == url
    assert range_server.count(method="GET") == 1  # not retried: the server is wrong, not flaky


def test_a_server_that_never_answers_gives_up_at_the_deadline(range_server, ifs_file, monkeypatch):
    aiohttp = pytest.importorskip("aiohttp")
    import time

    monkeypatch.setenv(fetcher.DEADLINE_ENV, "1.5")
    url, path = serve(range_server, ifs_file)
    options = {"client_kwargs": {"timeout": aiohttp.ClientTimeout(total=30)}}  # longer than the deadline
    f = tgm_xarray.open_file(url, storage_options=options)
    f.handle.parse_all()
    range_server.faults[f"/{path.name}"] = Fault(hang=True)
    began = time.monotonic()
    with pytest.raises(RemoteTimeoutError, match=rf"{url}: reading bytes .*1.5 s deadline"):
        f.read(0, 2)
    # Far from the client's 30 s: what ended the wait was the deadline (slack for a busy machine).
    assert time.monotonic() - began < 20


def test_short_client_timeouts_are_retried_within_the_deadline(range_server, ifs_file, quick_retries, monkeypatch):
    aiohttp = pytest.importorskip("aiohttp")
    import time

    url, path = serve(range_server, ifs_file)
    options = {"client_kwargs": {"timeout": aiohttp.ClientTimeout(total=0.2)}}
    f = tgm_xarray.open_file(url, storage_options=options)
    f.handle.parse_all()
    range_server.reset()
    range_server.faults[f"/{path.name}"] = Fault(hang=True)
    began = time.monotonic()
    with pytest.raises(RemoteTimeoutError, match=rf"{url}: reading bytes .* failed after {fetcher.RETRIES} tries: "
                                                 "no answer in time"):
        f.read(0, 2)
    # Far from the default deadline (fetcher.DEADLINE_ENV): the short client timeouts ended each try.
    assert time.monotonic() - began < 60
    assert range_server.count() == fetcher.RETRIES


def test_persistent_500_is_an_http_error(range_server, ifs_file, quick_retries):
    url, path = serve(range_server, ifs_file)
    range_server.faults[f"/{path.name}"] = Fault(status=500)
    with pytest.raises(RemoteHTTPError, match=rf"{url}: .* failed after {fetcher.RETRIES} tries: HTTP 500") as err:
        tgm_xarray.open_file(url)
    assert err.value.status == 500 and not isinstance(err.value, FileNotFoundError)


def test_a_redirect_loop_is_reported_as_one(range_server, ifs_file):
    url, path = serve(range_server, ifs_file)
    range_server.faults[f"/{path.name}"] = Fault(redirect=f"/{path.name}")
    with pytest.raises(RemoteRedirectError, match=rf"{url}: .*too many redirects"):
        tgm_xarray.open_file(url)
    assert range_server.count() <= 12  # aiohttp's 10 redirects, not retried


def test_a_refused_connection_is_a_connection_error(quick_retries):
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    url = f"http://127.0.0.1:{port}/x.tgm"
    with pytest.raises(RemoteConnectionError, match=rf"{url}: .*connection refused") as err:
        tgm_xarray.open_file(url)
    assert not isinstance(err.value, FileNotFoundError)


# --------------------------------------------------------------------------------------------
# Servers without range support (python -m http.server)


@pytest.fixture
def plain_server(tmp_path):
    from tests.helpers.range_server import PlainServer

    root = tmp_path / "plain"
    root.mkdir()
    server = PlainServer(root)
    server.root = root
    yield server
    server.stop()


def test_a_server_without_ranges_is_read_once_whole(plain_server, ifs_file):
    require_shared(ifs_file)
    shutil.copyfile(ifs_file, plain_server.root / ifs_file.name)
    url = plain_server.url(ifs_file.name)
    with xr.open_dataset(url, engine=ENGINE) as remote_ds, xr.open_dataset(ifs_file, engine=ENGINE) as local_ds:
        xr.testing.assert_identical(remote_ds.load(), local_ds.load())
    assert plain_server.gets == 2  # the index beside it (absent: docs/archives.md), then the file, once


def test_a_server_without_ranges_and_a_large_object_fails_fast(plain_server, ifs_file, monkeypatch):
    require_shared(ifs_file)
    shutil.copyfile(ifs_file, plain_server.root / ifs_file.name)
    monkeypatch.setenv(fetcher.MAX_WHOLE_BODY_ENV, "1000000")
    url = plain_server.url(ifs_file.name)
    with pytest.raises(RemoteRangeError, match=rf"{url}: the server does not support range requests.*"
                                               rf"larger than 1000000 bytes.*{fetcher.MAX_WHOLE_BODY_ENV}"):
        tgm_xarray.open_file(url)
    assert plain_server.gets == 1


# --------------------------------------------------------------------------------------------
# Opening archives of many messages in few requests


@pytest.fixture(scope="module")
def archive(tmp_path_factory):
    from tests.helpers.remote_archive import write_archive

    pytest.importorskip("tensogram")
    return Path(write_archive(tmp_path_factory.mktemp("archive") / "archive.tgm", 10_000))


def test_ten_thousand_messages_open_in_few_requests(range_server, archive):
    url, path = serve(range_server, archive)
    with xr.open_dataset(url, engine=ENGINE) as remote_ds:
        assert remote_ds["t"].shape == (100, 10, 32, 64)
        requests, sent = range_server.count(), range_server.sent_bytes()
        with xr.open_dataset(path, engine=ENGINE) as local_ds:
            xr.testing.assert_identical(remote_ds.isel(step=[0, -1]).load(), local_ds.isel(step=[0, -1]).load())
    assert requests <= 100  # one per block of messages (8 MiB at most), not one per message
    assert sent <= 1.01 * path.stat().st_size


def test_scan_finds_every_message_and_the_core_tables_them(range_server, archive, ifs_file):
    """``_core.scan_remote``: every message's place, as the mapped reader finds it, and the
    core's metadata table of them, with each object's frame, payload and hash as the local table
    has them: at once where every message came whole (small ones: the table is the scan's
    state), once their descriptors are fetched where large ones were read by their header."""
    for source, small in ((archive, True), (ifs_file, False)):
        url, path = serve(range_server, source)
        local = tgm_xarray.open_file(path)
        fetching = fetcher.Fetcher(url, None)
        messages = fetcher.drive(_core.scan_remote(url, fetching.size, **remote.scan_settings()), fetching.fetch_many)
        assert [messages.span(i) for i in range(len(messages))] == [local.handle.message_span(i) for i in range(len(local))]
        if not small:
            with pytest.raises(ValueError, match="message 0: its descriptors are not fetched yet"):
                _core.table_of_files([messages])
            fetcher.drive(messages.describe(list(range(len(messages)))), fetching.fetch_many)
        table, expected = (MetadataTable(_core.table_of_files([f])) for f in (messages, local.handle))
        for key in ("msg", "obj", "frame_start", "frame_end", "payload_start", "payload_end", "frame_hash",
                    "has_frame_hash", "message_offset", "message_length"):
            np.testing.assert_array_equal(getattr(table, key), getattr(expected, key), err_msg=key)
        msg = 7 if small else 1
        rows = expected.msg == msg
        assert messages.frame_spans(msg) == [(int(a), int(b - a)) for a, b in
                                             zip(expected.frame_start[rows], expected.frame_end[rows])]


def test_the_table_of_large_remote_messages_is_the_local_one(range_server, ifs_file):
    """Large messages are read by their header: the core builds their rows from their metadata
    frames and their objects' descriptors (fetched for every message at once), with every byte
    range and hash as the local table has them (references point at frames: virtual.py);
    descriptors fetched once are not fetched again."""
    url, path = serve(range_server, ifs_file)
    remote_file = tgm_xarray.open_file(url)
    remote_table, local_table = remote_file.table(), tgm_xarray.open_file(path).table()
    for key in ("msg", "obj", "frame_start", "frame_end", "payload_start", "payload_end", "frame_hash",
                "has_frame_hash", "message_offset", "message_length", "shape", "descriptor"):
        np.testing.assert_array_equal(getattr(remote_table, key), getattr(local_table, key), err_msg=key)
    assert remote_table.own.names == local_table.own.names
    range_server.reset()
    remote_file.table()
    assert range_server.count() == 0


def test_a_tabled_message_fetches_its_metadata_on_first_use(range_server, archive):
    """Opening a small-message archive parses no message again: a message's metadata and
    descriptors are fetched on first use (one request, for that message), reads need neither."""
    url, path = serve(range_server, archive)
    remote_file, local = tgm_xarray.open_file(url), tgm_xarray.open_file(path)
    range_server.reset()
    assert len(remote_file.table()) == len(local.table())
    assert range_server.count() == 0  # the table is the scan's
    assert remote_file.read(42, 0).tobytes() == local.read(42, 0).tobytes()
    assert remote_file.handle.fingerprint(42, 1) == local.handle.fingerprint(42, 1)
    assert range_server.count() == 1  # the frame: fingerprints come from the table's hashes
    range_server.reset()
    assert remote_file.metadata(42) == local.metadata(42)
    assert remote_file.descriptors(42) == local.descriptors(42)
    offset, length = local.handle.message_span(42)
    assert range_server.ranges(f"/{path.name}") == [(offset, offset + length)]


def test_a_list_of_urls_opens_as_one_dataset(range_server, tmp_path, ifs_file):
    """Several remote files plan as one Dataset, as local ones do: here the fixture's messages
    split over two files, which give the Dataset of the whole file."""
    data = ifs_file.read_bytes()
    spans = [tgm_xarray.open_file(ifs_file).handle.message_span(i) for i in range(2)]
    first, second = tmp_path / "first.tgm", tmp_path / "second.tgm"
    first.write_bytes(data[: spans[1][0]])
    second.write_bytes(data[spans[1][0]:])
    urls = [serve(range_server, p)[0] for p in (first, second)]
    with xr.open_dataset(ifs_file, engine="tgm") as whole, xr.open_dataset(urls, engine="tgm") as split:
        xr.testing.assert_identical(whole.drop_encoding(), split.drop_encoding())


def test_a_list_of_small_message_archives_opens_in_as_few_requests_as_each(range_server, tmp_path):
    """A list of remote archives plans from their scans' tables joined (no message fetched
    again), as one file does: as many requests as opening each alone, not one per message; a
    local file joins them too. The Dataset is the local files'."""
    from tests.helpers.remote_archive import write_archive

    pytest.importorskip("tensogram")
    paths = [Path(write_archive(tmp_path / f"{name}.tgm", 200, first_step=first)) for name, first in (("a", 0), ("b", 12))]
    urls = [serve(range_server, p)[0] for p in paths]
    alone = []
    for url in urls:
        range_server.reset()
        xr.open_dataset(url, engine="tgm", index=False).close()
        alone.append(range_server.count())
    with xr.open_dataset(paths, engine="tgm", index=False) as local:
        for files in (urls, [urls[0], paths[1]]):
            handles.CACHE.clear()
            range_server.reset()
            with xr.open_dataset(files, engine="tgm", index=False) as ds:
                assert range_server.count() <= sum(alone)  # 398 requests when each message was fetched
                assert ds["t"].shape == (4, 10, 32, 64)
                xr.testing.assert_identical(ds.drop_encoding(), local.drop_encoding())


def test_descriptors_of_tabled_messages_are_their_own(range_server, tmp_path):
    """The scan's table keeps one descriptor per kind of object (the first one's ``params``):
    ``descriptors`` of a tabled message fetches the message's own (each packed field has its own
    reference value), while a read's layout comes from the table (nothing more fetched)."""
    rng = np.random.default_rng(3)
    times = np.datetime64("2026-01-01") + np.arange(6) * np.timedelta64(6, "h")
    ds = xr.Dataset({"t": (("time", "latitude", "longitude"), 250 + 10 * rng.random((6, 16, 32)))},
                    coords={"time": times})
    path = tmp_path / "packed.tgm"
    tgm_xarray.to_tgm(ds, path, encoding={"t": {"bits": 16, "compression": "szip"}})
    url, path = serve(range_server, path)
    remote_file, local = tgm_xarray.open_file(url), tgm_xarray.open_file(path)
    range_server.reset()
    remote_file.table()
    for msg in range(len(local)):
        assert np.array_equal(remote_file.read(msg, 0), local.read(msg, 0))
    assert range_server.count() <= len(local)  # a frame a read at most: layouts from the table
    references = {d["params"]["sp_reference_value"] for msg in range(len(local)) for d in local.descriptors(msg)
                  if d["shape"] == [16, 32]}
    assert len(references) == len(local)
    for msg in range(len(local)):
        assert remote_file.descriptors(msg) == local.descriptors(msg)
