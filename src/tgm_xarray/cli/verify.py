"""``tgm-xarray verify``: every object of every file decoded and checked against its stored
hash, one line per problem."""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from dataclasses import dataclass

from tgm_xarray._core import numpy_dtype
from tgm_xarray.cli.parser import add_storage_options
from tgm_xarray.cli.report import error_line, plural
from tgm_xarray.errors import TgmCodecError
from tgm_xarray.source import open_file
from tgm_xarray.source.handles import absolute


def add_parser(commands: argparse._SubParsersAction) -> None:
    verify = commands.add_parser(
        "verify", help="check that .tgm files are intact: every message parses, every object "
                       "decodes and matches its stored xxh3 hash",
        description="Read every object of every FILE whole, one at a time, checking each stored "
                    "xxh3 hash. Prints one line per problem and a summary; exits 0 when every "
                    "input is intact, 1 otherwise. Writes nothing.")
    verify.add_argument("paths", nargs="+", metavar="FILE", help=".tgm path or URL (https://, s3://)")
    verify.add_argument("--require-hash", action="store_true",
                        help="an object written without a hash is a problem too (default: such "
                             "objects are only decoded)")
    add_storage_options(verify)
    verify.set_defaults(run=run, parser=verify)


@dataclass
class Checked:
    """What ``verify`` went through: messages, objects and the problems found."""

    messages: int = 0
    objects: int = 0
    problems: int = 0

    def summary(self) -> str:
        """
        >>> Checked(1, 3, 0).summary()
        '1 message, 3 objects checked, 0 problems'
        """
        return (f"{plural(self.messages, 'message')}, {plural(self.objects, 'object')} checked, "
                f"{plural(self.problems, 'problem')}")


def run(args: argparse.Namespace) -> int:
    checked = Checked()
    for path in args.paths:
        for problem in verify_file(path, checked, require_hash=args.require_hash,
                                   storage_options=args.storage_options):
            checked.problems += 1
            print(problem, flush=True)
    print(checked.summary())
    return 1 if checked.problems else 0


def verify_file(path: str, checked: Checked, *, require_hash: bool = False,
                storage_options: dict | None = None) -> Iterator[str]:
    """The problems of one file or URL, one line each (``PATH: message M, object O: what``),
    counting in ``checked`` the messages and objects gone through.

    Each object's stored hash is checked against its bytes, whatever its dtype (with
    ``require_hash``, an object without a hash is a problem, ``UNHASHED``); then the object is
    decoded whole where it has an array form (not bitmasks, nor bfloat16 without ml_dtypes) and
    dropped before the next, so memory stays at one decoded object.
    A file that does not open (truncated, not a Tensogram file, missing) is one problem.
    """
    try:
        f = open_file(path, storage_options)
    except Exception as error:  # every reason is the file's problem, reported like the others
        yield f"{path}: cannot be opened: {_reason(error, path)}"
        return
    with f:
        for msg in range(len(f)):
            checked.messages += 1
            try:
                f.metadata(msg)
                count = len(f.descriptors(msg))
            except Exception as error:
                yield f"{path}: message {msg}: {_reason(error, path, f'message {msg}')}"
                continue
            for obj in range(count):
                checked.objects += 1
                where = f"message {msg}, object {obj}"
                try:
                    if not f.check_hash(msg, obj) and require_hash:
                        yield f"{path}: {where}: {UNHASHED}"
                        continue
                    if _has_array_form(f.descriptors(msg)[obj]["dtype"]):
                        f.read(msg, obj, verify_hash=False)  # (the hash is checked)
                except Exception as error:
                    yield f"{path}: {where}: {_reason(error, path, where)}"


#: ``verify --require-hash``'s words for an object written without a hash.
UNHASHED = "written without a hash (--require-hash)"


def _has_array_form(dtype: str) -> bool:
    """Whether objects of Tensogram dtype ``dtype`` decode to numpy arrays here (not bitmasks,
    nor bfloat16 without ml_dtypes): ``verify`` checks the others' hashes only."""
    try:
        numpy_dtype(dtype)
    except TgmCodecError:
        return False
    return True


def _reason(error: BaseException, path: str, where: str = "") -> str:
    """``error_line(error)`` without the file and place the line already names.

    >>> _reason(ValueError("/d/f.tgm: message 2, object 0: hash mismatch"), "/d/f.tgm", "message 2, object 0")
    'hash mismatch'
    """
    text = error_line(error)
    # The core names the file it opened: through a symlink, the real one.
    for name in dict.fromkeys((path, absolute(path), os.path.realpath(path))):
        for prefix in (f"{name}: {where}: ", f"{name}: "):
            if text.startswith(prefix):
                return text[len(prefix):]
    return text
