"""Type stubs of the Rust core (codec-rs). See docs/architecture.md."""

from collections.abc import Callable
from typing import Any

import numpy as np

TENSOGRAM_VERSION: str
# Raw reads below this much work (bytes copied + BYTES_PER_PIECE per separate run) keep the GIL.
RELEASE_MIN_BYTES: int
BYTES_PER_PIECE: int

Selection = tuple[tuple[int, int, int] | np.ndarray, ...] | None

class FileHandle:
    """A mapped ``.tgm`` file shared by every thread (``&self`` methods only)."""

    def __init__(self, path: str) -> None: ...
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
    def fingerprint(self, msg: int, obj: int) -> str: ...
    def read(
        self, msg: int, obj: int, index: Any = None, out: np.ndarray | None = None, verify_hash: bool | None = None,
        threads: int | None = None,
    ) -> np.ndarray: ...
    def read_into(
        self, msg: int, obj: int, selection: Selection, out: np.ndarray, verify_hash: bool | None = None,
        threads: int | None = None,
    ) -> None: ...

def encode_message(
    metadata: dict[str, Any],
    objects: list[tuple[dict[str, Any], np.ndarray]],
    hash: bool = True,
    allow_nan: bool = False,
    allow_inf: bool = False,
) -> bytes: ...
def decode_message_into(
    buf: bytes | memoryview | np.ndarray, obj: int, selection: Selection, out: np.ndarray, verify_hash: bool | None = None,
    threads: int | None = None, expect: tuple[tuple[int, ...], str] | None = None,
) -> None: ...
def decoded_elements() -> int: ...

class PooledBuffer:
    """The owner (``base``) of a pooled array's memory; gives it back to the pool when freed."""

def empty(shape: tuple[int, ...] | list[int], dtype: Any) -> np.ndarray:
    """``numpy.empty``, with the memory of arrays of 256 KB and more recycled."""

def buffer_pool(limit: int | None = None) -> tuple[int, int, int]:
    """``(free buffers, their bytes, the limit in bytes)``; sets the limit first if given."""

def take_max_concurrent_reads() -> int: ...

# Pieces of messages fetched by byte range (remote.py)
DATA_OBJECT_FOOTER_SIZE: int

def frame_footer(head: bytes, tail: bytes, length: int) -> tuple[int, int | None]: ...
def parse_message(buf: bytes) -> tuple[dict[str, Any], list[tuple[dict[str, Any], int, int]]]: ...
def read_frame(
    frame: bytes, index: Any = None, out: np.ndarray | None = None, verify_hash: bool | None = None, context: str = "",
    threads: int | None = None,
) -> np.ndarray: ...
def frame_fingerprint(frame: bytes) -> str: ...
def read_payload_ranges(
    cbor: bytes, payload_len: int, fetch: Callable[[list[tuple[int, int]]], list[bytes]], index: Any = None,
    out: np.ndarray | None = None, context: str = "",
) -> np.ndarray | None: ...

# Metadata tables (`tgm_xarray.hypercube.table.MetadataTable.from_core`)
class RemoteMessages:
    """A remote file's messages as ``scan_remote`` found them (``tgm_xarray.remote``)."""

def scan_remote(url: str, size: int, fetch_many: Callable[..., Any], settings: Any) -> RemoteMessages: ...

def table_of_files(files: list[FileHandle | RemoteMessages]) -> dict[str, Any] | None:
    """One table over several files: messages numbered on from one file to the next; ``None``
    when a remote one has no table (its large messages were read by their header)."""
