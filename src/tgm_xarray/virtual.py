"""Virtual Zarr over ``.tgm`` files: a VirtualiZarr parser whose chunks are references to objects.

``TensogramParser`` follows VirtualiZarr 2's parser protocol: called with a URL and an
``ObjectStoreRegistry`` it returns a ``ManifestStore`` laid out exactly as the xarray engine lays
the file out (the same planner, ``hypercube.build_hypercube``/``split_groups``, and the engine's
own variables and attributes). Every stored object is one chunk, a reference to its
data-object frame's bytes in the file, decoded by the frame codec
(``zarr_codec.TensogramFrameCodec``, stored as the ``"tensogram"`` codec with ``"chunk":
"frame"``): the frame carries its descriptor, payload, NaN/Inf masks and hash, so a chunk
decodes from those bytes alone. Coordinates built from metadata (``step``,
``time``, levels, ...) own no bytes in the file: they are kept in memory with the store and
always loaded (VirtualiZarr then writes them as ordinary arrays).

>>> from obspec_utils.registry import ObjectStoreRegistry     # doctest: +SKIP
>>> from obstore.store import LocalStore                       # doctest: +SKIP
>>> from virtualizarr import open_virtual_dataset              # doctest: +SKIP
>>> vds = open_virtual_dataset("file:///data/fc.tgm", registry=ObjectStoreRegistry(
...     {"file://": LocalStore()}), parser=TensogramParser())  # doctest: +SKIP
>>> vds.vz.to_icechunk(session.store)                          # doctest: +SKIP

See docs/virtual.md.
"""

from __future__ import annotations

import json
from collections.abc import Hashable, Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from importlib.metadata import version
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import numpy as np
import obstore
import xarray as xr
from obstore.store import ObjectStore
from packaging.version import Version
from virtualizarr.manifests import ChunkManifest, ManifestArray, ManifestGroup, ManifestStore
from virtualizarr.manifests.utils import create_v3_array_metadata
from zarr.core.metadata import ArrayV3Metadata

from tgm_xarray import cf
from tgm_xarray.attrs import jsonable
from tgm_xarray.hypercube import HypercubePlan, PlanOptions, VariablePlan, build_hypercube, split_groups
from tgm_xarray.source import TgmFile
from tgm_xarray.source.remote import RemoteHandle
from tgm_xarray.table import MetadataTable
from tgm_xarray.zarr_codec import TensogramFrameCodec

__all__ = ["READ_CONFIG", "TensogramParser", "TensogramManifestStore", "local_repository", "no_credentials"]

#: zarr settings for opening a virtual store whose dask chunks hold several fields:
#: ``with zarr.config.set(READ_CONFIG): ds = xr.open_zarr(...)`` (they stick to the arrays
#: opened). zarr then hands the codec up to 64 chunks of a read at once instead of running a
#: task per chunk, which costs more than a small field's decode (docs/virtual.md).
READ_CONFIG = {"codec_pipeline.batch_size": 64}

#: Descriptor parameters computed per field (simple packing's range): left out of the codec's
#: configuration, which must be the same for every field of an array.
PER_FIELD_PARAMS = ("sp_reference_value", "sp_binary_scale_factor")


class TensogramParser:
    """A VirtualiZarr parser for Tensogram files: ``open_virtual_dataset(url, registry=...,
    parser=TensogramParser(...))``.

    Keywords are the engine's (``xr.open_dataset(path, engine="tgm", ...)``):
    ``variable_key``, ``dim_names``, ``filter_by_keys``, ``duplicates``, ``merge_objects``,
    ``message_index``, ``squeeze``, ``values_dtype``, ``time_dims`` (``PlanOptions``); ``group``
    picks one group of ``xr.open_datatree(path, engine="tgm")`` (``"isobaricInhPa"``), and
    ``groups=True`` gives all of them, one subgroup each, for
    ``virtualizarr.open_virtual_datatree``. ``hash=False`` skips the check of each
    frame's stored hash when a chunk is read (on by default: wrong bytes then fail instead of
    decoding).
    """

    def __init__(self, *, group: str | None = None, groups: bool = False, hash: bool = True, **plan_keywords: Any):
        if groups and group is not None:
            raise ValueError("group picks one group, groups=True takes them all: pass one of them")
        self.group, self.groups = group, groups
        self.hash = hash
        # Groups are planned as the engine's open_datatree plans them: from every message.
        if groups or group is not None:
            plan_keywords.pop("message_index", None)
        self.options = PlanOptions.of_keywords(plan_keywords, "TensogramParser")

    def __call__(self, url: str, registry) -> TensogramManifestStore:
        url = _reference_url(url)
        source = _open_source(url, registry)
        infos = source.table()
        frames = _FrameRanges(infos)
        if self.group is None and not self.groups:
            plan = build_hypercube(infos, self.options, source=url, fingerprint=source.fingerprint)
            return _manifest_store(url, frames, {"": plan}, registry, self.hash)
        groups = {name.strip("/"): plan for name, plan in
                  split_groups(infos, self.options, source=url, fingerprint=source.fingerprint).items()}
        if self.group is None:  # groups=True
            return _manifest_store(url, frames, groups, registry, self.hash)
        name = self.group.strip("/")
        if name not in groups:
            raise KeyError(f"{url}: no group {self.group!r}; the file's groups are {sorted(groups)}")
        return _manifest_store(url, frames, {"": groups[name]}, registry, self.hash)


