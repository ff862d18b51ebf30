"""tgm_xarray.selection: the outer-key normaliser, against numpy and through the core."""

from __future__ import annotations

import numpy as np
import pytest

from conftest import describe_key, outer_index, random_outer_key
from tgm_xarray import _core
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
    assert s.core == ((0, 3, 1), (3, 4, 1)) and s.decoded_shape == (3, 1) and s.result_shape == (3,)
    assert outer((), (3, 4)).core is None  # the whole object
    assert outer((0,), (1, 4)).core is None
    assert outer(slice(0, 2), (3,)).core == ((0, 2, 1),)
    reversed_ = outer(slice(None, None, -2), (5,))
    np.testing.assert_array_equal(reversed_.items[0], [4, 2, 0])
    mask = outer(np.array([True, False, True]), (3,))
    np.testing.assert_array_equal(mask.items[0], [0, 2])


@pytest.mark.parametrize("key, error", [
    ((5,), IndexError), ((-6,), IndexError), ((np.array([0, 5]),), IndexError),
    ((0, 0), IndexError), ((np.array([[0]]),), IndexError), ((np.array([True]),), IndexError),
    ((np.array([0.5]),), TypeError), (("a",), TypeError),
])
def test_bad_keys(key, error):
    with pytest.raises(error):
        outer(key, (5,))
