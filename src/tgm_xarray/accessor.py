"""``ds.tgm``: the Dataset accessor, registered by ``import tgm_xarray``.

The writer itself loads on first use, so registering costs no more than importing xarray.

>>> import tgm_xarray, xarray as xr, tempfile, os
>>> xr.Dataset({"a": ("x", [1, 2, 3])}).tgm.to_file(os.path.join(tempfile.mkdtemp(), "a.tgm"))
"""

from __future__ import annotations

import os
from typing import Any

import xarray as xr


@xr.register_dataset_accessor("tgm")
class TgmAccessor:
    """``ds.tgm.to_file(path, ...)``: :func:`tgm_xarray.to_tgm` as a Dataset method."""

    def __init__(self, ds: xr.Dataset):
        self._ds = ds

    def to_file(self, path: str | os.PathLike, **kwargs: Any) -> Any:
        """Write the Dataset to ``path``; keywords as :func:`tgm_xarray.to_tgm` (``mode``,
        ``encoding``, ``layout``, ...). Returns what ``to_tgm`` returns: ``None``, or a
        ``dask.delayed`` write with ``compute=False``."""
        from tgm_xarray.writer import to_tgm

        return to_tgm(self._ds, path, **kwargs)
