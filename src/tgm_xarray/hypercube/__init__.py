"""Hypercube planning: a file's metadata table -> the layout of one CF-style Dataset.

Operational ``.tgm`` files look like GRIB files: many messages, each holding a field (plus
perhaps its latitude/longitude), told apart only by metadata. :func:`build_hypercube` reads that
metadata (never a payload) and decides, the way cfgrib does for GRIB:

- which objects are coordinates (1-D objects labelling their own dimension, and
  ``latitude``/``longitude`` of the fields next to them) and which are data; coordinates
  identical in every message are shared once (:mod:`.objects`, :mod:`.coords`);
- which data objects form one variable (same name: ``PlanOptions.variable_key``, ``name``,
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

The input is a :class:`~tgm_xarray.table.MetadataTable` (one row per object, metadata
keys as code columns); every pass works on those columns and runs Python once per distinct
value, key, variable or message layout, never once per message. Passes return what they find
(new frozen ``Variable``/``Coordinate`` values, new coordinate maps) and never change what
another pass made; :func:`.plan.plan` runs them in order.

>>> import numpy as np
>>> from tgm_xarray._core import encode_message
>>> field = {"type": "ntensor", "shape": [3], "dtype": "float32", "encoding": "none",
...          "filter": "none", "compression": "none"}
>>> table = MetadataTable.of_bytes(b"".join(
...     encode_message({"base": [{"mars": {"param": "2t", "step": step}}]}, [(field, np.zeros(3, "float32"))])
...     for step in [12, 0]))
>>> plan = build_hypercube(table, PlanOptions(variable_key="mars.param"), source="demo.tgm",
...                        fingerprint=lambda msg, obj: b"")
>>> plan.variables["2t"].dims, plan.variables["2t"].refs
(('step', 'dim_0'), ((1, 0), (0, 0)))
"""

from __future__ import annotations

from typing import NotRequired, TypedDict, Unpack

from tgm_xarray.hypercube.coords import Fingerprints
from tgm_xarray.hypercube.extra import MESSAGE_DIM
from tgm_xarray.hypercube.groups import groups
from tgm_xarray.hypercube.objects import NAME_KEYS, Fingerprint, Locate, Objects, Selection
from tgm_xarray.hypercube.options import PlanOptions
from tgm_xarray.hypercube.plan import HypercubePlan, VariablePlan, plan
from tgm_xarray.table import MetadataTable

__all__ = ["MESSAGE_DIM", "NAME_KEYS", "HypercubePlan", "MetadataTable", "PlanOptions", "VariablePlan",
           "TableOrigin", "build_hypercube", "split_groups"]


class TableOrigin(TypedDict):
    """Where a table's rows come from: the keywords :func:`build_hypercube` and
    :func:`split_groups` take after the options."""

    source: str
    fingerprint: Fingerprint
    locate: NotRequired[Locate | None]


def build_hypercube(table: MetadataTable, options: PlanOptions = PlanOptions(),
                    **origin: Unpack[TableOrigin]) -> HypercubePlan:
    """Plan one Dataset from every message's metadata, without reading any payload.

    Parameters
    ----------
    table
        The file's metadata, one row per object (:class:`MetadataTable`).
    options
        The planner's keywords (:class:`PlanOptions`: ``variable_key``, ``dim_names``,
        ``filter_by_keys``, ``duplicates``, ``merge_objects``, ``message_index``, ``squeeze``);
        default: all at their defaults.
    source
        The file's path, for encodings and error messages.
    fingerprint
        ``fingerprint(message, object)`` identifies an object's stored payload; coordinate
        objects are shared when their stored bytes are equal in every message. It is called
        only for objects whose frame has no inline hash (the hash says it without a call).
    locate
        For a table of several files (``open_dataset([paths])``): ``locate(message)`` gives the
        file and the message's number in it, which error messages name.

    Raises
    ------
    TgmConflictError
        When fields of one variable differ in shape, dtype kind or dimensions, or coordinates
        with one name differ; the message suggests ``filter_by_keys`` or ``xr.open_datatree``.
    TgmDuplicateError
        When two fields of one variable land in the same place and ``duplicates="error"``.
    TgmIndexError
        When ``message_index`` is not a message of the table.

    >>> plan = build_hypercube(MetadataTable.of_bytes(b""), source="empty.tgm",
    ...                        fingerprint=lambda m, o: b"")
    >>> plan.variables, plan.index_coords
    ({}, {})
    """
    objects, selection = _select(table, options, origin)
    return plan(objects, selection, Fingerprints(objects))


def split_groups(table: MetadataTable, options: PlanOptions = PlanOptions(),
                 **origin: Unpack[TableOrigin]) -> dict[str, HypercubePlan]:
    """Split a heterogeneous file into groups that each form one Dataset (for ``open_datatree``).

    Data objects are grouped by level type and grid shape, named after their level as cfgrib
    names it (``"isobaricInhPa"``, ``"heightAboveGround"``, ``"surface"``), else their level
    type, else their grid (``"721x1440"``, ``"scalar"`` for 0-d objects); a level on several
    grids has the grid after it (``"isobaricInhPa_721x1440"``).
    Objects that would still conflict inside a group (another dtype kind, other dimension
    hints, other cfgrib dimensions present, different coordinate values) get a group of their
    own, named with a suffix ``_2``, ``_3``, ... in file order. Coordinates go with the groups
    of their messages, and join any other group that lacks that name and whose grid has their
    sizes (a grid message's latitude/longitude join every group on that grid); coordinates
    that join no group form a ``"coordinates"`` group. Arguments are those of
    :func:`build_hypercube`.

    >>> split_groups(MetadataTable.of_bytes(b""), source="empty.tgm",
    ...              fingerprint=lambda m, o: b"")
    {}
    """
    objects, selection = _select(table, options, origin)
    fingerprints = Fingerprints(objects)
    return {name: plan(objects, group, fingerprints)
            for name, group in groups(objects, selection, fingerprints).items()}


def _select(table: MetadataTable, options: PlanOptions, origin: TableOrigin) -> tuple[Objects, Selection]:
    if not isinstance(options, PlanOptions):
        raise TypeError(f"{origin['source']}: the planner's keywords come as one PlanOptions, "
                        f"not {type(options).__name__}")
    objects = Objects(table, options, source=origin["source"], fingerprint=origin["fingerprint"],
                      locate=origin.get("locate"))
    return objects, objects.select()
