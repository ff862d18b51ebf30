"""tgm_xarray.selection: the outer-key normaliser, against numpy and through the core."""

from __future__ import annotations

import numpy as np
import pytest

from tests.helpers.selections import describe_key, outer_index, random_outer_key
from tgm_xarray import _core
from tgm_xarray.errors import TgmIndexError
from tgm_xarray.selection import outer


def test_random_keys_match_numpy_through_the_core():
    """Each normalised key read by the core gives what numpy's outer indexing gives."""
    rng = np.random.default_rng(19)
    for shape in [(7,), (5, 6), (3, 4, 5), (1, 9, 2)]:
        values = rng.random(shape)
        message = _core.encode_message({"base": [{}]}, [(
            {"type": "ntensor", "shape": list(shape), "dtype": "float64", "byte_order": "little",
             "encoding": "none", "filter": "none", "compression": "none"}, values)])
        for _ in range(200):
            key = random_outer_key(rng, shape)
            found = outer(key, shape)
            out = np.empty(found.decoded_shape)
            _core.decode_message_into(message, 0, found.core, out)
            expected = outer_index(values, key)
            assert out.reshape(found.result_shape).shape == expected.shape, describe_key(key)
            np.testing.assert_array_equal(out.reshape(found.result_shape), expected, describe_key(key))


def test_forms():
    s = outer((slice(None), -1), (3, 4))
    assert s.items == (slice(0, 3, 1), slice(3, 4, 1))
    assert s.core == s.items and s.decoded_shape == (3, 1) and s.result_shape == (3,)
    assert outer((), (3, 4)).core is None  # the whole object
    assert outer((0,), (1, 4)).core is None
    assert outer(slice(0, 2), (3,)).core == (slice(0, 2, 1),)
    assert outer(slice(5, 1), (3,)).items == (slice(0, 0, 1),)  # empty
    np.testing.assert_array_equal(outer(((0, 2),), (3,)).items[0], [0, 2])  # a tuple item is a list
    assert outer(([],), (3,)).items[0].dtype == np.int64
    reversed_ = outer(slice(None, None, -2), (5,))
    np.testing.assert_array_equal(reversed_.items[0], [4, 2, 0])
    mask = outer(np.array([True, False, True]), (3,))
    np.testing.assert_array_equal(mask.items[0], [0, 2])


@pytest.mark.parametrize("key", [
    (5,), (-6,), (np.array([0, 5]),), (0, 0), (np.array([True]),), (np.array([0.5]),), ("a",),
    (..., 0, ...),
])
def test_bad_keys_are_refused_as_numpy_refuses_them(key):
    with pytest.raises(IndexError):
        np.arange(5)[key]
    with pytest.raises(TgmIndexError, match="axis 0|indices|ellipsis"):
        outer(key, (5,))


def test_an_index_array_of_two_dimensions_has_no_outer_meaning():
    with pytest.raises(TgmIndexError, match="axis 0"):
        outer((np.array([[0]]),), (5,))
