"""MARS conventions, both directions: which metadata keys become cfgrib-like dimensions, how they
decode (the reader), and the keys of each coordinate value (the writer, :func:`key_maker`).

Operational ``.tgm`` files carry the MARS request of each field (``mars.date``, ``mars.time``,
``mars.step``, ``mars.levtype``, ``mars.levelist``, ``mars.number``). cfgrib users expect them as
the dimensions ``number``, ``time``, ``step`` and a level named after the level type (a surface
field at a height above the ground, such as ``2t``, on cfgrib's ``heightAboveGround``); this module
knows those conventions and nothing about xarray or files. Each key's decoding and encoding sit
side by side (``_date``/``_date_key``, ``_step``/``_step_keys``, ...). Every key is looked up in the ``mars``
namespace first and then as a plain key (``date``, ``step``, ...), so generic producers work too.

>>> axes = find_axes({"mars.date": "20260404", "mars.time": "1200", "mars.step": 6,
...                   "mars.levtype": "pl", "mars.levelist": 500})
>>> sorted(axes)
['isobaricInhPa', 'step', 'time']
>>> str(decode_axes([axes])[0]["time"].value)
'2026-04-04T12:00:00.000000000'
"""

from __future__ import annotations

import re
import warnings
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from fractions import Fraction
from typing import Any, TypeVar

import numpy as np

from tgm_xarray import params

#: Level dimension named after ``levtype``, as cfgrib names it after ``typeOfLevel``.
LEVEL_DIMS: dict[str, str] = {
    "pl": "isobaricInhPa",
    "sfc": "surface",
    "ml": "hybrid",
    "pt": "theta",
    "pv": "potentialVorticity",
    "sol": "soilLayer",
}
#: Level dimension -> the ``levtype`` the writer keys it with (the inverse of :data:`LEVEL_DIMS`,
#: without ``surface``, whose coordinate the reader always sets to :data:`SURFACE_VALUE`).
LEVTYPES: dict[str, str] = {dim: levtype for levtype, dim in LEVEL_DIMS.items() if levtype != "sfc"}
#: Level dimension of an unknown or missing ``levtype``.
DEFAULT_LEVEL_DIM = "level"
#: Level dimension of a surface field at a height above the ground (``2t`` at 2 m), as cfgrib
#: names it after ecCodes' ``typeOfLevel`` (see :func:`find_axes`).
HEIGHT_DIM = "heightAboveGround"
#: The keys :func:`find_axes` reads a level from.
LEVEL_KEYS = ("mars.levtype", "levtype", "mars.levelist", "levelist", "level", "grib.typeOfLevel", "grib.level",
              "mars.param", "param")
#: Every key :func:`find_axes` reads, in groups that each give at most one dimension (the
#: member, the reference time, the step, the level), so that a planner can run it once per
#: distinct combination of one group's keys.
AXIS_KEYS = (("mars.number", "number"), ("mars.date", "date", "mars.time", "time"), ("mars.step", "step"),
             LEVEL_KEYS)
#: Every level dimension :func:`find_axes` names.
LEVEL_NAMES = frozenset({*LEVEL_DIMS.values(), DEFAULT_LEVEL_DIM, HEIGHT_DIM})
#: Dimensions in the order cfgrib stacks them by default; the level dimension comes last.
AXIS_ORDER = ("number", "time", "step")
#: Every dimension :func:`find_axes` names: never a field dimension by default, for the writer.
DIMS = frozenset({*AXIS_ORDER, *LEVEL_NAMES})
#: What cfgrib's ``time_dims`` may name here, and its default: the time dimensions, in order.
TIME_DIMS = ("time", "step", "valid_time")
DEFAULT_TIME_DIMS = ("time", "step")
#: cfgrib's other ``time_dims``: it computes them from ecCodes keys of monthly and seasonal
#: products that MARS metadata does not carry.
ECCODES_TIME_DIMS = {"indexing_time": "indexingDate/indexingTime", "verifying_time": "verifyingMonth",
                     "forecastMonth": "forecastMonth"}

