"""What is installed beside tgm-xarray, as the package's messages need it: the command that
installs an optional dependency, and whether another package registers xarray's engine name.

Below every module that raises for a missing dependency (the byte layer's remote reads, the
exports, the tutorial, the CLI); :mod:`tgm_xarray.versions` reports the installation.
"""

from __future__ import annotations

import shlex
import warnings
from importlib.metadata import entry_points

#: The engine name upstream's ``tensogram-xarray`` registers too, and the one only we do.
SHARED_ENGINE, OWN_ENGINE = "tensogram", "tgm"


class EngineNameWarning(RuntimeWarning):
    """Another installed package registers xarray's engine name ``"tensogram"`` too."""


def install_hint(*requirements: str) -> str:
    """The command that installs an optional dependency, naming the real packages: tgm-xarray
    itself is installed from a clone (README.md, "Installing") and no package index has it, so
    its extras install only from the clone, where ``pip install tqdm`` works anywhere.

    >>> install_hint("fsspec>=2024.6", "aiohttp")
    "pip install 'fsspec>=2024.6' aiohttp"
    """
    return "pip install " + " ".join(map(shlex.quote, requirements))


def other_providers(engine: str = SHARED_ENGINE) -> list[str]:
    """The installed packages other than this one that register xarray's engine ``engine``, as
    ``"distribution (module)"``."""
    return sorted(f"{ep.dist.name if ep.dist else '?'} ({ep.module})"
                  for ep in entry_points(group="xarray.backends", name=engine)
                  if ep.module.partition(".")[0] != "tgm_xarray")


def warn_if_engine_name_shared() -> None:
    """Warn when another package (upstream's ``tensogram-xarray``) registers ``engine=
    "tensogram"`` too: xarray then picks one of the two at random in each process."""
    others = other_providers()
    if others:
        warnings.warn(
            f'tgm-xarray (tgm_xarray.backend) and {", ".join(others)} both register xarray\'s '
            f'engine="{SHARED_ENGINE}", and xarray picks one of them at random in each process. '
            f'Pass engine="{OWN_ENGINE}" to open files with tgm-xarray (or uninstall the other).',
            EngineNameWarning, stacklevel=2)
