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
import shutil
import stat
import tempfile
import threading
import urllib.parse
import urllib.request
from typing import Any

from tgm_xarray._core import MAGIC  # the bytes every ``.tgm`` file starts with
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
    """A temporary file holding ``data`` (the core maps files), removed when the interpreter
    exits: the same bytes opened again share it. See ``_ContentsCopies``."""
    return _CONTENTS.path_of(data)


class _ContentsCopies:
    """The files holding bytes this process opened, in a directory of its own.

    The directory is made by ``tempfile.mkdtemp`` (mode 0700, a name nobody can guess or take
    first) and each file in it by ``mkstemp`` (``O_EXCL``): a name in the shared temporary
    directory could be a link or a file another user planted, and would serve their values.
    Bytes opened again share the file only if this process wrote it; a forked child starts
    afresh, and only the process that made the directory removes it.
    """

    def __init__(self) -> None:
        self._directory: str | None = None
        self._lock = threading.Lock()  # the directory is made once
        self._paths: dict[str, str] = {}  # sha256 of the bytes -> the complete file holding them

    def path_of(self, data: bytes) -> str:
        digest = hashlib.sha256(data).hexdigest()
        path = self._paths.get(digest)
        if path is not None:
            return path
        fd, new = tempfile.mkstemp(suffix=".tgm", dir=self._made_directory())
        try:
            with os.fdopen(fd, "wb") as f:
                f.write(data)
        except BaseException as error:
            os.remove(new)
            if isinstance(error, OSError) and error.filename is None and error.errno is not None:
                raise OSError(error.errno, f"{error.strerror} (copying the bytes opened to it)", new) from error
            raise
        # Recorded once complete; of two threads writing the same bytes at once, one file stays.
        path = self._paths.setdefault(digest, new)
        if path != new:
            os.remove(new)
        return path

    def _made_directory(self) -> str:
        with self._lock:
            if self._directory is None:
                self._directory = tempfile.mkdtemp(prefix="tgm-xarray-")
                atexit.register(_remove_directory, self._directory, os.getpid())
            return self._directory

    def _after_fork_in_child(self) -> None:
        self._directory, self._paths, self._lock = None, {}, threading.Lock()


def _remove_directory(directory: str, owner: int) -> None:
    """Removes ``directory`` in the process ``owner`` that made it (a forked child inherits the
    parent's exit functions, and would remove files the parent still reads)."""
    if os.getpid() == owner:
        shutil.rmtree(directory, ignore_errors=True)


_CONTENTS = _ContentsCopies()
os.register_at_fork(after_in_child=_CONTENTS._after_fork_in_child)


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
