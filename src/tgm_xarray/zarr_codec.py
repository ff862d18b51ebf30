"""``TensogramCodec``: a zarr v3 array-to-bytes codec that stores each chunk as one Tensogram message.

Every chunk becomes a complete, single-object Tensogram message, so it carries its own descriptor
(dtype, shape, encoding, filter, compression and their parameters) and upstream tools can decode
or check it on its own. Encoding and decoding run in the Rust core with the interpreter released,
in worker threads, so zarr decodes several chunks at once. The codec is registered under the name
``tensogram`` through the ``zarr.codecs`` entry point: an array written with it reopens in any
process where tgm-xarray is installed, without importing it first.

See docs/zarr.md for the configuration, the error bounds and the rules on dtypes and NaN.
"""

from __future__ import annotations

import asyncio
import json
import math
from dataclasses import dataclass
from importlib.metadata import version
from typing import TYPE_CHECKING, Any

import numpy as np
from packaging.version import Version
from zarr.abc.codec import ArrayBytesCodec, ArrayBytesCodecPartialDecodeMixin
from zarr.core.common import JSON, parse_named_configuration
from zarr.storage import StorePath

from tgm_xarray import _core
from tgm_xarray.errors import TgmCodecError
from tgm_xarray.pipeline import COMPRESSIONS, TABLE, Pipeline
from tgm_xarray.selection import outer
from tgm_xarray.threads import check_threads

if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Self

    from zarr.abc.store import ByteGetter, Store
    from zarr.core.array_spec import ArraySpec
    from zarr.core.buffer import Buffer, BufferPrototype, NDBuffer
    from zarr.core.chunk_grids import ChunkGrid
    from zarr.core.dtype.wrapper import TBaseDType, TBaseScalar, ZDType
    from zarr.core.indexing import SelectorTuple

# The stored options, as in the pipeline's table (the codec adds `hash`).
COMPRESSION_PARAMS = tuple(o.name for o in TABLE if o.stage in COMPRESSIONS)
# What a chunk's bytes are: a whole single-object message (what the codec writes), or one
# data-object frame of a message in a .tgm file (the chunks of virtual references, virtual.py).
CHUNKS = ("message", "frame")
#: Decoded size up to which a referenced frame decodes on zarr's event loop instead of in a
#: worker thread: the hop there and back (30-60 us on our 2-vCPU machines, more when the
#: interpreter is contended) costs as much as decoding ~50 KB of packed szip, and archives of
#: small fields read thousands of such chunks (docs/virtual.md, "Measured").
INLINE_DECODE_MAX_BYTES = 128 * 1024
#: Whether zarr has its synchronous pipeline (``FusedCodecPipeline``, zarr >= 3.3). Its read path
#: looks up the codec's ``_decode_partial_sync`` by name (a private hook, not part of the
#: ``ArrayBytesCodecPartialDecodeMixin`` contract): the codec defines it only where zarr calls
#: it, and tests/test_zarr_codec_sync.py checks this gate against zarr on both sides of 3.3.
ZARR_SYNC_PIPELINE = Version(version("zarr")) >= Version("3.3")


def _parse_choice(name: str, value: object, choices: tuple) -> Any:
    # Same type too: true is no chunk kind.
    if not any(type(value) is type(c) and value == c for c in choices):
        raise ValueError(f"{name} must be one of {', '.join(map(repr, choices))}; got {value!r}")
    return value


