"""Write xarray Datasets as Tensogram files: :func:`to_tgm`, ``ds.tgm.to_file`` and :class:`TgmWriter`.

A write streams: each message (one field, see :mod:`tgm_xarray.layout`) is read, encoded by
``_core.encode_message`` with the interpreter released, and appended in a fixed order, with at
most ``threads`` messages encoded at once and up to ``threads + 1`` more waiting for a thread.
The fields of dask-backed variables come from their dask blocks, each computed once in one graph
(:mod:`tgm_xarray.blocks`). Memory therefore holds a few fields or blocks, never the Dataset.

Writes are atomic: bytes go to a temporary file next to the target, which replaces the target
only once everything is written. On any error (or Ctrl-C) the temporary file is removed and the
target is left as it was, or absent. ``mode="a"`` copies the existing file into the temporary
file first and appends there, so even a killed process leaves the target intact, and readers
that have it mapped never see it change under them. Writers of one file take turns, and a
symlinked target is written through (:mod:`tgm_xarray.atomic`).

>>> import xarray as xr, numpy as np, tempfile, os
>>> ds = xr.Dataset({"t": (("y", "x"), np.arange(6.0).reshape(2, 3))})
>>> path = os.path.join(tempfile.mkdtemp(), "t.tgm")
>>> to_tgm(ds, path, encoding={"t": {"bits": 16}})
>>> ds.tgm.to_file(path, mode="a", encoding={"t": {"compression": "zstd"}})
"""

from __future__ import annotations

import functools
import os
import warnings
from collections import deque
from collections.abc import Callable, Hashable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any, Literal, Protocol, overload

import numpy as np
import xarray as xr

from tgm_xarray import _core
from tgm_xarray.atomic import MODES, AtomicFile, CommitsOnSuccess, WriteMode
from tgm_xarray.blocks import ClusterFields, EncodedFields, FetchedFields, block_fields, field_key
from tgm_xarray.errors import TgmCodecError, TgmError, TgmIndexWarning
from tgm_xarray.layout import DatasetPlan, MessageSpec, ObjectSpec, plan
from tgm_xarray.plans import index
from tgm_xarray.threads import check_threads

Layout = Literal["field", "variable"]


def to_tgm(
    ds: xr.Dataset,
    path: str | os.PathLike,
    *,
    encoding: Mapping[Hashable, Mapping[str, Any]] | None = None,
    layout: Layout = "field",
    mode: WriteMode = "w",
    compute: bool = True,
    hash: bool = True,
    threads: int | None = None,
    field_dims: Sequence[str] | None = None,
    skip_nan_fields: bool | None = None,
    progress: bool | None | Callable[[int], object] = False,
    durable: bool = False,
):
    """Write ``ds`` to the Tensogram file ``path``, readable by ``xr.open_dataset(path,
    engine="tgm")``.

    Parameters
    ----------
    encoding
        Per-variable pipeline options, ``{name: {"bits": 16, "compression": "szip", ...}}``
        (see ``docs/writer.md``). Default: lossless blosc2/zstd for data, none for coordinates.
    layout
        ``"field"``: one message per field (GRIB-like; stacked dimensions become MARS or plain
        metadata keys), or ``"variable"``: one message per data variable.
    mode
        ``"w"`` (replace), ``"w-"`` (fail if ``path`` exists) or ``"a"`` (append messages).
    compute
        ``False`` returns a ``dask.delayed`` object that writes when computed. Encodings are
        checked now either way.
    hash
        Store an xxh3 hash of every object (checked on read by default: docs/errors.md, "Integrity").
    threads
        At most this many threads: messages encoded at once, and those a large szip field is
        encoded on (in pieces; the same bytes on any number). Default: every CPU, shared with
        the reads and writes already running in the process.
    field_dims
        Dimensions kept inside each field (default: a variable's last two that are not
        ``number``/``time``/``step``/level dimensions).
    skip_nan_fields
        Which fields that are entirely NaN are left out (the reader fills them back with NaN).
        ``None`` (default): the holes, such as those of a Dataset read from fields on different
        levels, where another field keeps each of the field's variable and coordinate values,
        so the file reads back as the same Dataset. ``True``: all of them (a coordinate value
        whose fields are all left out disappears). ``False``: none.
    progress
        Show a progress bar (``None``: only when stderr is a terminal), or call this function
        with 1 after each message written (one bar of the caller's over several writes).
    durable
        Also survive a power cut: the file is fsynced before it replaces ``path``, and its
        directory after. Without it the write is atomic all the same (readers and a process that
        dies never see half a file), as xarray's and ecCodes' writes are (docs/writer.md).

    Raises
    ------
    TgmCodecError
        Before anything is written, for an invalid encoding or a variable Tensogram cannot hold.

    >>> import xarray as xr, numpy as np, tempfile, os
    >>> ds = xr.Dataset({"t": (("y", "x"), np.zeros((2, 3)))}, coords={"y": [10.0, 20.0]})
    >>> to_tgm(ds, os.path.join(tempfile.mkdtemp(), "zeros.tgm"))
    """
    write_plan = plan(ds, encoding=encoding, layout=layout, field_dims=field_dims)
    write = functools.partial(_write, write_plan, os.fspath(path), mode=mode, hash=hash,
                              threads=threads, skip_nan_fields=skip_nan_fields, progress=progress,
                              durable=durable)
    if compute:
        write()
        return None
    import dask

    # The plan travels inside a partial, so dask does not compute the Dataset as an argument.
    return dask.delayed(write, pure=False)()


