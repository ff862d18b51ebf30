"""The core's metadata table holds what upstream ``tensogram`` parses: for every fixture and for
crafted messages (repeated CBOR keys, the last one counting; nesting as deep as upstream reads;
every kind of value), per object and per message, and a remote file's table is its local
table. Crafted messages are upstream's own output (or our writer's) with CBOR bytes renamed in
place (same length: every offset stays valid)."""

from __future__ import annotations

import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import tgm_xarray
from tests.helpers.hostile import MEMORY_LIMIT
from tests.helpers.oracle import ENGINE
from tests.helpers.shared import REAL, require_shared, shared_files
from tgm_xarray import _core
from tgm_xarray.attrs import flatten
from tgm_xarray.source import fetcher, handles, remote
from tgm_xarray.table import MetadataTable

tensogram = pytest.importorskip("tensogram")

FIELD = {"type": "ntensor", "shape": [2], "dtype": "float64", "byte_order": "little", "encoding": "none",
         "filter": "none", "compression": "none"}


def renamed(metadata: dict, old: bytes, new: bytes) -> bytes:
    message = bytearray(tensogram.encode(metadata, [(FIELD, np.arange(2.0))]))
    assert len(old) == len(new) and message.count(old) == 1
    at = message.find(old)
    message[at:at + len(old)] = new
    return bytes(message)


def names(message: bytes, tmp_path) -> tuple[str, str, list[str]]:
    """Object 0's name as upstream, ``open_file().metadata`` and the Dataset (the table) see it."""
    path = tmp_path / "crafted.tgm"
    path.write_bytes(message)
    upstream = tensogram.decode(message).metadata.base[0]["name"]
    ours = tgm_xarray.open_file(path).metadata(0)["base"][0]["name"]
    with xr.open_dataset(path, engine=ENGINE, index=False) as ds:
        return upstream, ours, list(ds.data_vars)


def test_a_repeated_top_level_base_resolves_as_upstream(tmp_path):
    # `_extra_` {"pad": 20 x} (34 bytes) becomes a second `base` of the same length.
    message = renamed({"base": [{"name": "a"}], "_extra_": {"pad": "x" * 20}},
                      b"g_extra_\xa1cpadt" + b"x" * 20, b"dbase\x81\xa2dnameabapq" + b"y" * 17)
    assert names(message, tmp_path) == ("b", "b", ["b"])


def test_a_repeated_key_in_a_base_entry_resolves_as_upstream(tmp_path):
    # {"name": "a", "namx": "b"}: "namx" renamed "name", after the first in the encoded map.
    message = renamed({"base": [{"name": "a", "namx": "b"}]}, b"dnamxab", b"dnameab")
    assert names(message, tmp_path) == ("b", "b", ["b"])


def test_metadata_as_deep_as_upstream_reads_opens(tmp_path):
    """Attributes nested 70 deep (upstream reads up to 253): written by ``to_tgm``, read back."""
    nested: dict = {"leaf": 1}
    for _ in range(70):
        nested = {"n": nested}
    ds = xr.Dataset({"t": (("x",), np.arange(3.0), {"deep": nested})})
    path = tmp_path / "deep.tgm"
    tgm_xarray.to_tgm(ds, path)
    with xr.open_dataset(path, engine=ENGINE, index=False) as back:
        np.testing.assert_array_equal(back["t"].values, ds["t"].values)
    tensogram.decode(path.read_bytes())  # upstream reads it too


KEYS_OF_THEIR_OWN = textwrap.dedent("""
    import sys
    import xarray as xr
    import tgm_xarray
    path, budget = sys.argv[1], int(sys.argv[2])
""") + MEMORY_LIMIT + textwrap.dedent("""
    with xr.open_dataset(path, engine="tgm", index=False) as ds:
        print(ds.sizes["message"], len(ds.data_vars))
""")


