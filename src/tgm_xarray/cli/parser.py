"""The command line's parser: argparse's, naming the option a mistyped one was meant to be, the
options several commands share, and the usage errors a command finds after parsing. Each
command's module adds its own parser (``add_parser``) with ``run`` and ``parser`` as defaults."""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from tgm_xarray.vocabulary import close_matches, did_you_mean


class UsageError(ValueError):
    """A command line whose options cannot work (a value out of range, a name no input has):
    reported as argparse reports its own errors, after the command's usage, with status 2."""


class Parser(argparse.ArgumentParser):
    """argparse's parser, naming the option a mistyped one was meant to be (argparse only
    suggests subcommands and choices, and only from Python 3.14, with ``suggest_on_error``).
    Each command's parser is its ``args.parser``, which reports the command's usage errors."""

    def parse_args(self, args: Sequence[str] | None = None, namespace: Any = None) -> Any:  # type: ignore[override]
        namespace, unknown = self.parse_known_args(args, namespace)
        if unknown:
            command = getattr(namespace, "parser", self)
            # argparse keeps no public list of a parser's flags
            flags = list(command._option_string_actions)
            hints = "".join(did_you_mean(close_matches(arg.partition("=")[0], flags, n=1), spell=str)
                            for arg in unknown if arg.startswith("-"))
            command.error(f"unrecognized arguments: {' '.join(unknown)}{hints}")
        return namespace


def build_parser(add_parsers: Iterable[Callable[[argparse._SubParsersAction], None]]) -> Parser:
    """The parser of ``tgm-xarray``, with the subcommands each of ``add_parsers`` adds, listed by
    ``--help`` in their order."""
    from tgm_xarray import __version__
    from tgm_xarray._core import TENSOGRAM_VERSION

    parser = Parser(
        prog="tgm-xarray", description="Convert GRIB, NetCDF and Zarr files to .tgm, and inspect "
                                       ".tgm files.", epilog="docs/cli.md describes every option.")
    parser.add_argument("--version", action="version",
                        version=f"tgm-xarray {__version__} (tensogram crate {TENSOGRAM_VERSION})")
    parser.add_argument("--traceback", action="store_true",
                        help="on an error, print the full traceback too (for bug reports)")
    commands = parser.add_subparsers(required=True, metavar="COMMAND")
    for add_parser in add_parsers:
        add_parser(commands)
    return parser


def add_storage_options(command: argparse.ArgumentParser) -> None:
    command.add_argument("--storage-options", type=json_object, metavar="JSON",
                         help="options of the remote store for s3:// and https:// paths, as a "
                              "JSON object, e.g. '{\"anon\": true}' (docs/remote.md)")


def json_object(text: str) -> dict:
    """``--storage-options``: a JSON object.

    >>> json_object('{"anon": true}')
    {'anon': True}
    >>> json_object('anon')
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: expected a JSON object, e.g. '{"anon": true}' (Expecting value: line 1 column 1 (char 0))
    """
    try:
        value = json.loads(text)
    except ValueError as error:
        raise argparse.ArgumentTypeError(f"expected a JSON object, e.g. '{{\"anon\": true}}' ({error})") from None
    if not isinstance(value, dict):
        raise argparse.ArgumentTypeError(f"expected a JSON object, e.g. '{{\"anon\": true}}'; got {text!r}")
    return value


def add_progress_options(command: argparse.ArgumentParser) -> None:
    """``--progress`` / ``--no-progress`` (default: a bar only when stderr is a terminal)."""
    progress = command.add_mutually_exclusive_group()
    progress.add_argument("--progress", dest="progress", action="store_const", const=True,
                          help="always show a progress bar")
    progress.add_argument("--no-progress", dest="progress", action="store_const", const=False,
                          help="never show one (default: only when stderr is a terminal)")
    command.set_defaults(progress=None)