@dataclass(frozen=True)
class TensogramCodec(ArrayBytesCodecPartialDecodeMixin, ArrayBytesCodec):
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

    is_fixed_size = False

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
    chunk: str
    descriptor: str | None  # chunk "frame": the referenced objects' descriptor, as sorted JSON
    #: Threads that decode one chunk (None: the core's process-wide budget, which leaves the
    #: cores to zarr's own concurrency when it keeps them busy). A runtime setting: not stored.
    threads: int | None

    def __init__(
        self,
        *,
        hash: bool = True,
        chunk: str = "message",
        descriptor: dict[str, JSON] | None = None,
        threads: int | None = None,
        **options: Any,
    ) -> None:
        threads = check_threads(threads)
        if _parse_choice("chunk", chunk, CHUNKS) == "frame":
            # Read-only references: the frame holds its own descriptor, which decoding follows.
            # `descriptor` says what the objects are (their shape is checked on every decode).
            if options:
                raise ValueError(f"chunk 'frame' takes no pipeline options; got {sorted(options)}")
            self._init_frame(descriptor, hash)
            return
        if descriptor is not None:
            raise ValueError("descriptor applies to chunk 'frame', not 'message'")
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
        object.__setattr__(self, "chunk", "message")
        object.__setattr__(self, "descriptor", None)

    def _init_frame(self, descriptor: dict[str, JSON] | None, hash: bool) -> None:
        if not isinstance(descriptor, dict) or "shape" not in descriptor:
            raise ValueError("chunk 'frame' needs the objects' descriptor, with their shape")
        shape = descriptor["shape"]
        if not isinstance(shape, list | tuple) or any(isinstance(n, bool) or not isinstance(n, int) or n < 0
                                                      for n in shape):
            raise ValueError(f"descriptor shape must be a list of sizes; got {shape!r}")
        if not isinstance(hash, bool):
            raise TypeError(f"hash must be true or false; got {hash!r}")
        for name in self.__dataclass_fields__:
            object.__setattr__(self, name, None)
        for name in ("encoding", "filter", "compression"):
            object.__setattr__(self, name, descriptor.get(name))
        object.__setattr__(self, "hash", hash)
        object.__setattr__(self, "chunk", "frame")
        object.__setattr__(self, "descriptor", json.dumps(descriptor, sort_keys=True))
        object.__setattr__(self, "_object_shape", tuple(shape))  # checked on every decode

    def __repr__(self) -> str:
        # The stored configuration, not the unused parameters of other compressions.
        arguments = ", ".join(f"{k}={v!r}" for k, v in self.to_dict()["configuration"].items())
        return f"TensogramCodec({arguments})"

    @classmethod
    def from_dict(cls, data: dict[str, JSON]) -> Self:
        _, configuration_parsed = parse_named_configuration(data, "tensogram")
        return cls(**configuration_parsed)  # type: ignore[arg-type]

    def to_dict(self) -> dict[str, JSON]:
        if self.chunk == "frame":
            configuration = {"chunk": "frame", "descriptor": json.loads(self.descriptor), "hash": self.hash}
            return {"name": "tensogram", "configuration": configuration}
        # Only the parameters of the chosen stages, all of them, in a fixed order.
        configuration: dict[str, JSON] = self._pipeline.options()
        configuration["hash"] = self.hash
        return {"name": "tensogram", "configuration": configuration}

    @property
    def _float64_payload(self) -> bool:
        """Whether chunks travel as float64 (upstream 0.24 packs and runs zfp/sz3 on float64 only)."""
        return self._pipeline.float64_only

    def validate(
        self,
        *,
        shape: tuple[int, ...],
        dtype: ZDType[TBaseDType, TBaseScalar],
        chunk_grid: ChunkGrid,
    ) -> None:
        if self.chunk == "frame":
            return  # decoding follows each frame's descriptor and casts to the array's dtype
        self._check_dtype(dtype.to_native_dtype())

    def _check_dtype(self, dtype: np.dtype) -> np.dtype:
        """The dtype chunks of ``dtype`` are stored as; raises for dtypes the pipeline refuses."""
        return self._pipeline.stored_dtype(dtype)

    def _encode_sync(self, chunk_array: NDBuffer, chunk_spec: ArraySpec) -> Buffer | None:
        if self.chunk == "frame":
            raise TgmCodecError("chunk 'frame' arrays are read-only references into .tgm files")
        data = chunk_array.as_numpy_array().reshape(chunk_spec.shape)
        # NaN and infinities become Tensogram masks (restored on decode) instead of failing.
        message = _core.encode_message({}, [self._pipeline.prepare(data)], hash=self.hash,
                                       allow_nan=True, allow_inf=True)
        return chunk_spec.prototype.buffer.from_bytes(message)

    async def _encode_single(self, chunk_array: NDBuffer, chunk_spec: ArraySpec) -> Buffer | None:
        return await asyncio.to_thread(self._encode_sync, chunk_array, chunk_spec)

    def _decode_sync(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> NDBuffer:
        return self._decode_region_sync(chunk_bytes, (), chunk_spec)

    async def _decode_single(self, chunk_bytes: Buffer, chunk_spec: ArraySpec) -> NDBuffer:
        return await asyncio.to_thread(self._decode_sync, chunk_bytes, chunk_spec)

    def _decode_region_sync(
        self, chunk_bytes: Buffer, selection: SelectorTuple, chunk_spec: ArraySpec
    ) -> NDBuffer:
        """``chunk[selection]`` (numpy semantics), decoding only that region when it is outer."""
        if self.chunk == "frame":
            return self._decode_frame_region(chunk_bytes, selection, chunk_spec)
        dtype = chunk_spec.dtype.to_native_dtype()
        stored = np.dtype(np.float64) if self._float64_payload else dtype.newbyteorder("=")
        outer = _outer_selection(selection, chunk_spec.shape)
        if outer is None:  # coordinate or mask selection: decode all, let numpy pick
            core_selection, decoded_shape, result_shape = None, chunk_spec.shape, None
        else:
            core_selection, decoded_shape, result_shape = outer
        out = _core.empty(decoded_shape, stored)
        _core.decode_message_into(chunk_bytes.as_numpy_array(), 0, core_selection, out, threads=self.threads,
                                  expect=(chunk_spec.shape, stored.name))
        result = out.reshape(result_shape) if outer is not None else out[selection]
        if result.dtype != dtype:
            result = result.astype(dtype)
        return chunk_spec.prototype.nd_buffer.from_numpy_array(result)

    def _decode_frame_region(
        self, chunk_bytes: Buffer, selection: SelectorTuple, chunk_spec: ArraySpec
    ) -> NDBuffer:
        """``_decode_region_sync`` of a chunk that is one data-object frame. The chunk is the
        object with leading axes of size 1 (the fields' stacking dimensions)."""
        dtype = chunk_spec.dtype.to_native_dtype()
        shape = self._object_shape
        lead = len(chunk_spec.shape) - len(shape)
        if lead < 0 or tuple(chunk_spec.shape[lead:]) != shape or any(n != 1 for n in chunk_spec.shape[:lead]):
            raise TgmCodecError(f"a chunk of shape {chunk_spec.shape} cannot hold objects of shape {shape}")
        outer = _outer_selection(selection, chunk_spec.shape)
        if outer is None:  # coordinate or mask selection: decode all, let numpy pick
            core_selection, decoded_shape, result_shape = None, tuple(chunk_spec.shape), None
        else:
            core_selection, decoded_shape, result_shape = outer
        frame = _whole_bytes(chunk_bytes.as_numpy_array())
        # The frame's shape is checked before it decodes (a stale reference: the file was
        # rewritten), and its inline hash, where it has one, as every read checks it.
        values = _core.read_frame(frame, None if core_selection is None else core_selection[lead:], None,
                                  None, "the referenced data-object frame", expect_shape=list(shape))
        values = values.reshape(decoded_shape)
        result = values.reshape(result_shape) if outer is not None else values[selection]
        if result.dtype != dtype:
            result = result.astype(dtype)
        return chunk_spec.prototype.nd_buffer.from_numpy_array(result)

    async def _decode_partial_single(
        self, byte_getter: ByteGetter, selection: SelectorTuple, chunk_spec: ArraySpec
    ) -> NDBuffer | None:
        chunk_bytes = await byte_getter.get(prototype=chunk_spec.prototype)
        if chunk_bytes is None:
            return None
        if self.chunk == "frame" and _small_chunk(chunk_spec):
            return self._decode_frame_region(chunk_bytes, selection, chunk_spec)
        return await asyncio.to_thread(self._decode_region_sync, chunk_bytes, selection, chunk_spec)

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

    async def decode_partial(
        self, batch_info: Iterable[tuple[ByteGetter, SelectorTuple, ArraySpec]]
    ) -> list[NDBuffer | None]:
        """Referenced frames are fetched together: in one store request per event-loop turn
        (``_FrameFetches``), then decoded; other chunks as zarr does, one task each."""
        batch = list(batch_info)
        if self.chunk != "frame" or not all(isinstance(getter, StorePath) for getter, _, _ in batch):
            return await super().decode_partial(batch)
        wanted = [_FrameFetches.get(getter, spec.prototype) for getter, _, spec in batch]
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
                decoded.append(self._decode_frame_region(chunk_bytes, selection, spec))
        values = await asyncio.gather(*(asyncio.to_thread(self._decode_region_sync, chunk_bytes, selection, spec)
                                        for _, chunk_bytes, selection, spec in large))
        for (i, *_), value in zip(large, values, strict=True):
            decoded[i] = value
        return decoded

    def compute_encoded_size(self, _input_byte_length: int, _chunk_spec: ArraySpec) -> int:
        raise NotImplementedError


class _FrameFetches:
    """Referenced frames wanted in one event-loop turn, fetched with one ``get_partial_values``
    per store. zarr starts a task per chunk (``codec_pipeline.batch_size`` 1), and each store
    request is a round trip through Icechunk's runtime: 0.29-0.34 ms a chunk of 73 x 144 on one
    thread, against 0.15-0.19 ms a chunk for 12 in one request (docs/virtual.md, "Measured")."""

    # (loop, id(store), id(prototype)) -> (store, prototype, [(path, future)]): stores need not
    # be hashable (Icechunk's are not); an entry lives one loop turn and holds its store.
    _pending: dict[tuple, tuple[Store, BufferPrototype, list[tuple[str, asyncio.Future]]]] = {}
    _running: set[asyncio.Task] = set()  # the loop keeps only weak references to tasks

    @classmethod
    def get(cls, getter: StorePath, prototype: BufferPrototype) -> asyncio.Future:
        loop = asyncio.get_running_loop()
        key = (loop, id(getter.store), id(prototype))
        pending = cls._pending.get(key)
        if pending is None:
            pending = cls._pending[key] = (getter.store, prototype, [])
            loop.call_soon(cls._flush, key)  # after the tasks already scheduled in this turn
        future = loop.create_future()
        pending[2].append((getter.path, future))
        return future

    @classmethod
    def _flush(cls, key: tuple) -> None:
        task = key[0].create_task(cls._fetch(*cls._pending.pop(key)))
        cls._running.add(task)
        task.add_done_callback(cls._running.discard)

    @staticmethod
    async def _fetch(store: Store, prototype: BufferPrototype, wanted: list[tuple[str, asyncio.Future]]) -> None:
        async def get(path: str) -> Buffer | None | Exception:
            try:
                return await store.get(path, prototype)
            except Exception as err:
                return err

        found: list = []
        try:
            if len(wanted) > 1:
                try:
                    found = await store.get_partial_values(prototype, [(path, None) for path, _ in wanted])
                except Exception:  # not implemented (VirtualiZarr's ManifestStore), or some chunk failed
                    found = []
            if len(wanted) == 1:  # without a task more
                found = [await get(wanted[0][0])]
            elif len(found) != len(wanted):  # one request each: each chunk gets its own value or error
                found = await asyncio.gather(*(get(path) for path, _ in wanted))
        except BaseException:  # cancelled with the loop, interrupted: no reader waits forever
            for _, future in wanted:
                future.cancel()
            raise
        for (_, future), value in zip(wanted, found, strict=True):
            if future.cancelled():
                continue
            if isinstance(value, BaseException):
                future.set_exception(value)
            else:
                future.set_result(value)


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