@pytest.mark.thread_unsafe(reason="runs a subprocess")
def test_messages_with_keys_of_their_own_open_in_bounded_memory(tmp_path):
    """3,000 one-value messages, each with 100 metadata keys of its own (300,000 keys): the
    table keeps the 300,000 entries, not a column of 3,000 rows per key (9 x 10^8 cells, which
    aborted the process)."""
    path = tmp_path / "own-keys.tgm"
    with open(path, "wb") as f:
        for i in range(3000):
            meta = {"base": [{"name": "x", **{f"k{i}_{j}": j for j in range(100)}}]}
            f.write(tensogram.encode(meta, [(dict(FIELD, shape=[1]), np.array([float(i)]))]))
    # 1 GiB more address space than the imports take: the open adds ~0.3 GiB here (CPython 3.11);
    # a dense table needs over 3 GiB.
    budget = 1024**3
    run = subprocess.run([sys.executable, "-c", KEYS_OF_THEIR_OWN, str(path), str(budget)],
                         capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    assert run.stdout.split() == ["3000", "1"]


# --------------------------------------------------------------------------------------------
# The whole table against upstream's parse, and a remote file's table against the local one

OURS = Path(__file__).resolve().parents[1] / "golden"
#: What the table keeps of a descriptor (the rest, ``params``, has columns; ``masks`` upstream's
#: Python API does not show).
DESCRIPTOR_FIELDS = ("type", "ndim", "shape", "strides", "dtype", "byte_order", "encoding", "filter", "compression")
#: Top-level keys of a ``base`` entry or of ``_extra_`` with columns of their own, or none.
STRUCTURAL = ("dim_names", "coordinate_attrs", "_reserved_")


def canon(value):
    """``value`` with its types spelled out and NaN equal to itself: ``1``, ``1.0`` and ``True``
    differ, as do ``0.0`` and ``-0.0``."""
    if isinstance(value, dict):
        return "dict", tuple(sorted((canon(k), canon(v)) for k, v in value.items()))
    if isinstance(value, list):
        return "list", tuple(canon(v) for v in value)
    if isinstance(value, float):
        return "float", repr(value)
    return type(value).__name__, value


def upstream_rows(data: bytes) -> tuple[list, list]:
    """What the table must hold of each object and each message of ``data``, from upstream's
    parse of each message: metadata flattened (``attrs.flatten``), the structural keys apart,
    the descriptor's ``params`` split into codec settings (less the szip offsets table) and
    metadata that fills in what the object's ``base`` entry lacks."""
    objects, messages = [], []
    for msg, (offset, length) in enumerate(tensogram.scan(data)):
        meta, descriptors = tensogram.decode_descriptors(data[offset:offset + length])
        extra = dict(meta.extra)
        messages.append(canon({"span": [offset, length], "dim_names": extra.get("dim_names"),
                               "coordinate_attrs": extra.get("coordinate_attrs"),
                               "extra": flatten({k: v for k, v in extra.items() if k not in STRUCTURAL})}))
        for obj, d in enumerate(descriptors):
            base = meta.base[obj] if obj < len(meta.base) else {}
            own = flatten({k: v for k, v in base.items() if k not in STRUCTURAL})
            params = dict(d.params)
            for key, value in flatten({k: v for k, v in params.items()
                                       if not k.startswith(_core.CODEC_PARAM_PREFIXES)}).items():
                own.setdefault(key, value)
            codec = {k: v for k, v in params.items()
                     if k.startswith(_core.CODEC_PARAM_PREFIXES) and not k.startswith("szip_block_offsets")}
            descriptor = {"type": d.obj_type, "ndim": d.ndim, "shape": [int(n) for n in d.shape],
                          "strides": [int(n) for n in d.strides], "dtype": str(d.dtype),
                          "byte_order": d.byte_order, "encoding": d.encoding, "filter": d.filter,
                          "compression": d.compression}
            objects.append(canon({"msg": msg, "obj": obj, "descriptor": descriptor, "own": own, "codec": codec,
                                  "dim_names": base.get("dim_names")}))
    return objects, messages


def table_rows(table: MetadataTable, ranges: bool = False) -> tuple[list, list]:
    """``upstream_rows`` as the table holds them; with ``ranges``, also every byte range and
    frame hash."""
    def value(column, row):
        return column.values[column.codes[row]] if column.codes[row] >= 0 else None

    objects, messages = [], []
    for m in range(table.n_messages):
        row = {"span": [int(table.message_offset[m]), int(table.message_length[m])],
               "dim_names": value(table.extra_dim_names, m), "coordinate_attrs": value(table.coordinate_attrs, m),
               "extra": table.extra.of_row(m)}
        messages.append(canon(row))
    for r in range(len(table)):
        descriptor = table.descriptors[table.descriptor[r]]
        assert list(table.shapes[table.shape[r]]) == descriptor["shape"]
        row = {"msg": int(table.msg[r]), "obj": int(table.obj[r]),
               "descriptor": {k: descriptor[k] for k in DESCRIPTOR_FIELDS},
               "own": table.own.of_row(r), "codec": table.codec_params.of_row(r),
               "dim_names": value(table.own_dim_names, r)}
        if ranges:
            row["ranges"] = [int(getattr(table, k)[r]) for k in
                             ("frame_start", "frame_end", "payload_start", "payload_end", "has_frame_hash")]
            row["hash"] = int(table.frame_hash[r]) if table.has_frame_hash[r] else None
        objects.append(canon(row))
    return objects, messages


def assert_as_upstream(data: bytes) -> MetadataTable:
    table = MetadataTable.of_bytes(data)
    expected_objects, expected_messages = upstream_rows(data)
    objects, messages = table_rows(table)
    assert messages == expected_messages
    assert len(objects) == len(expected_objects)
    for got, expected in zip(objects, expected_objects):
        assert got == expected
    return table


FIXTURE_FILES = shared_files("**/*.tgm") + [pytest.param(p, id=f"golden/{p.name}") for p in sorted(OURS.glob("*.tgm"))]


@pytest.mark.parametrize("path", FIXTURE_FILES)
def test_the_table_of_every_fixture_is_upstreams_parse(path):
    table = assert_as_upstream(path.read_bytes())
    assert len(table) > 0


def _bytes_of(text: str) -> tuple[bytes, bytes]:
    """A text string's CBOR (length below 24) and a byte string's of the same length."""
    raw = text.encode()
    return bytes([0x60 + len(raw)]) + raw, bytes([0x40 + len(raw)]) + raw


def streamed_with_bytes_between_frames(frame: int, seekable: bool) -> bytes:
    """A message streamed by upstream (metadata and index after its object) with 8 zero bytes
    after the padding of its ``frame``-th frame: upstream's walk passes any bytes other than a
    frame's start between frames. ``seekable``: its lengths filled in, as a seekable sink has
    them (read by its footer remotely); else 0 (streaming mode, whose end the frames' walk finds)."""
    enc = tensogram.StreamingEncoder({"base": [{"name": "a"}]})
    enc.write_object(FIELD, np.arange(2.0))
    msg = bytearray(enc.finish())
    at = 24  # the first frame, after the preamble
    for _ in range(frame + 1):
        at += -(-int.from_bytes(msg[at + 8:at + 16], "big") // 8) * 8
    msg[at:at] = bytes(8)
    first_footer = int.from_bytes(msg[-24:-16], "big")
    if first_footer >= at:
        msg[-24:-16] = (first_footer + 8).to_bytes(8, "big")
    if seekable:
        for slot in (16, len(msg) - 16):
            msg[slot:slot + 8] = len(msg).to_bytes(8, "big")
    return bytes(msg)


def crafted_messages() -> dict[str, bytes]:
    """Messages whose metadata takes the less travelled paths of the CBOR walk."""
    field = [(FIELD, np.arange(2.0))]
    two = [(FIELD, np.arange(2.0)), (FIELD, np.arange(2.0) + 1)]
    # Upstream's Python API refuses integers outside int64 (test below for those).
    big = {"i64max": 2**63 - 1, "i64min": -(2**63), "u32": 2**32, "n32": -(2**32) - 1}
    return {
        # repeated keys, renamed in place: the last one counts
        "repeated top-level base": renamed({"base": [{"name": "a"}], "_extra_": {"pad": "x" * 20}},
                                           b"g_extra_\xa1cpadt" + b"x" * 20, b"dbase\x81\xa2dnameabapq" + b"y" * 17),
        "repeated key in a base entry": renamed({"base": [{"name": "a", "namx": "b"}]}, b"dnamxab", b"dnameab"),
        "repeated _extra_": renamed({"base": [{"name": "a"}], "_extra_": {"p": 1}, "_extrb_": {"q": 2}},
                                    b"g_extrb_", b"g_extra_"),
        "repeated nested key": renamed({"base": [{"mars": {"step": 1, "stex": 2}}]}, b"dstex", b"dstep"),
        # nesting and the structural keys at every level
        "nested base entries": tensogram.encode({"base": [
            {"mars": {"param": "t", "levelist": 500, "grid": {"n": {"deep": [1, {"x": None}]}}},
             "dim_names": ["y", "x"], "coordinate_attrs": {"ignored": 1},
             "inner": {"_reserved_": 3, "dim_names": ["kept"], "empty": {}}},
            {"name": "second", "units": "K"}]}, two),
        "_extra_ and free top-level keys": tensogram.encode({
            "base": [{"name": "a"}], "centre": "ecmf", "_extra_": {
                "dim_names": {"a": "x"}, "coordinate_attrs": {"member": {"long_name": "m"}},
                "nested": {"k": [1, 2], "_reserved_": {"x": 1}}, "list": [{"a": 1}, []]}}, field),
        # values of every CBOR kind
        "floats": tensogram.encode({"base": [{"name": "a", "nan": float("nan"), "inf": float("-inf"),
                                              "negzero": -0.0, "half": 0.5, "one": 1.0, "int": 1, "bool": True,
                                              "none": None}]}, field),
        "bytes and the ends of int64": _core.encode_message(
            {"base": [{"name": "a", "digest": b"\x00\xff", **big}], "_extra_": {"raw": b"", **big}},
            [(FIELD, np.arange(2.0))]),
        "a byte string renamed in place": renamed({"base": [{"name": "a", "b": "text"}]}, *_bytes_of("text")),
        "integer and boolean keys": tensogram.encode(
            {"base": [{"name": "a", "m": {1: "one", False: "no", "s": {2: 3}}}]}, field),
        # base shorter than the objects, empty, or absent
        "empty base": tensogram.encode({"base": []}, two),
        "empty base entries": tensogram.encode({"base": [{}, {}]}, two),
        "one base entry for two objects": tensogram.encode({"base": [{"name": "a"}]}, two),
        "no objects": tensogram.encode({"base": [], "_extra_": {"only": "extra"}}, []),
        # descriptor params: metadata where base lacks it, codec settings apart
        "params": _core.encode_message({"base": [{"name": "a"}]}, [(
            {**FIELD, "units": "K", "name": "params lose", "nested": {"k": 1}}, np.arange(2.0))]),
        # frame walks: bytes after a frame's padding, before the footer's index or the object
        "bytes between footer frames": streamed_with_bytes_between_frames(2, seekable=True),
        "bytes between a streaming message's frames": streamed_with_bytes_between_frames(0, seekable=False),
    }


@pytest.mark.parametrize("name", list(crafted_messages()))
def test_the_table_of_crafted_messages_is_upstreams_parse(name):
    assert_as_upstream(crafted_messages()[name])


def test_crafted_messages_together_are_each_upstreams_parse():
    """One file of every crafted message: values shared across messages keep their types."""
    assert_as_upstream(b"".join(crafted_messages().values()))


def test_integers_of_every_cbor_width_are_kept_as_written():
    """CBOR integers reach 2**64 - 1 and -2**64; upstream's Python API raises outside int64,
    the table keeps them as our writer wrote them."""
    big = {"u64": 2**64 - 1, "n64": -(2**64), "u63": 2**63}
    table = MetadataTable.of_bytes(_core.encode_message({"base": [{"name": "a", **big}], "_extra_": big},
                                                        [(FIELD, np.arange(2.0))]))
    assert table.own.of_row(0) == {"name": "a", **big}
    assert table.extra.of_row(0) == big


def remote_and_local(range_server, path: Path, monkeypatch, large: bool) -> tuple[tuple, tuple]:
    """The rows (byte ranges and hashes too) of the table of ``path`` served by ``range_server``
    and of the local file; ``large``: opening reads the messages by their header or footer."""
    pytest.importorskip("aiohttp")
    # The table is what is compared, not how fast the loopback server answers: on 3.13t beside two
    # busy loops a request waited past the 20 s idle timeout and the retries past the deadline.
    monkeypatch.setenv(fetcher.DEADLINE_ENV, "3600")
    monkeypatch.setenv(fetcher.IDLE_TIMEOUT_ENV, "600")
    if large:  # as test_remote's `read_as_large_files`
        monkeypatch.setattr(fetcher, "FIRST_BLOCK", 1024)
        monkeypatch.setattr(remote, "WHOLE_MESSAGE_MAX", 256)
    target = range_server.root / path.name
    shutil.copyfile(path, target)
    handles.CACHE.clear()
    got = table_rows(tgm_xarray.open_file(range_server.url(target.name)).table(), ranges=True)
    return got, table_rows(tgm_xarray.open_file(path).table(), ranges=True)


@pytest.mark.thread_unsafe(reason="patches the remote module's settings")
@pytest.mark.parametrize("large", [False, True], ids=["default", "read-by-header-or-footer"])
@pytest.mark.parametrize("path", FIXTURE_FILES)
def test_the_table_of_a_remote_fixture_is_the_local_one(range_server, monkeypatch, path, large):
    got, expected = remote_and_local(range_server, path, monkeypatch, large)
    assert got == expected


@pytest.mark.thread_unsafe(reason="patches the remote module's settings")
@pytest.mark.parametrize("large", [False, True], ids=["default", "read-by-header-or-footer"])
def test_the_table_of_remote_crafted_and_mixed_messages_is_the_local_one(range_server, monkeypatch, tmp_path,
                                                                          large):
    """Small crafted messages around the large ones of a real file: runs of messages read whole
    and messages read by their header, in one table."""
    ifs = require_shared(REAL / "ifs-0p25-20260404.tgm").read_bytes()
    local = tgm_xarray.open_file(REAL / "ifs-0p25-20260404.tgm").handle
    spans = [local.message_span(i) for i in range(len(local))]
    crafted = list(crafted_messages().values())
    pieces = crafted[:3] + [ifs[o:o + n] for o, n in spans[:2]] + crafted[3:] + [ifs[o:o + n] for o, n in spans[2:]]
    path = tmp_path / "mixed.tgm"
    path.write_bytes(b"".join(pieces))
    assert_as_upstream(path.read_bytes())
    got, expected = remote_and_local(range_server, path, monkeypatch, large)
    assert got == expected


@pytest.mark.thread_unsafe(reason="patches the remote module's settings")
@pytest.mark.parametrize("seekable", [True, False], ids=["lengths-filled-in", "streaming-mode"])
def test_bytes_between_frames_read_as_upstream_reads_them(range_server, monkeypatch, seekable):
    """Messages with bytes between frames read locally and remotely by their footer: the remote
    walk stopped at those bytes (the index missing), and a streaming one did not open."""
    pytest.importorskip("aiohttp")
    data = streamed_with_bytes_between_frames(2 if seekable else 0, seekable) * 2
    assert [span for span in tensogram.scan(data)] == [(0, len(data) // 2), (len(data) // 2, len(data) // 2)]
    path = range_server.root / f"between-frames-{seekable}.tgm"
    path.write_bytes(data)
    monkeypatch.setattr(fetcher, "FIRST_BLOCK", 1024)  # as test_remote's `read_as_large_files`
    monkeypatch.setattr(remote, "WHOLE_MESSAGE_MAX", 256)
    handles.CACHE.clear()
    for f in (tgm_xarray.open_file(path), tgm_xarray.open_file(range_server.url(path.name))):
        assert len(f) == 2
        for msg in range(2):
            np.testing.assert_array_equal(f.read(msg, 0), np.arange(2.0))
