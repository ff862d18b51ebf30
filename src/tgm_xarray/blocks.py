"""The fields of dask-backed variables, computed in one graph: each dask block once, and what
the blocks share (the mean of an anomaly ``x - x.mean("step")``) once for all of them, as
``dask.array.store`` and ``to_zarr`` compute theirs.

A variable's dask array is first rechunked to whole fields (its inner dimensions in one chunk),
so that each block holds one or more fields along its stacked dimensions. Where the work runs
depends on the scheduler (docs/writer.md, "dask, threads and memory"):

- dask's threads or synchronous scheduler, in the writing process (the default): one
  ``dask.compute`` of every block runs beside the writer, and each block, once computed, is cut
  into its fields and encoded on the dask thread that computed it (:class:`EncodedFields`).
  Memory holds the blocks being computed and the messages not yet written in order, never the
  Dataset.
- a ``dask.distributed`` client: a task per block, all submitted at once, encodes the block's
  fields on the worker that computed it, one thread each (:class:`ClusterFields`); only the
  messages come here, a block's fetched when the file first needs one of them: memory holds the
  messages of the blocks being written, never a block's values.
- any other scheduler (processes): each block is computed by itself when the writer first needs
  it (shared intermediates then once per block), and encoded on the writer's threads
  (:class:`FetchedFields`).

>>> import dask.array as da, numpy as np, xarray as xr
>>> from tgm_xarray.layout import plan
>>> ds = xr.Dataset({"t": (("step", "y", "x"), da.zeros((4, 2, 3), chunks=(2, 1, 3)))},
...                 coords={"step": np.array([0, 6, 12, 18], "timedelta64[h]")})
>>> [(b.key, b.starts, b.counts) for b in field_blocks(plan(ds).variables[0])[1]]
[((0, 0, 0), (0,), (2,)), ((1, 0, 0), (2,), (2,))]
"""

from __future__ import annotations

import dataclasses
import functools
import os
import queue
import sys
import tempfile
import threading
import uuid
from collections.abc import Callable, Iterable, Sequence
from concurrent import futures
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
import xarray as xr

from tgm_xarray.layout import MessageSpec, ObjectSpec, VariableLayout

#: A field of a dask-backed variable: its layout's ``id`` and its position along the stacked
#: dimensions.
FieldKey = tuple[int, tuple[int, ...]]


class Encode(Protocol):
    """Encodes one field's message from its values: the bytes, or ``None`` (an all-NaN field left
    out); ``threads``, where given, bounds the threads one field takes."""

    def __call__(self, spec: MessageSpec, field: np.ndarray, *, threads: int | None = ...) -> Any: ...


def is_dask_backed(layout: VariableLayout) -> bool:
    """Whether the variable's values are a dask array (not numpy, not a lazy backend array)."""
    dask = sys.modules.get("dask")
    return dask is not None and dask.is_dask_collection(layout.variable.data)


@dataclass(frozen=True, eq=False)  # one per block: compared and hashed as itself
class Block:
    """One dask block of a variable rechunked to whole fields."""

    layout: VariableLayout
    key: tuple[int, ...]  # its chunk index along every axis
    starts: tuple[int, ...]  # its first position along each stacked dimension
    counts: tuple[int, ...]  # its fields along each stacked dimension

    def fields(self) -> Iterable[tuple[tuple[int, ...], tuple[int, ...]]]:
        """``(position in the variable, position in the block)`` of each field it holds."""
        for local in np.ndindex(*self.counts):
            yield tuple(s + i for s, i in zip(self.starts, local)), local


def field_blocks(layout: VariableLayout) -> tuple[Any, list[Block]]:
    """The variable's dask array with each inner dimension in one chunk, and its blocks."""
    data = layout.variable.data
    stacked = len(layout.stacked)
    data = data.rechunk({axis: -1 for axis in range(stacked, data.ndim)})
    blocks = []
    for key in np.ndindex(*data.numblocks):
        starts = tuple(sum(data.chunks[axis][:key[axis]]) for axis in range(stacked))
        counts = tuple(data.chunks[axis][key[axis]] for axis in range(stacked))
        blocks.append(Block(layout, key, starts, counts))
    return data, blocks


def field_key(spec: MessageSpec) -> FieldKey | None:
    """The key of a field of a dask-backed variable, else ``None`` (written as it comes)."""
    if spec.origin is None or not is_dask_backed(spec.origin[0]):
        return None
    return id(spec.origin[0]), spec.origin[1]


def _blocks(layouts: Sequence[VariableLayout]) -> list[tuple[Block, Any]]:
    """Every block of every variable, in the order their fields are written, with a
    ``dask.delayed`` of its values; each array's graph optimized once, so that the blocks share
    its tasks when computed together."""
    blocks = []
    for layout in layouts:
        data, of_layout = field_blocks(layout)
        delayed = data.to_delayed()
        blocks += [(block, delayed[block.key]) for block in of_layout]
    return blocks


