"""Dimensions from other metadata keys (``tgm_xarray.hypercube.extra``).

Files are read with upstream ``tensogram`` (metadata only, through ``decode_descriptors``) and
written with ``tensogram.encode``; ``_materialize`` decodes the planned fields with upstream too,
so every test that checks values also proves xarray accepts the layout.
"""

from __future__ import annotations

import itertools

import numpy as np
import pytest

tensogram = pytest.importorskip("tensogram")

from tests.helpers.hypercube import (  # noqa: E402
    CODECS,
    _assert_plan_consistent,
    _desc,
    _field,
    _message,
    _plan,
    _write,
)
from tests.helpers.shared import require_shared  # noqa: E402
from tgm_xarray.errors import (  # noqa: E402
    TgmConflictError,
    TgmDuplicateError,
)
from tgm_xarray.hypercube import (  # noqa: E402  # noqa: E402
    MetadataTable,
    build_hypercube,
    extra,
)

# --------------------------------------------------------------------------------------------
# Extra dimensions from generic metadata keys
# --------------------------------------------------------------------------------------------


def test_codec_file_stacks_along_codec_only():
    plan = _plan(require_shared(CODECS))
    _assert_plan_consistent(plan)
    var = plan.variables["2t"]
    # `input_dtype` follows from `codec`: stacking on both would leave half the grid empty
    assert var.dims == ("codec", "latitude", "longitude") and var.shape == (13, 721, 1440)
    assert (var.fields >= 0).all()
    assert var.dtype == np.float64  # float32 and float64 fields
    assert "codec" not in var.attrs and "input_dtype" not in var.attrs
    assert "tensogram_compression" not in var.encoding
    codecs = plan.index_coords["codec"][1].tolist()
    assert codecs == sorted(codecs) and "zstd" in codecs
    assert var.refs[codecs.index("none")] == (0, 0)


def test_extra_dims_prefer_the_full_factorisation(tmp_path):
    messages = []
    for n, (expid, member) in enumerate(itertools.product(["a", "b"], [1, 2, 3])):
        meta = {"name": "t", "expid": expid, "member": member, "source_file": f"f{n}.grib",
                "mars": {"step": 0}}
        messages.append(_message((meta, _field(n))))
    path = _write(tmp_path / "factor.tgm", messages)
    plan = _plan(path)
    assert plan.variables["t"].dims == ("expid", "member", "dim_0", "dim_1")
    assert plan.variables["t"].fields.tolist() == [[0, 1, 2], [3, 4, 5]]
    assert "source_file" not in plan.variables["t"].attrs
    assert plan.index_coords["member"][1].dtype == np.int64


def test_keys_following_mars_dims_do_not_become_dims(tmp_path):
    messages = [_message(({"name": "t", "grib": {"level": level},
                           "mars": {"levtype": "pl", "levelist": level}}, _field()))
                for level in (500, 850)]
    plan = _plan(_write(tmp_path / "dep.tgm", messages))
    assert plan.variables["t"].dims == ("isobaricInhPa", "dim_0", "dim_1")
    assert "GRIB_level" not in plan.variables["t"].attrs and "grib.level" not in plan.variables["t"].attrs


def test_keys_that_cannot_label_a_dimension(tmp_path):
    """A list-valued or partly missing key cannot be a dimension: the fields are duplicates."""
    path = _write(tmp_path / "nolabel.tgm", [
        _message(({"name": "t", "tags": ["a"]}, _field())),
        _message(({"name": "t", "tags": ["b"], "note": "x"}, _field())),
    ])
    with pytest.raises(TgmDuplicateError):
        _plan(path)


def test_greedy_extra_dims_with_many_candidate_keys():
    """Past the exhaustive search limit the greedy pick still finds the one separating key."""
    n = extra._MAX_EXHAUSTIVE_KEYS + 2
    data = b"".join(tensogram.encode(
        {"base": [{"name": "v", "id": i, **{f"flag{j:02d}": int(i == j) for j in range(n - 1)}}]},
        [(_desc(np.zeros(2, "float32")), np.zeros(2, "float32"))]) for i in range(n))
    plan = build_hypercube(MetadataTable.of_bytes(data), source="mem", fingerprint=lambda m, o: 0)
    assert plan.variables["v"].dims == ("id", "dim_0")
    # the flags follow from `id`: they are neither dims nor attributes
    assert plan.variables["v"].attrs == {}


def test_generic_key_colliding_with_a_mars_coordinate(tmp_path):
    path = _write(tmp_path / "time.tgm", [
        _message(({"name": "a", "mars": {"date": d}}, _field())) for d in ("20260101", "20260102")
    ] + [_message(({"name": "b", "time": t}, _field())) for t in (1, 2)])
    with pytest.raises(TgmConflictError, match="metadata key 'time'"):
        _plan(path)
