"""The xarray engine ``"tgm"``: ``xr.open_dataset(path, engine="tgm")``.

Three roles, as in xarray's own engines: ``TensogramBackendArray`` knows how to read a key,
``TensogramDataStore`` turns a file into variables and attributes (the layout comes from
``hypercube``), and ``TensogramBackendEntrypoint`` is what xarray calls.
"""

from __future__ import annotations

import asyncio
import atexit
import hashlib
import io
import os
import stat
import tempfile
import threading
import urllib.parse
import urllib.request
import warnings
from collections.abc import Iterable, Mapping
from typing import Any, Protocol

import numpy as np
from xarray.backends.common import AbstractDataStore, BackendArray, BackendEntrypoint
from xarray.backends.store import StoreBackendEntrypoint
from xarray.core import indexing
from xarray.core.variable import Variable

from tgm_xarray import _core, mars
from tgm_xarray import index as tgm_index
from tgm_xarray.errors import TgmError
from tgm_xarray.file import TgmFile
from tgm_xarray.handles import FileVersion, absolute
from tgm_xarray.hypercube import HypercubePlan, MetadataTable, PlanOptions, VariablePlan, build_hypercube, split_groups
from tgm_xarray.remote import RemoteHandle, is_url
from tgm_xarray.selection import outer
from tgm_xarray.threads import check_threads
from tgm_xarray.versions import warn_if_engine_name_shared

warn_if_engine_name_shared()  # upstream's tensogram-xarray registers engine="tensogram" too


class FileRef:
    """A store's reference to its file, shared by its arrays.

    Closing the Dataset drops the reference; a read after that (or in another process, after
    pickling) reopens through the process's handle cache, and only the version of the file the
    Dataset was opened on (``TgmStaleFileError`` otherwise: its layout came from that version).
    """

    def __init__(self, path: str, file: TgmFile | None = None, storage_options: dict | None = None,
                 version: FileVersion | None = None):
        self.path = absolute(path)
        self.storage_options = storage_options
        self.version = file.version if file is not None else version
        self._file = file
        self._lock = threading.Lock()

    @property
    def file(self) -> TgmFile:
        file = self._file
        if file is None:
            with self._lock:
                if self._file is None:
                    self._file = TgmFile(self.path, self.storage_options, self.version)
                file = self._file
        return file

    def close(self) -> None:
        self._file = None

    def __reduce__(self):
        return (FileRef, (self.path, None, self.storage_options, self.version))


class FileSetRef:
    """References to several files read as one Dataset (``open_dataset([paths...])``): message
    numbers run on from one file to the next, in the order given."""

    def __init__(self, refs: list[FileRef]):
        self.refs = refs
        self.path = refs[0].path if len(refs) == 1 else f"{refs[0].path} (and {len(refs) - 1} more files)"
        self._files: FileSet | None = None
        self._lock = threading.Lock()

    @property
    def file(self) -> FileSet:
        with self._lock:
            if self._files is None:
                self._files = FileSet([ref.file for ref in self.refs])
            return self._files

    def close(self) -> None:
        for ref in self.refs:
            ref.close()
        self._files = None

    def __reduce__(self):
        return (FileSetRef, (self.refs,))


class FileSet:
    """``TgmFile``'s reads over several files, by message number across them."""

    def __init__(self, files: list[TgmFile]):
        self.files = files
        self.starts = np.cumsum([0] + [len(f) for f in files])
        self.handle = self  # what the planner asks for fingerprints

    def _locate(self, msg: int) -> tuple[TgmFile, int]:
        i = int(np.searchsorted(self.starts, msg, side="right")) - 1
        return self.files[i], msg - int(self.starts[i])

    def locate(self, msg: int) -> tuple[str, int]:
        """The file of message ``msg`` (numbered across the files) and its number there: what
        the planner's errors name."""
        file, local = self._locate(msg)
        return file.path, local

    def read(self, msg: int, obj: int, *args, **kwargs):
        file, msg = self._locate(msg)
        return file.read(msg, obj, *args, **kwargs)

    def layout(self, msg: int, obj: int):
        file, msg = self._locate(msg)
        return file.layout(msg, obj)

    def fingerprint(self, msg: int, obj: int):
        file, msg = self._locate(msg)
        return file.handle.fingerprint(msg, obj)


def _fill_value(dtype: np.dtype):
    return np.nan if dtype.kind in "fc" else 0


