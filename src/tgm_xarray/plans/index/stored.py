"""Values in the index's stored form (:class:`Packer`, :func:`unpack`): tagged and JSON-like, numeric
arrays as the message's objects; the table and plans in it, and the keys plans are stored under."""

from __future__ import annotations

import dataclasses
import json
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from tgm_xarray import _core
from tgm_xarray.hypercube import HypercubePlan, PlanOptions, VariablePlan
from tgm_xarray.plans.index.recorded import Recorded
from tgm_xarray.source.handles import FileVersion
from tgm_xarray.table import MetadataTable

_STORED_DTYPES = frozenset("int8 int16 int32 int64 uint8 uint16 uint32 uint64 float32 float64".split())


class Packer:
    """Turns values into the tagged stored form; numeric arrays become the message's objects."""

    def __init__(self) -> None:
        self.objects: list[tuple[dict, np.ndarray]] = []

    def pack(self, value: Any) -> Any:
        if value is None or isinstance(value, (bool, str)):
            return value
        if isinstance(value, (int, float)) and type(value) in (int, float):
            return value
        if isinstance(value, np.ndarray):
            return self._array(value)
        if isinstance(value, np.generic):
            return {"s": [value.dtype.str, self._array(np.asarray(value))]}
        if isinstance(value, np.dtype):
            return {"dt": value.str}
        if isinstance(value, tuple):
            return {"t": [self.pack(v) for v in value]}
        if isinstance(value, list):
            return {"l": [self.pack(v) for v in value]}
        if isinstance(value, frozenset):
            return {"fs": [self.pack(v) for v in sorted(value, key=repr)]}
        if isinstance(value, Mapping):
            return {"m": [[self.pack(k), self.pack(v)] for k, v in value.items()]}
        if isinstance(value, bytes):
            return {"b": value.hex()}
        if isinstance(value, complex):
            return {"c": [value.real, value.imag]}
        if isinstance(value, (int, float)):  # subclasses (IntEnum, ...): their plain value
            return float(value) if isinstance(value, float) else int(value)
        raise TypeError(f"cannot store a {type(value).__name__} in an index")

    def _array(self, a: np.ndarray) -> dict:
        kind = a.dtype
        flat = np.ascontiguousarray(a).reshape(-1)
        if kind.kind in "mM":  # datetime64/timedelta64: their int64 counts
            flat = flat.view(np.int64)
        elif kind.kind == "c":  # complex: (real, imaginary) pairs of its float type
            flat = flat.view(np.dtype(f"{kind.byteorder}f{kind.itemsize // 2}"))
        elif kind == np.bool_:
            flat = flat.view(np.uint8)
        if flat.dtype.name not in _STORED_DTYPES or flat.size == 0:
            return {"al": [kind.str, list(a.shape), [self.pack(v) for v in a.reshape(-1).tolist()]]}
        flat = flat.astype(flat.dtype.newbyteorder("<"), copy=False)
        descriptor = {"type": "ntensor", "shape": [flat.size], "dtype": flat.dtype.name, "byte_order": "little",
                      "encoding": "none", "filter": "none", "compression": "none"}
        self.objects.append((descriptor, flat))
        return {"a": [len(self.objects) - 1, kind.str, list(a.shape)]}


def unpack(value: Any, read: Callable[[int], np.ndarray]) -> Any:
    """A value from its stored form; ``read(i)`` gives the message's object ``i``."""
    if not isinstance(value, dict):
        return value
    (tag, body), = value.items()
    if tag == "a":
        index, dtype, shape = body
        dtype = np.dtype(dtype)
        flat = read(index)
        if dtype.kind in "mMc" or dtype == np.bool_:
            flat = flat.astype(flat.dtype.newbyteorder(dtype.byteorder), copy=False).view(dtype)
        return flat.astype(dtype, copy=False).reshape(shape)
    if tag == "al":
        dtype, shape, items = body
        out = np.empty(len(items), dtype=np.dtype(dtype))
        out[...] = [unpack(v, read) for v in items] if items else []
        return out.reshape(shape)
    if tag == "t":
        return tuple(unpack(v, read) for v in body)
    if tag == "l":
        return [unpack(v, read) for v in body]
    if tag == "m":
        return {unpack(k, read): unpack(v, read) for k, v in body}
    if tag == "fs":
        return frozenset(unpack(v, read) for v in body)
    if tag == "s":
        return unpack(body[1], read)[()].astype(np.dtype(body[0]))
    if tag == "dt":
        return np.dtype(body)
    if tag == "b":
        return bytes.fromhex(body)
    if tag == "c":
        return complex(*body)
    raise ValueError(f"unknown tag {tag!r}")


def plan_key(options: PlanOptions, groups: bool) -> str:
    """The canonical form of the planner's keywords (:meth:`PlanOptions.as_dict`: those left at
    their defaults dropped) and of ``groups`` (``split_groups``' plans, or one Dataset's): which
    stored plans an open may use."""
    return json.dumps(Packer().pack(dict(sorted({**options.as_dict(), "groups": groups}.items()))), sort_keys=True)


def pack_table(table: MetadataTable, packer: Packer) -> Any:
    """``table`` in the core's stored form, as one object of bytes (the core names the columns and
    checks what it reads back)."""
    return packer.pack(np.frombuffer(table.core.to_bytes(), dtype=np.uint8))


def unpack_table(stored: Any, read) -> MetadataTable:
    """The table :func:`pack_table` stored."""
    return MetadataTable(_core.Table.from_bytes(unpack(stored, read).tobytes()))


def pack_plan(plan: HypercubePlan, packer: Packer, prints: Callable[[np.ndarray], np.ndarray]) -> dict:
    """``plan`` in the stored form: a variable's refs (one (message, object) per field) as an array,
    one object, not a tagged pair per field; their fingerprints (``prints(refs)``) another."""
    # (Its fields as they are: dataclasses.asdict would deep-copy every ref first.)
    variables = {}
    for name, v in plan.variables.items():
        refs = np.array(v.refs, dtype=np.int64).reshape(-1, 2)
        variables[name] = {**{f.name: getattr(v, f.name) for f in dataclasses.fields(v)},
                           "refs": refs, "prints": prints(refs)}
    return packer.pack({"variables": variables, "coord_names": plan.coord_names,
                        "index_coords": plan.index_coords, "attrs": plan.attrs})


def unpack_plan(stored: Any, read, source: str, version: FileVersion | None
                ) -> tuple[HypercubePlan, dict[str, Recorded]]:
    """A stored plan, its variables' ``source`` encoding the path opened now (a plan names the
    path it was made for there only: an index copied with its file, or read beside a URL,
    serves the new path), and what the index recorded of each variable's objects in ``version``
    of the file."""
    plan = unpack(stored, read)
    variables, recorded = {}, {}
    for name, v in plan["variables"].items():
        refs, prints = v.pop("refs"), v.pop("prints")
        if refs.shape != (len(prints), 2):
            raise ValueError(f"variable {name!r}: {len(refs)} fields, {len(prints)} fingerprints")
        variables[name] = VariablePlan(**{**v, "refs": tuple(zip(refs[:, 0].tolist(), refs[:, 1].tolist())),
                                          "encoding": {**v["encoding"], "source": source}})
        recorded[name] = Recorded(source, prints, version)
    return HypercubePlan(variables, plan["coord_names"], plan["index_coords"], plan["attrs"]), recorded

