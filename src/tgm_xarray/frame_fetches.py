"""Referenced frames fetched together: the chunks the frame codec (``zarr_codec.TensogramFrameCodec``)
wants in one event-loop turn come from one ``get_partial_values`` request per store.

zarr starts a task per chunk (``codec_pipeline.batch_size`` 1), and each store request is a
round trip through Icechunk's runtime: 0.29-0.34 ms a chunk of 73 x 144 on one thread, against
0.15-0.19 ms a chunk for 12 in one request (docs/virtual.md, "Measured"). Each event loop has
its own batches and fetch tasks, touched only from the loop's thread and dropped with the loop.
"""

from __future__ import annotations

import asyncio
import threading
import weakref
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from zarr.abc.store import Store
    from zarr.core.buffer import Buffer, BufferPrototype
    from zarr.storage import StorePath

    #: Chunks of one batch: each one's store key and the future its reader awaits.
    _Wanted = list[tuple[str, asyncio.Future[Buffer | None]]]

#: Each running event loop's fetches.
_LOOPS: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _LoopFetches] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def fetch(path: StorePath, prototype: BufferPrototype) -> asyncio.Future[Buffer | None]:
    """The chunk at ``path`` (None if missing), fetched with the others wanted in this loop turn
    from the same store. Call it from a coroutine; await the future in the caller's task."""
    loop = asyncio.get_running_loop()
    with _LOCK:  # loops of other threads add theirs at the same time
        fetches = _LOOPS.get(loop)
        if fetches is None:
            fetches = _LOOPS[loop] = _LoopFetches()
    return fetches.add(loop, path, prototype)


class _LoopFetches:
    """One event loop's fetches: the batches of the current turn and the requests in flight."""

    def __init__(self) -> None:
        # (id(store), id(prototype)) -> (store, prototype, wanted): stores need not be hashable
        # (Icechunk's are not); an entry lives one loop turn and holds its store. Nothing here
        # holds the loop past a turn, so the loop, the key of _LOOPS, can go.
        self.pending: dict[tuple[int, int], tuple[Store, BufferPrototype, _Wanted]] = {}
        self.running: set[asyncio.Task[None]] = set()  # the loop keeps only weak references to tasks

    def add(self, loop: asyncio.AbstractEventLoop, path: StorePath, prototype: BufferPrototype
            ) -> asyncio.Future[Buffer | None]:
        key = (id(path.store), id(prototype))
        pending = self.pending.get(key)
        if pending is None:
            pending = self.pending[key] = (path.store, prototype, [])
            loop.call_soon(self._flush, key)  # after the tasks already scheduled in this turn
        future: asyncio.Future[Buffer | None] = loop.create_future()
        pending[2].append((path.path, future))
        return future

    def _flush(self, key: tuple[int, int]) -> None:
        task = asyncio.get_running_loop().create_task(_fetch(*self.pending.pop(key)))
        self.running.add(task)
        task.add_done_callback(self.running.discard)


async def _fetch(store: Store, prototype: BufferPrototype, wanted: _Wanted) -> None:
    """One request for all of ``wanted``, or one each where that fails, so that each chunk gets
    its own value or error; the readers' futures get them."""

    async def get(path: str) -> Buffer | None | Exception:
        try:
            return await store.get(path, prototype)
        except Exception as err:
            return err

    found: list[Buffer | None | Exception] = []
    try:
        if len(wanted) > 1:
            try:
                found = list(await store.get_partial_values(prototype, [(path, None) for path, _ in wanted]))
            except Exception:  # not implemented (VirtualiZarr's ManifestStore), or some chunk failed
                found = []
        if len(wanted) == 1:  # without a task more
            found = [await get(wanted[0][0])]
        elif len(found) != len(wanted):  # one request each: each chunk gets its own value or error
            found = list(await asyncio.gather(*(get(path) for path, _ in wanted)))
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
