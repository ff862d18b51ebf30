"""Which objects are planned (``tgm_xarray.hypercube.objects``): ``filter_by_keys``,
``message_index`` and ``merge_objects``, and classifying many objects of one message.

Files are read with upstream ``tensogram`` (metadata only, through ``decode_descriptors``) and
written with ``tensogram.encode``; ``_materialize`` decodes the planned fields with upstream too,
so every test that checks values also proves xarray accepts the layout.
"""

from __future__ import annotations

import pytest

tensogram = pytest.importorskip("tensogram")

from tests.helpers.hypercube import (  # noqa: E402
    IFS,
    _assert_plan_consistent,
    _plan,
    needs,
)
from tgm_xarray.errors import (  # noqa: E402
    TgmIndexError,
)
from tgm_xarray.hypercube import (  # noqa: E402  # noqa: E402
    objects,
)


@needs
@pytest.mark.parametrize(("filter_by_keys", "expected"), [
    ({"levtype": "pl"}, ["q", "t"]),
    ({"mars.levtype": "sfc"}, ["2t", "lsm"]),
    ({"param": ["2t", "t"]}, ["2t", "t"]),
    ({"levelist": "600"}, ["t"]),
    ({"mars.levelist": 150, "name": "q"}, ["q"]),
    ({"levtype": "ml"}, []),
    ({"levtype": "pl", "mars.param": "lsm"}, []),
])
def test_ifs_filter_by_keys(filter_by_keys, expected):
    plan = _plan(IFS, filter_by_keys=filter_by_keys)
    _assert_plan_consistent(plan)
    assert [n for n in plan.variables if n not in plan.coord_names] == expected
    assert plan.coord_names == ({"latitude", "longitude"} if expected else set())


@needs
def test_message_index_and_merge_objects():
    plan = _plan(IFS, message_index=2)
    assert [n for n in plan.variables if n not in plan.coord_names] == ["q"]
    assert plan.index_coords["isobaricInhPa"][0] == ()
    assert plan.variables["q"].dims == ("latitude", "longitude")
    plan = _plan(IFS, merge_objects=False)  # upstream's default: message 0 only
    assert [n for n in plan.variables if n not in plan.coord_names] == ["2t"]
    with pytest.raises(TgmIndexError, match=r"message_index 4 is out of range \(the file has 4"):
        _plan(IFS, message_index=4)
    with pytest.raises(IndexError):
        _plan(IFS, message_index=-1)


def test_filter_plain_key_matches_mars_namespace_and_values_loosely():
    keys = {"mars.levtype": "pl", "mars.levelist": 500, "levtype": "x", "name": "t"}
    assert objects._matches(keys, {"levtype": "pl"})
    assert objects._matches(keys, {"levtype": "x"})
    assert objects._matches(keys, {"mars.levelist": "500"})
    assert objects._matches(keys, {"levelist": [850, 500]})
    assert not objects._matches(keys, {"mars.levtype": "x"})
    assert not objects._matches(keys, {"number": 1})
    assert objects._matches(keys, None) and objects._matches(keys, {})


def test_classify_many_objects_of_one_message():
    """One message of 30,000 objects: classified in one pass over them (a pass over the others
    per object took 10^9 steps)."""
    n = 30_000
    names = [f"v{i}" for i in range(n)] + ["lat", "x"]
    shapes = [(7,)] * n + [(7,), (9,)]
    hints = [None] * (n + 2)
    found = objects._classify(names, shapes, hints)
    assert found[-2:] == ["latitude", None]  # `x` has no axis of its size to label
    assert found[:n] == [None] * n
