"""The zarr v3 codec ``tensogram``: two array-to-bytes codecs, one for each kind of chunk.

- ``TensogramCodec`` stores each chunk as one complete, single-object Tensogram message, so it
  carries its own descriptor (dtype, shape, encoding, filter, compression and their parameters)
  and upstream tools can decode or check it on its own.
- ``TensogramFrameCodec`` reads chunks that are one data-object frame of a message in a .tgm
  file: the chunks of virtual references (virtual.py). It is read-only.

Encoding and decoding run in the Rust core with the interpreter released, in worker threads, so
zarr decodes several chunks at once. Both are stored under the name ``tensogram``, registered
through the ``zarr.codecs`` entry point as ``TensogramCodec``, whose ``from_dict`` reads a frame
codec's configuration (it says ``"chunk": "frame"``) as a ``TensogramFrameCodec``: an array
written with either reopens in any process where tgm-xarray is installed, without importing it
first.

See docs/zarr.md for the configuration, the error bounds and the rules on dtypes and NaN, and
docs/virtual.md for the frame codec.
"""

from __future__ import annotations

import asyncio
import json
import math
from dataclasses import dataclass, field
from importlib.metadata import version
from typing import TYPE_CHECKING, Any

import numpy as np
from packaging.version import Version
from zarr.abc.codec import ArrayBytesCodec, ArrayBytesCodecPartialDecodeMixin
from zarr.core.common import JSON, parse_named_configuration
from zarr.storage import StorePath

from tgm_xarray import _core, frame_fetches
from tgm_xarray.errors import TgmCodecError
from tgm_xarray.pipeline import COMPRESSIONS, TABLE, Pipeline
from tgm_xarray.selection import outer
from tgm_xarray.threads import check_threads

if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Self

    from zarr.abc.store import ByteGetter
    from zarr.core.array_spec import ArraySpec
    from zarr.core.buffer import Buffer, NDBuffer
    from zarr.core.chunk_grids import ChunkGrid
    from zarr.core.dtype.wrapper import TBaseDType, TBaseScalar, ZDType
    from zarr.core.indexing import SelectorTuple

#: The codecs' name in zarr metadata.
NAME = "tensogram"
# The stored options, as in the pipeline's table (the codec adds `hash`).
COMPRESSION_PARAMS = tuple(o.name for o in TABLE if o.stage in COMPRESSIONS)
#: The configuration's ``chunk``: what a chunk's bytes are, a whole single-object message
#: (``TensogramCodec``, the default, not written) or one data-object frame (``TensogramFrameCodec``).
CHUNKS = ("message", "frame")
#: Decoded size up to which a referenced frame decodes on zarr's event loop instead of in a
#: worker thread: the hop there and back (30-60 us on our 2-vCPU machines, more when the
#: interpreter is contended) costs as much as decoding ~50 KB of packed szip, and archives of
#: small fields read thousands of such chunks (docs/virtual.md, "Measured").
INLINE_DECODE_MAX_BYTES = 128 * 1024
#: Whether zarr has its synchronous pipeline (``FusedCodecPipeline``, zarr >= 3.3). Its read path
#: looks up the codec's ``_decode_partial_sync`` by name (a private hook, not part of the
#: ``ArrayBytesCodecPartialDecodeMixin`` contract): the codecs define it only where zarr calls
#: it, and tests/zarr/test_codec_sync.py checks this gate against zarr on both sides of 3.3.
ZARR_SYNC_PIPELINE = Version(version("zarr")) >= Version("3.3")