# Level dimensions whose values sort from the top of the atmosphere down (largest first), as
# pressure levels conventionally do; every other dimension sorts ascending.
DESCENDING = frozenset({"isobaricInhPa"})

#: Units of a pressure coordinate the writer keys as ``isobaricInhPa`` (:func:`level_alias`).
PRESSURE_UNITS = frozenset({"hPa", "millibar", "millibars", "mbar"})

# Value of the `surface` coordinate, as cfgrib gives it (a surface field has no `levelist`).
SURFACE_VALUE = 0

_ISO_DATE = re.compile(r"^\d{4}-\d{2}-\d{2}")
# `6`, `6h`, `30m`, or a range `0-6` (accumulations) indexed by its end, as cfgrib's `endStep`.
_STEP = re.compile(r"(?:\d+(?:\.\d+)?[smhd]?-)?(\d+(?:\.\d+)?)([smhd]?)")
# Nanoseconds per unit of a step (a bare number is hours), in both directions.
_NS_PER = {"s": 1_000_000_000, "m": 60_000_000_000, "h": 3_600_000_000_000, "d": 86_400_000_000_000}
# What datetime64[ns] and timedelta64[ns] hold: int64 nanoseconds, the lowest being NaT.
_NS_RANGE = range(-(2**63) + 1, 2**63)

#: The MARS keys of one coordinate value, as a nested metadata map (``{"mars": {"step": 6}}``).
Keys = dict[str, Any]


@dataclass(frozen=True)
class Axis:
    """One field's position along a cfgrib-like dimension.

    ``keys`` are the metadata keys the value was read from (they become a coordinate, so they
    leave the attributes), including a ``levtype`` that names the level dimension; ``value`` is
    raw after :func:`find_axes` and decoded after :func:`decode_axes`; ``levtype`` is the level
    type of a level dimension (``None`` when the field has none, and always ``None`` for the
    other dimensions).
    """

    keys: tuple[str, ...]
    value: Any
    levtype: str | None = None


def lookup(keys: Mapping[str, Any], name: str) -> tuple[str, Any] | None:
    """Return ``(key, value)`` of a MARS key, preferring ``mars.<name>`` over the plain ``<name>``.

    >>> lookup({"levtype": "sfc", "mars.levtype": "pl"}, "levtype")
    ('mars.levtype', 'pl')
    """
    for key in lookup_keys(name):
        value = keys.get(key)
        if value is not None:
            return key, value
    return None


def lookup_keys(name: str) -> tuple[str, str]:
    """The keys :func:`lookup` reads a MARS key ``name`` from, preferred first."""
    return f"mars.{name}", name


def level_dim(levtype: Any) -> str:
    """Name of the level dimension for a ``levtype`` (``pl`` -> ``isobaricInhPa``, ...)."""
    if levtype is None:
        return DEFAULT_LEVEL_DIM
    return LEVEL_DIMS.get(str(levtype), DEFAULT_LEVEL_DIM)