def _write(write_plan: DatasetPlan, path: str, **options) -> None:
    skip = options.pop("skip_nan_fields")
    with TgmWriter(path, **options) as writer:
        writer.write_plan(write_plan, skip_nan_fields=skip)


class MessagePlan(Protocol):
    """What :meth:`TgmWriter.write_plan` writes: a :class:`~tgm_xarray.layout.DatasetPlan`, or
    the plans of several Datasets written as one (:class:`~tgm_xarray.layout.Plans`)."""

    @property
    def count(self) -> int: ...

    def messages(self) -> Iterator[MessageSpec]: ...


class TgmWriter(CommitsOnSuccess):
    """Writes any number of Datasets into one Tensogram file, atomically.

    Messages go to a temporary file in the target's directory; leaving the ``with`` block
    normally moves it onto ``path`` (``durable``: as :func:`to_tgm`'s), an exception removes it.
    ETL that merges several inputs
    into one file uses it directly:

    >>> import xarray as xr, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "two.tgm")
    >>> with TgmWriter(path) as writer:
    ...     writer.write(xr.Dataset({"a": ("x", [1.0, 2.0])}))
    ...     writer.write(xr.Dataset({"b": ("x", [3.0, 4.0])}))
    1
    1
    """

    def __init__(self, path: str | os.PathLike, mode: WriteMode = "w", *, hash: bool = True,
                 threads: int | None = None, progress: bool | None | Callable[[int], object] = False,
                 durable: bool = False):
        if mode not in MODES:
            raise ValueError(f"mode must be one of {MODES}, got {mode!r}")
        self.path = os.path.abspath(os.fspath(path))
        self.hash = hash
        #: at most this many threads: messages encoded at once, and those one large field takes
        self.threads = check_threads(threads, self.path)
        self.messages = 0  # messages written by this writer
        self._show_progress = progress
        self._progress = None  # made at the first write, when its total is known
        # Holds the target's turn until commit or abort: writers of one target take turns, so an
        # append starts from the file the previous writer left.
        self._out = AtomicFile(self.path, mode, durable=durable)
        try:
            # An existing file must be intact before anything is appended.
            self._existing = _core.FileHandle(self._out.path) if mode == "a" and self._out.existed \
                else None
            self._auxiliary = _AuxiliaryCoordinates(self._existing)
        except BaseException:
            self._out.abort()
            raise

    def write(self, ds: xr.Dataset, *, encoding: Mapping | None = None, layout: Layout = "field",
              field_dims: Sequence[str] | None = None, skip_nan_fields: bool | None = None) -> int:
        """Append ``ds`` (keywords as :func:`to_tgm`); returns the number of messages written."""
        return self.write_plan(plan(ds, encoding=encoding, layout=layout, field_dims=field_dims),
                               skip_nan_fields=skip_nan_fields)

    def write_plan(self, write_plan: MessagePlan, *, skip_nan_fields: bool | None = None) -> int:
        """Append the messages of a :func:`tgm_xarray.layout.plan`, or of several as one
        (``skip_nan_fields`` as :func:`to_tgm`)."""
        if self._out.closed:
            raise ValueError(f"{self.path}: the writer is already closed")
        self._out.check_owned()  # before any encoding: a forked child cannot write
        advance = self._advance(write_plan.count)
        # The fields of dask blocks may be encoded on dask.distributed's workers: what encodes
        # them pickles (no scheduler, which may be the client); the others are read here.
        encode_field = functools.partial(_encode_message, hash=self.hash, skip_nan_fields=skip_nan_fields,
                                         threads=self.threads)
        encode = functools.partial(encode_field, scheduler=_dask_scheduler())
        specs = list(write_plan.messages())
        fields = block_fields(specs, encode_field, self.threads, spill_dir=os.path.dirname(self._out.path))
        written = 0
        covered: set = set()  # what the written fields stand for (`MessageSpec.at`)
        holes: list[MessageSpec] = []  # all-NaN fields, written only if something needs them
        try:
            jobs = (self._job(spec, encode, fields) for spec in specs)
            for spec, data in _ordered(jobs, self.threads or os.cpu_count() or 1):
                if data is not None:
                    self._out.write(data)
                    written += 1
                    covered.update(spec.at)
                elif spec.field and skip_nan_fields is None:
                    holes.append(spec)
                if advance is not None:
                    advance(1)
        finally:
            if fields is not None:
                fields.close()
        keep = functools.partial(encode, skip_nan_fields=False)
        for spec in holes:
            if not covered.issuperset(spec.at):  # the field's variable or a coordinate value
                # (a dask block is not computed again for it)
                self._out.write(keep(spec, _nan_like(spec.objects[0].variable) if field_key(spec) else None))
                written += 1
                covered.update(spec.at)
        self.messages += written
        return written

    def _advance(self, count: int) -> Callable[[int], object] | None:
        """What moves the progress on by the messages written: the caller's function (a bar over
        several writers), or our bar, made at the first write and grown by ``count`` at the next."""
        if callable(self._show_progress):
            return self._show_progress
        if self._progress is not None:
            self._progress.total += count
            self._progress.refresh()
        elif self._show_progress is not False:
            self._progress = progress_bar(self._show_progress, count)
        return None if self._progress is None else self._progress.update

    def _job(self, spec: MessageSpec, encode: Callable[[MessageSpec], memoryview | None],
             fields: EncodedFields | ClusterFields | FetchedFields | None):
        """The work of one message, giving ``(spec, its bytes or None)``: a field of a dask block
        from ``fields``, any other read and encoded by the job. Auxiliary coordinates the file
        already holds are dropped (on this thread, before the message is queued)."""
        if not spec.field:
            objects = self._auxiliary.new(spec.objects)
            if not objects:
                return lambda: (spec, None)
            spec = MessageSpec(objects, spec.extra, field=False, label=spec.label)
        key = field_key(spec)
        if fields is not None and key is not None:
            from_blocks = fields
            return lambda: (spec, from_blocks.message(key))
        return lambda: (spec, encode(spec))

    def commit(self) -> None:
        """Move the written file onto ``path`` (``durable``: file and directory synced), and
        drop this user's indexes of it, which describe the file it replaced."""
        try:
            self._out.commit()
            _drop_indexes({self.path, self._out.path})  # the name given, and the file it links to
        finally:
            self._close_progress()

    def abort(self) -> None:
        """Drop everything written; ``path`` stays as it was."""
        self._out.abort()
        self._close_progress()

    def _close_progress(self) -> None:
        if self._progress is not None:
            self._progress.close()
        self._progress, self._show_progress = None, False


