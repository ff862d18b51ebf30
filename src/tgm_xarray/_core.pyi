"""Type stubs of the Rust core (codec-rs). See docs/architecture.md.

`make lint` checks them against the built module (`python -m mypy.stubtest tgm_xarray._core`)."""

from typing import Any, Literal, Self, final, overload

import numpy as np

__all__ = [
    "TgmError", "TgmFormatError", "TgmCodecError", "TgmHashMismatchError", "TgmIndexError", "TgmStaleFileError",
    "FileHandle",
    "PooledBuffer", "RemoteMessages", "RemoteScan", "RemoteDescription", "RemoteRead", "scan_remote", "empty",
    "buffer_pool", "encode_message", "decode_message_into", "parse_message",
    "read_frame", "frame_fingerprint", "check_frame_hash", "Table", "table_of_files", "table_of_bytes", "decoded_elements",
    "take_max_concurrent_reads", "writable_szip_flags",
    "numpy_dtype", "decoded_bytes", "read_dtype", "outer_key", "TENSOGRAM_VERSION", "DTYPES",
    "RELEASE_MIN_BYTES", "BYTES_PER_PIECE", "RESERVED_KEY", "DIM_NAMES_KEY", "COORDINATE_ATTRS_KEY",
    "VALUES_DTYPE_KEY", "CODEC_PARAM_PREFIXES", "MAGIC",
]

TENSOGRAM_VERSION: str
# The bytes every Tensogram message (so every .tgm file) starts with.
MAGIC: bytes
# Every Tensogram dtype name: the one table (core-rs/src/wire/dtypes.rs).
DTYPES: tuple[str, ...]
# Raw reads below this much work (bytes copied + BYTES_PER_PIECE per separate run) keep the GIL.
RELEASE_MIN_BYTES: int
BYTES_PER_PIECE: int
# Metadata keys the table keeps out of its key columns (core-rs/src/table/mod.rs): the encoder's
# `_reserved_`, and the dimension-name hints and coordinate attributes that get columns of their own.
RESERVED_KEY: str
DIM_NAMES_KEY: str
COORDINATE_ATTRS_KEY: str
VALUES_DTYPE_KEY: str
# Descriptor params of these prefixes are the codec pipeline's (the table's `codec_params`).
CODEC_PARAM_PREFIXES: tuple[str, ...]

# The core makes these (named as tgm_xarray.errors' classes, which re-exports them).
class TgmError(ValueError): ...
class TgmFormatError(TgmError): ...
class TgmCodecError(TgmError): ...
class TgmHashMismatchError(TgmError): ...
class TgmIndexError(TgmError, IndexError): ...
class TgmStaleFileError(OSError, TgmError): ...

# Per dimension a slice or an index array (outer_key's items); None: everything. Stub-only.
_Selection = tuple[slice | np.ndarray, ...] | None

@final
class FileHandle:
    """A mapped ``.tgm`` file shared by every thread (``&self`` methods only)."""

    def __new__(cls, path: str, complete_only: bool = False) -> Self: ...
    @property
    def cut(self) -> str | None: ...
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
    def check_hash(self, msg: int, obj: int) -> bool:
        """The object's stored hash checked against its bytes, nothing decoded: ``True`` when it
        holds, ``False`` without one; ``TgmHashMismatchError`` when it does not."""
    def fingerprint(self, msg: int, obj: int) -> int: ...
    def fingerprints(self, table: Table) -> np.ndarray:
        """Every object's ``fingerprint`` (uint64) in ``table``'s rows, this file's table, in one
        call; ``TgmFormatError`` for a table of other messages."""
    def read(
        self, msg: int, obj: int, index: Any = None, out: np.ndarray | None = None, verify_hash: bool | None = None,
        threads: int | None = None,
    ) -> np.ndarray: ...
    def read_into(
        self, msg: int, obj: int, selection: _Selection, out: np.ndarray, verify_hash: bool | None = None,
        threads: int | None = None,
    ) -> None: ...

@overload
def encode_message(
    metadata: dict[str, Any],
    objects: list[tuple[dict[str, Any], np.ndarray]],
    hash: bool = True,
    allow_nan: bool = False,
    allow_inf: bool = False,
    threads: int | None = None,
    copy: Literal[True] = True,
) -> bytes: ...
@overload
def encode_message(
    metadata: dict[str, Any],
    objects: list[tuple[dict[str, Any], np.ndarray]],
    hash: bool = True,
    allow_nan: bool = False,
    allow_inf: bool = False,
    threads: int | None = None,
    *,
    copy: Literal[False],
) -> memoryview:
    """``copy=False``: the message as a memoryview of the encoder's own memory, not copied into
    ``bytes``."""
def outer_key(
    key: Any, shape: tuple[int, ...] | list[int]
) -> tuple[tuple[slice | np.ndarray, ...], list[int], list[int]]: ...
def decode_message_into(
    buf: bytes | memoryview | np.ndarray, obj: int, selection: _Selection, out: np.ndarray,
    verify_hash: bool | None = None,
    threads: int | None = None, expect: tuple[tuple[int, ...], str] | None = None,
) -> None: ...
def decoded_elements() -> int: ...
def writable_szip_flags(flags: int, bits: int | None = None) -> int: ...
def numpy_dtype(name: str) -> np.dtype[Any]:
    """The numpy dtype objects of Tensogram dtype ``name`` are read as; ``TgmCodecError`` for a
    bitmask (packed bits), bfloat16 without ml_dtypes, and names Tensogram does not define."""
def decoded_bytes(name: str, count: int) -> int:
    """Bytes ``count`` elements of dtype ``name`` take decoded (bitmasks: whole bytes of bits)."""

