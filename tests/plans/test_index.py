"""Persistent indexes (``tgm_xarray.plans.index``, docs/archives.md): a second open reads the index, not
the data file; an index that does not describe the file's current version, or is not an index,
is ignored with a warning and the open is the cold one's."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

from tests.helpers.cli import CLI
from tests.helpers.index import assert_warm, cache_files, open_cold, open_quietly
from tests.helpers.oracle import ENGINE
from tgm_xarray import _core
from tgm_xarray.errors import TgmIndexWarning
from tgm_xarray.hypercube import PlanOptions
from tgm_xarray.plans import index
from tgm_xarray.source import handles
from tgm_xarray.table import MetadataTable

pytestmark = pytest.mark.usefixtures("own_cache")  # each test its own index cache


def test_warm_open_equals_cold_open_and_reads_no_data_file(archive, tmp_path):
    cold = open_cold(archive)
    with open_quietly(archive) as first:  # cold: scans, then writes the cache's index
        xr.testing.assert_identical(first.load(), cold)
    (name,) = cache_files(tmp_path)
    assert name.endswith(index.SUFFIX)
    handles.CACHE.clear()
    with assert_warm(archive) as warm:
        assert warm["t"].encoding["source"] == str(archive)
        xr.testing.assert_identical(warm.load(), cold)
        np.testing.assert_array_equal(warm["q"].values, cold["q"].values)


@pytest.mark.parametrize("fixture", ["ifs_file", "written"])
def test_real_files_open_warm_as_cold(fixture, request, tmp_path):
    """The shared IFS fixture (a real forecast file) and our writer's output."""
    if fixture == "written":
        import tgm_xarray

        path = tmp_path / "written.tgm"
        ds = xr.Dataset({"a": (("time", "x"), np.arange(12.0).reshape(3, 4)),
                         "b": (("x",), np.array([1, 2, 3, 4], dtype="int16"))},
                        coords={"time": np.array(["2026-01-01", "2026-01-02", "2026-01-03"], dtype="M8[ns]"),
                                "x": [10.0, 20.0, 30.0, 40.0]}, attrs={"title": "t", "n": 3})
        tgm_xarray.to_tgm(ds, path)
    else:
        path = tmp_path / "ifs.tgm"
        shutil.copyfile(request.getfixturevalue(fixture), path)
    cold = open_cold(path)
    open_quietly(path).close()
    handles.CACHE.clear()
    with assert_warm(path) as warm:
        xr.testing.assert_identical(warm.load(), cold)
        for name in cold.variables:
            assert warm[name].encoding == cold[name].encoding


def test_each_set_of_keywords_gets_its_plan(archive, tmp_path):
    open_quietly(archive).close()
    # Other keywords: planned from the index's table (the file is opened for the plan's
    # dimension coordinates, not scanned), then stored beside the first.
    cold = open_cold(archive, filter_by_keys={"param": "t"})
    handles.CACHE.clear()
    with open_quietly(archive, filter_by_keys={"param": "t"}) as ds:
        xr.testing.assert_identical(ds.load(), cold)
    handles.CACHE.clear()
    assert len(index.Index(index.cached(str(archive)), index.user_key()).keys) == 2
    with assert_warm(archive, filter_by_keys={"param": "t"}) as ds, assert_warm(archive) as default:
        xr.testing.assert_identical(ds.load(), cold)
        assert set(default.data_vars) > {"t"}


def test_equal_keywords_share_one_plan(archive, tmp_path):
    """Plans are keyed by ``PlanOptions``: keywords given at their defaults, numpy's integers
    and a list of names for a tuple find the plan stored for the other spelling."""
    open_quietly(archive, duplicates="error", squeeze=True).close()
    open_quietly(archive, message_index=np.int64(3)).close()
    handles.CACHE.clear()
    assert len(index.Index(index.cached(str(archive)), index.user_key()).keys) == 2
    with assert_warm(archive) as default, assert_warm(archive, message_index=3) as one:
        xr.testing.assert_identical(default.load(), open_cold(archive))
        xr.testing.assert_identical(one.load(), open_cold(archive, message_index=3))
    assert index.plan_key(PlanOptions(dim_names=["y", "x"]), False) == index.plan_key(
        PlanOptions(dim_names=("y", "x")), False) != index.plan_key(PlanOptions(dim_names=("y", "x")), True)