class TensogramBackendArray(BackendArray):
    """One variable: a grid of stored fields (message, object) stacked along outer dimensions.

    Reads go straight to the Rust core, one call per field touched, writing into the result.
    ``threads`` caps the threads that decode one field (None: the core's process-wide budget).
    ``async_getitem`` (``load_async``) reads off the event loop: a local file in one worker
    thread per call, whatever the number of fields; a remote one with every field's request in
    flight at once (fsspec's async filesystem), each decoded off the loop as it arrives.
    """

    def __init__(self, ref: FileRef, plan: VariablePlan, lock=None, verify_hash: bool | None = None,
                 threads: int | None = None, recorded: tgm_index.Recorded | None = None):
        self.ref = ref
        self.fields = plan.fields
        self.refs = plan.refs
        self.shape = plan.shape
        self.dtype = plan.dtype
        self.lock = lock
        self.verify_hash = verify_hash
        self.threads = threads
        self.recorded = recorded  # the index's: each object checked at its first read

    def __getitem__(self, key: indexing.ExplicitIndexer) -> np.ndarray:
        return indexing.explicit_indexing_adapter(
            key, self.shape, indexing.IndexingSupport.OUTER, self._read
        )

    async def async_getitem(self, key: indexing.ExplicitIndexer) -> np.ndarray:
        return await indexing.async_explicit_indexing_adapter(
            key, self.shape, indexing.IndexingSupport.OUTER, self._read_async
        )

    def _read(self, key: tuple) -> np.ndarray:
        if self.lock is None:
            return self._read_unlocked(key)
        with self.lock:
            return self._read_unlocked(key)

    async def _read_async(self, key: tuple) -> np.ndarray:
        file = self.ref.file
        read_async = getattr(file.handle, "read_async", None)
        if read_async is None or self.lock is not None:  # a mapped file: one thread, every field
            return await asyncio.to_thread(self._read, key)
        out, reads, final_shape = self._plan(key)

        async def read(msg, obj, field_key, cell, direct):
            values = await read_async(msg, obj, field_key, out=cell if direct else None,
                                      verify_hash=self.verify_hash, threads=self.threads)
            if not direct:
                cell[...] = values

        await asyncio.gather(*(read(*r) for r in reads))
        return out.reshape(final_shape)

    def _read_unlocked(self, key: tuple) -> np.ndarray:
        out, reads, final_shape = self._plan(key)
        file = self.ref.file
        for msg, obj, field_key, cell, direct in reads:
            values = file.read(msg, obj, field_key, out=cell if direct else None, verify_hash=self.verify_hash,
                               threads=self.threads)
            if not direct:
                cell[...] = values
        return out.reshape(final_shape)

    def _plan(self, key: tuple) -> tuple[np.ndarray, list[tuple], list[int]]:
        """The result array (missing fields already filled), the reads that fill the rest as
        ``(msg, obj, field key, view of the result, whether the core can read into the view)``
        (it cannot where the field's stored dtype differs: it is read, then converted), and the
        result's final shape."""
        n_outer = self.fields.ndim
        # Integers are length-1 slices, so every axis exists until the final reshape drops them.
        selection = outer(key, self.shape)
        outer_key, field_key = selection.items[:n_outer], selection.items[n_outer:]
        grid = self.fields[np.ix_(*(np.arange(n)[k] for n, k in zip(self.fields.shape, outer_key)))] \
            if n_outer else self.fields
        field_shape = selection.decoded_shape[n_outer:]
        out = _core.empty(grid.shape + field_shape, self.dtype)  # recycled memory: no page faults
        file = self.ref.file
        reads = []
        for pos in np.ndindex(grid.shape):
            which = grid[pos]
            cell = pos + (Ellipsis,)  # a view even for 0-d fields
            if which < 0:
                out[cell] = _fill_value(self.dtype)
                continue
            msg, obj = self.refs[which]
            if self.recorded is not None and not self.recorded.checked[which]:
                self.recorded.check(file.handle, which, msg, obj)
            _, stored = file.layout(msg, obj)
            reads.append((msg, obj, field_key, out[cell], stored == self.dtype))
        return out, reads, selection.result_shape


