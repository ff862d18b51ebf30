"""Where the example scripts find their input: the real ECMWF IFS 0.25-degree sample file.

``ifs-0p25-20260404.tgm`` holds 4 messages (2 m temperature, land-sea mask, specific humidity at
150 hPa, temperature at 600 hPa) on the global 721 x 1440 grid, packed to 24 bits + szip.
ECMWF open data, CC-BY-4.0: "Copyright ECMWF. Contains modified ECMWF open data."

The file is, in order of preference: the script's argument, the ``TGM_XARRAY_EXAMPLE_FILE``
environment variable, or ``tgm_xarray.tutorial.fetch("ifs-0p25-20260404")``. The tutorial has no
public URL for this file: it takes it from its cache directory (``$TGM_XARRAY_DATA_DIR``) or from
``$TGM_XARRAY_TUTORIAL_URL`` (docs/tutorial.md), and otherwise says how to provide it.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

ENV = "TGM_XARRAY_EXAMPLE_FILE"
NAME = "ifs-0p25-20260404"


def example_file(path: str | os.PathLike | None = None) -> Path:
    """``path`` if given, else ``$TGM_XARRAY_EXAMPLE_FILE``, else the tutorial download."""
    if path:
        return Path(path)
    if os.environ.get(ENV):
        return Path(os.environ[ENV])
    from tgm_xarray import tutorial

    return Path(tutorial.fetch(NAME))


def parse_args(doc: str, **extra: dict) -> argparse.Namespace:
    """The scripts' command line: an optional input file, plus ``extra`` options
    (``{"--flag": {argparse keywords}}``). ``args.path`` is resolved by ``example_file``."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("path", nargs="?", default=None,
                        help=f"a .tgm file (default: ${ENV}, else the tutorial's {NAME}.tgm)")
    for flag, options in extra.items():
        parser.add_argument(flag, **options)
    args = parser.parse_args()
    args.path = example_file(args.path)
    return args


@contextlib.contextmanager
def output_dir(out: Path | None, prefix: str) -> Iterator[Path]:
    """``out`` (created if missing, kept), or a temporary directory removed on the way out: the
    scripts leave nothing behind unless asked to with ``--out``."""
    if out is not None:
        out.mkdir(parents=True, exist_ok=True)
        yield out
        return
    with tempfile.TemporaryDirectory(prefix=prefix) as tmp:
        yield Path(tmp)