def find_axes(keys: Mapping[str, Any]) -> dict[str, Axis]:
    """Find the cfgrib-like dimensions of one field from its flattened metadata keys.

    The level is ``heightAboveGround`` where :func:`height_axis` finds one, else named after the
    level type (:func:`level_dim`). Returns raw values; :func:`decode_axes` decodes them for a
    whole set of fields.
    """
    axes: dict[str, Axis] = {}
    number = lookup(keys, "number")
    if number is not None:
        axes["number"] = Axis((number[0],), number[1])
    date = lookup(keys, "date")
    if date is not None:
        time_of_day = lookup(keys, "time")
        used = (date[0], time_of_day[0]) if time_of_day else (date[0],)
        axes["time"] = Axis(used, (date[1], time_of_day[1] if time_of_day else 0))
    elif isinstance(keys.get("time"), str) and _ISO_DATE.match(keys["time"]):
        axes["time"] = Axis(("time",), (keys["time"], None))
    step = lookup(keys, "step")
    if step is not None:
        axes["step"] = Axis((step[0],), step[1])
    height = height_axis(keys)
    if height is not None:
        axes[HEIGHT_DIM] = height
        return axes
    levtype = lookup(keys, "levtype")
    level = lookup(keys, "levelist")
    if level is None and keys.get("level") is not None:
        level = ("level", keys["level"])
    kind = levtype[1] if levtype else None
    # A level type that names the dimension (`pl` -> isobaricInhPa) is said by that name: its key
    # is consumed with the level's. Another level type (`dp`, dimension `level`) stays a key.
    named = (levtype[0],) if levtype and level_dim(kind) != DEFAULT_LEVEL_DIM else ()
    if level is not None:
        axes[level_dim(kind)] = Axis(named + (level[0],), level[1],
                                     str(kind) if kind is not None else None)
    elif kind == "sfc":
        axes[LEVEL_DIMS["sfc"]] = Axis(named, SURFACE_VALUE, "sfc")
    return axes


def height_axis(keys: Mapping[str, Any]) -> Axis | None:
    """The ``heightAboveGround`` axis of a surface field (``levtype`` ``sfc`` or none, no
    ``levelist``) at a height above the ground, as ecCodes encodes it in GRIB2 and cfgrib reads
    it: where the stored ecCodes keys say so (``grib.typeOfLevel: heightAboveGround``,
    ``grib.level: 2``); where no ``grib.typeOfLevel`` is stored, a MARS ``sfc`` parameter
    ecCodes encodes at a height (``2t`` at 2 m: ``params.HEIGHTS``). Metres as float, as cfgrib
    gives them; ``None`` for any other field.

    >>> height_axis({"mars.levtype": "sfc", "mars.param": "10u"})
    Axis(keys=('mars.levtype',), value=10.0, levtype='sfc')
    """
    levtype = lookup(keys, "levtype")
    if (levtype and levtype[1] != "sfc") or lookup(keys, "levelist") is not None or keys.get("level") is not None:
        return None
    named = (levtype[0],) if levtype else ()
    if "grib.typeOfLevel" in keys:
        level = keys.get("grib.level")
        if keys["grib.typeOfLevel"] != HEIGHT_DIM or isinstance(level, bool) \
                or not isinstance(level, (int, float)):
            return None
        return Axis(named + ("grib.typeOfLevel", "grib.level"), float(level), "sfc")
    param = lookup(keys, "param")
    height = params.height(param[1]) if levtype and param else None
    return Axis(named, height, "sfc") if height is not None else None


def height_keys(height: Any) -> dict[str, Any]:
    """The keys :func:`find_axes` reads ``heightAboveGround = height`` from, for any parameter:
    MARS ``levtype: sfc`` and ecCodes' ``typeOfLevel``/``level``, as ecCodes encodes a field at a
    height above the ground (the writer's inverse of :func:`height_axis`).

    >>> height_keys(2.0)
    {'mars': {'levtype': 'sfc'}, 'grib': {'typeOfLevel': 'heightAboveGround', 'level': 2.0}}
    """
    return {"mars": {"levtype": "sfc"}, "grib": {"typeOfLevel": HEIGHT_DIM, "level": height}}


def level_alias(name: str, attrs: Mapping[str, Any], dtype: np.dtype) -> str | None:
    """The MARS level dimension that a coordinate named otherwise stands for: pressures in hPa
    (``pressure_level``, as the CDS names ERA5's levels) are ``isobaricInhPa``; ``None`` for
    any other coordinate, and for the dimensions this module names itself.

    >>> hpa = np.dtype("float64")
    >>> level_alias("pressure_level", {"units": "hPa"}, hpa), level_alias("plev", {"units": "Pa"}, hpa)
    ('isobaricInhPa', None)
    """
    if name in DIMS or dtype.kind not in "iuf" or attrs.get("units") not in PRESSURE_UNITS:
        return None
    return LEVEL_DIMS["pl"] if attrs.get("standard_name", "air_pressure") == "air_pressure" else None


