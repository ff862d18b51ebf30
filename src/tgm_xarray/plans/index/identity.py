"""The data file's identity (its size, mtime and a fingerprint of its ends), which an index
records and is checked against before it is used."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from dataclasses import dataclass

from tgm_xarray.source.handles import FileKey, FileVersion, Replaced, unreplaced

#: Bytes hashed at each end of the data file for its fingerprint.
EDGE = 64 * 2**10


@dataclass(frozen=True)
class Identity:
    """What an index checks its data file against. ``mtime_ns`` is ``None`` for a remote object
    (its size and fingerprint are compared); ``version`` is the local file's, for ``FileRef``."""

    size: int
    mtime_ns: int | None
    fingerprint: str
    version: FileVersion | None = None

    @classmethod
    def of_file(cls, path: str) -> Identity:
        """Stats ``path`` (the errors ``FileKey.of`` raises) and hashes its ends; stats again
        after, so a file written meanwhile is never taken for the version that was hashed. A
        file replaced between the stat and the open is read once more, the new one
        (``handles.unreplaced``)."""
        def read(key: FileKey) -> Identity:
            with open(key.path, "rb") as f:
                before = os.fstat(f.fileno())
                if (before.st_ino, before.st_size, before.st_mtime_ns) != tuple(key.version):
                    raise Replaced(key.path)
                head = f.read(EDGE)
                tail = b""
                if before.st_size > EDGE:
                    f.seek(max(before.st_size - EDGE, EDGE))
                    tail = f.read(EDGE)
                after = os.fstat(f.fileno())
            if (before.st_size, before.st_mtime_ns) != (after.st_size, after.st_mtime_ns):
                raise OSError(f"{path}: the file changed while its identity was read")
            return cls(before.st_size, before.st_mtime_ns, _fingerprint(before.st_size, head, tail),
                       FileVersion(before.st_ino, before.st_size, before.st_mtime_ns))

        return unreplaced(path, read)

    @classmethod
    def of_url(cls, url: str, storage_options: dict | None) -> Identity:
        """The remote object's size and fingerprint: one range request for an object of at most
        ``fetcher.FIRST_BLOCK`` bytes, two for a larger one."""
        from tgm_xarray.source.fetcher import Fetcher

        return cls.of_fetcher(Fetcher(url, storage_options))

    @classmethod
    def of_fetcher(cls, fetcher) -> Identity:
        """The identity of the object a ``fetcher.Fetcher`` reads (its first block is at hand)."""
        size = fetcher.size
        head_stop = min(EDGE, size)
        tail_start = max(size - EDGE, EDGE) if size > EDGE else size
        head, tail = fetcher.fetch_many([(0, head_stop), (tail_start, size)])
        return cls(size, None, _fingerprint(size, head, tail))

    def stored(self) -> dict:
        return {"size": self.size, "mtime_ns": self.mtime_ns, "fingerprint": self.fingerprint}

    def mismatch(self, stored: Mapping) -> str | None:
        """Why an index that recorded ``stored`` is not this version's; ``None`` if it is."""
        if stored.get("size") != self.size:
            return f"the data file's size is {self.size} bytes, the index's {stored.get('size')}"
        if self.mtime_ns is not None and stored.get("mtime_ns") != self.mtime_ns:
            return f"the data file's mtime_ns is {self.mtime_ns}, the index's {stored.get('mtime_ns')}"
        if stored.get("fingerprint") != self.fingerprint:
            return "the data file's first or last 64 KiB differ from those the index recorded"
        return None


def _fingerprint(size: int, head: bytes, tail: bytes) -> str:
    h = hashlib.blake2b(digest_size=16)
    h.update(size.to_bytes(8, "little"))
    h.update(head)
    h.update(tail)
    return h.hexdigest()