class _Stopped(Exception):
    """The writer stopped (an error, or it is done): blocks still to compute are not."""


class EncodedFields:
    """Every block computed in one ``dask.compute`` on a thread beside the writer, each block's
    fields encoded on the dask thread that computed it; :meth:`message` hands a field's message
    to the writer, waiting until it is encoded.

    Messages encoded before their turn wait here: at most ``in_memory`` of them in memory, the
    rest in an unnamed temporary file in ``spill_dir`` (gone when closed, whatever happens), so
    that memory stays bounded in whatever order dask computes the blocks."""

    def __init__(self, layouts: Sequence[VariableLayout], specs: dict[FieldKey, MessageSpec],
                 encode: Encode, scheduler: dict[str, Any], *, spill_dir: str, in_memory: int):
        import dask

        self._specs = specs
        self._encode = encode
        self._ready: dict[FieldKey, Any] = {}  # a message, None, or where it was spilled
        self._in_memory = in_memory
        self._held = 0  # messages in memory
        self._spill_dir = spill_dir
        self._spill: Any = None
        self._error: BaseException | None = None
        self._done = False
        self._stopped = False
        self._changed = threading.Condition()
        blocks = _blocks(layouts)
        # dask orders tasks that are otherwise alike by their keys, in descending order: keys
        # that count down make it compute the blocks about in the order the file needs them, so
        # that few messages wait (a hint only: the spill file bounds memory in any order). The
        # block goes in the function, not its arguments, which dask would compute: its layout
        # holds the dask variable.
        name, width = f"tgm-write-{uuid.uuid4().hex}", len(str(len(blocks)))
        tasks = [dask.delayed(functools.partial(self._encode_block, block=block), pure=False)(
                     values, dask_key_name=f"{name}-{len(blocks) - 1 - i:0{width}d}")
                 for i, (block, values) in enumerate(blocks)]
        self._computing = _COMPUTE_THREADS.submit(functools.partial(self._compute, tasks, scheduler))

    def _compute(self, tasks: list, scheduler: dict[str, Any]) -> None:
        import dask

        try:
            dask.compute(*tasks, **scheduler)
            error = None
        except BaseException as exc:  # handed to the writer, which raises it
            error = exc
        with self._changed:
            self._done, self._error = True, error
            self._changed.notify_all()

    def _encode_block(self, values: np.ndarray, *, block: Block) -> None:
        for position, local in block.fields():
            if self._stopped:
                raise _Stopped
            key = (id(block.layout), position)
            message = self._encode(self._specs[key], values[local])
            with self._changed:
                if message is not None and self._held >= self._in_memory:
                    message = self._spilled(message)
                elif message is not None:
                    self._held += 1
                self._ready[key] = message
                self._changed.notify_all()

    def _spilled(self, message: Any) -> tuple[int, int]:
        """Where ``message`` now is in the spill file (called holding the lock)."""
        if self._spill is None:
            self._spill = tempfile.TemporaryFile(dir=self._spill_dir, prefix=".tgm-write-")
        offset = self._spill.seek(0, os.SEEK_END)
        self._spill.write(message)
        return offset, len(memoryview(message).cast("B"))

    def message(self, key: FieldKey) -> Any:
        """The message of field ``key`` (``None``: left out), once its block is encoded; the
        compute's error if it failed."""
        with self._changed:
            while key not in self._ready:
                if self._done:
                    raise self._error or RuntimeError(f"no block computed field {key[1]}")
                self._changed.wait()
            message = self._ready.pop(key)
            if isinstance(message, tuple):
                self._spill.flush()
                offset, size = message
                return os.pread(self._spill.fileno(), size, offset)
            if message is not None:
                self._held -= 1
            return message

    def close(self) -> None:
        """Stop computing blocks (each one under way ends at its next field), wait for it, and
        drop the spill file."""
        self._stopped = True
        futures.wait([self._computing])
        if self._spill is not None:
            self._spill.close()