#: VirtualiZarr >= 2.6 keeps chunks that live in memory in the manifest itself ("inlined"
#: chunks: its store reads them, its writers write them as data). 2.5, what pip gives Python
#: 3.11, has none: there TensogramManifestStore serves those chunks itself.
INLINED_CHUNKS = Version(version("virtualizarr")) >= Version("2.6")


class TensogramManifestStore(ManifestStore):
    """A ``ManifestStore`` whose small arrays built from metadata (which have no bytes in any
    file) are loaded whatever ``loadable_variables`` says, and written as plain data."""

    def __init__(self, group: ManifestGroup, *, registry, inline: dict[str, bytes], inline_variables=()):
        super().__init__(group, registry=registry)
        self._manifest_root = group  # ours: VirtualiZarr keeps its own copy private
        # Without INLINED_CHUNKS: store key -> bytes of the metadata-built arrays' chunks (zarr
        # leaves out chunks that equal the fill value).
        self._inline = inline
        self.inline_variables = sorted(inline_variables)

    if not INLINED_CHUNKS:
        async def get(self, key: str, prototype, byte_range=None):
            data = self._inline.get(key)
            if data is None:
                return await super().get(key, prototype, byte_range)
            if byte_range is not None:
                start, stop = _byte_range(byte_range, len(data))
                data = data[start:stop]
            return prototype.buffer.from_bytes(data)

    def to_virtual_dataset(self, group="", loadable_variables=None, decode_times=None) -> xr.Dataset:
        loadable = self._loadable(loadable_variables)
        ds = super().to_virtual_dataset(group, loadable_variables=loadable, decode_times=decode_times)
        _as_plain_data(ds.variables, loadable)
        return ds

    def to_virtual_datatree(self, group="", *, loadable_variables=None, decode_times=None) -> xr.DataTree:
        loadable = self._loadable(loadable_variables)
        tree = super().to_virtual_datatree(group, loadable_variables=loadable, decode_times=decode_times)
        for node in tree.subtree:
            _as_plain_data(node.variables, loadable)
        return tree

    def _loadable(self, requested) -> list[str]:
        """``loadable_variables`` and the metadata-built arrays; ``None`` is VirtualiZarr's
        default: the dimension coordinates (of every group)."""
        if requested is None:
            groups = [self._manifest_root, *self._manifest_root.groups.values()]
            requested = [name for g in groups for name, array in g.arrays.items()
                         if tuple(array.metadata.dimension_names or ()) == (name,)]
        return list(dict.fromkeys([*requested, *self.inline_variables]))


def _as_plain_data(variables: Mapping[Hashable, xr.Variable], loaded: Iterable[str]) -> None:
    """A loaded copy is written as data (to_icechunk, to_kerchunk): not with the codec of the
    references it was read through, which cannot encode."""
    for name in loaded:
        serializer = variables[name].encoding.get("serializer") if name in variables else None
        if isinstance(serializer, TensogramFrameCodec):
            for key in ("serializer", "compressors", "filters"):
                variables[name].encoding.pop(key, None)


# --------------------------------------------------------------------------------------------


class _FrameRanges:
    """``(offset, length)`` in the file of objects' data-object frames, the bytes a reference
    points at: the metadata table's (local and remote files' tables have every frame range)."""

    def __init__(self, table: MetadataTable):
        self._table = table

    def __call__(self, refs: Sequence[tuple[int, int]]) -> tuple[np.ndarray, np.ndarray]:
        if not refs:
            return np.empty(0, dtype=np.uint64), np.empty(0, dtype=np.uint64)
        msg, obj = np.asarray(refs, dtype=np.int64).T
        rows = np.searchsorted(self._table.msg, msg) + obj  # rows are in message, object order
        start, end = self._table.frame_start[rows], self._table.frame_end[rows]
        return start.astype(np.uint64), (end - start).astype(np.uint64)


