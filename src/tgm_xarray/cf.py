"""CF conventions, both directions: the ``coordinates`` attribute, CF numbers for times, and the
CF attributes of the MARS coordinates.

The writer (``layout``) names in a variable's ``coordinates`` the coordinates it keeps apart
from its dimensions and stores times as CF numbers; the reader (``hypercube``, the engine)
names them back, so that xarray makes them coordinates again, and gives the coordinates it
builds from MARS keys cfgrib's attributes (``COORD_ATTRS``), or their raw CF encoding when the
caller turns decoding off (:func:`raw_times`). This module knows nothing about files.

>>> naming({"units": "K", "coordinates": "lat"}, ["surface"])
{'units': 'K', 'coordinates': 'lat surface'}
>>> attached_to(("y", "x"), {"lat": ("y", "x"), "time": (), "member": ("number",)})
['lat', 'time']
"""

from __future__ import annotations

import warnings
from collections.abc import Hashable, Iterable, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from tgm_xarray.errors import TgmCodecError
from tgm_xarray.mars import HEIGHT_DIM

if TYPE_CHECKING:
    import xarray as xr

#: The attribute naming a variable's (or, on the Dataset, every variable's) coordinates.
COORDINATES = "coordinates"

_TIME_ATTRS = {"standard_name": "forecast_reference_time", "long_name": "initial time of forecast"}
#: CF attributes of the coordinates the reader builds from MARS keys (cfgrib's, minus
#: encoding-only keys: the values are already datetime64/timedelta64, so they carry no
#: ``units``/``calendar``). The writer stores a keyed coordinate's attributes only where they
#: differ from these.
COORD_ATTRS: dict[str, dict[str, str]] = {
    "number": {
        "units": "1",
        "standard_name": "realization",
        "long_name": "ensemble member numerical id",
    },
    "time": _TIME_ATTRS,
    "step": {"standard_name": "forecast_period", "long_name": "time since forecast_reference_time"},
    "valid_time": {"standard_name": "time", "long_name": "time"},
    "isobaricInhPa": {
        "units": "hPa",
        "positive": "down",
        "stored_direction": "decreasing",
        "standard_name": "air_pressure",
        "long_name": "pressure",
    },
    "hybrid": {
        "units": "1",
        "positive": "down",
        "long_name": "hybrid level",
        "standard_name": "atmosphere_hybrid_sigma_pressure_coordinate",
    },
    "theta": {
        "units": "K",
        "standard_name": "air_potential_temperature",
        "long_name": "potential temperature",
    },
    "potentialVorticity": {"units": "K m2 kg-1 s-1", "long_name": "potential vorticity"},
    "soilLayer": {"units": "1", "long_name": "soil layer"},
    "surface": {"units": "1", "long_name": "original GRIB coordinate for key: level(surface)"},
    HEIGHT_DIM: {"units": "m", "positive": "up", "standard_name": "height", "long_name": "height above the surface"},
    "level": {"long_name": "level"},
}

#: Units of the raw times, as cfgrib gives them with ``decode_times=False`` / ``decode_timedelta=False``.
RAW_TIME_ATTRS = {"units": "seconds since 1970-01-01T00:00:00", "calendar": "proleptic_gregorian"}
RAW_TIMEDELTA_ATTRS = {"units": "hours"}


#: The entries of a variable's ``encoding`` that say how a file CF-packed it, as xarray's NetCDF
#: and Zarr backends keep them (and ``to_netcdf``/``to_zarr`` pack with them again).
PACKING = ("dtype", "scale_factor", "add_offset", "_FillValue", "missing_value")


def packing(encoding: Mapping[str, Any]) -> dict | None:
    """The CF packing of a variable, from its ``encoding``: ``scale_factor``/``add_offset`` on an
    integer ``dtype``, as plain values (what the writer records); ``None`` where it had none.

    >>> packing({"dtype": np.dtype("int16"), "scale_factor": np.float32(0.5), "_FillValue": np.int16(-1),
    ...          "zlib": True})
    {'dtype': 'int16', 'scale_factor': 0.5, '_FillValue': -1}
    >>> packing({"dtype": np.dtype("float32"), "_FillValue": np.float32("nan")}) is None
    True
    """
    if "scale_factor" not in encoding and "add_offset" not in encoding:
        return None
    try:
        stored = np.dtype(encoding["dtype"])
    except (KeyError, TypeError):
        return None
    if stored.kind not in "iu":
        return None
    record: dict[str, Any] = {"dtype": stored.name}
    for key in PACKING[1:]:
        value = encoding.get(key)
        if value is not None and np.ndim(value) == 0 and np.asarray(value).dtype.kind in "iuf":
            record[key] = np.asarray(value).item()
    return record