def read_dtype(stored: np.dtype, wanted: np.dtype) -> np.dtype:
    """The dtype a read of ``stored`` objects fills to give ``wanted`` values: ``wanted`` where a
    read fills it straight (the object's own dtype; float32 for float64 objects, packed ones
    unpacked straight into float32), else ``stored``, which the caller then converts."""

@final
class PooledBuffer:
    """The owner (``base``) of a pooled array's memory; gives it back to the pool when freed."""

def empty(shape: tuple[int, ...] | list[int], dtype: Any) -> np.ndarray:
    """``numpy.empty``, with the memory of arrays of 256 KB and more recycled."""

def buffer_pool(limit: int | None = None) -> tuple[int, int, int]:
    """``(free buffers, their bytes, the limit in bytes)``; sets the limit first if given."""

def take_max_concurrent_reads() -> int: ...

# Pieces of messages fetched by byte range (source/remote.py)

def parse_message(buf: bytes) -> tuple[dict[str, Any], list[tuple[dict[str, Any], int, int]]]: ...
def read_frame(
    frame: bytes, index: Any = None, out: np.ndarray | None = None, verify_hash: bool | None = None, context: str = "",
    threads: int | None = None, expect_shape: tuple[int, ...] | list[int] | None = None,
) -> np.ndarray: ...
def check_frame_hash(frame: bytes, context: str = "") -> bool:
    """``FileHandle.check_hash`` of the object in data-object frame ``frame``: its stored hash
    checked against its bytes, nothing decoded."""

def frame_fingerprint(frame: bytes) -> int: ...

# Remote files: sans-IO walks that `tgm_xarray.source.fetcher.drive` (or `drive_async`) runs: each asks
# for byte ranges of the file (`wanted`: (start, stop) pairs, None when done) and takes their
# bytes in the same order (`feed`) until it wants nothing more, then `finish`.
@final
class RemoteScan:
    """The opening scan of a remote file; ``finish`` gives its messages."""

    def wanted(self) -> list[tuple[int, int]] | None: ...
    def feed(self, fed: list[bytes]) -> None: ...
    def finish(self) -> RemoteMessages: ...

@final
class RemoteDescription:
    """Fetches what describes messages of a remote file; ``finish`` keeps it."""

    def wanted(self) -> list[tuple[int, int]] | None: ...
    def feed(self, fed: list[bytes]) -> None: ...
    def finish(self) -> None: ...

@final
class RemoteRead:
    """A read of an object from byte ranges of its payload; ``finish`` decodes it."""

    def wanted(self) -> list[tuple[int, int]] | None: ...
    def feed(self, fed: list[bytes]) -> None: ...
    def finish(self) -> np.ndarray: ...

@final
class RemoteMessages:
    """A remote file's messages (``tgm_xarray.source.remote``): as ``scan_remote`` found them, or as
    an index's metadata table lists them (``from_index``)."""

    @staticmethod
    def from_index(source: str, size: int, table: Table, tail_guess: int) -> RemoteMessages: ...
    def __len__(self) -> int: ...
    def span(self, msg: int) -> tuple[int, int]: ...
    def is_described(self, msg: int) -> bool: ...
    def reads_need_description(self, msg: int) -> bool: ...
    def frame_range(self, msg: int, obj: int) -> tuple[int, int]: ...
    def check_frame(self, msg: int, obj: int, frame: bytes) -> None: ...
    def frame_spans(self, msg: int) -> list[tuple[int, int]]: ...
    def describe(self, wanted: list[int]) -> RemoteDescription: ...
    def metadata(self, msg: int) -> dict[str, Any]: ...
    def descriptors(self, msg: int) -> list[dict[str, Any]]: ...
    def object_layouts(self, msg: int) -> list[tuple[list[int], str]]: ...
    def fingerprint(self, msg: int, obj: int) -> int | None: ...
    def payload_read(self, msg: int, obj: int, index: Any = None, out: np.ndarray | None = None) -> RemoteRead | None: ...

# How much the open fetches at once: `tgm_xarray.source.remote.scan_settings()`.
def scan_remote(source: str, size: int, *, first_block: int, max_block: int, read_ahead: int, whole_message_max: int,
                header_guess: int, tail_guess: int) -> RemoteScan: ...

# Metadata tables (`tgm_xarray.table.MetadataTable` is their view)
@final
class Table:
    """A file's metadata table, frozen (``tgm_xarray.table.MetadataTable`` is its view): its
    columns by name, as the core lists them, and its stored form."""

    @property
    def n_messages(self) -> int: ...
    @property
    def columns(self) -> list[str]: ...
    def __len__(self) -> int: ...
    def column(self, name: str) -> tuple[str, Any]:
        """``(kind, value)``: "array", "codes", "keys", "shapes" or "descriptors"."""
    def fingerprints(self) -> np.ndarray:
        """Each row's fingerprint (uint64) where its frame's inline hash gives it; 0 where the
        frame has none (``has_frame_hash``: ``FileHandle.fingerprints`` hashes those)."""
    def to_bytes(self) -> bytes: ...
    @staticmethod
    def from_bytes(data: bytes) -> Table: ...
    def __reduce__(self) -> tuple[Any, tuple[bytes]]: ...

def table_of_files(files: list[FileHandle | RemoteMessages]) -> Table:
    """One table over several files: messages numbered on from one file to the next (a remote
    file's messages read by their header must be described first: ``RemoteMessages.describe``)."""
def table_of_bytes(data: bytes) -> Table:
    """The table of the whole messages in ``data`` (none when empty)."""
