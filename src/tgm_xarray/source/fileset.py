"""``FileSet``: several files read as one ``Source`` (``open_dataset([paths...])``)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from tgm_xarray.source.file import TgmFile, table_of
from tgm_xarray.table import MetadataTable


def set_name(paths: Sequence[str]) -> str:
    """What errors and encodings call several files read as one."""
    return paths[0] if len(paths) == 1 else f"{paths[0]} (and {len(paths) - 1} more files)"


class FileSet:
    """``TgmFile``'s reads over several files, by message number across them: numbers run on
    from one file to the next, in the order given."""

    version = None  # each file checks its own

    def __init__(self, files: list[TgmFile]):
        self.files = files
        self.path = set_name([f.path for f in files])
        self.remote = any(f.remote for f in files)
        self.starts = np.cumsum([0] + [len(f) for f in files])

    def __len__(self) -> int:
        return int(self.starts[-1])

    def _locate(self, msg: int) -> tuple[TgmFile, int]:
        i = int(np.searchsorted(self.starts, msg, side="right")) - 1
        return self.files[i], msg - int(self.starts[i])

    def cut_short(self) -> list[TgmFile]:
        """The files opened ``complete_only`` that are cut short."""
        return [f for f in self.files if f.cut is not None]

    def locate(self, msg: int) -> tuple[str, int]:
        """The file of message ``msg`` (numbered across the files) and its number there: what
        the planner's errors name."""
        file, local = self._locate(msg)
        return file.path, local

    def table(self) -> MetadataTable:
        """Every file's messages, one file after the other, as one table (one call to the core)."""
        return table_of(self.files)

    def read(self, msg: int, obj: int, index: Any = None, out: np.ndarray | None = None,
             verify_hash: bool | None = None, threads: int | None = None) -> np.ndarray:
        file, local = self._locate(msg)
        return file.read(local, obj, index, out, verify_hash, threads)

    async def read_async(self, msg: int, obj: int, index: Any = None, out: np.ndarray | None = None,
                         verify_hash: bool | None = None, threads: int | None = None) -> np.ndarray:
        file, local = self._locate(msg)
        return await file.read_async(local, obj, index, out, verify_hash, threads)

    def layout(self, msg: int, obj: int) -> tuple[tuple[int, ...], np.dtype]:
        file, local = self._locate(msg)
        return file.layout(local, obj)

    def fingerprint(self, msg: int, obj: int) -> int:
        file, local = self._locate(msg)
        return file.fingerprint(local, obj)
