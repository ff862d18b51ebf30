"""``ds.tgm``: the Dataset accessor, registered by ``import tgm_xarray``.

Registering takes xarray, most of the time ``import tgm_xarray`` would take (0.4 of 0.5 s), and
the command line mostly needs none of it (``tgm-xarray --version``, ``info``, ``cache list``).
So where xarray is not imported yet, the accessor is registered right after it is: a finder
first on ``sys.meta_path`` hands xarray's own loader a step to run after it (the import system
has no hook for "after a module is imported"). The writer itself loads on first use.

>>> import tgm_xarray, xarray as xr, tempfile, os
>>> xr.Dataset({"a": ("x", [1, 2, 3])}).tgm.to_file(os.path.join(tempfile.mkdtemp(), "a.tgm"))
"""

from __future__ import annotations

import importlib.abc
import importlib.util
import os
import sys
import threading
from collections.abc import Sequence
from importlib.machinery import ModuleSpec
from types import ModuleType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import xarray as xr


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


def register() -> None:
    """Registers ``ds.tgm`` now if xarray is imported, else as soon as it is."""
    if "xarray" in sys.modules:
        _register()
    else:
        sys.meta_path.insert(0, _AfterXarray())


def _register() -> None:
    import xarray as xr

    xr.register_dataset_accessor("tgm")(TgmAccessor)


class _AfterXarray(importlib.abc.MetaPathFinder):
    """Finds xarray through the other finders, once, and has the accessor registered after its
    loader has run. It stays on ``sys.meta_path`` afterwards, answering nothing: removing it
    could make an import running in another thread skip the finder after it."""

    def __init__(self) -> None:
        self._armed = True
        self._lock = threading.Lock()

    def find_spec(self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
                  ) -> ModuleSpec | None:
        if fullname != "xarray":
            return None
        with self._lock:
            if not self._armed:
                return None
            self._armed = False  # before the search: it asks this finder too
        spec = importlib.util.find_spec(fullname)
        if spec is not None and spec.loader is not None and hasattr(spec.loader, "exec_module"):
            spec.loader = _ThenRegister(spec.loader)
        return spec


class _ThenRegister(importlib.abc.Loader):
    """xarray's loader, then the registration."""

    def __init__(self, loader: importlib.abc.Loader):
        self.loader = loader

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        # xarray knows itself by its own loader (resources, reloads), not this one
        module.__loader__ = self.loader
        if module.__spec__ is not None:
            module.__spec__.loader = self.loader
        self.loader.exec_module(module)
        _register()
