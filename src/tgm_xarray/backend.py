"""The xarray engine ``"tgm"``: ``xr.open_dataset(path, engine="tgm")``.

Three roles, as in xarray's own engines: ``TensogramBackendArray`` knows how to read a key,
``TensogramDataStore`` turns a file into variables and attributes (the layout comes from
``hypercube``), and ``TensogramBackendEntrypoint`` is what xarray calls. Where the bytes come
from (paths, URLs, lists of files, the index, the handle cache) is ``tgm_xarray.source``'s.
"""

from __future__ import annotations

import asyncio
import inspect
import os
import urllib.request
import warnings
from collections.abc import Hashable, Iterable, Mapping
from contextlib import AbstractContextManager
from typing import Any

import numpy as np
from xarray.backends.common import AbstractDataStore, BackendArray, BackendEntrypoint
from xarray.backends.store import StoreBackendEntrypoint
from xarray.core import indexing
from xarray.core.variable import Variable

from tgm_xarray import _core, cf
from tgm_xarray.hypercube import HypercubePlan, PlanOptions, VariablePlan
from tgm_xarray.installation import warn_if_engine_name_shared
from tgm_xarray.plans import index as tgm_index
from tgm_xarray.plans import planned
from tgm_xarray.selection import outer
from tgm_xarray.source import Source, SourceRef, is_tgm, paths_of
from tgm_xarray.threads import check_threads

warn_if_engine_name_shared()  # upstream's tensogram-xarray registers engine="tensogram" too

#: What ``lock`` may be: any lock xarray's engines take (threading's, dask's, xarray's own).
ReadLock = AbstractContextManager[Any]


class TensogramBackendArray(BackendArray):
    """One variable: a grid of stored fields (message, object) stacked along outer dimensions.

    Reads go straight to the Rust core, one call per field touched, writing into the result.
    ``threads`` caps the threads that decode one field (None: the core's process-wide budget).
    ``async_getitem`` (``load_async``) reads a local file off the event loop, in one worker
    thread per call, whatever the number of fields; a remote one with every field's request in
    flight at once (fsspec's async filesystem) and no worker thread, each field decoded on the
    loop as it arrives (the core releases the interpreter; the loop is busy for the decode).
    """

    def __init__(self, ref: SourceRef, plan: VariablePlan, lock: ReadLock | None = None,
                 verify_hash: bool | None = None, threads: int | None = None,
                 recorded: tgm_index.Recorded | None = None):
        self.ref = ref
        self.fields = plan.fields
        self.refs = plan.refs
        self.shape = plan.shape
        self.dtype = plan.dtype
        self.fill_value = plan.fill_value
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
        source = self.ref.source
        if not source.remote or self.lock is not None:  # a mapped file: one thread, every field
            return await asyncio.to_thread(self._read, key)
        out, reads, final_shape = self._plan(key, source)

        async def read(msg: int, obj: int, field_key: tuple, cell: np.ndarray, direct: bool) -> None:
            values = await source.read_async(msg, obj, field_key, out=cell if direct else None,
                                             verify_hash=self.verify_hash, threads=self.threads)
            if not direct:
                cell[...] = values

        await asyncio.gather(*(read(*r) for r in reads))
        return out.reshape(final_shape)

    def _read_unlocked(self, key: tuple) -> np.ndarray:
        source = self.ref.source
        out, reads, final_shape = self._plan(key, source)
        for msg, obj, field_key, cell, direct in reads:
            values = source.read(msg, obj, field_key, out=cell if direct else None, verify_hash=self.verify_hash,
                               threads=self.threads)
            if not direct:
                cell[...] = values
        return out.reshape(final_shape)

    def _plan(self, key: tuple, source: Source
              ) -> tuple[np.ndarray, list[tuple[int, int, tuple, np.ndarray, bool]], tuple[int, ...]]:
        """The result array (missing fields already filled), the reads from ``source`` that fill
        the rest as ``(msg, obj, field key, view of the result, whether the core can read into
        the view)`` (it cannot where ``_core.read_dtype`` says so: it is read, then converted),
        and the result's final shape. Each object is checked in ``source``, the one read (a
        ``close`` meanwhile makes the reference reopen the file)."""
        n_outer = self.fields.ndim
        # Integers are length-1 slices, so every axis exists until the final reshape drops them.
        selection = outer(key, self.shape)
        outer_key, field_key = selection.items[:n_outer], selection.items[n_outer:]
        grid = self.fields[np.ix_(*(np.arange(n)[k] for n, k in zip(self.fields.shape, outer_key)))] \
            if n_outer else self.fields
        field_shape = selection.decoded_shape[n_outer:]
        out = _core.empty(grid.shape + field_shape, self.dtype)  # recycled memory: no page faults
        recorded = self.recorded
        checked = recorded.checked(source) if recorded is not None else b""  # one look per read, not per field
        reads = []
        for pos in np.ndindex(grid.shape):
            which = int(grid[pos])
            cell = pos + (Ellipsis,)  # a view even for 0-d fields
            if which < 0:
                out[cell] = self.fill_value
                continue
            msg, obj = self.refs[which]
            if recorded is not None and not checked[which]:
                recorded.check(source, which, msg, obj)
            _, stored = source.layout(msg, obj)
            reads.append((msg, obj, field_key, out[cell], _core.read_dtype(stored, self.dtype) == self.dtype))
        return out, reads, selection.result_shape


