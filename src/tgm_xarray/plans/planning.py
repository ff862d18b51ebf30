"""A source planned into Datasets, through its sidecar index where there is a fresh one
(docs/archives.md): then the data file is neither scanned nor opened to plan it."""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Mapping

import numpy as np

from tgm_xarray.errors import TgmError, TgmStaleFileError
from tgm_xarray.hypercube import HypercubePlan, PlanOptions, build_hypercube, split_groups
from tgm_xarray.hypercube.objects import Fingerprint, Locate
from tgm_xarray.plans import index as tgm_index
from tgm_xarray.source.file import TgmFile
from tgm_xarray.source.opening import open_source
from tgm_xarray.source.protocol import Source
from tgm_xarray.source.refs import FileRef, SourceRef, reference
from tgm_xarray.source.remote import RemoteHandle, is_url
from tgm_xarray.table import MetadataTable

#: ``planned``'s result: the source's reference, its plans by group name, the values of their
#: dimension coordinates that an index holds, and what an index recorded of their objects.
Planned = tuple[SourceRef, dict[str, HypercubePlan], dict[str, dict[str, np.ndarray]],
                dict[str, dict[str, tgm_index.Recorded]]]


def planned(path: str | list[str], storage_options: dict | None, index: str | bool, options: PlanOptions, *,
            groups: bool, identify: bool = False, must_write: bool = False, complete_only: bool = False) -> Planned:
    """The file's reference, its plans with ``options`` (``split_groups``'s with ``groups``, else one under
    ``""``), the values of their dimension coordinates where an index holds them and, for plans
    from an index, what it recorded of their variables' objects (checked at each one's first
    read), from a fresh index where there is one (docs/archives.md): then the data file is
    neither scanned nor opened here. ``index``: ``"auto"`` (use one, write the cache's after a
    cold open), ``"beside"`` (write beside the data instead), ``False`` (neither). ``identify``:
    index a remote object opened cold too (``tgm_xarray.plans.index.find``); ``must_write``: an index
    that cannot be written is an error, not a warning (``tgm-xarray index``). A list of paths is
    planned as one, without an index. ``complete_only``: files cut short are planned from their
    complete messages (``TgmFile``), without an index."""
    if index not in tgm_index.MODES:
        raise ValueError(f"index must be one of {tgm_index.MODES}, not {index!r}")
    try:
        return _planned(path, storage_options, index, options, groups, identify, must_write, complete_only)
    except TgmStaleFileError:
        if not isinstance(path, str) or is_url(path):
            raise
    # Replaced (os.replace, as writers publish) between the identity and the open: the new file.
    return _planned(path, storage_options, index, options, groups, identify, must_write, complete_only)


def _planned(path: str | list[str], storage_options: dict | None, index: str | bool, options: PlanOptions,
             groups: bool, identify: bool, must_write: bool, complete_only: bool) -> Planned:
    def plan(table: MetadataTable, fingerprint: Fingerprint, source: str,
             locate: Locate | None = None) -> dict[str, HypercubePlan]:
        if groups:
            return split_groups(table, options, source=source, fingerprint=fingerprint, locate=locate)
        return {"": build_hypercube(table, options, source=source, fingerprint=fingerprint, locate=locate)}

    # An open of complete messages only neither writes an index (one of a cut file's complete
    # messages would let a later strict open plan from it unscanned, and succeed where it must
    # raise) nor plans from one (the open must find the cut to report it, so the file is opened).
    if not isinstance(path, str) or index is False or complete_only:
        opened = open_source(path, storage_options, complete_only=complete_only)
        plans = plan(opened.table(), opened.fingerprint, path if isinstance(path, str) else opened.path,
                     None if isinstance(opened, TgmFile) else opened.locate)
        return reference(opened), plans, {name: {} for name in plans}, {}
    found = tgm_index.find(path, storage_options, to_beside=index == "beside", identify=identify)
    target = tgm_index.written_at(path, index == "beside")
    if must_write and found.index is not None and found.identity is not None \
            and os.path.abspath(found.index.path) != os.path.abspath(target):
        # `tgm-xarray index` answers for the index where it writes: another fresh one (the
        # cache's, for --beside) would leave none there, and the command say it wrote one
        found = dataclasses.replace(found, index=tgm_index.load(target, found.identity)[0])
    identity, key = found.identity, tgm_index.plan_key(options, groups)
    version = identity.version if identity is not None else None
    stored = indexed = None  # the index's plans with `options`, else its table and fingerprints
    remote = None  # a URL opened from its index: its handle is built from the index's table, no scan
    if found.index is not None:
        try:
            stored = found.index.plans(key, path, version)
            indexed = found.index.table() if stored is None or found.fetcher is not None else None
            if found.fetcher is not None and indexed is not None:
                handle = RemoteHandle(path, fetcher=found.fetcher, table=indexed[0])
                remote = TgmFile(path, storage_options, handle=handle)
        except Exception as err:  # noqa: BLE001 - a damaged index is not used, whatever broke
            tgm_index.warn(found.index.path, f"it is corrupt ({err})")
            found = tgm_index.Found(identity, None)
            stored = indexed = None
    # Reads of plans from an index check each object against its recorded fingerprint, so they
    # may read a file published over the one the open found (Recorded.check); planning here
    # reads only that one.
    if stored is not None:
        return (FileRef(path, remote, storage_options, version, any_version=True), *stored)
    ref = FileRef(path, remote, storage_options, version) if indexed is not None \
        else FileRef.of(TgmFile(path, storage_options, version))
    prints: np.ndarray | None = None
    if indexed is not None:
        table, prints = indexed
        plans = plan(table, lambda msg, obj: ref.source.fingerprint(msg, obj), path)
        recorded = tgm_index.record(plans, table, prints, path, version)
    else:
        table = ref.source.table()
        plans = plan(table, ref.source.fingerprint, path)
        recorded = {}
    if identity is None:  # a remote object without any index: none is written
        return ref, plans, {name: {} for name in plans}, recorded

    def table_prints() -> np.ndarray:  # the index's, else computed when the index is written
        return prints if prints is not None else ref.source.fingerprints(table)

    values = {name: dimension_coords(p, ref.source, recorded.get(name, {})) for name, p in plans.items()}
    tgm_index.save(path, found, table, table_prints, key, plans, values, to_beside=index == "beside",
                   must_write=must_write)
    return (ref.for_checked_reads() if recorded else ref), plans, values, recorded


def dimension_coords(plan: HypercubePlan, source: Source, recorded: Mapping[str, tgm_index.Recorded]
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
                    recorded[name].check(source, 0, *var.refs[0])
                values[name] = np.asarray(source.read(*var.refs[0])).astype(var.dtype, copy=False)
            except TgmError:
                continue
    return values
