"""The planner's keywords: one frozen value the engine, the virtual parser and the index share.

:class:`PlanOptions` holds the keywords that change a plan (``variable_key``, ``dim_names``,
``filter_by_keys``, ``duplicates``, ``merge_objects``, ``message_index``, ``squeeze``,
``values_dtype``, ``time_dims``), each with
its default and the rule that says what a bad value is. Two opens with equal options plan the
same Dataset from the same file, which is why the index keys its stored plans by
:meth:`PlanOptions.as_dict`.
"""

from __future__ import annotations

import dataclasses
import numbers
from collections.abc import Iterable, Mapping
from dataclasses import InitVar, dataclass
from typing import Any

import numpy as np

from tgm_xarray import mars
from tgm_xarray.errors import TgmIndexError

#: What ``duplicates`` may be: raise, or keep the first or the last field (by message order).
DUPLICATES = ("error", "first", "last")


@dataclass(frozen=True)
class PlanOptions:
    """How one file's metadata is planned into a Dataset: the keywords of
    ``xr.open_dataset(path, engine="tgm", ...)`` that change the layout.

    A bad value raises at construction (``TypeError``, ``ValueError``, or
    :class:`~tgm_xarray.errors.TgmIndexError` for a negative ``message_index``), naming
    ``source`` (the file these options are for, not stored) when it is given.

    Parameters
    ----------
    variable_key
        Dotted metadata key naming variables (``"mars.param"``); objects without it fall back
        to :data:`~tgm_xarray.hypercube.NAME_KEYS`, then ``object_<i>``. A key no object has is
        warned about when the file is planned.
    dim_names
        Names of the data objects' own axes: a sequence for every data variable, or a mapping
        from variable name to sequence and/or from axis size to name. Overrides metadata hints.
        A sequence is kept as a tuple.
    filter_by_keys
        Keep only data objects whose metadata matches every item (cfgrib's keyword). Keys are
        dotted (``"mars.levtype"``) or plain (``"levtype"``, which also matches ``mars.levtype``);
        a value may be a list of accepted values. Anything but a mapping is a ``TypeError``.
    duplicates
        ``"error"`` (raise :class:`~tgm_xarray.errors.TgmDuplicateError`), ``"first"`` or
        ``"last"``: what to do with fields of one variable that have the same coordinates (by
        message order).
    merge_objects
        ``False`` opens a single message (``message_index``, default 0) like upstream's default.
    message_index
        Open only this message (``>= 0``; one past the file's last is a ``TgmIndexError`` when
        the file is planned).
    squeeze
        ``True`` (cfgrib's default): a ``number``/``time``/``step``/level dimension with a
        single value becomes a scalar coordinate. ``False``: it stays a dimension of length 1
        of every variable that has it (so that files of one step each combine by coordinates).
    time_dims
        cfgrib's keyword: the time dimensions, in order, among ``mars.TIME_DIMS``: ``("time",
        "step")`` (the default), ``("valid_time",)`` (``time + step``), or any of them in any
        order; a sequence is kept as a tuple. The keys of a time or step that is no dimension are
        metadata like any other. cfgrib's ``indexing_time``, ``verifying_time`` and
        ``forecastMonth`` are refused (computed from ecCodes keys that MARS metadata lacks).

    >>> PlanOptions(dim_names=["y", "x"], duplicates="first").as_dict()
    {'dim_names': ('y', 'x'), 'duplicates': 'first'}
    >>> PlanOptions(duplicates="any", source="fc.tgm")
    Traceback (most recent call last):
    ...
    ValueError: fc.tgm: duplicates must be one of ('error', 'first', 'last'), got 'any'
    """

    variable_key: str | None = None
    dim_names: Iterable[str] | Mapping | None = None  # kept as a tuple or a dict
    filter_by_keys: Mapping | None = None
    duplicates: str = "error"
    merge_objects: bool = True
    message_index: int | None = None
    squeeze: bool = True
    #: cfgrib's keyword: the dtype name (``"float32"``, ``"float64"``) floating-point data
    #: variables are read as; ``None``: the dtype their values were written in.
    values_dtype: str | None = None
    time_dims: Iterable[str] = mars.DEFAULT_TIME_DIMS  # kept as a tuple
    source: InitVar[str | None] = None

    def __post_init__(self, source: str | None) -> None:
        at = f"{source}: " if source is not None else ""
        if self.variable_key is not None and not isinstance(self.variable_key, str):
            raise TypeError(f"{at}variable_key must be a metadata key (a str such as 'mars.param'), "
                            f"not {type(self.variable_key).__name__} {self.variable_key!r}")
        if self.duplicates not in DUPLICATES:
            raise ValueError(f"{at}duplicates must be one of {DUPLICATES}, got {self.duplicates!r}")
        object.__setattr__(self, "dim_names", _dim_names(self.dim_names, at))
        object.__setattr__(self, "filter_by_keys", _filter(self.filter_by_keys, at))
        for name in ("merge_objects", "squeeze"):
            if not isinstance(getattr(self, name), bool):
                raise TypeError(f"{at}{name} must be True or False, not {getattr(self, name)!r}")
        object.__setattr__(self, "message_index", _message_index(self.message_index, at))
        object.__setattr__(self, "values_dtype", _values_dtype(self.values_dtype, at))
        object.__setattr__(self, "time_dims", _time_dims(self.time_dims, at))

    @classmethod
    def of_keywords(cls, keywords: Mapping[str, Any], taker: str, source: str | None = None) -> PlanOptions:
        """The options among ``keywords`` given to ``taker`` (what a ``TypeError`` names, with
        ``source``) by callers that pass the planner's keywords on as they come; any other
        keyword is that ``TypeError``."""
        unknown = sorted(set(keywords) - {f.name for f in dataclasses.fields(cls)})
        if unknown:
            at = f"{source}: " if source is not None else ""
            raise TypeError(f"{at}{taker} takes no keyword {', '.join(map(repr, unknown))}")
        return cls(**keywords, source=source)

    def as_dict(self) -> dict[str, Any]:
        """The keywords not at their defaults, in field order: ``PlanOptions(**o.as_dict()) == o``.
        Leaving the defaults out keeps this form (the index's key) the same for every set of
        options a new keyword's default leaves as it was."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if not _same(getattr(self, f.name), f.default)}


def _same(a, b) -> bool:
    return type(a) is type(b) and a == b


def _dim_names(dim_names, at: str) -> tuple[str, ...] | dict | None:
    """A mapping as a dict of its own, a sequence as a tuple."""
    if dim_names is None:
        return None
    if isinstance(dim_names, Mapping):
        return dict(dim_names)
    if isinstance(dim_names, str) or not isinstance(dim_names, Iterable):
        raise TypeError(f"{at}dim_names must be a sequence of names or a mapping, got {dim_names!r}")
    return tuple(dim_names)


def _filter(filter_by_keys, at: str) -> dict | None:
    """cfgrib's form of ``filter_by_keys``: a mapping of metadata keys (str) to a value or a
    list of accepted values."""
    if filter_by_keys is None:
        return None
    if not isinstance(filter_by_keys, Mapping):
        raise TypeError(f"{at}filter_by_keys must be a mapping {{metadata key: value or list of values}} "
                        f"such as {{'shortName': '2t'}}, not {type(filter_by_keys).__name__} {filter_by_keys!r}")
    bad = [k for k in filter_by_keys if not isinstance(k, str)]
    if bad:
        raise TypeError(f"{at}filter_by_keys keys are metadata keys (str), not {bad[0]!r}")
    return dict(filter_by_keys)


#: What ``values_dtype`` may name: the floating-point dtypes a field can be read as.
VALUES_DTYPES = ("float32", "float64")


def _values_dtype(values_dtype, at: str) -> str | None:
    """A numpy dtype (``np.float32``, ``"float32"``, ...) as the name of one of
    :data:`VALUES_DTYPES`."""
    if values_dtype is None:
        return None
    try:
        name = np.dtype(values_dtype).name
    except TypeError:
        name = None
    if name not in VALUES_DTYPES:
        raise ValueError(f"{at}values_dtype must be one of {VALUES_DTYPES} (or None: as written), "
                         f"got {values_dtype!r}")
    return name


def _time_dims(time_dims, at: str) -> tuple[str, ...]:
    """cfgrib's ``time_dims`` as a tuple of distinct names of :data:`mars.TIME_DIMS`.

    >>> _time_dims(["valid_time"], "")
    ('valid_time',)
    """
    if isinstance(time_dims, str) or not isinstance(time_dims, Iterable):
        raise TypeError(f"{at}time_dims must be a sequence of names such as ('valid_time',), not {time_dims!r}")
    names = tuple(time_dims)
    for name in names:
        if name in mars.ECCODES_TIME_DIMS:
            raise ValueError(f"{at}time_dims={names!r}: cfgrib computes {name!r} from ecCodes' "
                             f"{mars.ECCODES_TIME_DIMS[name]}, which MARS metadata does not carry; "
                             f"engine='tgm' builds {mars.TIME_DIMS}")
        if name not in mars.TIME_DIMS:
            raise ValueError(f"{at}time_dims={names!r}: {name!r} is not one of {mars.TIME_DIMS}")
    if not names:
        raise ValueError(f"{at}time_dims=(): name at least one of {mars.TIME_DIMS} "
                         f"(fields of different times are told apart along them)")
    if len(set(names)) < len(names):
        raise ValueError(f"{at}time_dims={names!r} names a dimension twice")
    return names


def _message_index(message_index, at: str) -> int | None:
    """An integer (numpy's too) as an ``int``; a negative one is a :class:`TgmIndexError`."""
    if message_index is None:
        return None
    if isinstance(message_index, bool) or not isinstance(message_index, numbers.Integral):
        raise TypeError(f"{at}message_index must be an int (or None: every message), not {message_index!r}")
    if message_index < 0:
        raise TgmIndexError(f"{at}message_index must be >= 0 (or None: every message), got {message_index}")
    return int(message_index)
