"""This user's key, which signs the indexes they write (an index is trusted only if its signature
checks with it), and the digests the signature covers."""

from __future__ import annotations

import hashlib
import os
import stat
import tempfile
import threading
import warnings

from tgm_xarray.errors import TgmIndexWarning, not_a_file
from tgm_xarray.plans.index.places import cache_dir

#: The file in the cache directory that holds this user's key, and the key's size in bytes.
KEY_FILE = "index.key"
KEY_SIZE = 32

_unusable_keys: set[str] = set()  # key files a warning has been given for (once per process)
_unusable_lock = threading.Lock()


def user_key() -> bytes | None:
    """This user's secret key, which signs the indexes they write: ``index.key`` in the cache
    directory, created on first use. ``None`` (and a warning, once per process) if it cannot be
    created or read: then no index is trusted or written."""
    path = os.path.join(cache_dir(), KEY_FILE)
    try:
        return _read_key(path)
    except FileNotFoundError:
        pass
    except OSError as err:
        _unusable(path, err)
        return None
    try:
        _create_key(path)
        return _read_key(path)
    except OSError as err:
        _unusable(path, err)
        return None


def _create_key(path: str) -> None:
    """Writes a new key to a temporary file (mode 0600), then links it into place: a link never
    replaces a file, so processes creating the key at once all use the one that got there first."""
    directory = os.path.dirname(path)
    os.makedirs(directory, mode=0o700, exist_ok=True)
    fd, partial = tempfile.mkstemp(prefix="." + KEY_FILE + ".", suffix=".partial", dir=directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(os.urandom(KEY_SIZE))
        try:
            os.link(partial, path)
        except FileExistsError:
            pass
    finally:
        os.remove(partial)


def _read_key(path: str) -> bytes:
    # O_NONBLOCK: a named pipe there is refused below, not waited on (by every open, for ever).
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    with open(fd, "rb") as f:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise not_a_file(path, st.st_mode, "key file")
        key = f.read(KEY_SIZE + 1)
    if len(key) != KEY_SIZE:
        raise OSError(f"{path}: {len(key)} bytes, not a key of {KEY_SIZE}")
    if hasattr(os, "getuid") and (st.st_uid != os.getuid() or st.st_mode & 0o077):
        raise OSError(f"{path}: other users may read or replace it (owner {st.st_uid}, "
                      f"mode {st.st_mode & 0o777:o}): not a secret")
    return key


def _unusable(path: str, err: OSError) -> None:
    with _unusable_lock:
        first = path not in _unusable_keys
        _unusable_keys.add(path)
    if first:
        warnings.warn(f"{path}: indexes are neither read nor written: the key that marks this user's indexes "
                      f"could not be created or read ({err}); files are opened without them",
                      TgmIndexWarning, stacklevel=4)


def signature(key: bytes, signed: str) -> str:
    """The signature of ``signed`` with ``key``, which an index's header carries."""
    return hashlib.blake2b(signed.encode(), key=key, digest_size=32, person=b"tgm-xarray-index").hexdigest()


def digest(message: bytes) -> str:
    """The digest of one of an index's messages, which its header signs."""
    return hashlib.blake2b(message, digest_size=32).hexdigest()