def decode_axes(fields: Sequence[Mapping[str, Axis]], source: str = "") -> list[dict[str, Axis]]:
    """Decode the raw axes of a set of fields: ``time`` to datetime64, ``step`` to timedelta64.

    The decision is taken for all fields at once so that one dimension never mixes decoded and
    raw values: when any field's date/time or step does not parse, or lies beyond what
    nanoseconds hold (:class:`BeyondNanoseconds`, a warning naming ``source``), that dimension is
    dropped from every field and its keys are treated like any other metadata key. Numeric
    strings of ``number`` and levels become numbers.
    """
    decoders = {"time": _reference_time, "step": _step, "number": _number}
    decoded = [dict(axes) for axes in fields]
    for name, decode in decoders.items():
        try:
            values = [decode(axes[name].value) if name in axes else None for axes in fields]
        except ValueError as err:
            if isinstance(err, BeyondNanoseconds):
                warnings.warn(f"{source}: {err}: the {name!r} dimension is read as its metadata keys",
                              UserWarning, stacklevel=2)
            for axes in decoded:
                axes.pop(name, None)
            continue
        for axes, value in zip(decoded, values):
            if name in axes:
                axes[name] = replace(axes[name], value=value)
    for axes in decoded:
        for name, axis in axes.items():
            if is_level(name):
                axes[name] = replace(axis, value=_number_or_str(axis.value))
    return decoded


class BeyondNanoseconds(ValueError):
    """A time or step that datetime64[ns] / timedelta64[ns] cannot hold (years 1678-2261, steps
    of 292 years): numpy's conversions wrap such values around silently."""


_Time = TypeVar("_Time", np.datetime64, np.timedelta64)


def as_ns(value: _Time) -> _Time:
    """``value`` (a datetime64 or timedelta64 of any unit) in nanoseconds, exactly, or
    :class:`BeyondNanoseconds` (numpy's own conversion wraps around past the range, and drops
    what a finer unit holds).

    >>> as_ns(np.timedelta64(6, "h"))
    np.timedelta64(21600000000000,'ns')
    >>> as_ns(np.datetime64("2999-01-01"))
    Traceback (most recent call last):
    ...
    tgm_xarray.mars.BeyondNanoseconds: 2999-01-01 is beyond what datetime64[ns] holds
    """
    try:
        ns = value.astype(f"{value.dtype.kind}8[ns]")
    except OverflowError:  # numpy >= 2.5 refuses where older ones wrap around
        ns = np.datetime64("NaT", "ns") if value.dtype.kind == "M" else np.timedelta64("NaT", "ns")
    if not np.isnat(value) and (np.isnat(ns) or ns.astype(value.dtype) != value):
        kind = "datetime64[ns] holds" if value.dtype.kind == "M" else "timedelta64[ns] holds"
        raise BeyondNanoseconds(f"{value} is beyond what {kind}")
    return ns


def stacking_order(dims: Iterable[str], generic: Collection[str] = (), first: Sequence[str] = AXIS_ORDER) -> list[str]:
    """The order the reader stacks a variable's fields along ``dims``: ``first`` (cfgrib's
    ``number``, then its ``time_dims``: ``time``, ``step`` by default), then the other dimensions
    of this module (levels) by name, then the ``generic`` ones (plain metadata keys) by name.

    >>> stacking_order(["valid_time", "isobaricInhPa", "number"], generic=["valid_time"])
    ['number', 'isobaricInhPa', 'valid_time']
    >>> stacking_order(["step", "valid_time", "number"], first=("number", "valid_time", "step"))
    ['number', 'valid_time', 'step']
    """
    order = {d: i for i, d in enumerate(first)}
    return sorted(dims, key=lambda d: (d in generic, order.get(d, len(order)), d))


