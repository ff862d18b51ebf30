"""earthkit-data 1.x reads ``.tgm`` files: ``ekd.from_source("tgm", path_or_url)`` (docs/earthkit.md).

The source is registered under the entry point group ``earthkit.data.sources``, the one kind of
plugin earthkit-data 1.x loads (its readers, which ``from_source("file", ...)`` tries, are only
the modules of its own package). The data object gives:

- ``to_fieldlist()``: one field per data object (coordinate objects such as ``latitude`` and
  ``longitude`` are the fields' geography, as the engine decides which objects are coordinates).
  A field's values are decoded by the core when asked for, never when the list is made. Its
  earthkit keys come from the MARS request stored with it, decoded by :mod:`tgm_xarray.mars` as
  the engine decodes its dimensions: ``parameter.variable`` (named as the engine names its
  variable), ``parameter.units``, ``time.base_datetime``, ``time.step``, ``vertical.level``,
  ``vertical.level_type``, ``ensemble.member``; every stored key is also a label under its dotted
  name (``labels.mars.param``, ``labels.grib.paramId``).
- ``to_xarray(**kwargs)``: ``xr.open_dataset(path, engine="tgm", **kwargs)``, the whole file as
  one hypercube (the engine's keywords, such as ``filter_by_keys``, apply).
- ``to_numpy()``: the field list's values stacked.

>>> import earthkit.data as ekd                                     # doctest: +SKIP
>>> fields = ekd.from_source("tgm", "forecast.tgm").to_fieldlist()  # doctest: +SKIP
>>> fields.sel({"parameter.variable": "t", "vertical.level": 500})  # doctest: +SKIP
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from functools import cached_property
from typing import Any

import numpy as np
import xarray as xr
from earthkit.data.core.field import Field
from earthkit.data.data.source import SourceData
from earthkit.data.field.handler.data import DataFieldComponentHandler
from earthkit.data.field.handler.ensemble import EnsembleFieldComponentHandler
from earthkit.data.field.handler.geography import GeographyFieldComponentHandler
from earthkit.data.field.handler.labels import SimpleLabels
from earthkit.data.field.handler.parameter import ParameterFieldComponentHandler
from earthkit.data.field.handler.time import TimeFieldComponentHandler
from earthkit.data.field.handler.vertical import VerticalFieldComponentHandler
from earthkit.data.field.mars.vertical import MarsVerticalBuilder
from earthkit.data.indexing.simple import SimpleFieldList
from earthkit.data.sources import Source
from earthkit.data.utils.summary import DataDescriber

from tgm_xarray import mars
from tgm_xarray.attrs import structural
from tgm_xarray.hypercube import PlanOptions
from tgm_xarray.hypercube.objects import HORIZONTAL_NAMES, Objects, Row
from tgm_xarray.hypercube.variables import variable_name
from tgm_xarray.source import TgmFile


class TgmSource(Source):
    """``ekd.from_source("tgm", path, storage_options=None)``: a ``.tgm`` file or URL
    (``https://``, ``s3://``; ``storage_options`` go to fsspec, as for the engine). The file is
    opened here, so that a missing file or one that is not a ``.tgm`` file fails at once."""

    def __init__(self, path: str | os.PathLike, storage_options: dict | None = None):
        super().__init__()
        self.file = TgmFile(path, storage_options)
        self.path = self.file.path
        self.storage_options = storage_options

    def to_data_object(self) -> TgmData:
        return TgmData(self)

    def __repr__(self) -> str:
        return f"TgmSource({self.path!r})"


class TgmData(SourceData):
    """What ``from_source("tgm", ...)`` returns: a field list, or the engine's Dataset."""

    _TYPE_NAME = "Tensogram"

    @property
    def available_types(self) -> list[str]:
        return [self._FIELDLIST, self._XARRAY, self._NUMPY]

    def describe(self) -> DataDescriber:
        return DataDescriber(title=self._TYPE_NAME, path=self.path, types=self.available_types)

    def __repr__(self) -> str:
        return f"TgmData(path={self.path!r})"

    @cached_property
    def _fields(self) -> SimpleFieldList:
        return SimpleFieldList(fields(self._source.file))

    def to_fieldlist(self, *args, **kwargs) -> SimpleFieldList:
        """One field per data object, in file order; values are decoded when asked for."""
        return self._fields

    def to_xarray(self, *args, **kwargs) -> xr.Dataset:
        """The file as the engine opens it: ``xr.open_dataset(path, engine="tgm", **kwargs)``."""
        options = {"storage_options": self._source.storage_options, **kwargs}
        return xr.open_dataset(self.path, *args, engine="tgm", **options)

    def to_numpy(self, *args, **kwargs) -> np.ndarray:
        """The fields' values stacked (earthkit's ``FieldList.to_numpy``)."""
        return self.to_fieldlist().to_numpy(*args, **kwargs)


class TgmValues(DataFieldComponentHandler):
    """One object's values, decoded by the core each time they are asked for."""

    def __init__(self, file: TgmFile, msg: int, obj: int):
        self.file, self.msg, self.obj = file, msg, obj

    def get_values(self, dtype=None, copy=True) -> np.ndarray:
        values = self.file.read(self.msg, self.obj)  # a new array every time: ``copy`` holds
        return values if dtype is None else values.astype(dtype, copy=False)

    def __getstate__(self) -> dict:
        return {"file": self.file, "msg": self.msg, "obj": self.obj}

    def __setstate__(self, state: dict) -> None:
        self.file, self.msg, self.obj = state["file"], state["msg"], state["obj"]


def fields(file: TgmFile) -> list[Field]:
    """The earthkit fields of ``file``: one per data object, in file order."""
    table = file.table()
    objects = Objects(table, PlanOptions(), source=file.path, fingerprint=file.fingerprint)
    rows = np.flatnonzero(objects.coordinate < 0).tolist()
    keys = [objects.view(row) for row in rows]
    # Decided for all fields at once, as the engine decides its dimensions.
    axes = mars.decode_axes([mars.find_axes(k) for k in keys], file.path)
    grids = _Grids(file, objects)
    return [_field(file, objects.row(row), k, a, grids) for row, k, a in zip(rows, keys, axes)]


def _field(file: TgmFile, row: Row, keys: dict[str, Any], axes: Mapping[str, mars.Axis], grids: _Grids) -> Field:
    # Field(...) with ready components, as earthkit's own MARS fields are made: its
    # ``from_components`` would decode every field to learn the shape its geography has.
    parameter = {"variable": variable_name(keys, row.obj, None), "units": keys.get("units")}
    geography = grids.geography(row.msg, row.shape)
    return Field(
        data=TgmValues(file, row.msg, row.obj),
        parameter=ParameterFieldComponentHandler.from_any(parameter),
        time=_time(axes),
        geography=GeographyFieldComponentHandler.from_any(geography, dict_kwargs={"shape_hint": row.shape}),
        vertical=_vertical(axes),
        ensemble=EnsembleFieldComponentHandler.from_any({"member": axes["number"].value}) if "number" in axes else None,
        labels=SimpleLabels({k: v for k, v in keys.items() if not structural(k)}),
    )


def _time(axes: Mapping[str, mars.Axis]) -> TimeFieldComponentHandler | None:
    if "time" not in axes:
        return None
    time = {"base_datetime": axes["time"].value.astype("datetime64[us]").item()}
    if "step" in axes:
        time["step"] = axes["step"].value.astype("timedelta64[us]").item()
    return TimeFieldComponentHandler.from_any(time)


def _vertical(axes: Mapping[str, mars.Axis]) -> VerticalFieldComponentHandler | None:
    level = next((axis for dim, axis in axes.items() if mars.is_level(dim)), None)
    if level is None:
        return None
    # earthkit's own table turns a MARS levtype into its level types (pl -> pressure); a levtype
    # it does not know keeps the level with an unknown type.
    request = {"levtype": level.levtype, "levelist": None if level.levtype == "sfc" else level.value}
    try:
        return MarsVerticalBuilder.build(request)
    except ValueError:
        return VerticalFieldComponentHandler.from_any({"level": level.value})


class _Grids:
    """The latitude/longitude objects of each message, read once per distinct stored payload."""

    def __init__(self, file: TgmFile, objects: Objects):
        self.file = file
        self.by_message: dict[int, dict[str, tuple[int, int]]] = {}
        for row in np.flatnonzero(objects.coordinate >= 0).tolist():
            name = HORIZONTAL_NAMES.get(str(objects.coordinate_names[objects.coordinate[row]]).lower())
            if name is not None:
                msg, obj = int(objects.table.msg[row]), int(objects.table.obj[row])
                self.by_message.setdefault(msg, {})[name] = (msg, obj)
        self.arrays: dict[str, np.ndarray] = {}

    def read(self, ref: tuple[int, int]) -> np.ndarray:
        key = self.file.fingerprint(*ref)
        if key not in self.arrays:
            self.arrays[key] = self.file.read(*ref)
        return self.arrays[key]

    def geography(self, msg: int, shape: tuple[int, ...]) -> dict[str, np.ndarray]:
        """earthkit's geography of a field of ``shape`` in message ``msg``: a regular grid when
        the field is latitude x longitude, points when all three have one shape; else none."""
        refs = self.by_message.get(msg, {})
        if len(refs) < 2:
            return {}
        lat, lon = self.read(refs["latitude"]), self.read(refs["longitude"])
        if lat.ndim == lon.ndim == 1 and shape == (lat.size, lon.size):
            return {"distinct_latitudes": lat, "distinct_longitudes": lon}
        if lat.shape == lon.shape == shape:
            return {"latitudes": lat, "longitudes": lon}
        return {}
