"""The exception classes the Rust core raises: made by `_core`, seen as `tgm_xarray.errors`'s."""

import pickle
import sys
import types

import pytest

import tgm_xarray
from tgm_xarray import _core, errors


def garbage_file(tmp_path):
    path = tmp_path / "garbage.tgm"
    path.write_bytes(b"NOT A TENSOGRAM FILE")
    return path


@pytest.mark.parametrize("name", ["TgmError", "TgmFormatError", "TgmCodecError", "TgmHashMismatchError", "TgmIndexError"])
def test_core_classes_are_the_package_classes(name):
    cls = getattr(errors, name)
    assert getattr(_core, name) is cls is getattr(tgm_xarray, name)
    assert (cls.__module__, cls.__qualname__) == ("tgm_xarray.errors", name)
    assert cls.__doc__


def test_hierarchy_as_documented():
    assert errors.TgmError.__bases__ == (ValueError,)
    for name in ["TgmFormatError", "TgmCodecError", "TgmHashMismatchError"]:
        assert getattr(errors, name).__bases__ == (errors.TgmError,)
    assert errors.TgmIndexError.__bases__ == (errors.TgmError, IndexError)
    assert issubclass(errors.TgmStaleFileError, OSError) and issubclass(errors.TgmStaleFileError, errors.TgmError)


def test_raised_error_pickles_as_the_package_class(tmp_path):
    with pytest.raises(errors.TgmFormatError) as err:
        _core.FileHandle(str(garbage_file(tmp_path)))
    again = pickle.loads(pickle.dumps(err.value))
    assert type(again) is errors.TgmFormatError
    assert again.args == err.value.args and "garbage.tgm" in str(again)


def test_the_core_raises_without_importing_the_package(tmp_path, monkeypatch):
    # The binding makes the classes itself: it must never import the package it is part of.
    monkeypatch.setitem(sys.modules, "tgm_xarray.errors", types.ModuleType("tgm_xarray.errors"))
    path = garbage_file(tmp_path)
    with pytest.raises(errors.TgmFormatError, match="garbage.tgm"):
        _core.FileHandle(str(path))


def _messages(n: int) -> bytes:
    """``n`` messages of upstream ``tensogram``'s writing, each one 4 x 5 float64 field."""
    import numpy as np
    tensogram = pytest.importorskip("tensogram")
    desc = {"type": "ntensor", "shape": [4, 5], "dtype": "float64", "byte_order": "little", "encoding": "none",
            "filter": "none", "compression": "none"}
    return b"".join(tensogram.encode({"base": [{"name": "t", "step": i}]}, [(desc, np.full((4, 5), float(i)))])
                    for i in range(n))


@pytest.mark.parametrize("cut", ["truncated", "garbage"])
def test_a_file_cut_short_keeps_its_complete_messages_when_asked(tmp_path, cut):
    """``complete_only``: the messages before the cut, and why the rest is none (cfgrib's
    ``errors="warn"``); the default open still refuses the file."""
    data = _messages(3)
    data = data[:-7] if cut == "truncated" else data + b"not a message at all"
    path = tmp_path / "cut.tgm"
    path.write_bytes(data)
    with pytest.raises(errors.TgmFormatError, match="complete message"):
        _core.FileHandle(str(path))
    f = _core.FileHandle(str(path), complete_only=True)
    assert len(f) == (2 if cut == "truncated" else 3)
    assert f.cut is not None and str(path) in f.cut and f"after {len(f)} complete message(s)" in f.cut
    assert f.read(len(f) - 1, 0)[0, 0] == len(f) - 1
    whole = tmp_path / "whole.tgm"
    whole.write_bytes(_messages(2))
    assert _core.FileHandle(str(whole), complete_only=True).cut is None
    (tmp_path / "none.tgm").write_bytes(_messages(1)[:-7])
    with pytest.raises(errors.TgmFormatError, match="truncated"):
        _core.FileHandle(str(tmp_path / "none.tgm"), complete_only=True)