class _ComputeThreads:
    """The threads the writes' ``dask.compute`` calls run on, kept for the process: dask keeps a
    pool of workers per calling thread, so a thread of its own per write left a pool (and an
    ``atexit`` entry holding it) behind at every write, and fresh threads' memory arenas kept
    the process ~150 MB larger. Writes at once each get a thread.

    Daemon threads, not a ``ThreadPoolExecutor``'s: a SIGTERM handler that raises (``sys.exit``)
    may interrupt the main thread while it starts one, and an executor's thread started so is
    never told to stop: the interpreter then waited for it at exit, forever (2 runs in 30)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._jobs: queue.SimpleQueue[tuple[futures.Future, Callable[[], Any]]] = queue.SimpleQueue()
        self._idle = 0  # threads waiting for a job, less the jobs handed to them

    def submit(self, job: Callable[[], Any]) -> futures.Future:
        future: futures.Future = futures.Future()
        self._jobs.put((future, job))  # first: a thread started below finds it
        with self._lock:
            start = self._idle == 0
            if not start:
                self._idle -= 1
        if start:
            threading.Thread(target=self._run, name="tgm-write-dask", daemon=True).start()
        return future

    def _run(self) -> None:
        while True:
            future, job = self._jobs.get()
            if future.set_running_or_notify_cancel():
                try:
                    future.set_result(job())
                except BaseException as exc:  # the submitter's to raise
                    future.set_exception(exc)
            del future, job  # what the job held is not kept while this thread waits
            with self._lock:
                self._idle += 1

    def forget_after_fork(self) -> None:
        # A forked child has none of the threads.
        self._lock, self._jobs, self._idle = threading.Lock(), queue.SimpleQueue(), 0


_COMPUTE_THREADS = _ComputeThreads()
os.register_at_fork(after_in_child=_COMPUTE_THREADS.forget_after_fork)


class ClusterFields:
    """The fields of each block encoded on the ``dask.distributed`` worker that computed it, by one
    task per block that returns its fields' messages; every task is submitted at once, as
    ``to_zarr`` submits its stores, so that each block is computed once and what the blocks share
    once for all. :meth:`message` fetches a block's messages when the file first needs one of them
    and drops them from the cluster: this process holds the messages of the blocks being written,
    never a block's values. The encodes run on one thread each: the workers' threads are the
    parallelism (one field on every core would oversubscribe them)."""

    def __init__(self, layouts: Sequence[VariableLayout], specs: dict[FieldKey, MessageSpec],
                 encode: Encode, client: Any):
        import dask

        one_thread = functools.partial(encode, threads=1)
        portable = _Portable()
        blocks, tasks = [], []
        self._place: dict[FieldKey, tuple[Block, int]] = {}
        for block, values in _blocks(layouts):
            fields = list(block.fields())
            for i, (position, _) in enumerate(fields):
                self._place[(id(block.layout), position)] = block, i
            # What the worker needs goes in the function, as in EncodedFields; the block's values
            # are its one argument, computed where the task runs.
            task = functools.partial(_encode_block, encode=one_thread, locals_=[local for _, local in fields],
                                     specs=[portable(specs[(id(block.layout), position)]) for position, _ in fields])
            blocks.append(block)
            tasks.append(dask.delayed(task, pure=False)(values))
        self._client = client
        self._lock = threading.Lock()
        self._futures = dict(zip(blocks, client.compute(tasks)))
        self._held = _Held()

    def message(self, key: FieldKey) -> Any:
        """The message of field ``key`` (``None``: left out), once the workers have encoded its
        block; the compute's error if it failed."""
        block, i = self._place[key]
        return self._held.take(block, lambda: self._result(block))[i]

    def _result(self, block: Block) -> list[Any]:
        """The block's messages, once the workers have encoded them; the cluster then drops them."""
        with self._lock:
            future = self._futures.pop(block)
        try:
            return future.result()
        finally:
            future.release()

    def close(self) -> None:
        """Cancel the blocks no message was taken from yet."""
        with self._lock:
            left, self._futures = list(self._futures.values()), {}
        self._held.clear()
        if left:
            self._client.cancel(left)


def _encode_block(values: np.ndarray, *, encode: Encode, specs: list[MessageSpec],
                  locals_: list[tuple[int, ...]]) -> list[Any]:
    """The messages of a block's fields, encoded where the block was computed."""
    return [encode(spec, values[local]) for spec, local in zip(specs, locals_)]


class _Portable:
    """Field specs as a worker encodes them: nothing dask-backed, nothing of this process. The
    field's values come from its block, so its object keeps no variable; the other objects (the
    field's coordinates) are loaded here once for all the fields that share them."""

    def __init__(self) -> None:
        self._loaded: dict[int, ObjectSpec] = {}

    def __call__(self, spec: MessageSpec) -> MessageSpec:
        field, *others = spec.objects
        no_values = dataclasses.replace(field, whole=xr.Variable((), 0), at=())
        return dataclasses.replace(spec, objects=(no_values, *map(self._load, others)), origin=None)

    def _load(self, obj: ObjectSpec) -> ObjectSpec:
        loaded = self._loaded.get(id(obj))
        if loaded is None:
            variable = obj.variable
            loaded = self._loaded[id(obj)] = dataclasses.replace(
                obj, whole=xr.Variable(variable.dims, np.asarray(variable.values), variable.attrs), at=())
        return loaded


