"""The metadata table is the core's (``_core.Table``): ``MetadataTable`` views its columns, and
an index keeps it in the core's stored form, checked when read back."""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from tests.helpers.shared import REAL, require_shared
from tgm_xarray import _core
from tgm_xarray.errors import TgmFormatError
from tgm_xarray.table import Column, KeyColumns, MetadataTable


@pytest.fixture(scope="module")
def ifs_table() -> MetadataTable:
    path = require_shared(REAL / "ifs-0p25-20260404.tgm")
    return MetadataTable(_core.table_of_files([_core.FileHandle(str(path))]))


def _same(a: MetadataTable, b: MetadataTable) -> None:
    assert a.n_messages == b.n_messages and len(a) == len(b)
    for name in a.core.columns:
        x, y = getattr(a, name), getattr(b, name)
        if isinstance(x, KeyColumns):
            assert (x.names, x.flat_values, x.n) == (y.names, y.flat_values, y.n), name
            for part in ("value_starts", "rows", "key", "code"):
                np.testing.assert_array_equal(getattr(x, part), getattr(y, part), err_msg=f"{name}.{part}")
        elif isinstance(x, Column):
            np.testing.assert_array_equal(x.codes, y.codes, err_msg=name)
            assert x.values == y.values, name
        elif isinstance(x, np.ndarray):
            np.testing.assert_array_equal(x, y, err_msg=name)
        else:
            assert x == y, name


def test_a_stored_table_reads_back_column_for_column(ifs_table):
    back = MetadataTable(_core.Table.from_bytes(ifs_table.core.to_bytes()))
    _same(ifs_table, back)
    assert back.own["mars.param"].decoded() == ifs_table.own["mars.param"].decoded()


def test_a_table_pickles_as_its_stored_form(ifs_table):
    _same(ifs_table, pickle.loads(pickle.dumps(ifs_table)))


def test_columns_are_read_only(ifs_table):
    with pytest.raises(ValueError, match="read-only"):
        ifs_table.msg[0] = 5
    with pytest.raises(ValueError, match="read-only"):
        ifs_table.own_dim_names.codes[0] = 5


def test_a_name_that_is_no_column_is_an_attribute_error(ifs_table):
    with pytest.raises(AttributeError, match="no column 'mgs'"):
        _ = ifs_table.mgs


@pytest.mark.parametrize("damage", ["cut", "version", "magic", "body"])
def test_damaged_stored_tables_are_format_errors(ifs_table, damage):
    data = bytearray(ifs_table.core.to_bytes())
    if damage == "cut":
        data = data[:len(data) // 2]
    elif damage == "version":
        data[4] += 1
    elif damage == "magic":
        data[0] ^= 0xFF
    else:
        data[8:] = b"\xa0"  # an empty CBOR map: no table
    with pytest.raises(TgmFormatError, match="stored table"):
        _core.Table.from_bytes(bytes(data))
