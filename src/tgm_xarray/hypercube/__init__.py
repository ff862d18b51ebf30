"""Hypercube planning: a file's metadata table -> the layout of one CF-style Dataset.

Operational ``.tgm`` files look like GRIB files: many messages, each holding a field (plus
perhaps its latitude/longitude), told apart only by metadata. :func:`build_hypercube` reads that
metadata (never a payload) and decides, the way cfgrib does for GRIB:

- which objects are coordinates (1-D objects labelling their own dimension, and
  ``latitude``/``longitude`` of the fields next to them) and which are data; coordinates
  identical in every message are shared once (:mod:`.objects`, :mod:`.coords`);
- which data objects form one variable (same name: ``variable_key``, ``name``,
  ``mars.param``, ``mars.shortName``, ``shortName``, ``param``, else ``object_<i>``;
  :mod:`.variables`);
- along which dimensions each variable's fields stack: cfgrib's ``number``, ``time``, ``step``
  and level (see :mod:`tgm_xarray.mars`, :mod:`.axes`), then any other metadata key needed to
  tell the fields apart, named by its dotted key (:mod:`.extra`);
- where every field lands in that grid (``VariablePlan.fields``; ``-1`` marks a hole), and the
  names of the objects' own axes (:mod:`.dims`).

:func:`split_groups` cuts a heterogeneous file into groups that each form one such Dataset
(:mod:`.groups`). ``docs/mapping.md`` describes every rule and each difference from upstream
tensogram-xarray.

The input is a :class:`~tgm_xarray.hypercube.table.MetadataTable` (one row per object, metadata
keys as code columns); every pass works on those columns and runs Python once per distinct
value, key, variable or message layout, never once per message.

>>> import numpy as np
>>> from tgm_xarray._core import encode_message
>>> field = {"type": "ntensor", "shape": [3], "dtype": "float32", "encoding": "none",
...          "filter": "none", "compression": "none"}
>>> table = MetadataTable.of_bytes(b"".join(
...     encode_message({"base": [{"mars": {"param": "2t", "step": step}}]}, [(field, np.zeros(3, "float32"))])
...     for step in [12, 0]))
>>> plan = build_hypercube(table, source="demo.tgm", fingerprint=lambda msg, obj: b"")
>>> plan.variables["2t"].dims, plan.variables["2t"].refs
(('step', 'dim_0'), ((1, 0), (0, 0)))
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from tgm_xarray.hypercube.coords import Fingerprints
from tgm_xarray.hypercube.extra import MESSAGE_DIM
from tgm_xarray.hypercube.groups import groups
from tgm_xarray.hypercube.objects import NAME_KEYS, Fingerprint, Locate, Objects, Options
from tgm_xarray.hypercube.plan import HypercubePlan, VariablePlan, plan
from tgm_xarray.hypercube.table import MetadataTable

__all__ = ["MESSAGE_DIM", "NAME_KEYS", "HypercubePlan", "MetadataTable", "VariablePlan",
           "build_hypercube", "split_groups"]


def build_hypercube(
    table: MetadataTable,
    *,
    source: str,
    fingerprint: Fingerprint,
    variable_key: str | None = None,
    dim_names: Sequence[str] | Mapping | None = None,
    filter_by_keys: Mapping | None = None,
    duplicates: str = "error",
    merge_objects: bool = True,
    message_index: int | None = None,
    locate: Locate | None = None,
    squeeze: bool = True,
) -> HypercubePlan:
    """Plan one Dataset from every message's metadata, without reading any payload.

    Parameters
    ----------
    table
        The file's metadata, one row per object (:class:`MetadataTable`).
    source
        The file's path, for encodings and error messages.
    fingerprint
        ``fingerprint(message, object)`` identifies an object's stored payload; coordinate
        objects are shared when their stored bytes are equal in every message. It is called
        only for objects whose frame has no inline hash (the hash says it without a call).
    variable_key
        Dotted metadata key naming variables (``"mars.param"``); objects without it fall back
        to :data:`NAME_KEYS`, then ``object_<i>``. A key no object has is warned about.
    dim_names
        Names of the data objects' own axes: a sequence for every data variable, or a mapping
        from variable name to sequence and/or from axis size to name. Overrides metadata hints.
    filter_by_keys
        Keep only data objects whose metadata matches every item (cfgrib's keyword). Keys are
        dotted (``"mars.levtype"``) or plain (``"levtype"``, which also matches ``mars.levtype``);
        a value may be a list of accepted values. Anything but a mapping is a ``TypeError``.
    duplicates
        ``"error"`` (raise :class:`TgmDuplicateError`), ``"first"`` or ``"last"``: what to do
        with fields of one variable that have the same coordinates (by message order).
    merge_objects
        ``False`` opens a single message (``message_index``, default 0) like upstream's default.
    message_index
        Open only this message.
    locate
        For a table of several files (``open_dataset([paths])``): ``locate(message)`` gives the
        file and the message's number in it, which error messages name.
    squeeze
        ``True`` (cfgrib's default): a ``number``/``time``/``step``/level dimension with a
        single value becomes a scalar coordinate. ``False``: it stays a dimension of length 1
        of every variable that has it (so that files of one step each combine by coordinates).

    Raises
    ------
    TgmConflictError
        When fields of one variable differ in shape, dtype kind or dimensions, or coordinates
        with one name differ; the message suggests ``filter_by_keys`` or ``xr.open_datatree``.
    TgmDuplicateError
        When two fields of one variable land in the same place and ``duplicates="error"``.

    >>> plan = build_hypercube(MetadataTable.of_bytes(b""), source="empty.tgm",
    ...                        fingerprint=lambda m, o: b"")
    >>> plan.variables, plan.index_coords
    ({}, {})
    """
    objects = Objects(table, Options.make(source, fingerprint, variable_key, dim_names, duplicates, locate,
                                          squeeze))
    selection = objects.select(filter_by_keys, merge_objects, message_index)
    return plan(objects, selection, Fingerprints(objects))


def split_groups(
    table: MetadataTable,
    *,
    source: str,
    fingerprint: Fingerprint,
    variable_key: str | None = None,
    dim_names: Sequence[str] | Mapping | None = None,
    filter_by_keys: Mapping | None = None,
    duplicates: str = "error",
    merge_objects: bool = True,
    message_index: int | None = None,
    locate: Locate | None = None,
    squeeze: bool = True,
) -> dict[str, HypercubePlan]:
    """Split a heterogeneous file into groups that each form one Dataset (for ``open_datatree``).

    Data objects are grouped by level type and grid shape, named ``"<levtype>_<shape>"``
    (``"pl_721x1440"``; just ``"<shape>"`` without a level type, ``"scalar"`` for 0-d objects).
    Objects that would still conflict inside a group (another dtype kind, other dimension
    hints, other cfgrib dimensions present, different coordinate values) get a group of their
    own, named with a suffix ``_2``, ``_3``, ... in file order. Coordinates go with the groups
    of their messages, and join any other group that lacks that name and whose grid has their
    sizes (a grid message's latitude/longitude join every group on that grid); coordinates
    that join no group form a ``"coordinates"`` group. Keywords are those of
    :func:`build_hypercube`.

    >>> split_groups(MetadataTable.of_bytes(b""), source="empty.tgm",
    ...              fingerprint=lambda m, o: b"")
    {}
    """
    objects = Objects(table, Options.make(source, fingerprint, variable_key, dim_names, duplicates, locate,
                                          squeeze))
    selection = objects.select(filter_by_keys, merge_objects, message_index)
    fingerprints = Fingerprints(objects)
    return {name: plan(objects, group, fingerprints)
            for name, group in groups(objects, selection, fingerprints).items()}
