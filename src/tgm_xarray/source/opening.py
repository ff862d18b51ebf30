"""``open_source``: whatever an open is given, as a ``Source``."""

from __future__ import annotations

from typing import Any

from tgm_xarray.source.file import TgmFile
from tgm_xarray.source.fileset import FileSet
from tgm_xarray.source.handles import FileVersion
from tgm_xarray.source.inputs import paths_of


def open_source(path_or_paths: Any, storage_options: dict | None = None,
                version: FileVersion | None = None, complete_only: bool = False) -> TgmFile | FileSet:
    """A ``TgmFile`` of a path, URL, file's bytes or binary file object (``inputs.path_of``), or a
    ``FileSet`` of a list of those (read as one). ``storage_options`` go to fsspec for URLs;
    ``version``: the version a local file must still be (``TgmStaleFileError`` otherwise);
    ``complete_only``: each file cut short opens with its complete messages (``TgmFile``).

    >>> open_source([])
    Traceback (most recent call last):
    ...
    ValueError: open_dataset was given an empty list of files
    """
    paths = paths_of(path_or_paths)
    if isinstance(paths, str):
        return TgmFile(paths, storage_options, version, complete_only)
    if not paths:
        raise ValueError("open_dataset was given an empty list of files")
    return FileSet([TgmFile(p, storage_options, None, complete_only) for p in paths])
