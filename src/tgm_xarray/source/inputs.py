"""What an open is given, as paths the core opens: paths, ``file://`` and remote URLs, a file's
bytes, binary file objects, and lists of those (several files read as one Dataset).

>>> local_path("file:///data/fc.tgm"), local_path("https://host/fc.tgm")
('/data/fc.tgm', 'https://host/fc.tgm')
>>> is_tgm(b"TENSOGRM..."), is_tgm("notes.txt")
(True, False)
"""

from __future__ import annotations

import atexit
import hashlib
import io
import os
import stat
import tempfile
import urllib.parse
import urllib.request
from typing import Any

from tgm_xarray._core import MAGIC  # the bytes every ``.tgm`` file starts with
from tgm_xarray.atomic import atomic_write_bytes
from tgm_xarray.source.remote import is_url


def local_path(path: str | os.PathLike) -> str:
    """``path`` as the core opens it: ``~`` expanded, ``file://`` URLs as local paths; other URLs
    as they are."""
    path = os.fspath(path)
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if path.startswith("file://"):
        parsed = urllib.parse.urlsplit(path)
        return urllib.request.url2pathname(parsed.path)
    return path if is_url(path) else os.path.expanduser(path)


def path_of(filename_or_obj: Any) -> str:
    """What an open was given as a path the core opens: paths and URLs (``local_path``), the
    contents of a file (bytes, or a binary file object, read from its current position) as a
    temporary copy (``contents_path``). A file object of a file on disk opens that file."""
    if isinstance(filename_or_obj, (str, os.PathLike)):
        return local_path(filename_or_obj)
    if isinstance(filename_or_obj, (bytes, bytearray, memoryview)):
        return contents_path(bytes(filename_or_obj))
    if hasattr(filename_or_obj, "read"):
        name = getattr(filename_or_obj, "name", None)
        if isinstance(filename_or_obj, io.BufferedReader) and isinstance(name, str) and os.path.isfile(name):
            return os.path.realpath(name)
        data = filename_or_obj.read()
        if not isinstance(data, bytes):
            raise TypeError("engine='tgm' reads binary file objects; open the file with mode 'rb'")
        return contents_path(data)
    raise TypeError(f"engine='tgm' opens paths, URLs, bytes and binary file objects, "
                    f"not {type(filename_or_obj).__name__}")


def paths_of(filename_or_obj: Any) -> str | list[str]:
    """``path_of``, or a list of them (given a list or tuple): several files read as one."""
    if isinstance(filename_or_obj, (list, tuple)):
        return [path_of(item) for item in filename_or_obj]
    return path_of(filename_or_obj)


def contents_path(data: bytes) -> str:
    """A temporary file holding ``data`` (the core maps files): named by its contents, so the
    same bytes opened again share it, and removed when the interpreter exits."""
    digest = hashlib.sha256(data).hexdigest()[:32]
    path = os.path.join(tempfile.gettempdir(), f"tgm-xarray-{os.getpid()}-{digest}.tgm")
    if not os.path.exists(path):
        atomic_write_bytes(path, data)  # complete or absent, also with threads opening the same bytes
        atexit.register(_remove, path)
    return path


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass


def is_tgm(filename_or_obj: Any) -> bool:
    """Whether ``filename_or_obj`` (a path, URL, bytes or a seekable binary file object) looks
    like a ``.tgm`` file: named ``*.tgm``, or starting with ``MAGIC``. Reads at most the magic."""
    if isinstance(filename_or_obj, (str, os.PathLike)):
        path = local_path(filename_or_obj)
        if path.endswith(".tgm"):
            return True
        if is_url(path):
            return False
        try:
            if not stat.S_ISREG(os.stat(path).st_mode):  # a named pipe would block open()
                return False
            with open(path, "rb") as f:
                return f.read(len(MAGIC)) == MAGIC
        except OSError:
            return False
    if isinstance(filename_or_obj, (bytes, bytearray, memoryview)):
        return bytes(filename_or_obj[: len(MAGIC)]) == MAGIC
    if hasattr(filename_or_obj, "read") and hasattr(filename_or_obj, "seek"):
        try:
            at = filename_or_obj.tell()
            start = filename_or_obj.read(len(MAGIC))
            filename_or_obj.seek(at)
        except (OSError, ValueError):
            return False
        return bool(start == MAGIC)
    return False