def _drop_indexes(paths: Iterable[str]) -> None:
    """Removes the indexes of a file just replaced, beside it and in this user's cache: the next
    open would refuse them as stale, with a warning, after every append. One that cannot be
    removed is refused there all the same; a warning says so now."""
    for path in paths:
        for where in (index.beside_file(path), index.cached(path)):
            try:
                os.remove(where)
            except OSError as err:
                if index.none_there(err):
                    continue
                warnings.warn(f"{where}: the index of the file just written could not be removed "
                              f"({err.strerror}); the next open will find it stale", TgmIndexWarning,
                              stacklevel=4)


def _ordered(jobs: Iterable[Callable[[], Any]], threads: int):
    """Run jobs on ``threads`` threads, at most ``threads`` at once, yielding results in order;
    with one thread, on the caller's (no pool: handing each job to a thread and back costs more
    than overlapping the file write gains). Up to ``threads + 1`` more jobs wait in the pool, so
    that threads whose jobs are done start the next while the caller writes the oldest result (a
    write can take as long as a job, while the file it replaces is freed)."""
    if threads == 1:
        yield from (job() for job in jobs)
        return
    with ThreadPoolExecutor(threads, thread_name_prefix="tgm-write") as pool:
        window: deque[Future] = deque()
        try:
            for job in jobs:
                window.append(pool.submit(job))
                if len(window) > 2 * threads:
                    yield window.popleft().result()
            while window:
                yield window.popleft().result()
        finally:  # on error, or when the consumer stops: start nothing new
            for future in window:
                future.cancel()


@overload
def _encode_message(spec: MessageSpec, field: np.ndarray | None = None, *, hash: bool,
                    skip_nan_fields: Literal[False], threads: int | None,
                    scheduler: Any = "synchronous") -> memoryview: ...
