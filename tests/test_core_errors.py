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
    # The core used to look its classes up in `tgm_xarray.errors` on every error.
    monkeypatch.setitem(sys.modules, "tgm_xarray.errors", types.ModuleType("tgm_xarray.errors"))
    path = garbage_file(tmp_path)
    with pytest.raises(errors.TgmFormatError, match="garbage.tgm"):
        _core.FileHandle(str(path))
