"""cfgrib's vocabulary for ``filter_by_keys``: ecCodes key names read from the keys we store.

cfgrib users filter with ecCodes keys (``shortName``, ``paramId``, ``typeOfLevel``, ``level``,
``dataType``, ``stepType``, ...). Tensogram files carry the MARS request of each field
(``mars.param``, ``mars.levtype``, ``mars.levelist``, ``mars.type``, ``mars.step``, ...) and,
the ecCodes keys themselves: under ``grib.`` when converted from GRIB by upstream's converter,
as cfgrib's ``GRIB_<key>`` attributes when converted through cfgrib (``tgm-xarray convert``).
This module is the one table between them: :func:`values` gives a filter key's values for
one object in cfgrib's spelling (``mars.levtype: pl`` is ``typeOfLevel: isobaricInhPa``).

>>> values({"mars.levtype": "pl", "mars.levelist": 500}, "typeOfLevel")
['isobaricInhPa']
>>> values({"grib.typeOfLevel": "heightAboveGround", "mars.levtype": "sfc"}, "typeOfLevel")
['heightAboveGround']
>>> values({"GRIB_gridType": "regular_ll"}, "gridType"), values({"grib.gridType": "regular_ll"}, "GRIB_gridType")
(['regular_ll'], ['regular_ll'])
>>> values({"mars.levelist": 500}, "level")
[500]
>>> values({"mars.levtype": "sfc", "mars.param": "2t"}, "typeOfLevel")  # as the engine reads it
['heightAboveGround']
>>> values({"mars.param": "2t"}, "cfVarName"), values({"mars.param": "167"}, "cfName")
(['t2m'], ['air_temperature'])
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from tgm_xarray import mars
from tgm_xarray.attrs import GRIB_NAMESPACE, GRIB_PREFIX
from tgm_xarray.params import PARAMETERS, short_name

#: Namespaces a plain filter key is also looked up in: the MARS request, and the ecCodes keys
#: that upstream's GRIB converter stores.
NAMESPACES = ("mars", GRIB_NAMESPACE)


def _step_type(step: Any) -> str | None:
    # A MARS step range (`0-6`) is an accumulation, mean, max or min: the step alone cannot say.
    return None if "-" in str(step) else "instant"


def _end_step(step: Any) -> Any:
    return str(step).rsplit("-", 1)[-1]


def _hhmm(time_of_day: Any) -> Any:
    # ecCodes' dataTime is a number (0, 1200); MARS writes "0000", "1200" or "12" (hours).
    text = str(time_of_day).replace(":", "")
    if not text.isdigit():
        return time_of_day
    return int(text) * 100 if len(text) <= 2 else int(text)


_TYPE_OF_LEVEL: dict[str, str] = dict(mars.LEVEL_DIMS)


def _cf_var_name(param: Any) -> str:
    short = short_name(param)
    return PARAMETERS[short][1] if short in PARAMETERS else short


def _cf_name(param: Any) -> str:
    short = short_name(param)
    return PARAMETERS[short][2] if short in PARAMETERS else "unknown"


#: cfgrib (ecCodes) key -> the stored keys that say the same, each with the conversion of its
#: value to cfgrib's spelling (``None``: the same value). Used only when the object has none of
#: the key's own spellings (``key``, ``mars.key``, ``grib.key``, ``GRIB_key``).
CFGRIB_KEYS: dict[str, tuple[tuple[str, Callable[[Any], Any] | None], ...]] = {
    "shortName": (("mars.param", None), ("param", None), ("name", None)),
    "cfVarName": (("grib.shortName", _cf_var_name), ("grib.paramId", _cf_var_name),
                  ("mars.param", _cf_var_name), ("param", _cf_var_name), ("name", _cf_var_name)),
    "paramId": (("mars.param", None), ("param", None)),
    "typeOfLevel": (("mars.levtype", lambda v: _TYPE_OF_LEVEL.get(str(v), v)),
                    ("levtype", lambda v: _TYPE_OF_LEVEL.get(str(v), v))),
    "level": (("mars.levelist", None), ("levelist", None)),
    "dataType": (("mars.type", None), ("type", None)),
    "stepType": (("mars.step", _step_type), ("step", _step_type)),
    "stepRange": (("mars.step", str), ("step", str)),
    "endStep": (("mars.step", _end_step), ("step", _end_step)),
    "dataDate": (("mars.date", None), ("date", None)),
    "dataTime": (("mars.time", _hhmm), ("time", _hhmm)),
    "perturbationNumber": (("mars.number", None), ("number", None)),
    "experimentVersionNumber": (("mars.expver", None), ("expver", None)),
    "marsClass": (("mars.class", None),),
    "marsStream": (("mars.stream", None),),
    "marsType": (("mars.type", None),),
    "cfName": (("standard_name", None), ("grib.shortName", _cf_name), ("grib.paramId", _cf_name),
               ("mars.param", _cf_name), ("param", _cf_name), ("name", _cf_name)),
}


#: cfgrib keys that, for a field at a height above the ground, are its level's (``typeOfLevel:
#: heightAboveGround``, ``level: 2`` for ``2t``), as the engine reads it (``mars.height_axis``).
HEIGHT_KEYS = ("typeOfLevel", "level")


def _ec_codes_key(key: str) -> str:
    """The ecCodes key a plain filter key names: cfgrib's attribute name (``GRIB_gridType``)
    is its key (``gridType``), as :func:`tgm_xarray.attrs.attr_name` names it."""
    return key.removeprefix(GRIB_PREFIX)


def spellings(key: str) -> tuple[str, ...]:
    """The stored keys that are ``key`` itself: a dotted key is exact; a plain one is also
    looked up in :data:`NAMESPACES` and as cfgrib's ``GRIB_<key>``."""
    if "." in key:
        return (key,)
    key = _ec_codes_key(key)
    return (key, *(f"{ns}.{key}" for ns in NAMESPACES), f"{GRIB_PREFIX}{key}")