class TensogramDataStore(AbstractDataStore):
    """A ``.tgm`` file as xarray variables, laid out by ``hypercube.build_hypercube``."""

    def __init__(self, ref: FileRef | FileSetRef, plan: HypercubePlan, lock=None, verify_hash: bool | None = None,
                 threads: int | None = None, values: Mapping[str, np.ndarray] | None = None,
                 recorded: Mapping[str, tgm_index.Recorded] | None = None):
        self.ref = ref
        self.plan = plan
        self.recorded = recorded or {}  # per variable, from an index (planned)
        # Variables whose values an index holds (dimension coordinates): not read from the file.
        self.values = {} if verify_hash or values is None else values  # True: values from the file, hashed
        self.lock = lock
        self.verify_hash = verify_hash
        self.threads = threads

    @classmethod
    def open(cls, path: str | list[str], *, lock=None, verify_hash: bool | None = None,
             storage_options: dict | None = None, threads: int | None = None, index: str | bool = "auto",
             options: PlanOptions = PlanOptions()) -> TensogramDataStore:
        """The store of one file (through its index where there is one), or of several planned as
        one (a list of paths), planned with ``options``."""
        threads = check_threads(threads, str(path))  # before planning, not at the first read
        ref, plans, values, recorded = planned(path, storage_options, index, options, groups=False)
        return cls(ref, plans[""], lock, verify_hash, threads, values[""], recorded.get(""))

    def __getstate__(self) -> dict:
        # A Dataset pickles its store (its close): the index's values are its variables already.
        return {**self.__dict__, "values": {}}

    def _variable(self, plan: VariablePlan) -> Variable:
        array = TensogramBackendArray(self.ref, plan, self.lock, self.verify_hash, self.threads,
                                      self.recorded.get(plan.name))
        encoding = dict(plan.encoding)  # preferred_chunks included (hypercube.plan)
        encoding.setdefault("source", self.ref.path)
        # Wrapped as a read would be: xarray then shares one pandas index between the
        # coordinate and the Dataset's indexes (a plain array gets two, pickled twice).
        data = indexing.LazilyIndexedArray(
            indexing.NumpyIndexingAdapter(self.values[plan.name]) if plan.name in self.values else array)
        return Variable(plan.dims, data, dict(plan.attrs), encoding)

    def get_variables(self) -> dict[str, Variable]:
        variables = {name: Variable(dims, values, dict(attrs))
                     for name, (dims, values, attrs) in self.plan.index_coords.items()}
        variables.update({name: self._variable(p) for name, p in self.plan.variables.items()})
        return variables

    def get_attrs(self) -> dict:
        return dict(self.plan.attrs)

    def get_dimensions(self):
        return {dim: size for v in self.get_variables().values() for dim, size in zip(v.dims, v.shape)}

    def load(self):
        variables = self.get_variables()
        coord_names = set(self.plan.coord_names) | set(self.plan.index_coords)
        # CF's "coordinates" attribute tells StoreBackendEntrypoint which variables are coordinates.
        # A scalar level coordinate is named by the variables the planner declared it for (those
        # on that level), so that the writer keys each variable's own level.
        for name, var in variables.items():
            if name not in coord_names:
                declared = var.attrs.get("coordinates", "").split()
                extra = sorted(c for c in coord_names if c not in var.dims and set(variables[c].dims) <= set(var.dims)
                               and (variables[c].dims or c not in mars.LEVEL_NAMES or c in declared))
                if extra:
                    var.attrs["coordinates"] = " ".join(sorted(set(extra) | set(declared)))
        # The Dataset's `coordinates` (xarray reads it as CF's) keeps every scalar level a
        # coordinate, also when the variables naming it are dropped (drop_variables).
        attrs = self.get_attrs()
        levels = {c for c in self.plan.index_coords if c in mars.LEVEL_NAMES and not variables[c].dims}
        if levels:
            attrs["coordinates"] = " ".join(sorted(levels | set(str(attrs.get("coordinates", "")).split())))
        return variables, attrs

    def close(self) -> None:
        self.ref.close()


def _ref(path: str | list[str], storage_options: dict | None) -> FileRef | FileSetRef:
    if isinstance(path, str):
        return FileRef(path, TgmFile(path, storage_options), storage_options)
    if not path:
        raise ValueError("open_dataset was given an empty list of files")
    return FileSetRef([FileRef(p, TgmFile(p, storage_options), storage_options) for p in path])


class HasHandle(Protocol):
    """A file as :func:`metadata_table` reads it: a ``TgmFile``, or virtual.py's file over a
    registry's store."""

    @property
    def handle(self) -> _core.FileHandle | RemoteHandle: ...


