"""``.tgm`` to GRIB 2 through ecCodes (``tgm_xarray.to_grib``, ``tgm-xarray convert in.tgm out.grib2``).

One GRIB message per field: a data variable at one value of each of its other dimensions
(``number``, ``time``, ``step``, a level), on a regular latitude/longitude grid. The keys come
from what the field carries, as cfgrib and upstream's GRIB converter store them:

- the parameter: ``GRIB_paramId`` (cfgrib's attributes) or ``grib.paramId`` (upstream's), else
  the short name (``GRIB_shortName``, ``grib.shortName``, ``mars.param``);
- the reference time and step: the ``time`` and ``step`` coordinates (the engine makes them of
  ``mars.date``/``mars.time``/``mars.step``);
- the level: ``GRIB_typeOfLevel``/``grib.typeOfLevel``, else a level coordinate named as cfgrib
  names it (``isobaricInhPa``, ``heightAboveGround``, ...), else ``mars.levtype``; its value
  from that coordinate (or ``GRIB_level``, ``grib.level``, ``mars.levelist``);
- the member: the ``number`` coordinate (an ensemble product, template 4.1);
- the centre and the data type (``fc``, ``an``, ...): ``GRIB_centre``, ``GRIB_dataType`` of the
  variable or the Dataset, ``grib.centre``, ``mars.type``;
- the grid: the ``latitude`` and ``longitude`` coordinates, which must be regular.

A field without one of these is refused, naming what is missing, before anything is written.
Values are packed with the field's own bits: a simple-packed field's ``bits_per_value`` (the
``.tgm``'s ``sp_bits_per_value``) as CCSDS (``grid_ccsds``; ``grid_simple`` where the ``.tgm``
field is uncompressed), any other field as IEEE floats of its width (``grid_ieee``, exact);
``bits=`` packs every field with that many bits. NaN become a bitmap; a field of NaN only (a
hole of the hypercube, such as ``q`` at a level only ``t`` has) is not written.

>>> import xarray as xr                                              # doctest: +SKIP
>>> to_grib(xr.open_dataset("2t.tgm", engine="tgm"), "2t.grib2")    # doctest: +SKIP
"""

from __future__ import annotations

import os
from collections.abc import Hashable, Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from tgm_xarray import cf, mars
from tgm_xarray.atomic import MODES, AtomicFile, WriteMode
from tgm_xarray.installation import install_hint

if TYPE_CHECKING:
    import xarray as xr

#: File name endings of GRIB files.
GRIB_SUFFIXES = (".grib", ".grib1", ".grib2", ".grb", ".grb1", ".grb2")
#: The widest packing ecCodes' simple and CCSDS packing take.
MAX_BITS = 32
#: cfgrib's level coordinates named after ecCodes' ``typeOfLevel`` (besides :data:`mars.LEVEL_NAMES`).
LEVEL_TYPES = frozenset({*mars.LEVEL_NAMES, "isobaricInPa", "meanSea", "depthBelowLandLayer",
                         "heightAboveSea", "entireAtmosphere", "cloudBase", "cloudTop"} - {mars.DEFAULT_LEVEL_DIM})
#: Dimensions a field may be stacked along: each is a GRIB key of its own.
FIELD_AXES = frozenset({"number", "time", "step", *LEVEL_TYPES})
GRID_DIMS = ("latitude", "longitude")