def is_level(dim: Any) -> bool:
    """Whether a dimension (one :func:`find_axes` names, or a coordinate's name) is a level."""
    return dim in LEVEL_NAMES


def sort_values(dim: str, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A dimension's distinct coordinate values, sorted: pressure descending (cfgrib's stored
    direction), all other dimensions ascending, and NaN (NaT) once and last, as numpy and pandas
    sort it. Returns them and the position of each of ``values`` among them.

    >>> sort_values("isobaricInhPa", np.array([500.0, float("nan"), 850.0, 500.0]))
    (array([850., 500.,  nan]), array([1, 2, 0, 1]))
    """
    unique, inverse = np.unique(values, return_inverse=True)  # NaN merged, last
    if dim in DESCENDING:
        present = len(unique) - int(unique.dtype.kind in "fcmM" and len(unique) > 0
                                    and bool(np.isnan(unique[-1])))
        order = np.concatenate([np.arange(present)[::-1], np.arange(present, len(unique))])
        position = np.empty_like(order)
        position[order] = np.arange(len(order))
        unique, inverse = unique[order], position[inverse]
    return unique, inverse.reshape(-1)


def in_reader_order(dim: str, values: np.ndarray) -> bool:
    """Whether ``values`` are unique and sorted as :func:`sort_values` sorts them.

    >>> in_reader_order("isobaricInhPa", np.array([850, 500])), in_reader_order("step", np.array([6, 0]))
    (True, False)
    """
    if values.ndim != 1:
        return False
    items = values.tolist()
    if values.dtype.kind in "mM":
        if np.isnat(values).any():
            return False
        items = values.astype(np.int64).tolist()
    try:
        ordered = sorted(set(items), reverse=dim in DESCENDING)
    except TypeError:
        return False
    return ordered == items


def valid_time_axis(time: Axis | None, step: Axis | None) -> Axis | None:
    """A field's place along cfgrib's ``valid_time`` dimension (``time_dims=("valid_time",)``):
    ``time + step``, the time alone where there is no step (an analysis); of raw axes (not
    decoded) the pair, which tells fields apart as well. It takes no keys of its own: a sum
    cannot be undone, so the keys of the time and the step stay metadata (attributes where the
    fields agree, a dimension where nothing else tells them apart, as of several runs).

    >>> axes = decode_axes([find_axes({"mars.date": "20260404", "mars.time": "1200", "mars.step": 6})])[0]
    >>> axis = valid_time_axis(axes["time"], axes["step"])
    >>> axis.keys, str(axis.value)
    ((), '2026-04-04T18:00:00.000000000')
    """
    if time is None:
        return None
    if step is None:
        return Axis((), time.value)
    if not (isinstance(time.value, np.datetime64) and isinstance(step.value, np.timedelta64)):
        return Axis((), (time.value, step.value))
    _, value = valid_time(np.asarray(time.value), (), np.asarray(step.value), ())
    return Axis((), value[()])


def valid_time(time: np.ndarray, time_dims: tuple[str, ...], step: np.ndarray,
               step_dims: tuple[str, ...]) -> tuple[tuple[str, ...], np.ndarray]:
    """``valid_time = time + step`` over the dimensions of whichever of them are dimensions;
    :class:`BeyondNanoseconds` where a sum is past datetime64[ns] (numpy's wraps around)."""
    lhs = time.reshape(time.shape + (1,) * step.ndim)
    # Summed as int64 nanoseconds, which wrap around (numpy's datetime sum wraps before 2.5 and
    # raises from 2.5 on): a sum moved against its step's sign did; int64's minimum is NaT.
    a = lhs.astype("datetime64[ns]").view(np.int64)
    b = step.astype("timedelta64[ns]").view(np.int64)
    with np.errstate(over="ignore"):
        total = np.asarray(a + b)
    nat = np.isnat(lhs) | np.isnat(step)
    wrapped = (((b > 0) & (total < a)) | ((b < 0) & (total > a)) | (total == np.iinfo(np.int64).min)) & ~nat
    values = np.where(nat, np.datetime64("NaT", "ns"), total.view("datetime64[ns]"))
    if wrapped.any():
        at = np.unravel_index(np.argmax(wrapped), wrapped.shape)
        raise BeyondNanoseconds(f"valid_time = {time[at[:time.ndim]]} + {step[at[time.ndim:]]} "
                                "is beyond what datetime64[ns] holds")
    return time_dims + step_dims, values


def key_maker(dim: str, dtype: np.dtype, level_free: bool) -> Callable[[Any], Keys | None] | None:
    """The writer's inverse of :func:`find_axes` and :func:`decode_axes`: a function giving the
    MARS keys of one value of dimension ``dim`` (``None`` for a value they cannot hold, such as
    NaN), or ``None`` when ``dim`` of ``dtype`` is not a MARS dimension. A level is keyed only
    where ``level_free`` (a field has one level).

    >>> key_maker("step", np.dtype("m8[ns]"), True)(np.timedelta64(90, "m"))
    {'mars': {'step': '90m'}}
    >>> key_maker("isobaricInhPa", np.dtype("float64"), True)(np.float64(500))
    {'mars': {'levtype': 'pl', 'levelist': 500.0}}
    """
    if dim == "time" and dtype.kind == "M":
        return _time_keys
    if dim == "step" and dtype.kind == "m":
        return _step_keys
    if dim == "number" and dtype.kind in "iu":
        return lambda v: {"mars": {"number": int(v)}}
    if level_free and dtype.kind in "iuf":
        if dim in LEVTYPES:
            return lambda v: _if_finite(v, {"mars": {"levtype": LEVTYPES[dim], "levelist": _item(v)}})
        if dim == DEFAULT_LEVEL_DIM:
            return lambda v: _if_finite(v, {"level": _item(v)})
        if dim == HEIGHT_DIM:
            return lambda v: _if_finite(v, height_keys(_item(v)))
    return None


def scalar_keys(name: str, value: Any) -> Keys | None:
    """The MARS keys of a scalar coordinate ``name = value``; ``None`` where it has none.

    >>> scalar_keys("surface", np.int64(0)), scalar_keys("valid_time", np.int64(0))
    ({'mars': {'levtype': 'sfc'}}, None)
    """
    if name == LEVEL_DIMS["sfc"] and np.ndim(value) == 0 and value == SURFACE_VALUE:
        return {"mars": {"levtype": "sfc"}}
    to_keys = key_maker(name, np.asarray(value).dtype, level_free=True)
    return to_keys(value) if to_keys else None


def _if_finite(value: Any, keys: Keys) -> Keys | None:
    return keys if np.isfinite(value) else None


def _item(value: Any) -> Any:
    """A numpy number as the Python number a metadata value holds."""
    return value.item() if isinstance(value, np.generic) else value


def _reference_time(raw: tuple[Any, Any]) -> np.datetime64:
    date, time_of_day = raw
    if time_of_day is None:  # an ISO 8601 `time` string
        return as_ns(np.datetime64(date))
    return as_ns(_date(date) + _time_of_day(time_of_day))


def _date(value: Any) -> np.datetime64:
    text = str(value)
    if re.fullmatch(r"\d{8}", text):
        text = f"{text[:4]}-{text[4:6]}-{text[6:]}"
    elif not _ISO_DATE.match(text):
        raise ValueError(f"not a date: {value!r}")
    return np.datetime64(text)


def _date_key(day: np.datetime64) -> str:
    """``mars.date`` of a day: ``YYYYMMDD``, as :func:`_date` reads it."""
    return str(day.astype("datetime64[D]")).replace("-", "")


def _time_of_day(value: Any) -> np.timedelta64:
    text = str(value).replace(":", "")
    if not text.isdigit() or len(text) > 4:
        raise ValueError(f"not a time of day: {value!r}")
    # MARS writes hours alone (`12`) or hours and minutes (`1200`, `0000`).
    hours, minutes = (int(text), 0) if len(text) <= 2 else (int(text[:-2]), int(text[-2:]))
    if hours > 23 or minutes > 59:
        raise ValueError(f"not a time of day: {value!r}")
    return np.timedelta64(hours * 60 + minutes, "m")


def _time_key(minutes: int) -> str:
    """``mars.time`` of a time of day in minutes: ``HHMM``, as :func:`_time_of_day` reads it."""
    return f"{minutes // 60:02d}{minutes % 60:02d}"


def _time_keys(value: np.datetime64) -> Keys | None:
    """``mars.date`` and ``mars.time`` of a reference time; an ISO 8601 ``time`` (which
    :func:`find_axes` also reads) where it is not a whole minute; none where the reader's
    datetime64[ns] cannot hold it."""
    if np.isnat(value):
        return None
    try:
        value = as_ns(value)
    except BeyondNanoseconds:
        return None
    minute = value.astype("datetime64[m]")
    if minute != value:  # MARS keys hold whole minutes; ISO 8601 holds nanoseconds
        return {"time": np.datetime_as_string(value, unit="ns")}
    day = value.astype("datetime64[D]")
    return {"mars": {"date": _date_key(day), "time": _time_key(int((minute - day).astype(np.int64)))}}


def _step(value: Any) -> np.timedelta64:
    """A step exactly: its number or text in rational arithmetic (through a float, steps past
    2**53 ns, 104 days, lost their last nanoseconds), refused past timedelta64[ns]'s range."""
    if isinstance(value, bool):
        raise ValueError(f"not a step: {value!r}")
    amount: Any
    if isinstance(value, (int, float)):
        amount, unit = value, "h"
    else:
        match = _STEP.fullmatch(str(value).strip())
        if match is None:
            raise ValueError(f"not a step: {value!r}")
        amount, unit = match.groups()
    try:
        ns = round(Fraction(amount) * _NS_PER[unit or "h"])
    except (ValueError, OverflowError):  # NaN, infinity
        raise ValueError(f"not a step: {value!r}") from None
    if ns not in _NS_RANGE:
        raise BeyondNanoseconds(f"step {value!r} is beyond what timedelta64[ns] holds (292 years)")
    return np.timedelta64(ns, "ns")


def _step_keys(value: np.timedelta64) -> Keys | None:
    """``mars.step``: whole hours as a number (MARS steps are hours), else minutes (``90m``),
    else seconds (``1.500000000s``), as :func:`_step` reads them; none for a negative step or
    one the reader's timedelta64[ns] cannot hold."""
    if np.isnat(value):
        return None
    try:
        ns = int(as_ns(value).astype(np.int64))
    except BeyondNanoseconds:
        return None
    if ns < 0:
        return None
    if ns % _NS_PER["h"] == 0:
        step: int | str = ns // _NS_PER["h"]
    elif ns % _NS_PER["m"] == 0:
        step = f"{ns // _NS_PER['m']}m"
    else:
        step = f"{ns // _NS_PER['s']}.{ns % _NS_PER['s']:09d}s"
    return {"mars": {"step": step}}


def _number(value: Any) -> int:
    number = _number_or_str(value)
    if isinstance(number, bool) or not isinstance(number, int):
        raise ValueError(f"not an ensemble member number: {value!r}")
    return number


def _number_or_str(value: Any) -> Any:
    """Turn numeric strings (``"500"``, ``"0.5"``) into numbers; leave anything else alone."""
    if not isinstance(value, str):
        return value
    for convert in (int, float):
        try:
            return convert(value)
        except ValueError:
            pass
    return value