def metadata_table(file: HasHandle | FileSet) -> MetadataTable:
    """Every message's metadata as columns, built by the core in one call (interpreter
    released for local files, no payload read). Remote files have the descriptors of their
    messages read by their header fetched first, in concurrent batches (``parse_all``)."""
    handles = [f.handle for f in (file.files if isinstance(file, FileSet) else [file])]
    for h in handles:
        if isinstance(h, RemoteHandle):
            h.parse_all()
    return MetadataTable.from_core(
        _core.table_of_files([h.messages if isinstance(h, RemoteHandle) else h for h in handles]))


def planned(path: str | list[str], storage_options: dict | None, index: str | bool, options: PlanOptions, *,
            groups: bool, identify: bool = False, must_write: bool = False,
            ) -> tuple[FileRef | FileSetRef, dict[str, HypercubePlan], dict[str, dict[str, np.ndarray]],
                       dict[str, dict[str, tgm_index.Recorded]]]:
    """The file's reference, its plans with ``options`` (``split_groups``'s with ``groups``, else one under
    ``""``), the values of their dimension coordinates where an index holds them and, for plans
    from an index, what it recorded of their variables' objects (checked at each one's first
    read), from a fresh index where there is one (docs/archives.md): then the data file is
    neither scanned nor opened here. ``index``: ``"auto"`` (use one, write the cache's after a
    cold open), ``"beside"`` (write beside the data instead), ``False`` (neither). ``identify``:
    index a remote object opened cold too (``tgm_xarray.index.find``); ``must_write``: an index
    that cannot be written is an error, not a warning (``tgm-xarray index``). A list of paths is
    planned as one, without an index."""
    if index not in tgm_index.MODES:
        raise ValueError(f"index must be one of {tgm_index.MODES}, not {index!r}")

    def plan(table: MetadataTable, fingerprint, source: str, locate=None) -> dict[str, HypercubePlan]:
        if groups:
            return split_groups(table, options, source=source, fingerprint=fingerprint, locate=locate)
        return {"": build_hypercube(table, options, source=source, fingerprint=fingerprint, locate=locate)}

    if not isinstance(path, str) or index is False:
        ref = _ref(path, storage_options)
        files = ref.file
        plans = plan(metadata_table(files), files.handle.fingerprint, path if isinstance(path, str) else ref.path,
                     files.locate if isinstance(files, FileSet) else None)
        return ref, plans, {name: {} for name in plans}, {}
    found = tgm_index.find(path, storage_options, to_beside=index == "beside", identify=identify)
    key = tgm_index.plan_key(options, groups)
    stored = table = prints = None
    if found.index is not None:
        try:
            stored = found.index.plans(key, path)
            table, prints = found.index.table() if stored is None else (None, None)
        except Exception as err:  # noqa: BLE001 - a damaged index is not used, whatever broke
            tgm_index.warn(found.index.path, f"it is corrupt ({err})")
            found = tgm_index.Found(found.identity, None)
    if found.index is not None:
        ref = FileRef(path, None, storage_options, found.identity.version)
        if stored is not None:
            return ref, *stored
        plans = plan(table, lambda msg, obj: ref.file.handle.fingerprint(msg, obj), path)
        recorded = tgm_index.record(plans, table, prints, path)
    else:
        file = TgmFile(path, storage_options, found.identity.version if found.identity else None)
        ref = FileRef(path, file, storage_options)
        table = metadata_table(file)
        plans = plan(table, file.handle.fingerprint, path)
        recorded = {}
    if found.identity is None:  # a remote object without any index: none is written
        return ref, plans, {name: {} for name in plans}, recorded
    values = {name: _dimension_coords(p, ref.file, recorded.get(name, {})) for name, p in plans.items()}
    tgm_index.save(path, found, table, (lambda: prints) if prints is not None
                   else (lambda: tgm_index.fingerprints(table, ref.file.handle)),
                   key, plans, values, to_beside=index == "beside", must_write=must_write)
    return ref, plans, values, recorded


def _dimension_coords(plan: HypercubePlan, file: TgmFile, recorded: Mapping[str, tgm_index.Recorded]
                      ) -> dict[str, np.ndarray]:
    """The values of the plan's dimension coordinates read from objects: xarray reads them at
    every open (they become indexes), so an index keeps them. One that cannot be read, or is
    not the object ``recorded`` says, is left out (and read, and fails, as without an index)."""
    values = {}
    for name in plan.coord_names:
        var = plan.variables[name]
        if var.dims == (name,) and len(var.refs) == 1:
            try:
                if name in recorded:
                    recorded[name].check(file.handle, 0, *var.refs[0])
                values[name] = np.asarray(file.read(*var.refs[0])).astype(var.dtype, copy=False)
            except TgmError:
                continue
    return values