class FetchedFields:
    """Blocks computed by a scheduler of other processes, each by itself when the writer first
    needs one of its fields, and encoded on the writer's threads; each is dropped once all its
    fields are taken."""

    def __init__(self, layouts: Sequence[VariableLayout], specs: dict[FieldKey, MessageSpec],
                 encode: Encode):
        self._specs = specs
        self._encode = encode
        blocks = _blocks(layouts)
        self._blocks = {(id(block.layout), position): block for block, _ in blocks
                        for position, _ in block.fields()}
        self._pending = dict(blocks)  # each block's delayed values, until computed (by one taker)
        self._held = _Held()

    def message(self, key: FieldKey) -> Any:
        """The message of field ``key``, encoded on the caller's thread."""
        return self._encode(self._specs[key], self._values(key))

    def _values(self, key: FieldKey) -> np.ndarray:
        """The values of field ``key`` (computing its block first: once, outside the lock of the
        others, so that the writer's threads compute different blocks at once)."""
        block = self._blocks[key]
        local = tuple(p - s for p, s in zip(key[1], block.starts))
        return self._held.take(block, lambda: np.asarray(self._pending.pop(block).compute()))[local]

    def close(self) -> None:
        self._held.clear()


class _Held:
    """Blocks some of whose fields are not taken yet, each got once (by the first taker, outside
    the lock of the others, so that threads get different blocks at once) and dropped with its
    last field."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._held: dict[Block, _Fetched] = {}

    def take(self, block: Block, get: Callable[[], Any]) -> Any:
        """What ``get`` gives of the block (called once per block), one of its fields taken."""
        with self._lock:
            fetched = self._held.get(block)
            if fetched is None:
                fetched = self._held[block] = _Fetched(get, int(np.prod(block.counts)))
            fetched.left -= 1
            if not fetched.left:
                del self._held[block]
        return fetched.values()

    def clear(self) -> None:
        with self._lock:
            self._held.clear()


class _Fetched:
    """What ``get`` gives of one block (its values, or its fields' messages), got by the first
    thread that asks for it, the others waiting for that one only; ``left``: its fields not taken
    yet."""

    def __init__(self, get: Callable[[], Any], left: int):
        self._get: Callable[[], Any] | None = get
        self.left = left
        self._lock = threading.Lock()
        self._values: Any = None

    def values(self) -> Any:
        with self._lock:
            if self._get is not None:
                self._values, self._get = self._get(), None
            return self._values


def scheduler_of(threads: int | None) -> tuple[str, Any]:
    """How blocks are computed: ``("local", compute keywords)`` for dask's threads (where no
    scheduler is configured, on ``threads`` of them, else dask's ``num_workers`` or its core
    count) or synchronous scheduler, ``("distributed", client)``, else ``("other", None)``."""
    import dask
    import dask.base
    import dask.local
    import dask.system
    import dask.threaded

    configured = dask.config.get("scheduler", None)
    if configured is None:
        # The workers named, as dask does on the main thread only: from the writer's thread,
        # where the compute runs, dask would make a pool of Python's default size (cores + 4),
        # with as many blocks in memory at once, on the same cores. The scheduler given as its
        # function: dask looks a name up after importing dask.distributed to find no client
        # (0.15 s, the first write of a process).
        workers = threads or dask.config.get("num_workers", None) or dask.system.CPU_COUNT
        return "local", {"scheduler": dask.threaded.get, "num_workers": workers}
    get = dask.base.get_scheduler(scheduler=configured)
    if get in (dask.threaded.get, dask.local.get_sync):
        return "local", {"scheduler": get}
    owner = getattr(get, "__self__", None)
    distributed = sys.modules.get("distributed")
    if distributed is not None and isinstance(owner, distributed.Client):
        return "distributed", owner
    return "other", None


def block_fields(specs: Iterable[MessageSpec], encode: Encode, threads: int | None, *, spill_dir: str,
                 in_memory: int | None = None) -> EncodedFields | ClusterFields | FetchedFields | None:
    """What gives the messages of the fields of dask-backed variables among ``specs`` (``None``
    where there are none), each block computed once, as the scheduler allows. Messages encoded
    before their turn wait in memory, ``in_memory`` of them at most (default: two per thread),
    the others in a temporary file in ``spill_dir``."""
    keyed = {key: spec for spec in specs if (key := field_key(spec)) is not None}
    if not keyed:
        return None
    layouts = list({key[0]: spec.origin[0] for key, spec in keyed.items() if spec.origin}.values())
    kind, how = scheduler_of(threads)
    if kind == "local":
        waiting = in_memory if in_memory is not None else 2 * (threads or os.cpu_count() or 1) + 2
        return EncodedFields(layouts, keyed, encode, how, spill_dir=spill_dir, in_memory=waiting)
    if kind == "distributed":
        return ClusterFields(layouts, keyed, encode, how)
    return FetchedFields(layouts, keyed, encode)