def test_an_index_of_another_version_is_replaced_without_a_word(archive, tmp_path, monkeypatch):
    """After an upgrade that changes the format (the plans, or their keys) an older index is
    not read: the open is cold, says nothing, and writes this version's index in its place."""
    with monkeypatch.context() as patched:
        patched.setattr(index.file, "VERSION", index.file.VERSION - 1)
        open_quietly(archive).close()
    (name,) = cache_files(tmp_path)
    handles.CACHE.clear()
    opens = handles.CACHE.opens
    with open_quietly(archive) as ds:
        assert handles.CACHE.opens > opens, "an index of another version was used"
        xr.testing.assert_identical(ds.load(), open_cold(archive))
    assert cache_files(tmp_path) == [name]
    handles.CACHE.clear()
    with assert_warm(archive) as ds:
        xr.testing.assert_identical(ds.load(), open_cold(archive))


def test_datatree_opens_warm_as_cold(tmp_path, ifs_file):
    path = tmp_path / "ifs.tgm"
    shutil.copyfile(ifs_file, path)
    cold = xr.open_datatree(path, engine=ENGINE, index=False)
    xr.open_datatree(path, engine=ENGINE).close()
    handles.CACHE.clear()
    warm = xr.open_datatree(path, engine=ENGINE)
    xr.testing.assert_identical(warm.load(), cold.load())


def rewrite_in_place(path: Path) -> None:
    """Same size, same mtime, other values: only the fingerprint tells."""
    from tgm_xarray import open_file

    st = path.stat()
    data = bytearray(path.read_bytes())
    # The archive's messages are all one size: swapping the first two swaps their values.
    with open_file(path) as f:
        (a0, n0), (a1, n1) = f.handle.message_span(0), f.handle.message_span(1)
    assert n0 == n1
    data[a0:a0 + n0], data[a1:a1 + n1] = data[a1:a1 + n1], data[a0:a0 + n0]
    with open(path, "r+b") as f:
        f.write(data)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))


def replace_by_rename(path: Path) -> None:
    from tests.helpers.remote_archive import write_archive

    other = Path(write_archive(path.with_name("other.tgm"), 200))
    os.replace(other, path)


def truncate(path: Path) -> None:
    from tgm_xarray import open_file

    with open_file(path) as f:
        end = f.handle.message_span(len(f) - 1)[0]  # the last message dropped
    os.truncate(path, end)


def append(path: Path) -> None:
    from tgm_xarray import open_file

    with open_file(path) as f:
        start, length = f.handle.message_span(0)
    data = path.read_bytes()[start:start + length]
    with open(path, "ab") as f:
        f.write(data)


@pytest.mark.parametrize("change", [rewrite_in_place, replace_by_rename, truncate, append],
                         ids=["rewritten in place", "replaced by rename", "truncated", "appended to"])
def test_a_changed_file_is_opened_cold_and_reindexed(archive, tmp_path, change):
    # duplicates="last": the appended copy of message 0 takes its place
    before = open_cold(archive, duplicates="last")
    open_quietly(archive, duplicates="last").close()
    handles.CACHE.clear()
    change(archive)
    handles.CACHE.clear()
    with pytest.warns(TgmIndexWarning, match=r"tgmidx: index not used: it is stale"):
        with xr.open_dataset(archive, engine=ENGINE, duplicates="last") as ds:
            now = ds.load()
    xr.testing.assert_identical(now, open_cold(archive, duplicates="last"))
    if change is rewrite_in_place:  # the same Dataset, though its first t and q fields
        xr.testing.assert_identical(now, before)  # swapped places: a stale plan reads q as t
    handles.CACHE.clear()
    with assert_warm(archive, duplicates="last") as ds:  # rewritten by the cold open
        xr.testing.assert_identical(ds.load(), now)