def _is_tgm(filename_or_obj: Any) -> bool:
    if isinstance(filename_or_obj, (str, os.PathLike)):
        path = _local_path(filename_or_obj)
        if path.endswith(".tgm"):
            return True
        if is_url(path):
            return False
        try:
            if not stat.S_ISREG(os.stat(path).st_mode):  # a named pipe would block open()
                return False
            with open(path, "rb") as f:
                return f.read(len(_core.MAGIC)) == _core.MAGIC
        except OSError:
            return False
    if isinstance(filename_or_obj, (bytes, bytearray, memoryview)):
        return bytes(filename_or_obj[: len(_core.MAGIC)]) == _core.MAGIC
    if hasattr(filename_or_obj, "read") and hasattr(filename_or_obj, "seek"):
        try:
            at = filename_or_obj.tell()
            start = filename_or_obj.read(len(_core.MAGIC))
            filename_or_obj.seek(at)
        except (OSError, ValueError):
            return False
        return start == _core.MAGIC
    return False


#: cfgrib's ``open_dataset`` keywords that are not ours, each with cfgrib's default where this
#: engine does what that default asks (``None``: no value of it means anything here).
CFGRIB_KEYWORDS: dict[str, Any] = {
    "indexpath": None, "read_keys": None, "ignore_keys": (), "encode_cf": ("parameter", "time", "geography", "vertical"),
    "time_dims": ("time", "step"), "errors": None, "extra_coords": {},
    "coords_as_attributes": {}, "cache_geo_coords": True, "values_dtype": None,
}


def _cfgrib_keywords(source, index: str | bool, **given) -> str | bool:
    """The ``index`` option once cfgrib's keywords ``given`` are honoured (``indexpath=""``:
    no index); warns naming those ignored (given, and neither honoured nor cfgrib's default)."""
    ignored = []
    for name, value in given.items():
        if value is None or name == "read_keys":  # not given; every key is read anyway
            continue
        if name == "indexpath" and value == "":
            index = False
        elif not _same_value(value, CFGRIB_KEYWORDS[name]):
            ignored.append(f"{name}={value!r}")
    if ignored:
        warnings.warn(f"{source}: cfgrib's keyword(s) {', '.join(ignored)} mean nothing to engine='tgm' "
                      f"and are ignored (see help(TensogramBackendEntrypoint.open_dataset))",
                      UserWarning, stacklevel=4)
    return index


def _same_value(value, default) -> bool:
    if default is None:
        return False
    if isinstance(default, tuple) and not isinstance(value, str):
        try:
            return tuple(value) == default
        except TypeError:
            return False
    return type(value) is type(default) and value == default


def _docs_url() -> str:
    """The engine's documentation: docs/mapping.md of the source tree this package runs from (a
    clone, as the README installs it); none from a wheel, which carries no docs. The project has
    no web home yet: when it has one, its address goes here and in pyproject's [project.urls]."""
    page = os.path.join(os.path.dirname(os.path.abspath(__file__)), os.pardir, os.pardir, "docs", "mapping.md")
    return "file://" + urllib.request.pathname2url(os.path.realpath(page)) if os.path.isfile(page) else ""


