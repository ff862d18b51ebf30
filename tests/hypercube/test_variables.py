"""Data objects into variables (``tgm_xarray.hypercube.variables``): names, and the structure
every field of a variable must share.

Files are read with upstream ``tensogram`` (metadata only, through ``decode_descriptors``) and
written with ``tensogram.encode``; ``_materialize`` decodes the planned fields with upstream too,
so every test that checks values also proves xarray accepts the layout.
"""

from __future__ import annotations

import numpy as np
import pytest

tensogram = pytest.importorskip("tensogram")

from tests.helpers.hypercube import (  # noqa: E402
    _desc,
    _field,
    _groups,
    _message,
    _plan,
    _write,
)
from tgm_xarray.errors import (  # noqa: E402
    TgmConflictError,
    TgmError,
)
from tgm_xarray.hypercube import (  # noqa: E402  # noqa: E402
    MetadataTable,
    build_hypercube,
    variables,
)

# --------------------------------------------------------------------------------------------
# (4) Conflicts, duplicates and filters
# --------------------------------------------------------------------------------------------


def test_conflicting_shapes_raise_with_advice(tmp_path):
    path = _write(tmp_path / "shapes.tgm", [
        _message(({"name": "t", "mars": {"grid": "1/1"}}, _field(shape=(3, 4)))),
        _message(({"name": "t", "mars": {"grid": "2/2"}}, _field(shape=(2, 2)))),
    ])
    with pytest.raises(TgmConflictError) as info:
        _plan(path)
    text = str(info.value)
    assert str(path) in text and "'t'" in text
    assert "message 0 object 0" in text and "message 1 object 0" in text
    assert "filter_by_keys={'mars.grid': '1/1'}" in text and "open_datatree" in text
    assert isinstance(info.value, TgmError) and isinstance(info.value, ValueError)
    groups = _groups(path)
    assert list(groups) == ["3x4", "2x2"]


@pytest.mark.parametrize(("second", "detail"), [
    (({"name": "t"}, _field(dtype="int32")), "dtype kind"),
    (({"name": "t", "dim_names": ["y", "x"]}, _field()), "dimension names"),
    (({"name": "t", "mars": {"levtype": "ml", "levelist": 1}}, _field()), "level type"),
    (({"name": "t", "mars": {"levtype": "pl", "levelist": 1, "number": 1}}, _field()),
     "dimensions"),
])
def test_structural_conflicts(tmp_path, second, detail):
    first = ({"name": "t", "mars": {"levtype": "pl", "levelist": 500}}, _field())
    if detail in ("dtype kind", "dimension names"):
        first = ({"name": "t"}, _field())
    path = _write(tmp_path / "conflict.tgm", [_message(first), _message(second)])
    with pytest.raises(TgmConflictError, match=detail):
        _plan(path)
    groups = _groups(path)  # ...but the file still opens as groups
    assert len(groups) == 2
    assert all(list(g.variables) == ["t"] for g in groups.values())


def test_name_clash_with_a_coordinate(tmp_path):
    path = _write(tmp_path / "clash.tgm", [
        _message(({"name": "t", "mars": {"number": n}}, _field()),
                 ({"name": "number", "mars": {"number": n}}, _field())) for n in (1, 2)])
    with pytest.raises(TgmConflictError, match="the name 'number' is used"):
        _plan(path)


def test_variable_name_chain():
    def name(keys, variable_key):
        return variables.variable_name(keys, 3, variable_key)

    assert name({"name": "a", "mars.param": "b"}, None) == "a"
    assert name({"mars.param": "b", "param": 7}, None) == "b"
    assert name({"shortName": "s", "param": 7}, None) == "s"
    assert name({"param": 167}, None) == "167"
    assert name({"name": "a", "grib.paramId": 167}, "grib.paramId") == "167"
    assert name({"name": "a"}, "missing") == "a"
    assert name({}, None) == "object_3"


@pytest.mark.parametrize("meta", [{"name": "v"}, {"name": "lat", "dim_names": ["lat"]}],
                         ids=["data", "coordinate"])
def test_shape_past_what_numpy_holds_is_a_format_error(meta):
    """A declared shape of more bytes than any array holds: a TgmFormatError at open naming the
    file, the message and the object (numpy's bare ValueError came at the first read)."""
    shape = [2**32 - 1] * 3 if meta["name"] == "v" else [2**63 // 4]
    # No encoder writes such a shape: the message holds one of ones, whose CBOR in the
    # descriptor (the last copy, after `_reserved_`'s in the metadata) the huge one replaces in
    # place, a descriptor parameter `pad` giving up the bytes it takes more.
    ones = np.zeros([1] * len(shape))
    message = tensogram.encode({"base": [meta]}, [({**_desc(ones), "pad": "x" * 20}, ones)], hash=None)

    def cbor_shape(dims):
        return bytes([0x80 + len(dims)]) + b"".join(
            bytes([n]) if n < 24 else bytes([0x1a]) + n.to_bytes(4, "big") if n < 2**32
            else bytes([0x1b]) + n.to_bytes(8, "big") for n in dims)

    grown = len(cbor_shape(shape)) - len(cbor_shape([1] * len(shape)))
    for old, new in ((b"eshape" + cbor_shape([1] * len(shape)), b"eshape" + cbor_shape(shape)),
                     (b"cpadt" + b"x" * 20, b"cpad" + bytes([0x60 + 20 - grown]) + b"x" * (20 - grown))):
        at = message.rfind(old)
        message = message[:at] + new + message[at + len(old):]
    table = MetadataTable.of_bytes(message)
    assert list(table.shapes[0]) == shape
    with pytest.raises(TgmError, match=r"huge\.tgm: .*message 0 object 0\) has shape") as err:
        build_hypercube(table, source="huge.tgm", fingerprint=lambda m, o: 0)
    assert type(err.value).__name__ == "TgmFormatError"
