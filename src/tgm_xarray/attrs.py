"""Tensogram metadata as flat, netCDF-friendly attributes, and as JSON.

Tensogram metadata is CBOR: nested maps, byte strings, lists of anything. xarray attributes
must survive ``to_netcdf``, so they may only be strings, numbers, or lists of numbers or of
strings. Nested maps are flattened into dotted keys (``mars.class``, ``grib.paramId``), which
is also how the planner names metadata keys everywhere else (filters, dimensions). GRIB facts
are named as cfgrib names them (:func:`attr_name`: ``grib.paramId`` is ``GRIB_paramId``),
whoever wrote the file. What has no attribute form becomes JSON text, by the one rule every
JSON output follows (:func:`jsonable`: attributes, the CLI's ``dump`` and ``info --json``,
virtual Zarr metadata, NetCDF exports).

>>> flatten({"mars": {"class": "od", "step": 0}, "_reserved_": {"tensor": {}}})
{'mars.class': 'od', 'mars.step': 0}
>>> to_attrs({"flag": True, "digest": b"\\x01\\xff", "levels": [1000, 850], "grid": [{"n": 1}]})
{'digest': '01ff', 'flag': 1, 'grid': '[{"n": 1}]', 'levels': [1000, 850]}
>>> to_attrs({"grib.paramId": 167, "GRIB_units": "K", "grib.units": "K"})
{'GRIB_paramId': 167, 'GRIB_units': 'K'}
"""

from __future__ import annotations

import json
import math
import numbers
from collections.abc import Mapping
from typing import Any, TypeAlias, overload

import numpy as np

from tgm_xarray._core import COORDINATE_ATTRS_KEY, DIM_NAMES_KEY, RESERVED_KEY, VALUES_DTYPE_KEY

#: A field's record of its variable's stacked dimensions, in the writer's order and names, and
#: of those whose values run against the reader's sort (``hypercube.written``).
STACKED_DIMS_KEY = "_stacked_dims_"
REVERSED_DIMS_KEY = "_reversed_dims_"
#: A field's record of the text coordinates along its variable's stacked dimensions that are its
#: keys (``[["expver", "valid_time"]]``: each coordinate's name and dimension).
LABELS_KEY = "_labels_"
#: A field's record of the CF packing its values had in the file they were read from
#: (``{"dtype": "int16", "scale_factor": 0.01, ...}``: ``cf.packing``), which the reader gives
#: back in the variable's ``encoding``.
CF_PACKING_KEY = "_cf_packing_"
#: Metadata that shapes the Dataset instead of describing the data: never attributes, dimensions
#: or names. The core's table keeps the first three out of its key columns (core-rs/src/table/mod.rs):
#: the encoder's ``_reserved_`` (tensor layout, encode time, UUID), the ``dim_names`` hints and
#: ``_extra_``'s ``coordinate_attrs`` (``{"member": {"long_name": "ensemble member"}}``); the
#: planner reads ``_values_dtype_`` (the dtype packed values were given in) and the writer's
#: records from their columns (a map's entries are flattened: :func:`structural`).
STRUCTURAL_KEYS = frozenset({RESERVED_KEY, DIM_NAMES_KEY, COORDINATE_ATTRS_KEY, VALUES_DTYPE_KEY,
                             STACKED_DIMS_KEY, REVERSED_DIMS_KEY, LABELS_KEY, CF_PACKING_KEY})
#: CF attributes listed first, in this order; the rest follow sorted by name.
CF_FIRST = ("units", "long_name", "standard_name")
#: The namespace of the ecCodes keys upstream's GRIB converter stores (``grib.paramId``), and
#: cfgrib's prefix of the same keys as attributes (``GRIB_paramId``), which files converted
#: through cfgrib store as they are.
GRIB_NAMESPACE = "grib"
GRIB_PREFIX = "GRIB_"
_GRIB_DOT = GRIB_NAMESPACE + "."

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1
# Types CBOR decodes to most often, checked before the (slower) abstract base classes: opening
# a file runs these checks tens of times per message.
_PLAIN_SCALARS = (str, int, float, bool)
_EXACT_SCALARS = frozenset(_PLAIN_SCALARS)
_EXACT_CONTAINERS = frozenset((dict, list, tuple))


def structural(key: str) -> bool:
    """Whether a flattened metadata key is one of :data:`STRUCTURAL_KEYS` or inside one.

    >>> structural("_cf_packing_.scale_factor"), structural("mars.param")
    (True, False)
    """
    return key.split(".", 1)[0] in STRUCTURAL_KEYS


def flatten(meta: Mapping[Any, Any], prefix: str = "") -> dict[str, Any]:
    """Flatten nested mappings into dotted keys, leaving out ``_reserved_`` entries."""
    flat: dict[str, Any] = {}
    for key, value in meta.items():
        if key == RESERVED_KEY:
            continue
        name = f"{prefix}{key}"
        if type(value) is dict or (type(value) not in _EXACT_SCALARS and isinstance(value, Mapping)):
            flat.update(flatten(value, f"{name}."))
        else:
            flat[name] = value
    return flat


def freeze(value: Any) -> Any:
    """A hashable stand-in for a metadata value, to compare and count values."""
    kind = type(value)
    if kind is str or kind is int or kind is bool:
        return value
    if isinstance(value, float) and value != value:
        return "NaN"  # NaN != NaN would make a constant NaN look like it varies
    if isinstance(value, _PLAIN_SCALARS) or value is None:
        return value
    if isinstance(value, Mapping):
        return tuple(sorted((str(k), freeze(v)) for k, v in value.items()))
    if isinstance(value, (list, tuple)):
        return tuple(freeze(v) for v in value)
    if isinstance(value, bytearray):
        return bytes(value)
    return value


