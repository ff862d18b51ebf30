"""References to a Dataset's source that survive closing and pickling: what its lazy arrays hold.

Closing the Dataset drops the opened source; a read after that (or in another process, after
pickling) reopens through that process's handle cache, and only the version of the file the
Dataset was opened on (``TgmStaleFileError`` otherwise: its layout came from that version).
A reference whose readers prove each object the one planned before they read it (a plan from
an index, whose fingerprints ``plans.index.recorded.Recorded`` checks) opens whatever version is there
instead: a file republished (``os.replace``) with the same objects is read, not refused.
"""

from __future__ import annotations

import threading

from tgm_xarray.source.file import TgmFile
from tgm_xarray.source.fileset import FileSet, set_name
from tgm_xarray.source.handles import FileVersion, absolute


class FileRef:
    """A reference to one file (or URL), shared by a store's arrays: reopened at ``version``, or
    with ``any_version`` at the version there (for readers that check each object first)."""

    def __init__(self, path: str, file: TgmFile | None = None, storage_options: dict | None = None,
                 version: FileVersion | None = None, any_version: bool = False, complete_only: bool = False):
        self.path = absolute(path)
        self.storage_options = storage_options
        self.version = file.version if file is not None else version
        self.any_version = any_version
        # Reopened as it was opened: a file cut short was planned from its complete messages.
        self.complete_only = file.complete_only if file is not None else complete_only
        self._source = file
        self._lock = threading.Lock()

    @classmethod
    def of(cls, file: TgmFile) -> FileRef:
        """The reference of an opened file."""
        return cls(file.path, file, file.storage_options, complete_only=file.complete_only)

    def for_checked_reads(self) -> FileRef:
        """This reference, with its file if it is open, for readers that prove each object the
        one planned before they read it: it reopens whatever version of the file is there."""
        return FileRef(self.path, self._source, self.storage_options, self.version, any_version=True,
                       complete_only=self.complete_only)

    @property
    def source(self) -> TgmFile:
        """The opened file (reopened after ``close`` or unpickling)."""
        file = self._source
        if file is None:
            with self._lock:
                if self._source is None:
                    self._source = TgmFile(self.path, self.storage_options,
                                           None if self.any_version else self.version, self.complete_only)
                file = self._source
        return file

    def close(self) -> None:
        self._source = None

    def __reduce__(self):
        return (FileRef, (self.path, None, self.storage_options, self.version, self.any_version, self.complete_only))


class FileSetRef:
    """References to several files read as one (a ``FileSet``)."""

    def __init__(self, refs: list[FileRef]):
        self.refs = refs
        self.path = set_name([ref.path for ref in refs])
        self._source: FileSet | None = None
        self._lock = threading.Lock()

    @classmethod
    def of(cls, files: FileSet) -> FileSetRef:
        """The reference of opened files."""
        ref = cls([FileRef.of(f) for f in files.files])
        ref._source = files
        return ref

    @property
    def source(self) -> FileSet:
        """The opened files (reopened after ``close`` or unpickling)."""
        with self._lock:
            if self._source is None:
                self._source = FileSet([ref.source for ref in self.refs])
            return self._source

    def close(self) -> None:
        for ref in self.refs:
            ref.close()
        self._source = None

    def __reduce__(self):
        return (FileSetRef, (self.refs,))


#: What a store's arrays hold.
SourceRef = FileRef | FileSetRef


def reference(source: TgmFile | FileSet) -> SourceRef:
    """The reference of an opened source."""
    return FileSetRef.of(source) if isinstance(source, FileSet) else FileRef.of(source)
