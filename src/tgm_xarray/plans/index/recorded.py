"""What an index recorded of each object: its fingerprint, checked at the object's first read
(:class:`Recorded`), so that a file changed where its identity does not look is never read as
the one indexed."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping

import numpy as np

from tgm_xarray.errors import TgmIndexError, TgmStaleFileError
from tgm_xarray.hypercube import HypercubePlan
from tgm_xarray.source.handles import FileVersion, changed
from tgm_xarray.table import MetadataTable


def ref_prints(table: MetadataTable, prints: np.ndarray) -> Callable[[np.ndarray], np.ndarray]:
    """``refs`` (an ``(n, 2)`` array of (message, object)) -> their fingerprints in ``prints``
    (the table's, one per row: rows are in message, then object order)."""
    width = int(table.obj.max()) + 1 if len(table) else 1
    keys = table.msg.astype(np.int64) * width + table.obj

    def of(refs: np.ndarray) -> np.ndarray:
        return prints[np.searchsorted(keys, refs[:, 0] * width + refs[:, 1])]
    return of


def record(plans: Mapping[str, HypercubePlan], table: MetadataTable, prints: np.ndarray, source: str,
           version: FileVersion | None) -> dict[str, dict[str, Recorded]]:
    """Per plan, per variable, what ``prints`` (the table's fingerprints) say of its objects in
    ``version`` of the file."""
    of_refs = ref_prints(table, prints)
    return {name: {v.name: Recorded(source, of_refs(np.array(v.refs, dtype=np.int64).reshape(-1, 2)), version)
                   for v in plan.variables.values()}
            for name, plan in plans.items()}


class Recorded:
    """The fingerprints an index recorded of one variable's objects (one per ref), which the
    open found the file at ``version`` of (``None``: a URL, which has none). Each object is
    checked at its first read from each version of the file: a file changed where the index's
    identity does not look (its middle, with size and mtime kept) raises ``TgmStaleFileError``
    rather than give another object's values. A file replaced since the open (``os.replace``,
    as writers publish one) is read where it holds the same objects: each one's fingerprint
    must be the one recorded and stand for a frame hash that holds, so its stored bytes
    (descriptor, payload, masks) are proven the same. An object without a hash is proven by its
    fingerprint alone, which hashed its whole frame."""

    def __init__(self, path: str, prints: np.ndarray, version: FileVersion | None):
        self.path = path
        self.prints = prints
        self.version = version
        # The version of the file these flags are for, and per ref whether it was checked there
        # (0 -> 1 only, under the lock; a read without it at worst checks again). One tuple, so
        # that a reader never pairs one version with another version's flags.
        self._checked: tuple[FileVersion | None, bytearray] = (version, bytearray(len(prints)))
        self._lock = threading.Lock()

    def checked(self, source) -> bytearray:
        """Per ref, whether it was checked in the version of the file ``source`` (a ``TgmFile``)
        reads: none for another version than the last checked. Read only: :meth:`check` sets them."""
        version, flags = self._checked
        return flags if version == source.version else bytearray(len(self.prints))

    def check(self, source, which: int, msg: int, obj: int) -> None:
        """Checks ref ``which`` (message ``msg``, object ``obj``) in ``source``, the data file as a
        read reads it (a ``TgmFile``)."""
        if source.version == self.version:
            if source.fingerprint(msg, obj) != int(self.prints[which]):
                raise TgmStaleFileError(
                    f"{self.path}: message {msg}, object {obj} is not the object its index recorded: the index is "
                    "stale (the file changed where its identity check does not look, keeping its size, mtime and "
                    "first and last 64 KiB); open it with index=False, or delete its index")
        else:
            self._check_replaced(source, which, msg, obj)
        with self._lock:
            if self._checked[0] != source.version:
                self._checked = (source.version, bytearray(len(self.prints)))
            self._checked[1][which] = 1

    def _check_replaced(self, source, which: int, msg: int, obj: int) -> None:
        """The check in a file that replaced the one the open found: the same stored bytes, proven."""
        why = changed(self.path, self.version, source.version)
        try:
            same = source.fingerprint(msg, obj) == int(self.prints[which])
        except TgmIndexError:  # the file holds no such object now
            same = False
        if not same:
            raise TgmStaleFileError(f"{why}: message {msg}, object {obj} is not the object its index recorded; "
                                    "open it again")
        # A fingerprint stands for the frame's inline hash, which must hold over the frame
        # (TgmHashMismatchError otherwise); without one it hashed the whole frame itself.
        source.check_hash(msg, obj)

    def __reduce__(self):  # pickled with the array that holds it: checked again where it is read
        return (Recorded, (self.path, self.prints, self.version))

