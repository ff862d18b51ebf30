"""``tgm-xarray info``: a summary of a ``.tgm`` file (sizes, codecs, the Dataset or groups it
opens as), printed or as JSON."""

from __future__ import annotations

import argparse
import json
import math
from collections import Counter

from tgm_xarray._core import decoded_bytes
from tgm_xarray.attrs import jsonable
from tgm_xarray.cli.parser import add_storage_options
from tgm_xarray.cli.report import plural
from tgm_xarray.errors import TgmCodecError, TgmConflictError
from tgm_xarray.source import open_file


def add_parser(commands: argparse._SubParsersAction) -> None:
    info = commands.add_parser("info", help="summarise a .tgm file: variables, codecs, sizes")
    info.add_argument("file", help=".tgm path or URL (https://, s3://)")
    info.add_argument("--json", action="store_true", help="print the summary as JSON")
    add_storage_options(info)
    info.set_defaults(run=run, parser=info)


def describe(path: str, storage_options: dict | None = None) -> dict:
    """A summary of a ``.tgm`` file or URL: sizes, codecs, and the Dataset(s) it opens as, with
    their attributes. Writes nothing (no index either).

    ``ratio`` is the decoded size of every object over the file size. When the file is not one
    Dataset with ``open_dataset``'s defaults, ``dataset_error`` says why (and which keyword opens
    it), and ``groups`` are what the first of ``open_datatree``, then ``duplicates="first"`` with
    either, gives (``opened_as``).
    """
    handle = open_file(path, storage_options).handle
    size = handle.file_size
    codecs: Counter = Counter()
    decoded: Counter = Counter()
    objects = 0
    for msg in range(len(handle)):
        for d in handle.descriptors(msg):
            label = codec_label(d)
            codecs[label] += 1
            decoded[label] += decoded_bytes(d["dtype"], math.prod(d.get("shape") or ()))
            objects += 1
    total = sum(decoded.values())
    summary = {
        "file": path, "bytes": size, "messages": len(handle), "objects": objects,
        "decoded_bytes": total, "ratio": total / size if size else math.nan,
        "codecs": [{"codec": c, "objects": codecs[c], "decoded_bytes": decoded[c]}
                   for c in sorted(codecs, key=lambda c: -decoded[c])],
    }
    datasets, summary["opened_as"], why = _datasets(path, storage_options)
    try:
        summary["groups"] = {name: _dataset_summary(ds) for name, ds in datasets.items() if ds.variables}
    finally:
        for ds in datasets.values():
            ds.close()
    if why:
        summary["dataset_error"] = why
    return summary


def codec_label(descriptor: dict) -> str:
    """A short name of an object's pipeline, e.g. ``packing16+blosc2(zstd)``.

    >>> codec_label({"encoding": "simple_packing", "filter": "none", "compression": "szip",
    ...              "params": {"sp_bits_per_value": 24}})
    'packing24+szip'
    """
    params = descriptor.get("params") or {}
    parts = []
    if descriptor.get("encoding") == "simple_packing":
        parts.append(f"packing{params.get('sp_bits_per_value', '')}")
    if descriptor.get("filter") not in (None, "none"):
        parts.append(descriptor["filter"])
    compression = descriptor.get("compression")
    if compression not in (None, "none"):
        detail = params.get("blosc2_codec") or params.get("zfp_mode") or params.get("sz3_error_bound_mode")
        parts.append(f"{compression}({detail})" if detail else compression)
    return "+".join(parts) or "none"


def _datasets(path: str, storage_options: dict | None) -> tuple[dict, dict | None, str | None]:
    """The Datasets ``info`` summarises (``"/"``, or the groups of ``open_datatree``), the call
    that opens them (function and keywords), and why the file is not one Dataset with ``open_dataset``'s defaults (None
    when it is). Tried in turn: the Dataset, the groups, each again with ``duplicates="first"``
    (the way out of fields stored twice, as ``convert`` of several copies of a field writes).
    No index is read or written: ``info`` writes nothing."""
    from tgm_xarray.backend import TensogramBackendEntrypoint

    entrypoint = TensogramBackendEntrypoint()
    why = None
    for duplicates in ("error", "first"):
        for call in ("open_dataset", "open_datatree"):
            try:
                if call == "open_dataset":
                    datasets = {"/": entrypoint.open_dataset(
                        path, storage_options=storage_options, index=False, duplicates=duplicates)}
                else:
                    datasets = entrypoint.open_groups_as_dict(
                        path, storage_options=storage_options, index=False, duplicates=duplicates)
            except TgmConflictError as error:
                why = why or str(error)
                continue
            except TgmCodecError as error:  # e.g. a bitmask object: the rest of the summary holds
                return {}, None, str(error)
            keywords = {"engine": "tgm"} if duplicates == "error" else {"engine": "tgm", "duplicates": duplicates}
            return datasets, {"function": f"xr.{call}", "keywords": keywords}, why
    return {}, None, why


def _dataset_summary(ds) -> dict:
    def entry(var):
        return {"dims": list(var.dims), "shape": list(var.shape), "dtype": str(var.dtype),
                "attrs": jsonable(var.attrs, strict=True)}
    return {
        "dims": {str(k): int(v) for k, v in ds.sizes.items()},
        "data_vars": {str(k): entry(v) for k, v in ds.data_vars.items()},
        "coords": {str(k): entry(v) for k, v in ds.coords.items()},
        "attrs": jsonable(ds.attrs, strict=True),
    }


def run(args: argparse.Namespace) -> int:
    summary = describe(args.file, args.storage_options)
    if args.json:
        print(json.dumps(summary, indent=2))
        return 0
    print(f"{summary['file']}: {summary['bytes']:,} bytes, {plural(summary['messages'], 'message')}, "
          f"{plural(summary['objects'], 'object')}")
    print(f"decoded size {summary['decoded_bytes']:,} bytes, compression ratio "
          f"{summary['ratio']:.2f}")
    print("codecs:")
    for c in summary["codecs"]:
        print(f"  {c['codec']:<28} {plural(c['objects'], 'object'):>14} {c['decoded_bytes']:>16,} bytes decoded")
    if "dataset_error" in summary:
        print(f"dataset: none ({summary['dataset_error']})")
        if summary["groups"]:
            opened = summary["opened_as"]
            keywords = "".join(f", {k}={v!r}" for k, v in opened["keywords"].items())
            print(f"as {opened['function']}({summary['file']!r}{keywords}) opens it:")
    for name, group in summary["groups"].items():
        print(f"group {name}:" if name != "/" else "dataset:")
        print("  dimensions: " + ", ".join(f"{k}={v}" for k, v in group["dims"].items()))
        for kind in ("data_vars", "coords"):
            print(f"  {'variables' if kind == 'data_vars' else 'coordinates'}:")
            for var, e in group[kind].items():
                print(f"    {var:<20} ({', '.join(e['dims'])}) {e['dtype']}")
                _print_attrs(e["attrs"], "        ")
        if group["attrs"]:
            print("  attributes:")
            _print_attrs(group["attrs"], "    ")
    return 0


def _print_attrs(attrs: dict, indent: str) -> None:
    """One ``name = value`` line per attribute, values as JSON (``units = "K"``), as ``ncdump -h``."""
    for key, value in attrs.items():
        print(f"{indent}{key} = {json.dumps(value)}")