class TensogramBackendEntrypoint(BackendEntrypoint):
    """``engine="tgm"`` (and ``"tensogram"``): Tensogram files as lazy, CF-decoded Datasets."""

    description = "Tensogram (.tgm) files through tgm-xarray: lazy, GIL-free reads in a Rust core"
    url = _docs_url()
    open_dataset_parameters = (
        "filename_or_obj", "mask_and_scale", "decode_times", "concat_characters", "decode_coords",
        "drop_variables", "use_cftime", "decode_timedelta", "lock", "variable_key", "dim_names",
        "filter_by_keys", "duplicates", "merge_objects", "message_index", "range_threshold",
        "verify_hash", "storage_options", "threads", "index", "squeeze", *CFGRIB_KEYWORDS,
    )

    def guess_can_open(self, filename_or_obj) -> bool:
        return _is_tgm(filename_or_obj)

    def open_dataset(
        self,
        filename_or_obj,
        *,
        mask_and_scale=True,
        decode_times=True,
        concat_characters=True,
        decode_coords=True,
        drop_variables: str | Iterable[str] | None = None,
        use_cftime=None,
        decode_timedelta=None,
        lock=None,
        variable_key: str | None = None,
        dim_names: Iterable[str] | Mapping | None = None,
        filter_by_keys: Mapping | None = None,
        duplicates: str = "error",
        merge_objects: bool = True,
        message_index: int | None = None,
        range_threshold: float | None = None,
        verify_hash: bool | None = None,
        storage_options: dict | None = None,
        threads: int | None = None,
        index: str | bool = "auto",
        squeeze: bool = True,
        indexpath: str | None = None,
        read_keys: Iterable[str] | None = None,
        ignore_keys: Iterable[str] | None = None,
        encode_cf: Iterable[str] | None = None,
        time_dims: Iterable[str] | None = None,
        errors: str | None = None,
        extra_coords: Mapping | None = None,
        coords_as_attributes: Mapping | None = None,
        cache_geo_coords: bool | None = None,
        values_dtype: Any = None,
    ):
        """Open a ``.tgm`` file (or a list of them, planned as one) as a lazy Dataset:
        ``xr.open_dataset(path, engine="tgm", ...)``. Reading the metadata decodes no payload;
        each variable's values are read, field by field, when used.

        Parameters
        ----------
        filename_or_obj
            A path, a ``file://``, ``http(s)://`` or ``s3://`` URL, the file's bytes, a binary file
            object, or a list of paths/URLs opened as one Dataset (message numbers run on from
            one file to the next).
        mask_and_scale, decode_times, concat_characters, decode_coords, use_cftime, decode_timedelta
            xarray's CF decoding, as in every engine (defaults ``True``, ``True``, ``True``,
            ``True``, ``None``, ``None``). With ``decode_times=False`` / ``decode_timedelta=False``
            the times built from metadata are cfgrib's raw values: seconds since 1970, hours.
        drop_variables
            A name or names of variables to leave out (default ``None``).
        lock
            A lock held around every read (default ``None``: reads run in parallel, the core is
            thread-safe).
        variable_key
            The dotted metadata key that names variables (``"mars.param"``, ``"grib.shortName"``);
            objects without it are named by ``name``, ``mars.param``, ``mars.shortName``,
            ``shortName``, ``param``, else ``object_<i>``. Default ``None`` (that chain). A key
            that no object has gives a ``UserWarning`` (and that chain), as upstream falls back.
        dim_names
            Names of the data objects' own axes: a sequence for every data variable, or a mapping
            ``{variable name: names}`` and/or ``{axis size: name}``. Default ``None``: the objects'
            ``dim_names`` hints, a 1-D coordinate of that size, else ``dim_<axis>``.
        filter_by_keys
            Keep only data objects whose metadata match every item (cfgrib's keyword):
            ``{"shortName": "t", "level": [500, 850]}``. Keys are dotted (``"mars.levtype"``) or
            plain (also matching ``mars.<key>`` and ``grib.<key>``), including cfgrib's ecCodes
            names (``typeOfLevel``, ``cfVarName``, ``cfName``, ``paramId``, ...). Default ``None``.
            Anything but a mapping is a ``TypeError``.
        duplicates
            Fields of one variable at the same coordinates: ``"error"`` (default,
            ``TgmDuplicateError``), ``"first"`` or ``"last"``.
        merge_objects
            ``True`` (default): every message forms one Dataset. ``False``: a single message
            (``message_index``, default 0), like upstream tensogram-xarray's default.
        message_index
            Open only this message (default ``None``: all); out of range is a ``TgmIndexError``.
        range_threshold
            Upstream tensogram-xarray's switch between full and range decodes; accepted and
            ignored (default ``None``): every read here decodes only what it needs.
        verify_hash
            ``None`` (default): objects with a stored hash are checked at their first read;
            ``True``: objects without one are refused too; ``False``: nothing is checked.
        storage_options
            For URLs: fsspec's options (``{"anon": True}``, ``{"headers": ...}``); object_store's
            spellings (``allow_http``, ``aws_endpoint``, ...) are translated. Default ``None``.
        threads
            The most threads that decode one field (1 to the core's limit); default ``None``: the
            core's process-wide budget decides.
        index
            The metadata index that makes a second open skip the scan (docs/archives.md):
            ``"auto"`` (default: use one, and write one into the cache after a cold open),
            ``"beside"`` (write it beside the data file), ``False`` (neither).
        squeeze
            cfgrib's keyword: ``True`` (default) makes a ``number``/``time``/``step``/level
            dimension with a single value a scalar coordinate; ``False`` keeps it a dimension
            of length 1, so that files of one step each combine with
            ``xr.open_mfdataset(paths, engine="tgm", combine="by_coords", squeeze=False)``.
        indexpath, read_keys, ignore_keys, encode_cf, time_dims, errors, extra_coords, coords_as_attributes, cache_geo_coords, values_dtype
            cfgrib's keywords, accepted so that cfgrib's ``backend_kwargs`` work unchanged (default
            ``None``: not given). Honoured where they mean something here: ``indexpath=""``
            (cfgrib: no index file) is ``index=False``; ``read_keys`` (every metadata key is read
            anyway); cfgrib's own defaults of ``time_dims``, ``encode_cf`` and
            ``cache_geo_coords`` (what this engine does). Any other value is ignored with a
            ``UserWarning`` naming the keywords.

        Returns
        -------
        xarray.Dataset
            Lazy variables (``chunks={}`` gives one dask chunk per stored field), cfgrib's
            ``number``/``time``/``step``/level dimensions from MARS metadata.
        """
        # `range_threshold` (upstream's switch between full and range reads) is accepted for
        # compatibility: every read here decodes only what it needs.
        del range_threshold
        source = filename_or_obj if isinstance(filename_or_obj, (str, os.PathLike, list, tuple)) else "<file object>"
        index = _cfgrib_keywords(source, index, indexpath=indexpath, read_keys=read_keys,
                                 ignore_keys=ignore_keys, encode_cf=encode_cf,
                                 time_dims=time_dims, errors=errors, extra_coords=extra_coords,
                                 coords_as_attributes=coords_as_attributes,
                                 cache_geo_coords=cache_geo_coords, values_dtype=values_dtype)
        paths = _paths(filename_or_obj)
        options = PlanOptions(variable_key=variable_key, dim_names=dim_names, filter_by_keys=filter_by_keys,
                              duplicates=duplicates, merge_objects=merge_objects, message_index=message_index,
                              squeeze=squeeze, source=str(paths))
        store = TensogramDataStore.open(paths, lock=lock, verify_hash=verify_hash, storage_options=storage_options,
                                        threads=threads, index=index, options=options)
        return _decode(store, mask_and_scale, decode_times, concat_characters, decode_coords,
                       drop_variables, use_cftime, decode_timedelta)

    def open_groups_as_dict(
        self,
        filename_or_obj,
        *,
        mask_and_scale=True,
        decode_times=True,
        concat_characters=True,
        decode_coords=True,
        drop_variables: str | Iterable[str] | None = None,
        use_cftime=None,
        decode_timedelta=None,
        lock=None,
        variable_key: str | None = None,
        dim_names: Iterable[str] | Mapping | None = None,
        filter_by_keys: Mapping | None = None,
        duplicates: str = "error",
        merge_objects: bool = True,
        verify_hash: bool | None = None,
        storage_options: dict | None = None,
        threads: int | None = None,
        index: str | bool = "auto",
    ):
        """One Dataset per consistent group of messages (by level type and grid)."""
        paths = _paths(filename_or_obj)
        options = PlanOptions(variable_key=variable_key, dim_names=dim_names, filter_by_keys=filter_by_keys,
                              duplicates=duplicates, merge_objects=merge_objects, source=str(paths))
        threads = check_threads(threads, str(paths))
        ref, groups, values, recorded = planned(paths, storage_options, index, options, groups=True)
        result = {}
        for name, plan in groups.items():
            store = TensogramDataStore(ref, plan, lock, verify_hash, threads, values[name], recorded.get(name))
            result[name if name.startswith("/") else f"/{name}"] = _decode(
                store, mask_and_scale, decode_times, concat_characters, decode_coords,
                drop_variables, use_cftime, decode_timedelta)
        if "/" not in result:
            import xarray as xr

            result = {"/": xr.Dataset(), **result}
        return result

    def open_datatree(self, filename_or_obj, **kwargs):
        from xarray import DataTree

        return DataTree.from_dict(self.open_groups_as_dict(filename_or_obj, **kwargs))