def to_grib(data: xr.Dataset | str | os.PathLike, path: str | os.PathLike, *, bits: int | None = None,
            mode: WriteMode = "w", durable: bool = False) -> int:
    """Write the fields of ``data`` (a Dataset, or the path of a ``.tgm`` file, opened with
    this package's engine) to the GRIB 2 file ``path``; returns the number of messages.

    Every variable is checked before anything is written; the file is written atomically
    (:mod:`tgm_xarray.atomic`): ``mode="w"`` replaces it, ``"w-"`` refuses an existing one.
    ``bits``: pack every field with this many bits (1 to 32) instead of its own.
    """
    import xarray as xr

    from tgm_xarray.backend import TensogramBackendEntrypoint

    if mode not in ("w", "w-"):
        raise ValueError(f"mode must be one of 'w', 'w-'; got {mode!r} ({MODES} for .tgm files)")
    if bits is not None and not (isinstance(bits, int) and 1 <= bits <= MAX_BITS):
        raise ValueError(f"bits must be an integer from 1 to {MAX_BITS} (GRIB's simple and CCSDS packing); got {bits!r}")
    eccodes = _eccodes(str(path))
    if isinstance(data, xr.Dataset):
        return _write(data, data.encoding.get("source", "the Dataset"), path, bits, mode, durable, eccodes)
    with xr.open_dataset(data, engine=TensogramBackendEntrypoint) as ds:
        return _write(ds, os.fspath(data), path, bits, mode, durable, eccodes)


def _write(ds: xr.Dataset, source: str, path: str | os.PathLike, bits: int | None, mode: WriteMode,
           durable: bool, eccodes: Any) -> int:
    fields = [field_keys(ds, name, source, bits) for name in ds.data_vars]  # all, before writing
    messages = 0
    with AtomicFile(os.fspath(path), mode, durable=durable) as out:
        for var in fields:
            for keys, values in var.fields(ds):
                if np.isnan(values).all():  # a hole of the hypercube, not a field
                    continue
                out.write(_encode(eccodes, keys, values))
                messages += 1
    return messages


def _eccodes(path: str) -> Any:
    try:
        import eccodes
    except (ImportError, RuntimeError) as error:  # RuntimeError: the package without its library
        raise ImportError(f"{path}: writing GRIB needs ecCodes ({install_hint('eccodes')}): {error}") from None
    return eccodes


@dataclass(frozen=True)
class VariableKeys:
    """The GRIB keys every field of one variable shares, and how its fields are taken."""

    name: Hashable
    keys: dict[str, Any]
    stacked: tuple[Hashable, ...]  # the dimensions other than the grid's, one message per value
    level_type: str

    def fields(self, ds: xr.Dataset) -> Iterator[tuple[dict[str, Any], np.ndarray]]:
        """Each field's keys and values, read one field at a time."""
        var = _own_coordinates(ds[self.name])
        for index in np.ndindex(*(var.sizes[d] for d in self.stacked)):
            field = var.isel(dict(zip(self.stacked, index)))
            keys = dict(self.keys)
            keys.update(_coordinate_keys(field, self.level_type))
            yield keys, np.asarray(field.transpose(*GRID_DIMS).values)


def field_keys(ds: xr.Dataset, name: Hashable, source: str, bits: int | None = None) -> VariableKeys:
    """The GRIB keys of variable ``name`` of ``ds``; a ``ValueError`` naming ``source``, the
    variable and everything missing where it lacks some."""
    var = _own_coordinates(ds[name])
    attrs = {**{k: v for k, v in ds.attrs.items() if str(k).startswith("GRIB_")}, **var.attrs}
    missing: list[str] = []
    keys: dict[str, Any] = {}
    centre = _attr(attrs, "centre")
    if centre is not None:
        keys["centre"] = centre
    data_type = _attr(attrs, "dataType", "mars.type")
    if data_type is not None:
        keys["dataType"] = data_type
    keys.update(_parameter(attrs) or {})
    if "paramId" not in keys and "shortName" not in keys:
        missing.append("the parameter (GRIB_paramId, grib.paramId, GRIB_shortName, grib.shortName or mars.param)")
    for coord in ("time", "step"):
        if coord not in var.coords:
            missing.append(f"the {'reference time' if coord == 'time' else 'forecast step'} (a {coord!r} coordinate)")
    step_type = _attr(attrs, "stepType")
    if step_type not in (None, "instant"):
        missing.append(f"the start of its {step_type!r} time range (only instantaneous fields are written)")
    level_type = _level_type(var, attrs)
    if level_type is None:
        missing.append("the level type (GRIB_typeOfLevel, grib.typeOfLevel, mars.levtype, or one level "
                       "coordinate such as isobaricInhPa or heightAboveGround)")
    else:
        keys["typeOfLevel"] = level_type
        if level_type not in var.coords:
            level = _attr(attrs, "level", "mars.levelist")
            keys["level"] = mars.SURFACE_VALUE if level is None else level
    grid = _grid(var, missing)
    stacked = tuple(d for d in var.dims if d not in GRID_DIMS)
    unknown = [str(d) for d in stacked if d not in FIELD_AXES]
    if unknown:
        missing.append(f"a GRIB key for its dimensions {unknown} (fields stack along number, time, step "
                       "and their level only)")
    if missing:
        raise ValueError(f"{source}: variable {str(name)!r} cannot be written as GRIB, missing "
                         + "; ".join(missing))
    keys.update(grid)
    keys.update(_packing(var, bits))
    return VariableKeys(name, keys, stacked, str(level_type))


