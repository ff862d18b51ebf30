"""``tgm-xarray index``: the sidecar index of each file (:mod:`tgm_xarray.plans.index`) built
ahead of the first open."""

from __future__ import annotations

import argparse
import os

from tgm_xarray.cli.parser import add_progress_options, add_storage_options
from tgm_xarray.cli.report import writer_progress
from tgm_xarray.errors import TgmConflictError
from tgm_xarray.source.remote import is_url


def add_parser(commands: argparse._SubParsersAction) -> None:
    index = commands.add_parser(
        "index", help="build the index of .tgm files, so that opening them reads one small file",
        description="Scan every PATH once and store its metadata and the Dataset's plan in an "
                    "index (docs/archives.md): in the user cache directory, or beside the file "
                    "with --beside. A fresh index is left as it is.")
    index.add_argument("paths", nargs="+", metavar="PATH", help=".tgm path or URL (https://, s3://)")
    index.add_argument("--beside", action="store_true",
                       help="write PATH.tgmidx next to each local PATH (default: the cache directory)")
    add_storage_options(index)
    add_progress_options(index)
    index.set_defaults(run=run, parser=index)


def run(args: argparse.Namespace) -> int:
    from tgm_xarray.hypercube import PlanOptions
    from tgm_xarray.plans import index, planned

    paths = [p if is_url(p) else os.path.abspath(os.path.expanduser(p)) for p in args.paths]
    if args.beside and any(is_url(p) for p in paths):
        raise ValueError("--beside writes next to local files only: index URLs into the cache, "
                         "or run the command where the files are")
    progress = writer_progress(args.progress)
    bar = None
    if progress is not False:
        from tqdm.auto import tqdm

        bar = tqdm(total=len(paths), unit="file", desc="indexing", disable=None if progress is None else False)
    try:
        for path in paths:
            mode = "beside" if args.beside else "auto"
            # The plan open_dataset's defaults give, or, for a file that needs groups,
            # open_datatree's: the table alone serves any other keywords.
            try:
                planned(path, args.storage_options, mode, PlanOptions(), groups=False, identify=True, must_write=True)
            except TgmConflictError:
                planned(path, args.storage_options, mode, PlanOptions(), groups=True, identify=True, must_write=True)
            where = index.written_at(path, args.beside)
            print(f"{path}: indexed in {where}")
            if bar is not None:
                bar.update(1)
    finally:
        if bar is not None:
            bar.close()
    return 0
