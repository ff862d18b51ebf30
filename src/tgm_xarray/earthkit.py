"""earthkit-data 1.x reads and writes ``.tgm`` files: ``ekd.from_source("tgm", path_or_url)``,
``data.to_target("tgm", path)`` (docs/earthkit.md).

The source is registered under the entry point group ``earthkit.data.sources`` (earthkit-data
1.x loads sources, targets and encoders from plugins; its readers, which ``from_source("file",
...)`` tries, are only the modules of its own package). The data object gives:

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

The target ``"tgm"`` (:class:`TgmTarget`, entry point group ``earthkit.data.targets``) writes
what its encoder ``"tgm"`` (:class:`TgmEncoder`, ``earthkit.data.encoders``) makes of the data as
Datasets, atomically, through :class:`tgm_xarray.writer.TgmWriter`:

- GRIB fields (those with a GRIB message: ``field.message()``) as ``tgm-xarray convert`` writes
  their GRIB: the messages go to a temporary GRIB file, which cfgrib opens as the command does;
- any other field (such as those of the source ``"tgm"``) as one message: its values on its
  regular latitude/longitude grid, its labels as its keys (those of the source ``"tgm"`` are every
  stored key, so the engine reads the field back as it read it);
- ``from_source("tgm", path)`` itself as the engine's Dataset of the file; an xarray Dataset as it is.

>>> import earthkit.data as ekd                                     # doctest: +SKIP
>>> fields = ekd.from_source("tgm", "forecast.tgm").to_fieldlist()  # doctest: +SKIP
>>> fields.sel({"parameter.variable": "t", "vertical.level": 500})  # doctest: +SKIP
>>> fields.to_target("tgm", "t.tgm")                                # doctest: +SKIP
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping
from functools import cached_property
from typing import Any

import numpy as np
import xarray as xr
from earthkit.data.core.field import Field
from earthkit.data.core.fieldlist import FieldList
from earthkit.data.data import Data
from earthkit.data.data.source import SourceData
from earthkit.data.encoders import EncodedData, Encoder
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
from earthkit.data.targets import SimpleTarget
from earthkit.data.utils.summary import DataDescriber

from tgm_xarray import mars
from tgm_xarray.attrs import structural
from tgm_xarray.hypercube import PlanOptions
from tgm_xarray.hypercube.objects import HORIZONTAL_NAMES, Objects, Row
from tgm_xarray.hypercube.variables import variable_name
from tgm_xarray.layout import Plans, plan
from tgm_xarray.source import TgmFile
from tgm_xarray.writer import TgmWriter

#: The attributes the engine gives the coordinates of a regular grid.
LATLON_ATTRS = {"latitude": {"units": "degrees_north", "standard_name": "latitude"},
                "longitude": {"units": "degrees_east", "standard_name": "longitude"}}


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
        self.arrays: dict[int, np.ndarray] = {}

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


class TgmTarget(SimpleTarget):
    """``data.to_target("tgm", path, append=False, encoding=None, durable=False)``: ``path``
    gets the ``.tgm`` file of every ``write`` to this target, when the target closes (``with``
    or ``to_target``); nothing when a write or the ``with`` block fails. ``append`` adds the
    messages to an existing file; ``encoding`` and ``durable`` are :func:`tgm_xarray.to_tgm`'s."""

    _name = "tgm"

    # Keyword-only: ``to_target`` gives every keyword to the target first, then passes on to
    # ``write`` those that are not the target's (its ``target_kwargs``).
    def __init__(self, file: str | os.PathLike, *, append: bool = False,
                 encoding: Mapping[str, Mapping[str, Any]] | None = None, durable: bool = False,
                 encoder: Encoder | str | None = None, **kwargs):
        super().__init__(encoder=encoder, **kwargs)
        if not isinstance(file, (str, os.PathLike)):
            raise TypeError(f"the tgm target writes to a path, not {type(file).__name__}")
        self.path = os.fspath(file)
        self.encoding = encoding
        # Taken at the first write, so a target never written to leaves ``path`` as it was.
        self.writer: TgmWriter | None = None
        self.mode = "a" if append else "w"
        self.durable = durable
        self.tgm_encoder = TgmEncoder() if encoder is None else encoder

    def _write(self, data: Any, encoder: Encoder | str | None = None, **kwargs) -> None:
        from earthkit.data.encoders import make_encoder

        encoded = make_encoder(data, encoder or self.tgm_encoder).encode(data, target=self, **kwargs)
        if not isinstance(encoded, TgmEncodedData):
            raise TypeError(f"the tgm target writes the tgm encoder's output, not {type(encoded).__name__}")
        if self.writer is None:
            self.writer = TgmWriter(self.path, self.mode, durable=self.durable)  # type: ignore[arg-type]
        with encoded:
            encoded.write(self.writer, self.encoding)

    def flush(self) -> None:
        self._raise_if_closed()

    def close(self) -> None:
        """Put the file in place (:meth:`TgmWriter.commit`)."""
        self._mark_closed()
        if self.writer is not None:
            self.writer.commit()

    def abort(self) -> None:
        """Leave ``path`` as it was."""
        self._mark_closed()
        if self.writer is not None:
            self.writer.abort()

    def __exit__(self, kind, value, traceback) -> None:
        self.close() if kind is None else self.abort()