@pytest.mark.parametrize("damage", ["garbage", "truncated", "a data file", "empty"])
def test_a_corrupt_or_foreign_index_is_ignored_with_a_warning(archive, tmp_path, damage):
    open_quietly(archive).close()
    target = Path(index.cached(str(archive)))
    if damage == "garbage":
        target.write_bytes(b"TENSOGRM" + os.urandom(2000))
    elif damage == "truncated":
        target.write_bytes(target.read_bytes()[: target.stat().st_size // 2])
    elif damage == "a data file":
        shutil.copyfile(archive, target)
    else:
        target.write_bytes(b"")
    handles.CACHE.clear()
    with pytest.warns(TgmIndexWarning, match=rf"{target.name}: index not used: it is corrupt or not an index"):
        with xr.open_dataset(archive, engine=ENGINE) as ds:
            xr.testing.assert_identical(ds.load(), open_cold(archive))
    handles.CACHE.clear()
    with assert_warm(archive) as ds:  # replaced by a good one
        xr.testing.assert_identical(ds.load(), open_cold(archive))


def test_an_index_beside_the_data_is_read_first(archive, tmp_path):
    result = subprocess.run([*CLI, "index", "--beside", "--no-progress", str(archive)],
                            capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == f"{archive}: indexed in {archive}{index.SUFFIX}"
    assert (tmp_path / f"archive.tgm{index.SUFFIX}").is_file()
    with assert_warm(archive) as ds:
        xr.testing.assert_identical(ds.load(), open_cold(archive))
    assert cache_files(tmp_path) == []  # nothing written but the key: the beside index had the plan


def test_index_false_reads_and_writes_none(archive, tmp_path):
    open_cold(archive)
    assert not (tmp_path / "cache").exists()
    with pytest.raises(ValueError, match="index must be one of"):
        xr.open_dataset(archive, engine=ENGINE, index="yes")


def test_cli_index_errors_are_one_line(tmp_path):
    result = subprocess.run([*CLI, "index", str(tmp_path / "missing.tgm")], capture_output=True, text=True,
                            timeout=300)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines() == [f"tgm-xarray: error: {tmp_path / 'missing.tgm'}: "
                                                  "no such file or directory"]


def test_two_processes_building_at_once_leave_a_valid_index(archive, tmp_path):
    env = {**os.environ, index.CACHE_DIR_ENV: str(tmp_path / "cache")}
    builders = [subprocess.Popen([*CLI, "index", "--no-progress", str(archive)], env=env,
                                 stdout=subprocess.PIPE, stderr=subprocess.PIPE) for _ in range(2)]
    for builder in builders:
        _, err = builder.communicate(timeout=300)
        assert builder.returncode == 0, err
    assert cache_files(tmp_path) == [os.path.basename(index.cached(str(archive)))]  # no temporaries
    with assert_warm(archive) as ds:
        xr.testing.assert_identical(ds.load(), open_cold(archive))


def test_a_remote_open_uses_the_index_beside_the_url(range_server, archive, tmp_path):
    served = range_server.root / "archive.tgm"
    shutil.copyfile(archive, served)
    subprocess.run([*CLI, "index", "--beside", "--no-progress", str(served)], check=True, timeout=300,
                   capture_output=True)
    url = range_server.url("archive.tgm")
    range_server.reset()
    with open_quietly(url) as ds:
        assert range_server.count() <= 3  # the index, then the data file's two ends
        assert ds["t"].encoding["source"] == url
        xr.testing.assert_identical(ds.load(), open_cold(archive))
    handles.CACHE.clear()
    range_server.reset()
    with open_quietly(url) as ds:  # now from the cache's copy: the data file's two ends
        assert range_server.count() <= 2
        xr.testing.assert_identical(ds.load(), open_cold(archive))


def test_a_remote_open_without_an_index_scans_and_the_command_caches_one(range_server, archive, tmp_path):
    shutil.copyfile(archive, range_server.root / "archive.tgm")
    url = range_server.url("archive.tgm")
    with open_quietly(url) as ds:
        cold = ds.load()
    assert range_server.count(f"/archive.tgm{index.SUFFIX}") == 1  # asked once: absent
    assert not (tmp_path / "cache").exists()  # no identity paid for, no index written
    result = subprocess.run([*CLI, "index", "--no-progress", url], capture_output=True, text=True, timeout=300,
                            env={**os.environ, index.CACHE_DIR_ENV: str(tmp_path / "cache")})
    assert result.returncode == 0, result.stderr
    handles.CACHE.clear()
    range_server.reset()
    with open_quietly(url) as ds:
        assert range_server.count() <= 2  # the data file's two ends
        xr.testing.assert_identical(ds.load(), cold)
    result = subprocess.run([*CLI, "index", "--beside", url], capture_output=True, text=True, timeout=300)
    assert result.returncode == 1
    assert result.stderr.startswith("tgm-xarray: error: --beside writes next to local files only")


def test_a_damaged_column_in_an_index_is_caught_by_its_digest(archive, tmp_path):
    open_quietly(archive).close()
    target = Path(index.cached(str(archive)))
    stored = _core.FileHandle(str(target))
    frames = MetadataTable(_core.table_of_files([stored]))
    row = int(np.searchsorted(frames.msg, 2))  # the first array of the plan's message
    start, length = int(frames.frame_start[row]), int(frames.frame_end[row] - frames.frame_start[row])
    del stored
    data = bytearray(target.read_bytes())
    data[start + length // 2] ^= 0xFF
    target.write_bytes(bytes(data))
    handles.CACHE.clear()
    with pytest.warns(TgmIndexWarning, match=rf"{target.name}: index not used: it is corrupt"):
        with xr.open_dataset(archive, engine=ENGINE) as ds:
            xr.testing.assert_identical(ds.load(), open_cold(archive))