def packing_encoding(record: Mapping[str, Any], dtype: np.dtype) -> dict:
    """The ``encoding`` entries of a recorded CF packing, for values read as ``dtype``: the
    integer dtype, and ``scale_factor``/``add_offset`` of the values' type (CF's rule, by which
    xarray decodes into that type again).

    >>> packing_encoding({"dtype": "int16", "scale_factor": 0.5, "_FillValue": -1}, np.dtype("float32"))
    {'dtype': dtype('int16'), 'scale_factor': np.float32(0.5), '_FillValue': np.int16(-1)}
    """
    integers = np.dtype(record["dtype"])
    encoding: dict[str, Any] = {"dtype": integers}
    for key, value in record.items():
        if key in ("scale_factor", "add_offset"):
            encoding[key] = dtype.type(value) if dtype.kind == "f" else value
        elif key in ("_FillValue", "missing_value"):
            encoding[key] = integers.type(value)
    return encoding


def named_coordinates(attrs: Mapping[str, Any], encoding: Mapping[str, Any] | None = None) -> set[str] | None:
    """The coordinates a variable names in CF's ``coordinates`` (kept in its ``encoding`` by
    xarray's decoding, or still an attribute), ``None`` where it names none."""
    named = (encoding or {}).get(COORDINATES, attrs.get(COORDINATES))
    return set(str(named).split()) if named is not None else None


def coordinates_attr(names: Iterable[str]) -> str:
    """The value of ``coordinates`` naming ``names``: sorted, each once, space-separated."""
    return " ".join(sorted(set(names)))


def naming(attrs: Mapping[str, Any], names: Iterable[str]) -> dict:
    """``attrs`` whose ``coordinates`` names ``names`` besides those it already names."""
    return {**attrs, COORDINATES: coordinates_attr({*(named_coordinates(attrs) or ()), *names})}


def attached_to(dims: Iterable[Hashable], coords: Mapping[str, Iterable[Hashable]]) -> list[str]:
    """The coordinates (name -> dimensions) a variable on ``dims`` names in ``coordinates``:
    those that are not one of its dimensions and lie on no dimension it lacks; sorted."""
    own = set(dims)
    return sorted(name for name, on in coords.items() if name not in own and set(on) <= own)


def encode(name: str, var: xr.Variable) -> xr.Variable:
    """Times, durations and booleans as CF numbers (the reader CF-decodes them back); numbers
    as they are, without copying or loading them. ``TgmCodecError`` for anything else."""
    from xarray import conventions  # the planner imports this module without xarray

    # A shallow copy keeps dask and lazily-loaded data unread. Source encodings (netCDF packing,
    # chunks, time units) are dropped: they would be misapplied, and xarray picks exact units.
    var = var.copy(deep=False)
    var.encoding = {}
    if var.dtype.kind in "iufc":
        return var
    if var.dtype.kind in "mMbO":
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", category=UserWarning)  # "units chosen for you"
            encoded = conventions.encode_cf_variable(var, name=name).copy(deep=False)
        encoded.encoding = {}
        if encoded.dtype.kind in "iufc":
            return encoded
    raise TgmCodecError(f"variable {name!r}: Tensogram stores numbers, not {var.dtype} values; "
                        f"drop it with ds.drop_vars({name!r}) or convert it to numbers")


def raw_times(var: xr.Variable, decode_times: bool, decode_timedelta: bool) -> xr.Variable | None:
    """A decoded time coordinate as cfgrib's raw values when decoding is off: seconds since 1970
    (int64) and hours (float64), with their units (:data:`RAW_TIME_ATTRS`); ``None`` where the
    variable stays as it is."""
    from xarray import Variable  # the planner imports this module without xarray

    if var.dtype.kind == "M" and not decode_times:
        seconds = (var.values - np.datetime64(0, "s")) // np.timedelta64(1, "s")
        return Variable(var.dims, seconds.astype(np.int64), {**var.attrs, **RAW_TIME_ATTRS})
    if var.dtype.kind == "m" and not decode_timedelta:
        hours = var.values / np.timedelta64(1, "h")
        return Variable(var.dims, hours.astype(np.float64), {**var.attrs, **RAW_TIMEDELTA_ATTRS})
    return None


def seconds_encodings(variables: Mapping[Hashable, xr.Variable], names: Iterable[Hashable]) -> dict[Hashable, dict]:
    """The encodings that store the times and steps among ``names`` as int64 seconds: xarray
    would pick the coarsest unit that fits this file's values (days for a step of 0), and steps
    appended later would not fit it."""
    encodings: dict[Hashable, dict] = {}
    for name in names:
        kind = variables[name].dtype.kind
        if kind in "mM":
            units = "seconds" if kind == "m" else "seconds since 1970-01-01"
            encodings[name] = {"units": units, "dtype": "int64"}
    return encodings