def _own_coordinates(var: xr.DataArray) -> xr.DataArray:
    """``var`` with only the coordinates it names in CF's ``coordinates`` and those of its
    dimensions: a Dataset's ``surface`` coordinate is not ``2t``'s level."""
    named = cf.named_coordinates(var.attrs, var.encoding)
    if named is None:
        return var
    return var.drop_vars([c for c in var.coords if c not in named and c not in var.dims])


def _attr(attrs: Mapping[Hashable, Any], key: str, *others: str) -> Any:
    """The first of ``GRIB_<key>`` (cfgrib's), ``grib.<key>`` (upstream's converter) and
    ``others`` that ``attrs`` has."""
    for name in (f"GRIB_{key}", f"grib.{key}", *others):
        if attrs.get(name) is not None:
            return attrs[name]
    return None


def _parameter(attrs: Mapping[Hashable, Any]) -> dict[str, Any] | None:
    """``paramId`` where it is recorded, else ``shortName``; a MARS ``param`` ``167`` or
    ``167.128`` is a paramId (ECMWF's: table 128 is the plain number, others table * 1000 +
    number)."""
    param_id = _attr(attrs, "paramId")
    if param_id is not None:
        return {"paramId": int(param_id)}
    short = _attr(attrs, "shortName")
    if short is not None:
        return {"shortName": str(short)}
    param = attrs.get("mars.param")
    if param is None:
        return None
    number, _, table = str(param).partition(".")
    if number.isdigit() and (not table or table.isdigit()):
        return {"paramId": int(number) if table in ("", "128") else int(table) * 1000 + int(number)}
    return {"shortName": str(param)}


def _level_type(var: xr.DataArray, attrs: Mapping[Hashable, Any]) -> str | None:
    recorded = _attr(attrs, "typeOfLevel")
    if recorded is not None:
        return str(recorded)
    there = [str(c) for c in var.coords if c in LEVEL_TYPES]
    if len(there) == 1:
        return there[0]
    levtype = attrs.get("mars.levtype")
    return mars.LEVEL_DIMS.get(str(levtype)) if levtype is not None else None


def _grid(var: xr.DataArray, missing: list[str]) -> dict[str, Any]:
    """The keys of a regular latitude/longitude grid from the coordinates (``missing`` says why not)."""
    if not all(d in var.dims and d in var.coords and var.coords[d].ndim == 1 for d in GRID_DIMS):
        missing.append("a regular latitude/longitude grid (1-D 'latitude' and 'longitude' dimension coordinates)")
        return {}
    lat, lon = (np.asarray(var.coords[d].values, dtype=np.float64) for d in GRID_DIMS)
    irregular = [d for d, v in zip(GRID_DIMS, (lat, lon)) if len(v) < 2 or not np.allclose(np.diff(v), v[1] - v[0])]
    if irregular:
        missing.append(f"a regular grid: its {' and '.join(irregular)} are not evenly spaced (at least 2 values)")
        return {}
    return {"gridType": "regular_ll", "Ni": len(lon), "Nj": len(lat),
            "iScansNegatively": int(lon[1] < lon[0]), "jScansPositively": int(lat[1] > lat[0]),
            "latitudeOfFirstGridPointInDegrees": float(lat[0]),
            "latitudeOfLastGridPointInDegrees": float(lat[-1]),
            "longitudeOfFirstGridPointInDegrees": float(lon[0]) % 360,
            "longitudeOfLastGridPointInDegrees": float(lon[-1]) % 360,
            "iDirectionIncrementInDegrees": abs(float(lon[1] - lon[0])),
            "jDirectionIncrementInDegrees": abs(float(lat[1] - lat[0]))}


