"""``tgm-xarray dump``: every message's metadata and descriptors, as JSON."""

from __future__ import annotations

import argparse
import json
import sys

from tgm_xarray.attrs import jsonable
from tgm_xarray.cli.parser import add_storage_options
from tgm_xarray.source import open_file


def add_parser(commands: argparse._SubParsersAction) -> None:
    dump = commands.add_parser("dump", help="print the metadata and descriptors as JSON")
    dump.add_argument("file", help=".tgm path or URL (https://, s3://)")
    dump.add_argument("--message", type=int, help="only this message")
    add_storage_options(dump)
    dump.set_defaults(run=run, parser=dump)


def run(args: argparse.Namespace) -> int:
    handle = open_file(args.file, args.storage_options).handle
    messages = range(len(handle)) if args.message is None else [args.message]
    entries = []
    for msg in messages:
        if not 0 <= msg < len(handle):
            raise ValueError(f"--message {msg}: the file has {len(handle)} messages")
        offset, length = handle.message_span(msg)
        entries.append({"message": msg, "offset": offset, "length": length,
                        "metadata": handle.metadata(msg), "descriptors": handle.descriptors(msg)})
    json.dump(jsonable(entries, strict=True), sys.stdout, indent=2)
    print()
    return 0
