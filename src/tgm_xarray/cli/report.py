"""How the command words what it says: each failure in one line, every count in the singular or
the plural, and whether a progress bar can be drawn."""

from __future__ import annotations

import sys

from tgm_xarray.installation import install_hint


def error_line(error: BaseException) -> str:
    """One line saying what failed: the message of our errors, ``path: reason`` for system
    errors, the exception's type for anything else.

    >>> error_line(IsADirectoryError(21, "Is a directory", "data"))
    'data: is a directory'
    >>> error_line(KeyError("t2m"))
    "KeyError: 't2m'"
    """
    if isinstance(error, OSError) and error.strerror:
        reason = error.strerror[0].lower() + error.strerror[1:]
        named = error.filename and str(error.filename) not in reason
        text = f"{error.filename}: {reason}" if named else reason
    elif isinstance(error, (OSError, ValueError)) and str(error):  # TgmError is a ValueError
        text = str(error)
    else:
        text = f"{type(error).__name__}: {error}" if str(error) else type(error).__name__
    text += "".join(f" ({note})" for note in getattr(error, "__notes__", ()))  # e.g. the variable
    return " ".join(text.split())  # messages from libraries may span lines


def plural(count: int, noun: str, nouns: str | None = None) -> str:
    """The count and the noun, in the plural unless the count is one: every count the command
    prints goes through here.

    >>> plural(1, "variable"), plural(2, "variable"), plural(0, "entry", "entries")
    ('1 variable', '2 variables', '0 entries')
    """
    return f"{count:,} {noun if count == 1 else nouns or noun + 's'}"


def writer_progress(wanted: bool | None) -> bool | None:
    """The writer's ``progress``: no bar without tqdm (an optional extra), with a note if one
    was asked for."""
    if wanted is False:
        return False
    try:
        import tqdm  # noqa: F401
    except ImportError:
        if wanted:
            print(f"tgm-xarray: --progress needs tqdm ({install_hint('tqdm')}); "
                  "writing without a progress bar", file=sys.stderr)
        return False
    return wanted