def _packing(var: xr.DataArray, bits: int | None) -> dict[str, Any]:
    """Simple packing's bits as CCSDS (``grid_simple`` for an uncompressed ``.tgm`` field);
    fields that are not packed as IEEE floats of their width."""
    encoding = var.encoding
    own = encoding.get("bits_per_value") if encoding.get("tensogram_encoding") == "simple_packing" else None
    bits = bits if bits is not None else own
    if bits is None:
        return {"packingType": "grid_ieee", "precision": 1 if var.dtype.itemsize <= 4 else 2}
    simple = encoding.get("tensogram_compression", "none") == "none" and own is not None
    return {"packingType": "grid_simple" if simple else "grid_ccsds", "bitsPerValue": int(bits)}


def _coordinate_keys(field: xr.DataArray, level_type: str) -> dict[str, Any]:
    """The keys of one field's scalar coordinates: reference time, step, level, member."""
    keys: dict[str, Any] = {}
    minutes = int(np.datetime64(field.coords["time"].values, "m").astype(np.int64))
    day, minute = divmod(minutes, 24 * 60)
    keys["dataDate"] = int(str(np.datetime64(day, "D")).replace("-", ""))
    keys["dataTime"] = minute // 60 * 100 + minute % 60
    step = np.timedelta64(field.coords["step"].values, "ns").astype(np.int64)
    hours, rest = divmod(int(step), 3_600_000_000_000)
    keys.update({"stepUnits": 1, "step": hours} if not rest else
                {"stepUnits": 0, "step": int(step) // 60_000_000_000})
    if level_type in field.coords:
        level = field.coords[level_type].values.item()
        keys["level"] = int(level) if float(level).is_integer() else level
    if "number" in field.coords:
        keys["productDefinitionTemplateNumber"] = 1
        keys["perturbationNumber"] = int(field.coords["number"].values)
    return keys


def _encode(eccodes: Any, keys: Mapping[str, Any], values: np.ndarray) -> bytes:
    """One GRIB 2 message of ``keys`` and ``values`` (NaN as a bitmap)."""
    handle = eccodes.codes_grib_new_from_samples("GRIB2")
    try:
        # the packing first: changed after the grid, ecCodes repacks the sample's values on it
        packing = [k for k in ("packingType", "bitsPerValue", "precision") if k in keys]
        for key in [*packing, *(k for k in keys if k not in packing)]:
            _set(eccodes, handle, key, keys[key])
        flat = values.astype(np.float64).ravel()
        missing = np.isnan(flat)
        if missing.any():
            fill = float(np.nanmax(np.abs(flat))) * 2 + 1  # no value's: ecCodes' missing points
            _set(eccodes, handle, "bitmapPresent", 1)
            _set(eccodes, handle, "missingValue", fill)
            flat = np.where(missing, fill, flat)
        eccodes.codes_set_values(handle, flat)
        return bytes(eccodes.codes_get_message(handle))
    finally:
        eccodes.codes_release(handle)


def _set(eccodes: Any, handle: Any, key: str, value: Any) -> None:
    try:
        eccodes.codes_set(handle, key, value.item() if isinstance(value, np.generic) else value)
    except Exception as error:  # ecCodes' own classes: name the key and value
        raise ValueError(f"ecCodes refused GRIB key {key}={value!r}: {error}") from error