class _ChunkCodec(ArrayBytesCodecPartialDecodeMixin, ArrayBytesCodec):
    """What both codecs share: a chunk, or the part of it a read selects, decoded by the core
    (``_decode_selection``), synchronously and from zarr's event loop, on either pipeline."""

    is_fixed_size = False

    def __repr__(self) -> str:
        # The stored configuration, not the unused parameters of other compressions.
        arguments = ", ".join(f"{k}={v!r}" for k, v in self._arguments().items())
        return f"{type(self).__name__}({arguments})"

    def _arguments(self) -> dict[str, Any]:
        """The keyword arguments that make this codec again (its stored configuration)."""
        raise NotImplementedError

    def _encode_sync(self, chunk_array: NDBuffer, chunk_spec: ArraySpec) -> Buffer | None:
        raise NotImplementedError

    def _decode_selection(self, chunk_bytes: Buffer, core_selection: tuple | None,
                          decoded_shape: tuple[int, ...], chunk_spec: ArraySpec) -> np.ndarray:
        """The values of ``core_selection`` (the core's outer selection; None: the whole chunk)
        of the chunk, of shape ``decoded_shape``, in the dtype they decode to."""
        raise NotImplementedError

    def _decode_region_sync(
        self, chunk_bytes: Buffer, selection: SelectorTuple, chunk_spec: ArraySpec
    ) -> NDBuffer:
        """``chunk[selection]`` (numpy semantics), decoding only that region when it is outer."""
        outer = _outer_selection(selection, chunk_spec.shape)
        if outer is None:  # coordinate or mask selection: decode all, let numpy pick
            core_selection, decoded_shape, result_shape = None, tuple(chunk_spec.shape), None
        else:
            core_selection, decoded_shape, result_shape = outer
        values = self._decode_selection(chunk_bytes, core_selection, decoded_shape, chunk_spec)
        result = values.reshape(result_shape) if result_shape is not None else values[selection]
        dtype = chunk_spec.dtype.to_native_dtype()
        if result.dtype != dtype:
            result = result.astype(dtype)
        return chunk_spec.prototype.nd_buffer.from_numpy_array(result)

    async def _decode_region(self, chunk_bytes: Buffer, selection: SelectorTuple, chunk_spec: ArraySpec) -> NDBuffer:
        """``_decode_region_sync`` from zarr's event loop: in a worker thread."""
        return await asyncio.to_thread(self._decode_region_sync, chunk_bytes, selection, chunk_spec)

    def _decode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> NDBuffer:
        return self._decode_region_sync(chunk_bytes, (), chunk_spec)

    async def _decode_single(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> NDBuffer:
        return await asyncio.to_thread(self._decode_sync, chunk_bytes, chunk_spec)

    async def _encode_single(self, chunk_array: NDBuffer, chunk_spec: ArraySpec) -> Buffer | None:
        return await asyncio.to_thread(self._encode_sync, chunk_array, chunk_spec)

    async def _decode_partial_single(
        self, byte_getter: ByteGetter, selection: SelectorTuple, chunk_spec: ArraySpec
    ) -> NDBuffer | None:
        chunk_bytes = await byte_getter.get(prototype=chunk_spec.prototype)
        if chunk_bytes is None:
            return None
        return await self._decode_region(chunk_bytes, selection, chunk_spec)

    if ZARR_SYNC_PIPELINE:

        def _decode_partial_sync(
            self, byte_getter: Any, selection: SelectorTuple, chunk_spec: ArraySpec
        ) -> NDBuffer | None:
            """``_decode_partial_single`` for ``FusedCodecPipeline``, which calls it in its own
            worker threads (stores with synchronous IO only): the chunk is fetched whole and only
            the selection decoded, here, without a thread hop; a missing chunk is None."""
            chunk_bytes = byte_getter.get_sync(prototype=chunk_spec.prototype)
            if chunk_bytes is None:
                return None
            return self._decode_region_sync(chunk_bytes, selection, chunk_spec)

    def compute_encoded_size(self, _input_byte_length: int, _chunk_spec: ArraySpec) -> int:
        raise NotImplementedError


@dataclass(frozen=True, repr=False)  # repr: _ChunkCodec's, the stored configuration
class TensogramCodec(_ChunkCodec):
    """Stores each chunk as one Tensogram message, with Tensogram's encodings and compressors.

    The pipeline mirrors Tensogram's: an ``encoding`` (``"none"``, or ``"simple_packing"``: GRIB's
    lossy quantisation to ``bits_per_value`` bits, floats only), a ``filter`` (``"none"`` or
    byte ``"shuffle"``), then a ``compression`` (``"none"``, ``"szip"``, ``"zstd"``, ``"lz4"``,
    ``"blosc2"``, and the lossy ``"zfp"`` and ``"sz3"``), whose parameters keep Tensogram's names
    (``szip_rsi``, ``zstd_level``, ...). The options, their aliases and defaults are those of
    ``to_tgm``'s ``encoding=`` (:data:`tgm_xarray.pipeline.TABLE`), so the same options store the
    same objects. ``hash`` stores an xxh3 hash of each chunk's payload. NaN and infinities are
    preserved with every configuration.

    Use it as the array's only codec (``compressors=None``): the chunk is already compressed, and
    reads of part of a chunk then decode only that part where the encoding allows it. With simple
    packing, prefer ``fill_value=np.nan``: zarr pads edge chunks with the fill value, which would
    otherwise widen their packing range.

    >>> import numpy as np, zarr
    >>> codec = TensogramCodec(encoding="simple_packing", bits_per_value=24, compression="szip")
    >>> z = zarr.create_array({}, shape=(100, 200), chunks=(64, 128), dtype="float64",
    ...                       fill_value=np.nan, serializer=codec, compressors=None)
    >>> z[:] = np.linspace(250.0, 310.0, 20_000).reshape(100, 200)
    >>> bool(abs(z[10, 20] - (250.0 + 60.0 * 2020 / 19_999)) < 1e-5)
    True
    >>> codec.to_dict()["configuration"]["szip_block_size"]
    32
    """

    encoding: str
    bits_per_value: int | None
    decimal_scale_factor: int | None
    filter: str
    compression: str
    szip_rsi: int | None
    szip_block_size: int | None
    szip_flags: int | None
    zstd_level: int | None
    blosc2_codec: str | None
    blosc2_clevel: int | None
    zfp_mode: str | None
    zfp_rate: float | None
    zfp_precision: int | None
    zfp_tolerance: float | None
    sz3_error_bound_mode: str | None
    sz3_error_bound: float | None
    hash: bool
    #: Threads that decode one chunk (None: the core's process-wide budget, which leaves the
    #: cores to zarr's own concurrency when it keeps them busy). A runtime setting: not stored.
    threads: int | None
    _pipeline: Pipeline = field(init=False, compare=False)  # what the fields above say

    def __init__(self, *, hash: bool = True, threads: int | None = None, **options: Any) -> None:
        threads = check_threads(threads)
        if not isinstance(hash, bool):
            raise TypeError(f"hash must be true or false; got {hash!r}")
        pipeline = Pipeline.from_options(options)
        object.__setattr__(self, "_pipeline", pipeline)
        object.__setattr__(self, "encoding", pipeline.encoding)
        object.__setattr__(self, "bits_per_value", pipeline.bits_per_value)
        object.__setattr__(self, "decimal_scale_factor", pipeline.decimal_scale_factor)
        object.__setattr__(self, "filter", pipeline.filter)
        object.__setattr__(self, "compression", pipeline.compression)
        for name in COMPRESSION_PARAMS:
            object.__setattr__(self, name, pipeline.params.get(name))
        object.__setattr__(self, "hash", hash)
        object.__setattr__(self, "threads", threads)

    @classmethod
    def from_dict(cls, data: dict[str, JSON]) -> TensogramCodec | TensogramFrameCodec:  # type: ignore[override]
        """The codec stored as ``data``: zarr resolves the name ``tensogram`` to this class, so a
        frame codec's configuration (``"chunk": "frame"``) gives a ``TensogramFrameCodec``."""
        _, configuration = parse_named_configuration(data, NAME)
        chunk = configuration.get("chunk", "message")
        # Same type too: true is no chunk kind.
        if not any(type(chunk) is type(c) and chunk == c for c in CHUNKS):
            raise ValueError(f"chunk must be one of {', '.join(map(repr, CHUNKS))}; got {chunk!r}")
        if chunk == "frame":
            return TensogramFrameCodec.from_dict(data)
        return cls(**{k: v for k, v in configuration.items() if k != "chunk"})  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, JSON]:
        return {"name": NAME, "configuration": self._arguments()}

    def _arguments(self) -> dict[str, Any]:
        # Only the parameters of the chosen stages, all of them, in a fixed order.
        return self._pipeline.options() | {"hash": self.hash}

    def validate(
        self,
        *,
        shape: tuple[int, ...],
        dtype: ZDType[TBaseDType, TBaseScalar],
        chunk_grid: ChunkGrid,
    ) -> None:
        self._pipeline.stored_dtype(dtype.to_native_dtype())  # raises for dtypes the pipeline refuses

    def _encode_sync(self, chunk_array: NDBuffer, chunk_spec: ArraySpec) -> Buffer | None:
        data = chunk_array.as_numpy_array().reshape(chunk_spec.shape)
        # NaN and infinities become Tensogram masks (restored on decode) instead of failing; the
        # buffer is a view of the encoder's memory (no copy into bytes).
        message = _core.encode_message({}, [self._pipeline.prepare(data)], hash=self.hash,
                                       allow_nan=True, allow_inf=True, copy=False)
        return chunk_spec.prototype.buffer.from_bytes(message)

    def _decode_selection(self, chunk_bytes: Buffer, core_selection: tuple | None,
                          decoded_shape: tuple[int, ...], chunk_spec: ArraySpec) -> np.ndarray:
        dtype = chunk_spec.dtype.to_native_dtype()
        # Upstream 0.24 packs and runs zfp/sz3 on float64 only: such chunks are stored as float64
        # (read straight into a float32 array's float32).
        stored = np.dtype(np.float64) if self._pipeline.float64_only else dtype.newbyteorder("=")
        out = _core.empty(decoded_shape, _core.read_dtype(stored, dtype.newbyteorder("=")))
        _core.decode_message_into(chunk_bytes.as_numpy_array(), 0, core_selection, out, threads=self.threads,
                                  expect=(tuple(chunk_spec.shape), stored.name))
        return out


