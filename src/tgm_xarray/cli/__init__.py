"""The ``tgm-xarray`` command: convert GRIB, NetCDF and Zarr to ``.tgm``, and inspect ``.tgm`` files.

::

    tgm-xarray convert 2t.grib2 lsm.grib2 forecast.tgm --bits 16
    tgm-xarray convert era5.nc era5.tgm --variables t2m,msl --chunks time=1
    tgm-xarray info forecast.tgm
    tgm-xarray dump https://example.org/forecast.tgm --message 0
    tgm-xarray index archive/*.tgm --beside
    tgm-xarray verify archive/*.tgm --require-hash
    tgm-xarray cache prune --max-mb 64

``docs/cli.md`` describes every option. The command never destroys an input: ``convert`` writes
files, never under a GRIB or HDF5 name, and refuses to replace an input or any existing OUTPUT
unless given ``--force``. Every failure is one line on stderr (``--traceback`` shows the full one).

A module per command (:mod:`.convert`, :mod:`.info`, :mod:`.dump`, :mod:`.index`,
:mod:`.verify`, :mod:`.cache`) adds its parser and runs it; :mod:`.parser` holds what they
share of argparse, :mod:`.report` how they word what they print, and :mod:`.inputs` and
:mod:`.outputs` what ``convert`` reads and may write. Nothing imports xarray before a command
needs it: ``tgm-xarray --version`` stays quick.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
import warnings
from collections.abc import Sequence

from tgm_xarray.cli import cache, convert, dump, index, info, verify
from tgm_xarray.cli.parser import UsageError, build_parser
from tgm_xarray.cli.report import error_line
from tgm_xarray.installation import EngineNameWarning

#: The commands, in the order ``--help`` lists them.
COMMANDS = (convert, info, dump, index, verify, cache)


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 on success, 1 on error, 2 on misuse)."""
    args = build_parser([c.add_parser for c in COMMANDS]).parse_args(argv)
    try:
        with warnings.catch_warnings():  # the caller's warning settings are restored after
            warnings.showwarning = _show_warning
            # .tgm files are opened with this package's engine class, never by engine name:
            # which package xarray maps "tensogram" to is no concern of the command's users.
            warnings.filterwarnings("ignore", category=EngineNameWarning)
            warnings.filterwarnings("ignore", message="Found .* entrypoints for the engine name",
                                    category=RuntimeWarning)
            return args.run(args)
    except UsageError as error:
        command: argparse.ArgumentParser = args.parser
        command.error(str(error))  # exits with status 2
    except KeyboardInterrupt:
        print("tgm-xarray: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # `tgm-xarray dump f.tgm | head`: stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 1
    except Exception as error:  # a user sees one line; --traceback is for bug reports
        if args.traceback:
            traceback.print_exc()
        print(f"tgm-xarray: error: {error_line(error)}", file=sys.stderr)
        return 1


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"tgm-xarray: warning: {' '.join(str(message).split())}", file=sys.stderr)
