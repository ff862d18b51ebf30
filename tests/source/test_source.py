"""``tgm_xarray.source``: every way an open is given its bytes ends in one ``Source`` whose
table, fingerprints and reads agree with the files read one by one."""

import asyncio
import io
import pickle
import shutil

import numpy as np
import pytest

from tests.helpers.matrix import small_file
from tgm_xarray.source import FileSet, FileSetRef, Source, TgmFile, open_source, reference


@pytest.fixture
def two_files(tmp_path):
    return [small_file(tmp_path / "a.tgm", seed=1, messages=2), small_file(tmp_path / "b.tgm", seed=2, messages=3)]


def test_a_path_its_bytes_and_a_file_object_open_the_same_source(two_files):
    path = two_files[0]
    with open(path, "rb") as f:
        data = f.read()
    sources = [open_source(path), open_source(data), open_source(io.BytesIO(data)), open_source("file://" + path)]
    for source in sources:
        assert isinstance(source, TgmFile) and isinstance(source, Source)
        assert not source.remote and len(source) == 2
        assert np.array_equal(source.read(1, 0), sources[0].read(1, 0))
        assert source.fingerprint(1, 0) == sources[0].fingerprint(1, 0)
    assert sources[0].path == path and sources[0].version is not None


def test_a_list_of_files_numbers_messages_across_them(two_files):
    files = [TgmFile(p) for p in two_files]
    source = open_source(two_files)
    assert isinstance(source, FileSet) and isinstance(source, Source)
    assert len(source) == 5 and source.path == f"{two_files[0]} (and 1 more files)"
    assert [source.locate(m) for m in range(5)] == [(two_files[0], 0), (two_files[0], 1),
                                                     (two_files[1], 0), (two_files[1], 1), (two_files[1], 2)]
    assert np.array_equal(source.read(3, 0, (slice(2, 5),)), files[1].read(1, 0, (slice(2, 5),)))
    assert source.fingerprint(4, 0) == files[1].fingerprint(2, 0)
    assert source.layout(2, 0) == ((8, 9), np.dtype("float32"))
    table, tables = source.table(), [f.table() for f in files]
    assert len(table) == sum(len(t) for t in tables)
    assert table.msg.tolist() == [0, 1, 2, 3, 4]


def test_read_async_reads_what_read_reads(two_files):
    source = open_source(two_files)

    async def read_all():
        return await asyncio.gather(*(source.read_async(m, 0, (slice(1, 3), 4)) for m in range(len(source))))

    for msg, values in enumerate(asyncio.run(read_all())):
        assert np.array_equal(values, source.read(msg, 0, (slice(1, 3), 4)))


def test_references_reopen_after_pickling(two_files):
    ref = reference(open_source(two_files))
    assert isinstance(ref, FileSetRef)
    again = pickle.loads(pickle.dumps(ref))
    assert again.path == ref.path
    assert np.array_equal(again.source.read(4, 0), ref.source.read(4, 0))


def test_a_url_is_a_remote_source_reading_what_the_file_holds(two_files, range_server):
    shutil.copyfile(two_files[1], range_server.root / "b.tgm")
    source = open_source(range_server.url("b.tgm"))
    local = open_source(two_files[1])
    assert isinstance(source, TgmFile) and source.remote and source.version is None
    assert source.table().msg.tolist() == local.table().msg.tolist()
    assert np.array_equal(asyncio.run(source.read_async(2, 0)), local.read(2, 0))


def test_an_empty_list_or_another_object_is_refused():
    with pytest.raises(ValueError, match="empty list of files"):
        open_source([])
    with pytest.raises(TypeError, match="not int"):
        open_source(3)