def local_repository(repo_dir, archive):
    """An Icechunk repository in the folder ``repo_dir`` whose virtual chunks may be read from the
    local folder ``archive`` (the ``.tgm`` files the references point into)."""
    import icechunk

    archive = Path(archive).resolve()
    prefix = archive.as_uri() + "/"
    config = icechunk.RepositoryConfig.default()
    config.set_virtual_chunk_container(
        icechunk.VirtualChunkContainer(prefix, icechunk.local_filesystem_store(str(archive))))
    credentials = icechunk.containers_credentials({prefix: no_credentials(prefix)})
    storage = icechunk.local_filesystem_storage(str(repo_dir))
    return icechunk.Repository.open_or_create(storage, config, authorize_virtual_chunk_access=credentials)


def no_credentials(prefix: str):
    """What ``icechunk.containers_credentials`` takes for a virtual chunk container that needs
    no credentials (``file://`` and ``http(s)://`` prefixes): ``None`` on Icechunk 1 (what
    Python 3.11 gets); Icechunk 2 deprecates ``None`` there for an explicit value per scheme."""
    import icechunk

    if Version(version("icechunk")).major < 2:
        return None
    # Icechunk 2's names: the type stubs of Icechunk 1 (what Python 3.11 gets) lack them.
    scheme = urlparse(prefix).scheme
    if scheme == "file":
        return icechunk.credentials.LocalFileSystemAccess  # type: ignore[attr-defined]
    if scheme in ("http", "https"):
        return icechunk.credentials.HttpAccess  # type: ignore[attr-defined]
    raise ValueError(f"{prefix}: only file:// and http(s):// containers need no credentials")


def _reference_url(url: str) -> str:
    """``url``, or a local path as an absolute ``file://`` URL: references name files by URL
    (VirtualiZarr's manifests and Icechunk's virtual chunk containers require one)."""
    if urlparse(url).scheme:
        return url
    return Path(url).resolve().as_uri()


def _open_source(url: str, registry) -> TgmFile:
    """The file: through the process's mapped handle for ``file://`` URLs, else a remote handle
    whose range requests go through the registry's object store."""
    parsed = urlparse(url)
    if parsed.scheme in ("", "file"):
        return TgmFile(unquote(parsed.path))
    store, path = registry.resolve(url)
    return TgmFile(url, handle=RemoteHandle(url, fetcher=_StoreFetcher(url, store, str(path))))


class _StoreFetcher:
    """``fetcher.Fetcher``'s methods (a ``fetcher.RangeFetcher``) over an obstore store (retries
    are the store's own)."""

    def __init__(self, url: str, store: ObjectStore, path: str):
        self.url, self._store, self._path = url, store, path
        with self._errors("finding its size"):
            self.size = int(obstore.head(store, path)["size"])

    @contextmanager
    def _errors(self, what: str) -> Iterator[None]:
        """obstore's errors re-raised naming the URL and the bytes."""
        try:
            yield
        except FileNotFoundError as err:
            raise FileNotFoundError(f"{self.url}: not found ({what})") from err
        except Exception as err:
            raise OSError(f"{self.url}: {what} failed: {type(err).__name__}: {err}") from err

    def fetch(self, start: int, stop: int) -> bytes:
        if stop <= start:
            return b""
        with self._errors(f"reading bytes {start}-{stop - 1}"):
            return bytes(obstore.get_range(self._store, self._path, start=start, end=stop))

    async def fetch_async(self, start: int, stop: int) -> bytes:
        if stop <= start:
            return b""
        with self._errors(f"reading bytes {start}-{stop - 1}"):
            return bytes(await obstore.get_range_async(self._store, self._path, start=start, end=stop))

    def fetch_many(self, ranges: list[tuple[int, int]]) -> list[bytes]:
        if not ranges:
            return []
        starts, stops = [r[0] for r in ranges], [r[1] for r in ranges]
        with self._errors(f"reading {len(ranges)} byte ranges"):
            pieces = obstore.get_ranges(self._store, self._path, starts=starts, ends=stops)
        return [bytes(p) for p in pieces]


def _byte_range(request, size: int) -> tuple[int, int]:
    """``(start, stop)`` of a zarr ``ByteRequest`` on ``size`` bytes."""
    from zarr.abc.store import OffsetByteRequest, RangeByteRequest, SuffixByteRequest

    if isinstance(request, RangeByteRequest):
        return request.start, request.end
    if isinstance(request, OffsetByteRequest):
        return request.offset, size
    if isinstance(request, SuffixByteRequest):
        return max(0, size - request.suffix), size
    raise TypeError(f"unexpected byte range {request!r}")