@dataclass(frozen=True, repr=False)  # repr: _ChunkCodec's, the stored configuration
class TensogramFrameCodec(_ChunkCodec):
    """Reads chunks that are one data-object frame of a message in a .tgm file: the chunks of
    virtual references (virtual.py), read-only.

    The frame holds its own descriptor, payload, NaN/Inf masks and hash, which decoding follows;
    ``descriptor`` is what every object of the array shares (at least its ``shape``, checked on
    every decode). The chunk is the object with leading axes of size 1 (the fields' stacking
    dimensions). ``hash=False`` skips the check of the frames' stored hashes. Stored as
    ``{"name": "tensogram", "configuration": {"chunk": "frame", "descriptor": {...}, "hash": true}}``.

    >>> TensogramFrameCodec(descriptor={"shape": [721, 1440], "encoding": "simple_packing"})
    TensogramFrameCodec(descriptor={'encoding': 'simple_packing', 'shape': [721, 1440]}, hash=True)
    """

    descriptor: str  # the objects' descriptor, as sorted JSON (hashable, like the codec)
    hash: bool
    #: Threads that decode one chunk, as for ``TensogramCodec``. A runtime setting: not stored.
    threads: int | None
    _object_shape: tuple[int, ...] = field(init=False, compare=False)  # the descriptor's
    _stored_dtype: np.dtype | None = field(init=False, compare=False)  # the descriptor's, if it names one

    def __init__(self, *, descriptor: dict[str, JSON], hash: bool = True, threads: int | None = None) -> None:
        threads = check_threads(threads)
        if not isinstance(descriptor, dict) or "shape" not in descriptor:
            raise ValueError("a frame codec needs the objects' descriptor, with their shape")
        shape = descriptor["shape"]
        if not isinstance(shape, list | tuple) or any(isinstance(n, bool) or not isinstance(n, int) or n < 0
                                                      for n in shape):
            raise ValueError(f"descriptor shape must be a list of sizes; got {shape!r}")
        if not isinstance(hash, bool):
            raise TypeError(f"hash must be true or false; got {hash!r}")
        object.__setattr__(self, "descriptor", json.dumps(descriptor, sort_keys=True))
        object.__setattr__(self, "hash", hash)
        object.__setattr__(self, "threads", threads)
        object.__setattr__(self, "_object_shape", tuple(shape))
        stored = descriptor.get("dtype")
        object.__setattr__(self, "_stored_dtype", _core.numpy_dtype(stored) if isinstance(stored, str) else None)

    @classmethod
    def from_dict(cls, data: dict[str, JSON]) -> Self:
        _, configuration = parse_named_configuration(data, NAME)
        arguments = dict(configuration)  # the caller's dict stays as it is
        if arguments.pop("chunk", None) != "frame":
            raise ValueError(f"not the configuration of a frame codec (no \"chunk\": \"frame\"): {data!r}")
        return cls(**arguments)  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, JSON]:
        return {"name": NAME, "configuration": {"chunk": "frame", **self._arguments()}}

    def _arguments(self) -> dict[str, Any]:
        return {"descriptor": json.loads(self.descriptor), "hash": self.hash}

    def _encode_sync(self, chunk_array: NDBuffer, chunk_spec: ArraySpec) -> Buffer | None:
        raise TgmCodecError("frame codec arrays are read-only references into .tgm files")

    def _decode_selection(self, chunk_bytes: Buffer, core_selection: tuple | None,
                          decoded_shape: tuple[int, ...], chunk_spec: ArraySpec) -> np.ndarray:
        shape = self._object_shape
        lead = len(chunk_spec.shape) - len(shape)
        if lead < 0 or tuple(chunk_spec.shape[lead:]) != shape or any(n != 1 for n in chunk_spec.shape[:lead]):
            raise TgmCodecError(f"a chunk of shape {chunk_spec.shape} cannot hold objects of shape {shape}")
        # The frame's shape is checked before it decodes (a stale reference: the file was
        # rewritten), and its inline hash, where it has one, as every read checks it (unless
        # `hash` is false).
        # Straight into the array's dtype where a read fills it (float32 for float64 packing).
        dtype = chunk_spec.dtype.to_native_dtype().newbyteorder("=")
        direct = self._stored_dtype is not None and _core.read_dtype(self._stored_dtype, dtype) == dtype
        out = _core.empty(decoded_shape[lead:], dtype) if direct else None
        values = _core.read_frame(_whole_bytes(chunk_bytes.as_numpy_array()),
                                  None if core_selection is None else core_selection[lead:], out,
                                  None if self.hash else False, "the referenced data-object frame",
                                  threads=self.threads, expect_shape=list(shape))
        return values.reshape(decoded_shape)

    async def _decode_region(self, chunk_bytes: Buffer, selection: SelectorTuple, chunk_spec: ArraySpec) -> NDBuffer:
        """Small frames decode here, on zarr's event loop; larger ones in a worker thread."""
        if _small_chunk(chunk_spec):
            return self._decode_region_sync(chunk_bytes, selection, chunk_spec)
        return await super()._decode_region(chunk_bytes, selection, chunk_spec)

    async def decode_partial(
        self, batch_info: Iterable[tuple[ByteGetter, SelectorTuple, ArraySpec]]
    ) -> Iterable[NDBuffer | None]:
        """The frames of a batch are fetched together (``frame_fetches``: one store request per
        event-loop turn), then decoded; other byte getters (a shard's inner chunks) as zarr
        does, one task each."""
        batch = list(batch_info)
        paths = [getter for getter, _, _ in batch if isinstance(getter, StorePath)]
        if len(paths) != len(batch):
            return await super().decode_partial(batch)
        wanted = [frame_fetches.fetch(path, spec.prototype) for path, (_, _, spec) in zip(paths, batch, strict=True)]
        fetched = [await wanted[0]] if len(wanted) == 1 else await asyncio.gather(*wanted)
        # Small frames decode here, one after the other; larger ones each in a worker thread.
        decoded: list[NDBuffer | None] = []
        large = []
        for i, (chunk_bytes, (_, selection, spec)) in enumerate(zip(fetched, batch, strict=True)):
            if chunk_bytes is None or not _small_chunk(spec):
                decoded.append(None)
                if chunk_bytes is not None:
                    large.append((i, chunk_bytes, selection, spec))
            else:
                decoded.append(self._decode_region_sync(chunk_bytes, selection, spec))
        values = await asyncio.gather(*(asyncio.to_thread(self._decode_region_sync, chunk_bytes, selection, spec)
                                        for _, chunk_bytes, selection, spec in large))
        for (i, *_), value in zip(large, values, strict=True):
            decoded[i] = value
        return decoded