def is_scalar(value: Any) -> bool:
    """Whether a metadata value can label a dimension (a string, number or boolean)."""
    if type(value) in _EXACT_SCALARS:
        return True
    if value is None or type(value) in _EXACT_CONTAINERS:
        return False
    return isinstance(value, _PLAIN_SCALARS) or (
        isinstance(value, numbers.Number) and not isinstance(value, complex))


def attr_value(value: Any) -> Any:
    """netCDF-friendly form of one metadata value, or ``None`` when it has none (``None``).

    Booleans become 0/1, integers beyond int64 and other odd scalars become strings, byte
    strings become hex, lists of numbers or of strings stay lists, and any other list (mixed,
    nested, empty) becomes its JSON text.
    """
    if value is None:
        return None
    if isinstance(value, (list, tuple)):
        return _list_value(value)
    if isinstance(value, Mapping):
        return json_text(value)
    return _scalar_value(value)


def attr_name(key: str) -> str:
    """The attribute name of a flattened metadata key: an ecCodes key of the ``grib``
    namespace as cfgrib's attribute, any other key as it is.

    >>> attr_name("grib.gridType"), attr_name("GRIB_gridType"), attr_name("mars.param")
    ('GRIB_gridType', 'GRIB_gridType', 'mars.param')
    """
    return GRIB_PREFIX + key[len(_GRIB_DOT):] if key.startswith(_GRIB_DOT) else key


def to_attrs(flat: Mapping[str, Any]) -> dict[str, Any]:
    """Attributes from flattened metadata: values made netCDF-friendly, named by
    :func:`attr_name`, CF keys first.

    Where a file stores a GRIB fact both ways (``GRIB_level`` and ``grib.level``), one
    attribute holds it when the values agree; when they differ, ``GRIB_<key>`` keeps its own
    value and ``grib.<key>`` stays as stored, so no value is lost or replaced.
    """
    converted = {key: value for key, value in ((k, attr_value(v)) for k, v in flat.items()) if value is not None}
    named: dict[str, Any] = {}
    for key, value in converted.items():
        name = attr_name(key)
        if name != key and name in converted:
            if freeze(converted[name]) == freeze(value):
                continue  # cfgrib's spelling holds it
            name = key
        named[name] = value
    ordered = [key for key in CF_FIRST if key in named]
    ordered += sorted(key for key in named if key not in CF_FIRST)
    return {key: named[key] for key in ordered}


def _scalar_value(value: Any) -> Any:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, numbers.Integral):
        number = int(value)
        return number if _INT64_MIN <= number <= _INT64_MAX else str(number)
    if isinstance(value, numbers.Real):
        return float(value)
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    return str(value)


def _list_value(items: list[Any] | tuple[Any, ...]) -> Any:
    if items and all(isinstance(v, str) for v in items):
        return list(items)
    if items and all(isinstance(v, numbers.Real) for v in items):
        converted = [_scalar_value(v) for v in items]
        if all(isinstance(v, int) for v in converted):
            return converted
        if all(isinstance(v, (int, float)) for v in converted):
            return [float(v) for v in converted]
    return json_text(items)


#: A value of JSON's types.
JSONValue: TypeAlias = "None | bool | int | float | str | list[JSONValue] | dict[str, JSONValue]"


@overload
def jsonable(value: Mapping[Any, Any], *, strict: bool = False) -> dict[str, JSONValue]: ...
@overload
def jsonable(value: Any, *, strict: bool = False) -> JSONValue: ...


def jsonable(value: Any, *, strict: bool = False) -> JSONValue:
    """``value`` in JSON's types: mappings as objects with text keys, lists, tuples and arrays
    as lists, numpy scalars as Python's, byte strings as hex, anything else JSON has no type for
    as its text. Non-finite floats stay floats (Python's ``json`` and zarr write ``NaN``) unless
    ``strict`` (RFC 8259 JSON, which has no such number) names them ``"NaN"``, ``"Infinity"``
    or ``"-Infinity"``.

    >>> jsonable({"digest": b"\\x01\\xff", "v": (np.float32(1.5), float("nan")), 3: np.int64(7)})
    {'digest': '01ff', 'v': [1.5, nan], '3': 7}
    >>> jsonable([float("nan"), float("-inf")], strict=True)
    ['NaN', '-Infinity']
    """
    if value is None or isinstance(value, (str, bool, int)):
        return value
    if isinstance(value, float):
        if strict and not math.isfinite(value):
            return "NaN" if math.isnan(value) else ("Infinity" if value > 0 else "-Infinity")
        return float(value)
    if isinstance(value, Mapping):
        return {k if isinstance(k, str) else str(jsonable(k)): jsonable(v, strict=strict) for k, v in value.items()}
    if isinstance(value, (list, tuple, np.ndarray)):
        return [jsonable(v, strict=strict) for v in value]
    if isinstance(value, (bytes, bytearray, memoryview)):
        return bytes(value).hex()
    if isinstance(value, np.generic):
        return jsonable(value.item(), strict=strict)
    return str(value)


def json_text(value: Any) -> str:
    """``value`` as JSON text (keys sorted): how attributes hold what has no attribute form."""
    return json.dumps(jsonable(value), sort_keys=True)
