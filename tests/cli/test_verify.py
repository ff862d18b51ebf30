"""``tgm-xarray verify``: real upstream-written files, clean and damaged (a flipped payload byte,
a truncation), local and served over loopback HTTP; it reports each problem and writes nothing."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

import tgm_xarray
from tests.helpers.shared import FIXTURES, require_shared
from tgm_xarray.cli import main

UNHASHED = FIXTURES / "upstream" / "remote-parity" / "ten-msg.tgm"  # 10 messages, written without hashes


def flipped(source, target, msg: int, obj: int) -> None:
    """``source`` (the IFS file) copied to ``target`` with one bit flipped inside the payload
    of message ``msg``'s object ``obj``: object 0 is the field (24-bit packing + szip, 0.9 to
    2.2 MB, its message's bulk), 1 and 2 the raw latitude and longitude."""
    f = tgm_xarray.open_file(source)
    offset, length = f.handle.message_span(msg)
    data = bytearray(source.read_bytes())
    if obj == 0:
        at = offset + length // 2
    else:
        at = data.index(f.read(msg, obj).tobytes(), offset) + 100
        assert at < offset + length
    data[at] ^= 0x01
    target.write_bytes(bytes(data))


def verify(capsys, *args) -> tuple[int, list[str]]:
    code = main(["verify", *map(str, args)])
    out, err = capsys.readouterr()
    assert err == ""
    return code, out.splitlines()


def test_a_clean_file_passes_and_nothing_is_written(ifs_file, tmp_path, capsys):
    path = tmp_path / ifs_file.name
    shutil.copyfile(ifs_file, path)
    cache = os.environ["TGM_XARRAY_CACHE_DIR"]
    before = sorted(os.listdir(cache))
    assert verify(capsys, path) == (0, ["4 messages, 12 objects checked, 0 problems"])
    assert os.listdir(tmp_path) == [ifs_file.name] and sorted(os.listdir(cache)) == before  # no index


def test_a_flipped_payload_byte_names_the_message_and_object(ifs_file, tmp_path, capsys):
    path = tmp_path / "flipped.tgm"
    flipped(ifs_file, path, 0, 0)
    code, lines = verify(capsys, path)
    assert code == 1
    assert len(lines) == 2 and lines[0].startswith(f"{path}: message 0, object 0: hash check failed")
    assert lines[1] == "4 messages, 12 objects checked, 1 problem"
    # Problems of several inputs add up; a clean input among them adds none.
    code, lines = verify(capsys, ifs_file, path, path)
    assert code == 1 and lines[-1] == "12 messages, 36 objects checked, 2 problems"


def test_a_truncated_file_is_one_clear_problem(ifs_file, tmp_path, capsys):
    path = tmp_path / "truncated.tgm"
    path.write_bytes(ifs_file.read_bytes()[:-1000])
    code, lines = verify(capsys, path)
    assert code == 1
    assert len(lines) == 2 and lines[0].startswith(f"{path}: cannot be opened: ")
    assert "truncated message" in lines[0] and "after 3 complete message(s)" in lines[0]
    assert lines[1] == "0 messages, 0 objects checked, 1 problem"


def test_missing_and_foreign_files_are_problems_not_crashes(tmp_path, capsys):
    foreign = tmp_path / "foreign.tgm"
    foreign.write_bytes(b"not a tensogram file")
    code, lines = verify(capsys, tmp_path / "missing.tgm", foreign)
    assert code == 1
    assert lines[0] == f"{tmp_path / 'missing.tgm'}: cannot be opened: no such file or directory"
    assert lines[1].startswith(f"{foreign}: cannot be opened: not a Tensogram file")
    assert lines[2] == "0 messages, 0 objects checked, 2 problems"


def test_a_url_is_verified_as_a_file(ifs_file, range_server, capsys):
    """Whole reads of remote objects fetch whole frames, so they are hashed: the szip field's
    and a raw one's (whose partial reads would fetch byte ranges, unverified)."""
    shutil.copyfile(ifs_file, range_server.root / "clean.tgm")
    clean = range_server.url("clean.tgm")
    assert verify(capsys, clean) == (0, ["4 messages, 12 objects checked, 0 problems"])
    for msg, obj in ((0, 0), (2, 1)):
        flipped(ifs_file, range_server.root / f"flipped-{msg}-{obj}.tgm", msg, obj)
        url = range_server.url(f"flipped-{msg}-{obj}.tgm")
        code, lines = verify(capsys, url)
        assert code == 1 and lines[0].startswith(f"{url}: message {msg}, object {obj}: hash check failed")
        assert lines[1:] == ["4 messages, 12 objects checked, 1 problem"]


