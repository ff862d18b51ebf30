"""The outputs ``convert`` writes and those it refuses: never an input, a GRIB or HDF5 name, a
URL, nor, without ``--force``, an existing file; a directory OUTPUT gets one file per input."""

from __future__ import annotations

import errno
import os
from collections.abc import Sequence

from tgm_xarray._core import MAGIC
from tgm_xarray.source.remote import is_url

#: Names of formats `convert` reads but does not write: such an OUTPUT is a mistake (often a
#: forgotten OUTPUT, the last input taken for it), never a file to fill with Tensogram bytes.
OTHER_FORMATS = dict.fromkeys((".h5", ".hdf5"), "HDF5")


def names_a_directory(output: str) -> bool:
    """Whether OUTPUT stands for a directory to write one ``.tgm`` per input into: an existing
    directory, or a name ending in a path separator (created)."""
    return os.path.isdir(output) or output.endswith(tuple(filter(None, (os.sep, os.altsep))))


def outputs_in(directory: str, inputs: Sequence[str]) -> list[str]:
    """``directory/<stem>.tgm`` for each input (its name less its last suffix). Two inputs of
    one stem would write one file: refused.

    >>> outputs_in("out", ["grib/2t.grib2", "https://host/data/lsm.nc", "store.zarr/"])
    ['out/2t.tgm', 'out/lsm.tgm', 'out/store.tgm']
    >>> outputs_in("out", ["a/2t.grib2", "b/2t.grib2"])  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    ValueError: inputs 'a/2t.grib2' and 'b/2t.grib2' would both be written to 'out/2t.tgm':
    convert them into different directories, or into one OUTPUT.tgm
    """
    from urllib.parse import urlsplit

    outputs: dict[str, str] = {}
    for path in inputs:
        name = os.path.basename((urlsplit(path).path if is_url(path) else path).rstrip("/"))
        output = os.path.join(directory, os.path.splitext(name)[0] + ".tgm")
        if output in outputs:
            raise ValueError(f"inputs {outputs[output]!r} and {path!r} would both be written to "
                             f"{output!r}: convert them into different directories, or into one "
                             f"OUTPUT.tgm")
        outputs[output] = path
    return list(outputs)


def check_export_output(output: str, inputs: Sequence[str], *, force: bool) -> None:
    """Refuse a NetCDF or Zarr OUTPUT that is a URL or an input, or that exists (unless ``force``)."""
    if is_url(output):
        raise ValueError(f"OUTPUT {output!r} is a URL: convert writes local files only")
    if any(_same_file(output, path) for path in inputs):
        raise ValueError(f"OUTPUT {output!r} is also an input")
    if not force:
        refuse_existing(output)


def refuse_existing(output: str, alternative: str = "") -> None:
    """The rule of every OUTPUT: an existing one is replaced only with ``--force``."""
    if os.path.lexists(output.rstrip("/")):
        raise FileExistsError(errno.EEXIST, f"exists: --force replaces it{alternative}", output)


def check_output(output: str, inputs: Sequence[str], *, force: bool, append: bool = False) -> None:
    """Refuse a Tensogram OUTPUT whose writing would destroy something: a GRIB or HDF5 name
    (always: ``convert`` writes no such files), an input (always: the user's data stays as it
    was), and, unless ``force``, an existing file (but a Tensogram file ``append`` adds to), or a
    name without ``.tgm``.

    >>> check_output("2t.h5", ["lsm.grib2"], force=False)  # doctest: +NORMALIZE_WHITESPACE
    Traceback (most recent call last):
    ...
    ValueError: OUTPUT '2t.h5' is a HDF5 file name: convert writes .tgm, .nc, .zarr and .grib2
    files (writing HDF5 is not supported yet); give OUTPUT.tgm last
    """
    if is_url(output):
        raise ValueError(f"OUTPUT {output!r} is a URL: convert writes local .tgm files only")
    name = output.rstrip("/")
    fmt = OTHER_FORMATS.get(os.path.splitext(name)[1].lower())
    if fmt:
        raise ValueError(f"OUTPUT {output!r} is a {fmt} file name: convert writes .tgm, .nc, .zarr and "
                         f".grib2 files (writing {fmt} is not supported yet); give OUTPUT.tgm last")
    if os.path.isdir(output):
        raise IsADirectoryError(errno.EISDIR, "is a directory, not a .tgm file name", output)
    if any(_same_file(output, path) for path in inputs):
        raise ValueError(f"OUTPUT {output!r} is also an input: give another OUTPUT.tgm "
                         f"(convert never replaces its input, not even with --force)")
    if force:
        return
    if not name.lower().endswith(".tgm"):
        raise ValueError(f"OUTPUT {output!r} does not end in .tgm: give OUTPUT.tgm last "
                         f"(or --force to write a Tensogram file under this name)")
    if os.path.exists(output):
        with open(output, "rb") as f:
            if f.read(len(MAGIC)) != MAGIC:
                raise ValueError(f"OUTPUT {output!r} exists and is not a Tensogram file: "
                                 f"--force replaces it")
        if not append:
            refuse_existing(output, ", --append adds to it")


def _same_file(a: str, b: str) -> bool:
    if is_url(b):
        return False
    try:
        return os.path.samefile(a, b)
    except OSError:  # one of them does not exist
        return os.path.realpath(a) == os.path.realpath(b)
