"""The exceptions tgm-xarray raises (documented in docs/errors.md).

Every error is a ``TgmError`` (itself a ``ValueError``, so code that catches ``ValueError`` around
a read keeps working); messages name the file, the message and the object concerned. A missing
file stays a ``FileNotFoundError``.
"""

import errno
import stat

# The classes the Rust core raises are made by `_core` (with this module's name, so they pickle
# and print as this module's): the core never imports this package.
from tgm_xarray._core import (  # noqa: F401  (re-exported)
    TgmCodecError,
    TgmError,
    TgmFormatError,
    TgmHashMismatchError,
    TgmIndexError,
    TgmStaleFileError,
)


class TgmConflictError(TgmError):
    """Messages that cannot form one hypercube (same variable, different structure)."""


class TgmDuplicateError(TgmConflictError):
    """Two messages carry the same variable at the same coordinates."""


# Remote reads (source/fetcher.py, docs/remote.md). They are ``OSError``s, as fsspec's and the standard
# library's network errors are; each names the URL and says what happened. A missing object stays
# a ``FileNotFoundError``, a refused one a ``PermissionError``.


class RemoteError(OSError):
    """A remote read failed; ``url`` is the object's URL."""

    def __init__(self, message: str, url: str):
        super().__init__(message)
        self.url = url


class RemoteConnectionError(RemoteError, ConnectionError):
    """The server could not be reached (connection refused, reset or dropped)."""


class RemoteTimeoutError(RemoteError, TimeoutError):
    """The server did not answer in time (a try's timeout, or the read's overall deadline)."""


class RemoteHTTPError(RemoteError):
    """The server answered with an HTTP error status (``status``)."""

    def __init__(self, message: str, url: str, status: int):
        super().__init__(message, url)
        self.status = status


class RemoteRedirectError(RemoteError):
    """The server redirected too many times (a redirect loop)."""


class RemoteRangeError(RemoteError):
    """The server answered a range request with other bytes than asked, or without range support
    for an object too large to read whole."""


# Persistent indexes (plans/index/, docs/archives.md).


class TgmIndexWarning(UserWarning):
    """An index was not used (stale, corrupt, foreign, or not writable): the file is opened
    without it, as if it did not exist. The message names the index and why."""


# Paths that are not regular files, refused by every open and write (the handle cache, atomic
# writes, the index's key file). What each non-regular file type is called in errors:
_FILE_TYPES = ((stat.S_ISFIFO, "a named pipe (FIFO)"), (stat.S_ISSOCK, "a socket"),
               (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"))


def not_a_file(path: str, mode: int, expected: str = ".tgm file") -> OSError:
    """The error for ``path``, of file ``mode``, that is not a regular file (``expected``: what
    it should have been)."""
    if stat.S_ISDIR(mode):
        return IsADirectoryError(errno.EISDIR, f"is a directory, not a {expected}", path)
    what = next((name for test, name in _FILE_TYPES if test(mode)), "not a regular file")
    return OSError(errno.EINVAL, f"is {what}, not a regular {expected}", path)