def _small_chunk(chunk_spec: ArraySpec) -> bool:
    """Whether a chunk decodes to at most ``INLINE_DECODE_MAX_BYTES``."""
    return chunk_spec.dtype.to_native_dtype().itemsize * math.prod(chunk_spec.shape) <= INLINE_DECODE_MAX_BYTES


def _whole_bytes(message: np.ndarray) -> bytes:
    """``message`` as ``bytes``, without a copy when it views a whole ``bytes`` object, as zarr's
    stores hand chunks (a copy costs ~50 us per MB: as much as a small partial read)."""
    base = message.base
    while isinstance(base, np.ndarray):
        base = base.base
    if isinstance(base, bytes) and message.flags.c_contiguous and message.nbytes == len(base):
        return base
    return message.tobytes()


def _outer_selection(
    selection: SelectorTuple, shape: tuple[int, ...]
) -> tuple[tuple | None, tuple[int, ...], tuple[int, ...]] | None:
    """Zarr's chunk selection as the core's outer selection.

    Returns ``(core selection, decoded shape, result shape)`` — the core selection is None for
    the whole chunk — or None when numpy would not read the selection as outer (coordinate and
    mask selections). zarr hands codecs slices and integers (basic indexing), ``np.ix_``-style
    index arrays on every axis, or (zarr >= 3.2) one 1-D index array among slices (orthogonal).
    """
    if not isinstance(selection, tuple):
        selection = (selection,)
    selection = selection + (slice(None),) * (len(shape) - len(selection))
    if len(selection) != len(shape):
        return None
    arrays = [s for s in selection if isinstance(s, np.ndarray)]
    others = [s for s in selection if not isinstance(s, np.ndarray)]
    # Mixed with slices, numpy indexes outer only with a lone 1-D array (integers would join it).
    lone_array = len(arrays) == 1 and arrays[0].ndim == 1 and all(isinstance(s, slice) for s in others)
    if arrays and others and not lone_array:
        return None
    key = []
    for axis, s in enumerate(selection):
        if isinstance(s, np.ndarray):
            # np.ix_ shapes axis k's array (1, .., n_k, .., 1); a lone array is 1-D
            ix_shaped = s.ndim == len(shape) and all(k == 1 for i, k in enumerate(s.shape) if i != axis)
            if s.dtype.kind not in "iu" or not (lone_array or ix_shaped):
                return None
            s = s.reshape(-1)
        key.append(s)
    try:
        found = outer(tuple(key), tuple(shape))
    except (IndexError, TypeError):  # numpy says what is wrong with it
        return None
    return found.core, found.decoded_shape, found.result_shape