@overload
def _encode_message(spec: MessageSpec, field: np.ndarray | None = None, *, hash: bool,
                    skip_nan_fields: bool | None, threads: int | None,
                    scheduler: Any = "synchronous") -> memoryview | None: ...
def _encode_message(spec: MessageSpec, field: np.ndarray | None = None, *, hash: bool,
                    skip_nan_fields: bool | None, threads: int | None,
                    scheduler: Any = "synchronous") -> memoryview | None:
    """Read and encode one message (on a writer thread, or where ``field``, the values of its
    first object, when given, was computed: a dask thread or worker); ``None`` for an all-NaN
    field unless ``skip_nan_fields`` is ``False``. Dask-backed objects are computed by
    ``scheduler``. A large field is encoded on up to ``threads`` threads of what the core's
    budget has free: messages encoded at once share the cores."""
    objects = []
    for i, obj in enumerate(spec.objects):
        values = np.asarray(field) if i == 0 and field is not None else _values(obj.variable, scheduler)
        if i == 0 and spec.field and skip_nan_fields is not False and _all_nan(values):
            return None
        objects.append(values)
    metadata = {"base": [obj.base for obj in spec.objects], "_extra_": spec.extra}
    try:
        prepared = [obj.codec.prepare(values) for obj, values in zip(spec.objects, objects)]
        # The message is only written out: the encoder's own memory, not a copy of it.
        return _core.encode_message(metadata, prepared, hash=hash, allow_nan=True, allow_inf=True, threads=threads,
                                    copy=False)
    except (TgmError, ValueError, TypeError) as error:
        raise TgmCodecError(f"cannot encode {spec.label}: {error}") from error


def _values(variable: xr.Variable, scheduler: Any) -> np.ndarray:
    if variable.chunks is not None:
        import dask

        if dask.is_dask_collection(variable.data):
            return np.asarray(dask.compute(variable.data, scheduler=scheduler)[0])
    return np.asarray(variable.values)


def _nan_like(variable: xr.Variable) -> np.ndarray:
    """The values of a field found all NaN, without computing it again."""
    return np.full(variable.shape, np.nan, variable.dtype)


def _dask_scheduler() -> Any:
    """What computes a dask value read by itself (not a field of a dask block: an auxiliary
    coordinate): synchronously on the writer thread, unless a scheduler (such as a distributed
    client) is configured."""
    try:
        import dask
    except ImportError:
        return None
    return dask.config.get("scheduler", None) or "synchronous"


def _all_nan(values: np.ndarray) -> bool:
    # The first value settles it for almost every field: no pass over the rest.
    return (values.dtype.kind in "fc" and values.size > 0 and bool(np.isnan(values.flat[0]))
            and bool(np.isnan(values).all()))


class _AuxiliaryCoordinates:
    """Auxiliary coordinates already in the file, so that appends do not repeat them (the reader
    would see two identical variables)."""

    def __init__(self, existing: Any):
        self._existing = existing
        self._known: list[tuple[dict, np.ndarray]] = []
        self._scanned = existing is None

    def new(self, objects: Sequence[ObjectSpec]) -> tuple[ObjectSpec, ...]:
        self._scan({o.name for o in objects})
        fresh = []
        for obj in objects:
            values = np.asarray(obj.variable.values)
            if not any(_same(obj.base, values, base, known) for base, known in self._known):
                fresh.append(obj)
                self._known.append((obj.base, values))
        return tuple(fresh)

    def _scan(self, names: set[str]) -> None:
        if self._scanned:
            return
        self._scanned = True
        handle = self._existing
        for msg in range(len(handle)):
            bases = handle.metadata(msg).get("base") or []
            for obj, descriptor in enumerate(handle.descriptors(msg)):
                base = bases[obj] if obj < len(bases) else {}
                if base.get("name") not in names:
                    continue
                try:
                    dtype = _core.numpy_dtype(descriptor["dtype"])
                except TgmCodecError:  # an object no Dataset holds (a bitmask): nothing to repeat
                    continue
                out = np.empty(descriptor["shape"], dtype)
                handle.read_into(msg, obj, None, out)
                self._known.append(({k: v for k, v in base.items() if k != _core.RESERVED_KEY}, out))


def _same(base: dict, values: np.ndarray, other_base: dict, other: np.ndarray) -> bool:
    return base == other_base and values.shape == other.shape and \
        np.array_equal(values, other, equal_nan=values.dtype.kind in "fc")


def progress_bar(progress: bool | None, total: int):
    """The bar of messages written (``progress``: True, or None for only on a terminal)."""
    from tqdm.auto import tqdm

    # tqdm's `disable=None` turns the bar off when its stream (stderr) is not a terminal.
    return tqdm(total=total, unit="msg", desc="writing", disable=None if progress is None else False)

