"""What netCDF attributes may hold (``tgm_xarray.attrs``)."""

from __future__ import annotations

import numbers


def assert_netcdf_friendly(values: dict) -> None:
    """Strings, numbers (not booleans), or non-empty lists of numbers or of strings (what netCDF
    attributes hold; tests/hypercube checks its plans' attributes with it too)."""
    for key, value in values.items():
        assert isinstance(key, str)
        if isinstance(value, list):
            assert value and (all(isinstance(v, str) for v in value)
                              or all(isinstance(v, numbers.Real) and not isinstance(v, bool)
                                     for v in value)), (key, value)
        else:
            assert isinstance(value, (str, int, float)) and not isinstance(value, bool), (key, value)