class TgmEncodedData(EncodedData):
    """What :class:`TgmEncoder` makes: Datasets, some read from a temporary GRIB file that lives
    until they are written (``with``)."""

    def __init__(self, datasets: list[xr.Dataset], scratch: tempfile.TemporaryDirectory | None = None):
        self.datasets, self.scratch = datasets, scratch

    def write(self, writer: TgmWriter, encoding: Mapping | None = None) -> None:
        # One plan of all: a hole of one Dataset may be another's field (``skip_nan_fields``).
        writer.write_plan(Plans([plan(ds, encoding=_encoding(ds, encoding)) for ds in self.datasets]))

    def to_file(self, f: Any) -> None:
        """Write the ``.tgm`` file to ``f``, a path (atomically) or a binary file object."""
        if isinstance(f, (str, os.PathLike)):
            with self, TgmWriter(f) as writer:
                self.write(writer)
        else:
            f.write(self.to_bytes())

    def to_bytes(self) -> bytes:
        with tempfile.TemporaryDirectory() as scratch:
            path = os.path.join(scratch, "encoded.tgm")
            self.to_file(path)
            with open(path, "rb") as f:
                return f.read()

    def get(self, key: str, default: Any = None) -> Any:
        return default

    def __enter__(self) -> TgmEncodedData:
        return self

    def __exit__(self, *exc) -> None:
        for ds in self.datasets:
            ds.close()
        if self.scratch is not None:
            self.scratch.cleanup()


class TgmEncoder(Encoder):
    """The encoder ``"tgm"``: a field list, a field, ``from_source`` data or an xarray Dataset as
    the Datasets the ``.tgm`` file is written from (the module's docstring says how). It serves
    the target ``"tgm"`` only: any other (``to_target("file", "x.tgm", encoder="tgm")``) is
    refused, as earthkit's file target would write in place, and replace where asked to append."""

    def encode(self, data: Any = None, *, target: Any = None, **kwargs) -> TgmEncodedData:
        if target is not None and not isinstance(target, TgmTarget):
            raise ValueError(f"the tgm encoder writes through the tgm target only, not {type(target).__name__}: "
                             "to_target('tgm', path)")
        if isinstance(data, Source) and not isinstance(data, FieldList):
            data = data.to_data_object()  # what ``from_source(...).to_target`` gives the target
        if isinstance(data, TgmData):
            return TgmEncodedData([data.to_xarray()])
        if isinstance(data, xr.DataArray):
            data = data.to_dataset()
        if isinstance(data, xr.Dataset):
            return TgmEncodedData([data])
        if isinstance(data, Data) and "fieldlist" in data.available_types:
            data = data.to_fieldlist()
        if isinstance(data, Field):
            data = [data]
        if isinstance(data, (FieldList, list)):
            return _fields_encoded(list(data))
        raise TypeError(f"the tgm encoder takes fields, a field list or xarray data, not {type(data).__name__}")

    # earthkit's double dispatch, for callers that use it.
    def _encode(self, data, *, target=None, **kwargs) -> TgmEncodedData:
        return self.encode(data, target=target, **kwargs)

    _encode_field = _encode_fieldlist = _encode_xarray = _encode

    def _encode_featurelist(self, featurelist, *, target=None, **kwargs) -> TgmEncodedData:
        raise TypeError("the tgm encoder writes fields, not features")

    _encode_path = _encode_featurelist


def _encoding(ds: xr.Dataset, encoding: Mapping | None) -> dict | None:
    """The target's ``encoding`` for the variables of ``ds`` (a Dataset is one of several)."""
    return None if encoding is None else {k: v for k, v in encoding.items() if k in ds.data_vars}


def _fields_encoded(fields: list[Field]) -> TgmEncodedData:
    messages = [field.message() for field in fields]
    datasets = [_field_dataset(field) for field, message in zip(fields, messages) if message is None]
    grib = [message for message in messages if message is not None]
    if not grib:
        return TgmEncodedData(datasets)
    from tgm_xarray.cli.inputs import open_inputs

    scratch = tempfile.TemporaryDirectory(prefix="tgm-earthkit-")
    path = os.path.join(scratch.name, "fields.grib2")
    with open(path, "wb") as f:
        for message in grib:
            f.write(message)
    # As ``tgm-xarray convert fields.grib2 out.tgm`` opens it: one Dataset per cfgrib hypercube.
    return TgmEncodedData(open_inputs(path, None, None) + datasets, scratch)


def _field_dataset(field: Field) -> xr.Dataset:
    """A field of no GRIB message as a Dataset of one variable: its values on its regular grid,
    its labels as attributes."""
    values = field.to_numpy()
    name = field.get("parameter.variable") or "values"
    attrs = field.labels.to_dict()
    lat, lon = field.geography.distinct_latitudes(), field.geography.distinct_longitudes()
    if lat is None or lon is None or values.shape != (np.size(lat), np.size(lon)):
        raise ValueError(f"field {name!r}: the tgm encoder writes fields on a regular latitude/longitude grid only")
    coords = {dim: xr.Variable(dim, axis, LATLON_ATTRS[dim]) for dim, axis in (("latitude", lat), ("longitude", lon))}
    return xr.Dataset({name: (("latitude", "longitude"), values, attrs)}, coords=coords)
