"""``Source``: what every reader of ``.tgm`` bytes (the xarray engine, the planner, the CLI, the
virtual references, earthkit) asks of where those bytes come from.

Implementations: ``TgmFile`` (one local file, mapped through the process's handle cache, or one
URL, read by byte ranges through ``remote.RemoteHandle``) and ``FileSet`` (several files read
as one, message numbers running on from one file to the next). ``open_source`` opens either.

``Handle``: what a ``TgmFile`` reads through, the core's ``FileHandle`` or ``RemoteHandle``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import numpy as np

if TYPE_CHECKING:  # handles.py types its cache with Handle; file.py implements Source
    from tgm_xarray.source.file import TgmFile
    from tgm_xarray.source.handles import FileVersion
from tgm_xarray import _core
from tgm_xarray.table import MetadataTable


@runtime_checkable
class Source(Protocol):
    """Messages of objects, their metadata as a table, and reads of (parts of) objects.

    Messages are numbered from 0 across the source (across its files for a ``FileSet``).
    """

    #: What errors and encodings name: a path, a URL, or the first of several files.
    path: str
    #: Whether reads wait on the network: concurrent ``read_async`` calls then overlap their
    #: fetches; a local source's reads are CPU work, better batched into one worker thread.
    remote: bool

    def __len__(self) -> int:
        """The number of messages."""
        ...

    @property
    def version(self) -> FileVersion | None:
        """The version of the contents the source was opened on (``None`` for URLs and sets)."""
        ...

    def table(self) -> MetadataTable:
        """Every message's metadata as columns, one row per object: what the planner plans from."""
        ...

    def fingerprint(self, msg: int, obj: int) -> int:
        """What identifies an object's stored payload (its inline hash where it has one)."""
        ...

    def locate(self, msg: int) -> tuple[str, int]:
        """The file of message ``msg`` and its number there: what errors name."""
        ...

    def cut_short(self) -> list[TgmFile]:
        """Its files opened ``complete_only`` whose end is no message (``TgmFile.cut``)."""
        ...

    def layout(self, msg: int, obj: int) -> tuple[tuple[int, ...], np.dtype]:
        """``(shape, numpy dtype)`` of an object as stored."""
        ...

    def read(self, msg: int, obj: int, index: Any = None, out: np.ndarray | None = None,
             verify_hash: bool | None = None, threads: int | None = None) -> np.ndarray:
        """An object, or the part ``index`` selects (outer indexing), read into ``out``."""
        ...

    async def read_async(self, msg: int, obj: int, index: Any = None, out: np.ndarray | None = None,
                         verify_hash: bool | None = None, threads: int | None = None) -> np.ndarray:
        """``read`` for event loops."""
        ...


class Handle(Protocol):
    """One file's messages as the core reads them: ``_core.FileHandle`` (a mapped file) and
    ``remote.RemoteHandle`` (a URL, read by byte ranges) both have these methods, which
    ``TgmFile`` calls without asking which it holds. Only a remote one reads asynchronously and
    gives the core's table builder its ``messages`` rather than itself (``TgmFile.__init__``)."""

    @property
    def path(self) -> str: ...

    @property
    def file_size(self) -> int: ...

    def __len__(self) -> int: ...

    def message_span(self, msg: int) -> tuple[int, int]: ...

    def parse_all(self) -> None: ...

    def metadata(self, msg: int) -> dict[str, Any]: ...

    def descriptors(self, msg: int) -> list[dict[str, Any]]: ...

    def object_layouts(self, msg: int) -> list[tuple[list[int], str]]: ...

    def check_hash(self, msg: int, obj: int) -> bool: ...

    def fingerprint(self, msg: int, obj: int) -> int: ...

    def fingerprints(self, table: _core.Table) -> np.ndarray: ...

    def read(self, msg: int, obj: int, index: Any = None, out: np.ndarray | None = None,
             verify_hash: bool | None = None, threads: int | None = None) -> np.ndarray: ...