def _local_path(path: str | os.PathLike) -> str:
    """``path`` as the core opens it: ``~`` expanded, ``file://`` URLs as local paths; other URLs
    as they are."""
    path = os.fspath(path)
    if isinstance(path, bytes):
        path = os.fsdecode(path)
    if path.startswith("file://"):
        parsed = urllib.parse.urlsplit(path)
        return urllib.request.url2pathname(parsed.path)
    return path if is_url(path) else os.path.expanduser(path)


def _path(filename_or_obj) -> str:
    """What ``open_dataset`` was given as a path the core opens: paths and URLs (``_local_path``),
    the contents of a file (bytes, or a binary file object, read from its current position) as a
    temporary copy (``_contents_path``). A file object of a file on disk opens that file."""
    if isinstance(filename_or_obj, (str, os.PathLike)):
        return _local_path(filename_or_obj)
    if isinstance(filename_or_obj, (bytes, bytearray, memoryview)):
        return _contents_path(bytes(filename_or_obj))
    if hasattr(filename_or_obj, "read"):
        name = getattr(filename_or_obj, "name", None)
        if isinstance(filename_or_obj, io.BufferedReader) and isinstance(name, str) and os.path.isfile(name):
            return os.path.realpath(name)
        data = filename_or_obj.read()
        if not isinstance(data, bytes):
            raise TypeError("engine='tgm' reads binary file objects; open the file with mode 'rb'")
        return _contents_path(data)
    raise TypeError(f"engine='tgm' opens paths, URLs, bytes and binary file objects, "
                    f"not {type(filename_or_obj).__name__}")


