"""Indexes are a cache, never a second truth (``tgm_xarray.plans.index``, docs/archives.md "The index"):
an index is trusted only if this user signed it, every object a plan from it reads is checked
against the data file at its first read, and concurrent writers leave a valid index."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import numpy as np
import pytest
import xarray as xr

import tgm_xarray
from tests.helpers.cli import CLI
from tests.helpers.index import assert_warm, cache_files, open_cold, open_quietly
from tests.helpers.oracle import ENGINE
from tgm_xarray import _core
from tgm_xarray.errors import TgmIndexWarning, TgmStaleFileError
from tgm_xarray.hypercube import PlanOptions
from tgm_xarray.plans import dimension_coords, index, planned
from tgm_xarray.source import handles, open_file

pytestmark = pytest.mark.usefixtures("own_cache")  # each test its own index cache


def forge(path: Path, target: Path, change, key: bytes | None = None) -> None:
    """Writes to ``target`` an index of ``path`` whose plan ``change(plans, values)`` altered,
    with the data file's true identity, signed with ``key`` (default: not this user's)."""
    ref, plans, _, _ = planned(str(path), None, False, PlanOptions(), groups=False)
    with open_file(path) as f:
        plans, values = change(dict(plans), {name: dimension_coords(p, f, {}) for name, p in plans.items()})
        table = f.table()
        prints = f.fingerprints(table)
    plan_key = index.plan_key(PlanOptions(), False)
    target.write_bytes(index.encode(key or os.urandom(index.KEY_SIZE), index.Identity.of_file(str(path)), table,
                                    prints, {plan_key: plans}, {plan_key: values}))


def swap_t_and_u(plans, values):
    variables = dict(plans[""].variables)
    t, u = variables["t"], variables["u"]
    variables["t"], variables["u"] = dataclasses.replace(t, refs=u.refs), dataclasses.replace(u, refs=t.refs)
    return {"": dataclasses.replace(plans[""], variables=variables)}, values


def reverse_latitude(plans, values):
    values[""]["latitude"] = values[""]["latitude"][::-1].copy()
    return plans, values


def open_warned(path, match) -> xr.Dataset:
    with pytest.warns(TgmIndexWarning, match=match):
        with xr.open_dataset(path, engine=ENGINE) as ds:
            return ds.load()


@pytest.mark.parametrize("change", [swap_t_and_u, reverse_latitude], ids=["refs swapped", "labels reversed"])
def test_a_forged_index_beside_the_data_is_not_trusted(archive, change):
    cold = open_cold(archive)
    target = Path(index.beside(str(archive)))
    forge(archive, target, change)
    handles.CACHE.clear()
    now = open_warned(archive, rf"{target.name}: index not used: it was not written by this user: not trusted")
    xr.testing.assert_identical(now, cold)
    # The cold open saved this user's own index in the cache: the next open reads it, passing
    # over the untrusted one beside the data quietly.
    handles.CACHE.clear()
    with assert_warm(archive) as ds:
        xr.testing.assert_identical(ds.load(), cold)
    # What the signature stops: the same forgery, signed with this user's key, is served.
    forge(archive, target, change, index.user_key())
    handles.CACHE.clear()
    with open_quietly(archive) as ds:
        assert not ds.load().identical(cold)


def test_an_index_signed_by_another_user_is_not_trusted(archive, tmp_path, monkeypatch):
    cold = open_cold(archive)
    monkeypatch.setenv(index.CACHE_DIR_ENV, str(tmp_path / "other user"))
    with xr.open_dataset(archive, engine=ENGINE, index="beside") as ds:
        ds.load()
    assert (tmp_path / "other user" / index.KEY_FILE).is_file()
    monkeypatch.setenv(index.CACHE_DIR_ENV, str(tmp_path / "cache"))
    handles.CACHE.clear()
    now = open_warned(archive, "not written by this user: not trusted")
    xr.testing.assert_identical(now, cold)
    assert len(cache_files(tmp_path)) == 1  # this user's own, trusted from now on
    handles.CACHE.clear()
    # The other user's index beside the data is passed over quietly: the cache's serves.
    with assert_warm(archive) as ds:
        xr.testing.assert_identical(ds.load(), cold)


def test_the_key_is_private_to_the_user_and_made_once(tmp_path):
    key = index.user_key()
    path = tmp_path / "cache" / index.KEY_FILE
    assert len(key) == index.KEY_SIZE and path.read_bytes() == key
    assert path.stat().st_mode & 0o777 == 0o600
    assert index.user_key() == key
    assert cache_files(tmp_path) == []  # no temporaries


def test_a_key_others_can_read_is_not_used(tmp_path):
    index.user_key()
    os.chmod(tmp_path / "cache" / index.KEY_FILE, 0o644)
    with pytest.warns(TgmIndexWarning, match="other users may read or replace it"):
        assert index.user_key() is None


def test_without_a_key_no_index_is_read_or_written(archive, tmp_path, monkeypatch):
    blocker = tmp_path / "a file"
    blocker.write_bytes(b"")
    monkeypatch.setenv(index.CACHE_DIR_ENV, str(blocker / "cache"))  # its parent is a file
    cold = open_cold(archive)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with xr.open_dataset(archive, engine=ENGINE) as ds:
            xr.testing.assert_identical(ds.load(), cold)
    said = [str(w.message) for w in caught if issubclass(w.category, TgmIndexWarning)]
    assert len(said) == 1 and "neither read nor written" in said[0], said


def test_mutated_index_bytes_cost_a_cold_open(archive, tmp_path):
    cold = open_cold(archive)
    open_quietly(archive).close()
    target = Path(index.cached(str(archive)))
    data = bytearray(target.read_bytes())
    header = data.find(b'"source"')  # in the signed part of the header
    data[header + 2] ^= 0x01
    target.write_bytes(bytes(data))
    handles.CACHE.clear()
    xr.testing.assert_identical(open_warned(archive, "not trusted"), cold)
    handles.CACHE.clear()
    with assert_warm(archive) as ds:
        xr.testing.assert_identical(ds.load(), cold)


def swap_messages_in_the_middle(path: Path) -> tuple[int, int]:
    """Swaps two messages far from both ends (same size, same mtime, same first and last 64 KiB)."""
    st = path.stat()
    with open_file(path) as f:
        a, b = len(f) // 2, len(f) // 2 + 1
        (a0, n0), (a1, n1) = f.handle.message_span(a), f.handle.message_span(b)
    assert n0 == n1 and a0 > index.EDGE and a1 + n1 < st.st_size - index.EDGE
    with open(path, "r+b") as f:
        f.seek(a0)
        first = f.read(n0)
        f.seek(a1)
        second = f.read(n1)
        f.seek(a0)
        f.write(second)
        f.seek(a1)
        f.write(first)
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns))
    return a, b


@pytest.mark.parametrize("verify_hash", [False, True])
def test_a_file_changed_where_the_identity_does_not_look_raises_at_read(archive, verify_hash):
    open_quietly(archive).close()
    a, b = swap_messages_in_the_middle(archive)
    handles.CACHE.clear()
    with open_quietly(archive, verify_hash=verify_hash) as ds:  # the identity matches: warm
        with pytest.raises(TgmStaleFileError, match=rf"{archive}: message ({a}|{b}), object 0 is not the object "
                                                    "its index recorded: the index is stale"):
            ds.load()
    handles.CACHE.clear()
    with open_quietly(archive, index=False) as ds:  # what the file holds now
        ds.load()


@pytest.mark.parametrize("read", ["whole fields", "a window"])
def test_a_remote_file_republished_under_its_index_raises_at_read(archive, range_server, read):
    """A warm remote open builds its handle from the index's table: each object it reads is
    checked against the bytes fetched for it (the frame's hash, or its footer fetched with a
    window's ranges), never against that table itself, which served another object's values."""
    served = range_server.root / "archive.tgm"
    served.write_bytes(archive.read_bytes())
    subprocess.run([*CLI, "index", "--beside", "--no-progress", str(served)], check=True, timeout=300,
                   capture_output=True)
    a, b = swap_messages_in_the_middle(served)
    url = range_server.url("archive.tgm")
    handles.CACHE.clear()
    with open_quietly(url) as ds:  # the identity matches: warm, from the index beside it
        with pytest.raises(TgmStaleFileError, match=rf"{url}: message ({a}|{b}), object 0: the object's bytes are not "
                                                    "those the file's table"):
            ds.load() if read == "whole fields" else ds.isel(latitude=slice(0, 2), longitude=[0, 3]).load()


def test_a_plan_made_from_a_stale_table_raises_at_read(archive):
    open_quietly(archive).close()  # the table, and the default plan
    swap_messages_in_the_middle(archive)
    handles.CACHE.clear()
    with open_quietly(archive, duplicates="first") as ds:  # planned from the index's table
        with pytest.raises(TgmStaleFileError, match="the index is stale"):
            ds.load()
    handles.CACHE.clear()
    with open_quietly(archive, duplicates="first") as ds:  # saved with the table's fingerprints
        with pytest.raises(TgmStaleFileError, match="the index is stale"):
            ds.load()


def test_complex_coordinates_are_indexed(tmp_path):
    path = tmp_path / "complex.tgm"
    ds = xr.Dataset({"a": (("k",), np.arange(3.0))},
                    coords={"k": np.array([1 + 2j, -3.5j, 4.0], dtype=np.complex128)})
    tgm_xarray.to_tgm(ds, path)
    cold = open_cold(path)
    open_quietly(path).close()
    handles.CACHE.clear()
    with assert_warm(path) as warm:
        xr.testing.assert_identical(warm.load(), cold)
    assert cold["k"].dtype == np.complex128


def test_values_are_stored_with_their_types():
    packer = index.Packer()
    values = [complex(1, -2), np.complex64(3 - 1j), np.array([1j, 2], dtype=">c16"), np.array([1j], "<c8")]
    stored = packer.pack(values)
    back = index.unpack(stored, lambda i: packer.objects[i][1])
    for value, got in zip(values, back):
        assert type(got) is type(value)
        assert np.asarray(got).dtype == np.asarray(value).dtype and np.array_equal(got, value)


WRITER = textwrap.dedent("""
    import sys, warnings
    import xarray as xr
    warnings.simplefilter("ignore")
    path, params = sys.argv[1], sys.argv[2].split(",")
    for _ in range(3):
        for param in params:
            for duplicates in ("error", "first", "last"):
                xr.open_dataset(path, engine="tgm", filter_by_keys={"param": param}, duplicates=duplicates).close()
""")
OPTIONS = [{"filter_by_keys": {"param": p}, "duplicates": d}
           for p in ("t", "q", "u", "v", "w", "r", "gh", "vo", "d", "pv") for d in ("error", "first", "last")]


def test_two_processes_adding_plans_at_once_leave_a_valid_index(archive, tmp_path):
    open_quietly(archive).close()  # the table both start from
    env = {**os.environ, index.CACHE_DIR_ENV: str(tmp_path / "cache"),
           "PYTHONPATH": os.pathsep.join([str(Path(tgm_xarray.__file__).parents[1]), os.environ.get("PYTHONPATH", "")])}
    writers = [subprocess.Popen([sys.executable, "-c", WRITER, str(archive), params], env=env,
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE)
               for params in ("t,q,u,v,w", "r,gh,vo,d,pv")]
    for writer in writers:
        _, err = writer.communicate(timeout=600)
        assert writer.returncode == 0, err
    assert cache_files(tmp_path) == [os.path.basename(index.cached(str(archive)))]  # no temporaries
    handles.CACHE.clear()
    with warnings.catch_warnings():
        warnings.simplefilter("error", TgmIndexWarning)
        stored, _ = index.load(index.cached(str(archive)), index.Identity.of_file(str(archive)))
    assert stored is not None and len(stored.keys) >= 2
    held = [o for o in OPTIONS if index.plan_key(PlanOptions(**o), False) in stored.keys]
    assert held
    for options in held:
        handles.CACHE.clear()
        with assert_warm(archive, **options) as ds:
            xr.testing.assert_identical(ds.load(), open_cold(archive, **options))


def test_cli_index_fails_when_the_index_cannot_be_written(archive, tmp_path):
    Path(index.beside(str(archive))).mkdir()  # a directory where the index would go
    result = subprocess.run([*CLI, "index", "--beside", "--no-progress", str(archive)], capture_output=True,
                            text=True, timeout=300)
    assert result.returncode == 1
    assert f"tgm-xarray: error: {archive}{index.SUFFIX}: the index could not be written" in result.stderr
    blocker = tmp_path / "a file"
    blocker.write_bytes(b"")
    result = subprocess.run([*CLI, "index", "--no-progress", str(archive)], capture_output=True, text=True,
                            timeout=300, env={**os.environ, index.CACHE_DIR_ENV: str(blocker / "cache")})
    assert result.returncode == 1
    assert "the index could not be written: no key to sign it with" in result.stderr


def test_an_unhashed_objects_fingerprint_covers_its_descriptor(tmp_path):
    """Without an inline hash, the fingerprint hashes the whole frame: a packing parameter
    changed in place (the same payload, other values) is another object, not the one recorded."""
    desc = {"type": "ntensor", "shape": [50], "dtype": "float64", "byte_order": "little",
            "encoding": "simple_packing", "sp_bits_per_value": 16, "filter": "none", "compression": "none"}
    message = _core.encode_message({"base": [{"name": "t"}]}, [(desc, np.linspace(270, 280, 50))], hash=False)
    reference = b"sp_reference_value\xf9\x5c\x38"  # 270.0 as a CBOR half float
    assert message.count(reference) == 1
    moved = message.replace(reference, b"sp_reference_value\xf9\x5c\x40")  # 272.0
    paths = []
    for name, data in (("a.tgm", message), ("b.tgm", moved)):
        paths.append(tmp_path / name)
        paths[-1].write_bytes(data)
    a, b = (_core.FileHandle(str(p)) for p in paths)
    assert not np.array_equal(a.read(0, 0), b.read(0, 0))
    assert a.fingerprint(0, 0) != b.fingerprint(0, 0)