class TensogramDataStore(AbstractDataStore):
    """A ``.tgm`` file as xarray variables, laid out by ``hypercube.build_hypercube``."""

    def __init__(self, ref: SourceRef, plan: HypercubePlan, lock: ReadLock | None = None, verify_hash: bool | None = None,
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
    def open(cls, path: str | list[str], *, lock: ReadLock | None = None, verify_hash: bool | None = None,
             storage_options: dict | None = None, threads: int | None = None, index: str | bool = "auto",
             options: PlanOptions = PlanOptions(), complete_only: bool = False) -> TensogramDataStore:
        """The store of one file (through its index where there is one), or of several planned as
        one (a list of paths), planned with ``options``; ``complete_only``: of the complete
        messages of files cut short (``TgmFile``)."""
        threads = check_threads(threads, str(path))  # before planning, not at the first read
        ref, plans, values, recorded = planned(path, storage_options, index, options, groups=False,
                                               complete_only=complete_only)
        return cls(ref, plans[""], lock, verify_hash, threads, values[""], recorded.get(""))

    def __getstate__(self) -> dict:
        # A Dataset pickles its store (its close): the index's values are its variables already.
        return {**self.__dict__, "values": {}}

    def _variable(self, plan: VariablePlan, attrs: dict) -> Variable:
        array = TensogramBackendArray(self.ref, plan, self.lock, self.verify_hash, self.threads,
                                      self.recorded.get(plan.name))
        encoding = dict(plan.encoding)  # preferred_chunks included (hypercube.plan)
        encoding.setdefault("source", self.ref.path)
        # Wrapped as a read would be: xarray then shares one pandas index between the
        # coordinate and the Dataset's indexes (a plain array gets two, pickled twice).
        data = indexing.LazilyIndexedArray(
            indexing.NumpyIndexingAdapter(self.values[plan.name]) if plan.name in self.values else array)
        return Variable(plan.dims, data, attrs, encoding)

    def get_variables(self) -> dict[str, Variable]:
        attrs = self.plan.cf_attrs()[0]
        variables = {name: Variable(dims, values, attrs[name])
                     for name, (dims, values, _) in self.plan.index_coords.items()}
        variables.update({name: self._variable(p, attrs[name]) for name, p in self.plan.variables.items()})
        return variables

    def get_attrs(self) -> dict:
        return self.plan.cf_attrs()[1]

    def get_dimensions(self) -> dict[Hashable, int]:
        return {dim: size for v in self.get_variables().values() for dim, size in zip(v.dims, v.shape)}

    def close(self) -> None:
        self.ref.close()


#: cfgrib's ``open_dataset`` keywords that are not ours, each with the value of it this engine
#: does (``None``: no value of it means anything here): cfgrib's default. ``errors`` is not
#: among them: every value of it is honoured (:data:`ERRORS`).
CFGRIB_KEYWORDS: dict[str, Any] = {
    "indexpath": None, "read_keys": None, "ignore_keys": (), "encode_cf": ("parameter", "time", "geography", "vertical"),
    "extra_coords": {}, "coords_as_attributes": {}, "cache_geo_coords": True,
}
#: cfgrib's ``errors``: ``"raise"`` (this engine's default; a file cut short raises), ``"warn"``
#: (its complete messages are read, with a warning naming what was left out: cfgrib's default)
#: and ``"ignore"`` (the same, silently).
ERRORS = ("raise", "warn", "ignore")


def _errors(source, errors: Any) -> str:
    """``errors`` checked: one of :data:`ERRORS` (``None``: ``"raise"``)."""
    if errors is None:
        return "raise"
    if not isinstance(errors, str) or errors not in ERRORS:
        raise ValueError(f"{source}: errors must be one of {', '.join(map(repr, ERRORS))} (cfgrib's), not {errors!r}")
    return errors


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
    # `xr.open_datatree(path)` and `open_groups` look only among engines that declare groups.
    supports_groups = True

    def guess_can_open(self, filename_or_obj) -> bool:
        return is_tgm(filename_or_obj)

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
        time_dims: Iterable[str] = ("time", "step"),
        indexpath: str | None = None,
        read_keys: Iterable[str] | None = None,
        ignore_keys: Iterable[str] | None = None,
        encode_cf: Iterable[str] | None = None,
        errors: str | None = "raise",
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
        time_dims
            cfgrib's keyword: the time dimensions, in order: ``("time", "step")`` (default,
            cfgrib's), ``("valid_time",)`` (``time + step``, the one time dimension, as cfgrib
            gives it), or any of ``time``, ``step`` and ``valid_time`` in any order. The keys of a
            time or step that is no dimension stay metadata: attributes where the fields agree,
            a dimension of their own where nothing else tells the fields apart (several runs on
            one ``valid_time``). cfgrib's ``indexing_time``, ``verifying_time`` and
            ``forecastMonth`` are a ``ValueError``: it computes them from ecCodes keys that MARS
            metadata does not carry.
        values_dtype
            cfgrib's keyword: ``np.float32`` or ``np.float64``, the dtype floating-point data
            variables are read as. Default ``None``: the dtype they were written in (a float32
            variable packed by this package's writer, which packing stores as float64, reads as
            float32; files without that record, upstream's, as stored).
        errors
            cfgrib's keyword, for a file cut short (truncated, or followed by bytes that are no
            message): ``"raise"`` (default here; cfgrib's is ``"warn"``) raises
            ``TgmFormatError`` naming the file and its complete messages; ``"warn"`` reads the
            complete messages before the cut, with a ``UserWarning`` naming the file, how many
            were read and why the rest was not; ``"ignore"`` reads them silently. With
            ``"warn"`` or ``"ignore"`` no index is read or written, and a URL is a
            ``ValueError`` (a URL is read whole or refused). Variables that conflict raise
            whatever the value. Any other value is a ``ValueError``.
        indexpath, read_keys, ignore_keys, encode_cf, extra_coords, coords_as_attributes, cache_geo_coords
            cfgrib's keywords, accepted so that cfgrib's ``backend_kwargs`` work unchanged (default
            ``None``: not given). Honoured where they mean something here: ``indexpath=""``
            (cfgrib: no index file) is ``index=False``; ``read_keys`` (every metadata key is read
            anyway); cfgrib's own defaults of ``encode_cf`` and ``cache_geo_coords`` (what this
            engine does). Any other value is ignored with a ``UserWarning`` naming the keywords.

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
        errors = _errors(source, errors)
        index = _cfgrib_keywords(source, index, indexpath=indexpath, read_keys=read_keys,
                                 ignore_keys=ignore_keys, encode_cf=encode_cf, extra_coords=extra_coords,
                                 coords_as_attributes=coords_as_attributes,
                                 cache_geo_coords=cache_geo_coords)
        paths = paths_of(filename_or_obj)
        options = PlanOptions(variable_key=variable_key, dim_names=dim_names, filter_by_keys=filter_by_keys,
                              duplicates=duplicates, merge_objects=merge_objects, message_index=message_index,
                              squeeze=squeeze, values_dtype=values_dtype, time_dims=time_dims,
                              source=str(paths))
        store = TensogramDataStore.open(paths, lock=lock, verify_hash=verify_hash, storage_options=storage_options,
                                        threads=threads, index=index, options=options,
                                        complete_only=errors != "raise")
        if errors == "warn":
            for cut in store.ref.source.cut_short():
                warnings.warn(f"{cut.path}: errors='warn': read its {len(cut)} complete message(s); the rest "
                              f"is left out: {cut.cut}", UserWarning, stacklevel=3)
        return _decode(store, mask_and_scale, decode_times, concat_characters, decode_coords,
                       drop_variables, use_cftime, decode_timedelta)

    # xarray derives this from the signature only for the engines it finds by name; the class
    # passed as `engine=` (as the CLI passes it) is used as it is: derived here the same way.
    open_dataset_parameters = tuple(name for name in inspect.signature(open_dataset).parameters if name != "self")

    def open_groups_as_dict(self, filename_or_obj, *, drop_variables: str | Iterable[str] | None = None,
                            lock=None, verify_hash: bool | None = None, storage_options: dict | None = None,
                            threads: int | None = None, index: str | bool = "auto", **keywords):
        """One Dataset per consistent group of messages (by level type and grid). ``keywords``:
        xarray's CF decoders and the planner's keywords, as ``open_dataset`` takes them (xarray
        reads an engine's keywords from ``open_dataset`` alone; a wrong one fails in
        ``PlanOptions``)."""
        decoders = {name: keywords.pop(name, default) for name, default in DECODERS.items()}
        paths = paths_of(filename_or_obj)
        options = PlanOptions.of_keywords(keywords, "open_datatree", str(paths))
        threads = check_threads(threads, str(paths))
        ref, groups, values, recorded = planned(paths, storage_options, index, options, groups=True)
        result = {}
        for name, plan in groups.items():
            store = TensogramDataStore(ref, plan, lock, verify_hash, threads, values[name], recorded.get(name))
            result[name if name.startswith("/") else f"/{name}"] = _decode(
                store, drop_variables=drop_variables, **decoders)
        if "/" not in result:
            import xarray as xr

            result = {"/": xr.Dataset(), **result}
        return result

    def open_datatree(self, filename_or_obj, **kwargs):
        from xarray import DataTree

        return DataTree.from_dict(self.open_groups_as_dict(filename_or_obj, **kwargs))


#: xarray's CF decoding keywords and their defaults, as every engine's ``open_dataset`` takes them.
DECODERS = {"mask_and_scale": True, "decode_times": True, "concat_characters": True, "decode_coords": True,
            "use_cftime": None, "decode_timedelta": None}


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


def _raw_times(ds, index_coords: Mapping, decode_times, decode_timedelta):
    """The coordinates the planner decoded from metadata (``time``, ``step``, ``valid_time``, ISO
    date-time keys) as cfgrib's raw values when decoding is off: seconds since 1970 (int64) and
    hours (float64), with their units. Coordinates stored as objects are xarray's to decode."""
    raw = {}
    for name in index_coords:
        var = ds.variables.get(name)
        encoded = None if var is None else cf.raw_times(var, decode_times, decode_timedelta)
        if encoded is not None:
            raw[name] = encoded
    return ds.assign_coords(raw) if raw else ds