def test_require_hash_reports_each_unhashed_object(capsys):
    require_shared(UNHASHED)
    assert verify(capsys, UNHASHED) == (0, ["10 messages, 10 objects checked, 0 problems"])
    code, lines = verify(capsys, "--require-hash", UNHASHED)
    assert code == 1
    assert lines[:-1] == [f"{UNHASHED}: message {m}, object 0: written without a hash (--require-hash)"
                          for m in range(10)]
    assert lines[-1] == "10 messages, 10 objects checked, 10 problems"


def test_a_file_reached_through_a_symlink_is_named_once(capsys, tmp_path):
    """The core names the file it opened (the link's target); each line names the path given."""
    require_shared(UNHASHED)
    link = tmp_path / "link.tgm"
    link.symlink_to(UNHASHED)
    code, lines = verify(capsys, "--require-hash", str(link))
    assert code == 1
    assert lines[0] == f"{link}: message 0, object 0: written without a hash (--require-hash)"


def test_usage_errors_exit_2(capsys):
    for args in ([], ["--no-such-option", "x.tgm"]):
        with pytest.raises(SystemExit) as exit:
            main(["verify", *args])
        assert exit.value.code == 2
    assert "usage: tgm-xarray verify" in capsys.readouterr().err


def _bitmask_and_bfloat16(path) -> None:
    """A file of upstream tensogram's writing, with hashes: a float field, a bitmask (rle) and a
    bfloat16 object, none of which numpy holds without ml_dtypes."""
    import tensogram

    def descriptor(dtype, shape, compression="none"):
        return {"type": "ntensor", "shape": shape, "dtype": dtype, "byte_order": "little", "encoding": "none",
                "filter": "none", "compression": compression}

    bits = np.packbits(np.arange(4096) % 3 == 0)
    halves = (np.arange(512, dtype=np.uint32) << 16).astype("<u4").view("<u2")[1::2].copy()  # bfloat16 bits
    path.write_bytes(tensogram.encode({"base": [{"name": "t"}, {"name": "m"}, {"name": "b"}]},
                                      [(descriptor("float64", [8]), np.linspace(250.0, 300.0, 8)),
                                       (descriptor("bitmask", [4096], "rle"), bits),
                                       (descriptor("bfloat16", [512]), halves.tobytes())], hash="xxh3"))


def test_objects_without_an_array_form_have_their_hashes_checked_over_http(range_server, capsys):
    pytest.importorskip("tensogram")
    pytest.importorskip("aiohttp")
    _bitmask_and_bfloat16(range_server.root / "bits.tgm")
    assert verify(capsys, range_server.url("bits.tgm")) == (0, ["1 message, 3 objects checked, 0 problems"])


def test_objects_without_an_array_form_have_their_hashes_checked(tmp_path, capsys):
    """Bitmask and bfloat16 objects: their stored hashes are checked from their bytes (they were
    read through numpy, so intact ones were reported damaged and their hashes never checked)."""
    pytest.importorskip("tensogram")
    path = tmp_path / "bits.tgm"
    _bitmask_and_bfloat16(path)
    assert verify(capsys, path) == (0, ["1 message, 3 objects checked, 0 problems"])
    assert verify(capsys, "--require-hash", path) == (0, ["1 message, 3 objects checked, 0 problems"])
    with tgm_xarray.open_file(path) as f:
        frame_starts = f.table().frame_start  # one message: a row per object
    for obj in (1, 2):
        data = bytearray(path.read_bytes())
        data[int(frame_starts[obj]) + 20] ^= 0x01  # in the payload, after the frame's 16-byte header
        damaged = tmp_path / f"damaged-{obj}.tgm"
        damaged.write_bytes(bytes(data))
        code, lines = verify(capsys, damaged)
        assert code == 1, lines
        assert lines[0].startswith(f"{damaged}: message 0, object {obj}: hash check failed"), lines
        assert lines[-1] == "1 message, 3 objects checked, 1 problem"