def stored_keys(key: str) -> tuple[str, ...]:
    """Every stored key :func:`values` may read for a filter key."""
    plain = _ec_codes_key(key)
    height = mars.LEVEL_KEYS if plain in HEIGHT_KEYS else ()
    return spellings(key) + tuple(k for k, _ in CFGRIB_KEYS.get(plain, ())) + height


def values(keys: Mapping[str, Any], key: str) -> list[Any]:
    """The values of filter key ``key`` in one object's flattened ``keys``: those of its own
    spellings, else the first cfgrib translation the object has (``[]`` when none)."""
    found = [keys[k] for k in spellings(key) if k in keys]
    if found or "." in key:
        return found
    key = _ec_codes_key(key)
    height = mars.height_axis(keys) if key in HEIGHT_KEYS else None
    if height is not None:
        return [mars.HEIGHT_DIM if key == "typeOfLevel" else height.value]
    for stored, convert in CFGRIB_KEYS.get(key, ()):
        if stored in keys:
            return [convert(keys[stored]) if convert else keys[stored]]
    return []


def close_matches(word: str, candidates: Iterable[Any], n: int = 3) -> list[str]:
    """Up to ``n`` candidates spelled like ``word`` (difflib), for a name that matched nothing:
    a filter's key or value, an encoding option, a command-line flag."""
    return difflib.get_close_matches(str(word), sorted({str(c) for c in candidates}), n=n, cutoff=0.6)


def did_you_mean(close: Iterable[str], spell: Callable[[str], str] = repr) -> str:
    """``" (did you mean 'a', 'b'?)"`` for the ``close`` matches of a mistyped name, ``""``
    when there are none: every suggestion is worded here. ``spell`` writes each one (``str``
    for command-line flags, which are not quoted).

    >>> did_you_mean(close_matches("zstd_levl", ["zstd_level", "szip_rsi"])), did_you_mean([])
    (" (did you mean 'zstd_level'?)", '')
    """
    close = list(close)
    return f" (did you mean {', '.join(map(spell, close))}?)" if close else ""