def _manifest_store(url: str, frames: _FrameRanges, plans: Mapping[str, HypercubePlan], registry,
                    hash: bool) -> TensogramManifestStore:
    """The store of ``plans`` by group name: ``""`` is the root group, others are its subgroups."""
    inline: dict[str, bytes] = {}
    groups = {name: _manifest_group(url, frames, plan, hash, name, inline) for name, plan in plans.items()}
    root = groups.pop("", None) or ManifestGroup(arrays={}, attributes={})
    if groups:
        root = ManifestGroup(arrays=root.arrays, groups=groups, attributes=root.metadata.attributes)
    names = {name for plan in plans.values() for name in plan.index_coords}
    return TensogramManifestStore(root, registry=registry, inline=inline, inline_variables=names)


def _manifest_group(url: str, frames: _FrameRanges, plan: HypercubePlan, hash: bool, name: str,
                    inline: dict[str, bytes]) -> ManifestGroup:
    """One group's arrays; the chunks of its metadata-built arrays are inlined in their manifests
    (INLINED_CHUNKS), else go into ``inline`` under the store keys of group ``name``."""
    # The engine's attributes (CF's `coordinates` included): one home for those rules.
    var_attrs, attrs = plan.cf_attrs()
    arrays = {var: _virtual_array(url, frames, p, var_attrs[var], hash) for var, p in plan.variables.items()}
    if plan.index_coords:
        memory: dict = {}  # a dict is a zarr store (zarr writes it through a MemoryStore)
        coords = xr.Dataset({var: xr.Variable(dims, values, var_attrs[var])
                             for var, (dims, values, _) in plan.index_coords.items()})
        coords.to_zarr(memory, zarr_format=3, consolidated=False,
                       encoding=cf.seconds_encodings(coords.variables, plan.index_coords))
        prefix = f"{name}/" if name else ""
        chunks: dict[str, dict[str, dict]] = {var: {} for var in plan.index_coords}
        metadata: dict[str, ArrayV3Metadata] = {}
        for key, buffer in memory.items():
            var, _, rest = key.partition("/")
            if var not in plan.index_coords:
                continue
            if rest == "zarr.json":
                metadata[var] = ArrayV3Metadata.from_dict(json.loads(buffer.to_bytes()))
            elif INLINED_CHUNKS:  # "c/0/1" -> the manifest's key "0.1"
                data = buffer.to_bytes()
                index = ".".join(rest.removeprefix("c/").split("/"))
                chunks[var][index] = {"path": "", "offset": 0, "length": len(data), "data": data}
            else:
                inline[prefix + key] = buffer.to_bytes()
        for var, entries in chunks.items():
            grid = tuple(-(-n // c) for n, c in zip(metadata[var].shape, metadata[var].chunks))
            arrays[var] = ManifestArray(metadata=metadata[var], chunkmanifest=ChunkManifest(entries, shape=grid))
    return ManifestGroup(arrays=arrays, attributes=jsonable(attrs))


def _virtual_array(url: str, frames: _FrameRanges, plan: VariablePlan, attrs: dict, hash: bool) -> ManifestArray:
    """One variable: a chunk per stored field, referencing its data-object frame."""
    n_outer = plan.fields.ndim
    object_shape = plan.shape[n_outer:]
    offsets, lengths = frames(plan.refs)
    grid = plan.fields.reshape(plan.fields.shape + (1,) * len(object_shape))
    present = grid >= 0
    which = np.where(present, grid, 0)
    paths = np.full(present.shape, "", dtype=np.dtypes.StringDType())
    paths[present] = url
    manifest = ChunkManifest.from_arrays(
        paths=paths,
        offsets=np.where(present, offsets[which] if len(plan.refs) else 0, 0).astype(np.uint64),
        lengths=np.where(present, lengths[which] if len(plan.refs) else 0, 0).astype(np.uint64),
        validate_paths=False,
    )
    codec = TensogramFrameCodec(descriptor=_descriptor(plan, object_shape), hash=hash)
    metadata = create_v3_array_metadata(
        shape=plan.shape, data_type=plan.dtype, chunk_shape=(1,) * n_outer + object_shape,
        fill_value=plan.fill_value, codecs=[codec.to_dict()], attributes=jsonable(attrs),
        dimension_names=plan.dims,
    )
    return ManifestArray(metadata=metadata, chunkmanifest=manifest)


def _descriptor(plan: VariablePlan, object_shape: tuple[int, ...]) -> dict[str, Any]:
    """What the variable's objects share of their descriptors (the planner's encoding), less
    the values each field's packing computes: arrays of other files then have the same codec,
    which concatenating and appending require."""
    descriptor: dict[str, Any] = {"shape": list(object_shape)}
    for key in ("dtype", "byte_order", "encoding", "filter", "compression"):
        if f"tensogram_{key}" in plan.encoding:
            descriptor[key] = plan.encoding[f"tensogram_{key}"]
    params = {k: v for k, v in plan.encoding.get("tensogram_params", {}).items() if k not in PER_FIELD_PARAMS}
    if params:
        descriptor["params"] = jsonable(params)
    return descriptor