def _paths(filename_or_obj) -> str | list[str]:
    """``_path``, or a list of them: several files planned as one Dataset."""
    if isinstance(filename_or_obj, (list, tuple)):
        return [_path(item) for item in filename_or_obj]
    return _path(filename_or_obj)


def _contents_path(data: bytes) -> str:
    """A temporary file holding ``data`` (the core maps files): named by its contents, so the
    same bytes opened again share it, and removed when the interpreter exits."""
    digest = hashlib.sha256(data).hexdigest()[:32]
    path = os.path.join(tempfile.gettempdir(), f"tgm-xarray-{os.getpid()}-{digest}.tgm")
    if not os.path.exists(path):
        fd, partial = tempfile.mkstemp(suffix=".partial", dir=os.path.dirname(path))
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.replace(partial, path)  # complete or absent, also with threads opening the same bytes
        atexit.register(_remove, path)
    return path


def _remove(path: str) -> None:
    try:
        os.remove(path)
    except OSError:
        pass


def _decode(store, mask_and_scale, decode_times, concat_characters, decode_coords, drop_variables,
            use_cftime, decode_timedelta):
    ds = StoreBackendEntrypoint().open_dataset(
        store, mask_and_scale=mask_and_scale, decode_times=decode_times,
        concat_characters=concat_characters, decode_coords=decode_coords,
        drop_variables=drop_variables, use_cftime=use_cftime, decode_timedelta=decode_timedelta,
    )
    ds = _raw_times(ds, store.plan.index_coords, decode_times,
                    decode_times if decode_timedelta is None else decode_timedelta)
    ds.set_close(store.close)
    return ds


#: Units of the raw times, as cfgrib gives them with ``decode_times=False`` / ``decode_timedelta=False``.
RAW_TIME_ATTRS = {"units": "seconds since 1970-01-01T00:00:00", "calendar": "proleptic_gregorian"}
RAW_TIMEDELTA_ATTRS = {"units": "hours"}


def _raw_times(ds, index_coords: Mapping, decode_times, decode_timedelta):
    """The coordinates the planner decoded from metadata (``time``, ``step``, ``valid_time``, ISO
    date-time keys) as cfgrib's raw values when decoding is off: seconds since 1970 (int64) and
    hours (float64), with their units. Coordinates stored as objects are xarray's to decode."""
    raw = {}
    for name in index_coords:
        var = ds.variables.get(name)
        if var is None:
            continue
        if var.dtype.kind == "M" and not decode_times:
            seconds = (var.values - np.datetime64(0, "s")) // np.timedelta64(1, "s")
            raw[name] = Variable(var.dims, seconds.astype(np.int64), {**var.attrs, **RAW_TIME_ATTRS})
        elif var.dtype.kind == "m" and not decode_timedelta:
            hours = var.values / np.timedelta64(1, "h")
            raw[name] = Variable(var.dims, hours.astype(np.float64), {**var.attrs, **RAW_TIMEDELTA_ATTRS})
    return ds.assign_coords(raw) if raw else ds
