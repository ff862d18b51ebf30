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
"""

from __future__ import annotations

import argparse
import errno
import functools
import json
import math
import os
import re
import sys
import threading
import traceback
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tgm_xarray._core import MAGIC, decoded_bytes, numpy_dtype
from tgm_xarray.attrs import jsonable
from tgm_xarray.errors import TgmCodecError, TgmConflictError
from tgm_xarray.grib import GRIB_SUFFIXES
from tgm_xarray.installation import EngineNameWarning, install_hint
from tgm_xarray.pipeline import COMPRESSIONS, NAMES, OPTIONS, bits_advice, canonical
from tgm_xarray.source import open_file
from tgm_xarray.source.handles import absolute
from tgm_xarray.source.remote import is_url
from tgm_xarray.threads import MAX_THREADS
from tgm_xarray.vocabulary import close_matches, did_you_mean

if TYPE_CHECKING:  # imported where used: `tgm-xarray --help` stays quick
    from tgm_xarray.layout import Plans

#: Names of formats `convert` reads but does not write: such an OUTPUT is a mistake (often a
#: forgotten OUTPUT, the last input taken for it), never a file to fill with Tensogram bytes.
OTHER_FORMATS = dict.fromkeys((".h5", ".hdf5"), "HDF5")
#: Options of `convert` that only a .tgm OUTPUT takes (their flags, for the error).
TGM_ONLY = {"bits_per_value": "--bits", "compression": "--compression", "option": "--option",
            "layout": "--layout", "field_dims": "--field-dims", "append": "--append", "threads": "--threads",
            "hash": "--no-hash"}
#: A directory holding one of these is a Zarr store (v3, v2 group, v2 array); any other directory
#: given to `convert` stands for the files in it.
ZARR_MARKERS = ("zarr.json", ".zgroup", ".zarray")


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


def main(argv: Sequence[str] | None = None) -> int:
    """Run the command line; returns the exit status (0 on success, 1 on error, 2 on misuse)."""
    args = _parser().parse_args(argv)
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


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    print(f"tgm-xarray: warning: {' '.join(str(message).split())}", file=sys.stderr)


def _parser() -> argparse.ArgumentParser:
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

    convert = commands.add_parser(
        "convert", help="convert files xarray opens (GRIB, NetCDF, Zarr) into one .tgm file, "
                        "or a .tgm file into NetCDF (.nc) or Zarr (.zarr)",
        description="Convert every INPUT into OUTPUT.tgm, in order, atomically: OUTPUT is only "
                    "replaced (or appended to) once every input is written. OUTPUT must end in "
                    ".tgm, and an input or an existing OUTPUT is never replaced, unless --force "
                    "is given (--append adds to an existing OUTPUT.tgm). A directory INPUT that "
                    "is not a Zarr store stands for the files in it. An OUTPUT ending in .nc or "
                    ".zarr takes one .tgm INPUT and is written by xarray's to_netcdf / to_zarr; "
                    "one ending in .grib2 (or .grib) takes one .tgm INPUT and is written by ecCodes.")
    convert.add_argument("inputs", nargs="+", metavar="INPUT",
                         help="GRIB, NetCDF, Zarr or .tgm path (or URL), or a directory of them")
    convert.add_argument("output", metavar="OUTPUT.tgm|.nc|.zarr|.grib2")
    convert.add_argument("--force", action="store_true",
                         help="write OUTPUT even if it exists, is an input, or is a name "
                              "without .tgm")
    # The encoding options are the writer's and the zarr codec's (pipeline.TABLE).
    convert.add_argument("--bits-per-value", "--bits", dest="bits_per_value", type=int,
                         help="simple packing with this many bits per value (floating-point "
                              "variables; lossy, max error < (max-min)/(2**bits-1))")
    convert.add_argument("--compression", choices=COMPRESSIONS,
                         help="compression of every variable (zfp and sz3: floating point only; "
                              f"default: {OPTIONS['compression'].default})")
    parameters = ", ".join(sorted(set(NAMES) - {"bits", "bits_per_value", "compression"}))
    convert.add_argument("--option", action="append", default=[], metavar="KEY=VALUE",
                         help=f"encoding option, e.g. zstd_level=9 (any of: {parameters})")
    convert.add_argument("--variables", metavar="A,B", help="only these data variables")
    convert.add_argument("--drop-variables", metavar="A,B",
                         help="leave out these variables or coordinates (such as text ones, "
                              "which are skipped with a warning otherwise)")
    convert.add_argument("--chunks", metavar="SPEC", type=chunks_spec,
                         help="dask chunks to open inputs with: 'auto', '{}' (the file's own), "
                              "or DIM=N,... (default: no dask; fields are still read one by one)")
    convert.add_argument("--layout", choices=("field", "variable"),
                         help="one message per field (default) or per variable")
    convert.add_argument("--field-dims", metavar="A,B",
                         help="the dimensions each field keeps, every other one making a message "
                              "per value (default: each variable's last two that are not "
                              "number, time, step or a level)")
    convert.add_argument("--engine", help="xarray engine of the inputs (default: cfgrib for "
                         ".grib*, zarr for .zarr and Zarr stores, else xarray's guess; given, every "
                         "file of a directory INPUT is taken)")
    # Defaults None: a .nc or .zarr OUTPUT refuses the options given (TGM_ONLY).
    convert.add_argument("--append", action="store_true", default=None, help="append to OUTPUT if it exists")
    convert.add_argument("--threads", type=int, help="messages encoded at once (default: CPUs)")
    convert.add_argument("--no-hash", dest="hash", action="store_false", default=None,
                         help="do not store xxh3 hashes")
    convert.add_argument("--durable", action="store_true",
                         help="fsync each output before it replaces its name, and its directory after: "
                              "outputs that survive a power cut (slower; docs/writer.md)")
    _storage_options(convert)
    _progress_options(convert)
    convert.set_defaults(run=_convert, parser=convert)

    info = commands.add_parser("info", help="summarise a .tgm file: variables, codecs, sizes")
    info.add_argument("file", help=".tgm path or URL (https://, s3://)")
    info.add_argument("--json", action="store_true", help="print the summary as JSON")
    _storage_options(info)
    info.set_defaults(run=_info, parser=info)

    dump = commands.add_parser("dump", help="print the metadata and descriptors as JSON")
    dump.add_argument("file", help=".tgm path or URL (https://, s3://)")
    dump.add_argument("--message", type=int, help="only this message")
    _storage_options(dump)
    dump.set_defaults(run=_dump, parser=dump)

    index = commands.add_parser(
        "index", help="build the index of .tgm files, so that opening them reads one small file",
        description="Scan every PATH once and store its metadata and the Dataset's plan in an "
                    "index (docs/archives.md): in the user cache directory, or beside the file "
                    "with --beside. A fresh index is left as it is.")
    index.add_argument("paths", nargs="+", metavar="PATH", help=".tgm path or URL (https://, s3://)")
    index.add_argument("--beside", action="store_true",
                       help="write PATH.tgmidx next to each local PATH (default: the cache directory)")
    _storage_options(index)
    _progress_options(index)
    index.set_defaults(run=_index, parser=index)

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
    _storage_options(verify)
    verify.set_defaults(run=_verify, parser=verify)

    cache = commands.add_parser(
        "cache", help="list or prune the index cache",
        description="The user cache directory of indexes (docs/archives.md, \"The cache's size\"): "
                    "it keeps $TGM_XARRAY_CACHE_MB megabytes of them (default 256), the least "
                    "recently used removed first. Only index files are ever removed.")
    actions = cache.add_subparsers(required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="print the cache directory, its indexes' count and size")
    listing.set_defaults(run=_cache_list, parser=listing)
    prune = actions.add_parser("prune", help="remove the least recently used indexes down to a size")
    down_to = prune.add_mutually_exclusive_group()
    down_to.add_argument("--max-mb", type=_megabytes, metavar="N",
                         help="keep N megabytes of indexes at most (default: $TGM_XARRAY_CACHE_MB, else 256)")
    down_to.add_argument("--all", action="store_true", help="remove every index")
    prune.set_defaults(run=_cache_prune, parser=prune)
    return parser


def _megabytes(text: str) -> int:
    from tgm_xarray.plans import index

    try:
        return index.megabytes(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of megabytes (0 or more)") from None


def _storage_options(command: argparse.ArgumentParser) -> None:
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


def _progress_options(command: argparse.ArgumentParser) -> None:
    """``--progress`` / ``--no-progress`` (default: a bar only when stderr is a terminal)."""
    progress = command.add_mutually_exclusive_group()
    progress.add_argument("--progress", dest="progress", action="store_const", const=True,
                          help="always show a progress bar")
    progress.add_argument("--no-progress", dest="progress", action="store_const", const=False,
                          help="never show one (default: only when stderr is a terminal)")
    command.set_defaults(progress=None)


# --------------------------------------------------------------------------------------------
# convert
# --------------------------------------------------------------------------------------------


def _convert(args: argparse.Namespace) -> int:
    from tgm_xarray.export import output_format

    check_ranges(args)
    fmt = output_format(args.output)
    if fmt is not None:
        return _convert_from_tgm(args, fmt)
    from tgm_xarray.writer import TgmWriter

    inputs = expand_inputs(args.inputs, args.engine)
    if names_a_directory(args.output):
        return _convert_each(args, inputs)
    check_output(args.output, inputs, force=args.force, append=bool(args.append))
    planner = Planner.of(args)
    progress = _progress(args.progress)
    datasets = _selected(args, [ds for path in inputs
                                for ds in open_inputs(path, args.engine, args.chunks, args.storage_options)])
    plans = planner.plans(datasets)  # everything first: a bad option fails before OUTPUT is touched
    with TgmWriter(args.output, "a" if args.append else "w", hash=args.hash is not False, threads=args.threads,
                   progress=progress, durable=args.durable) as writer:
        writer.write_plan(plans)
    _report_written(args.output, writer.messages, plural(len(inputs), "input"), why_not_one_dataset(args.output))
    return 0


def check_ranges(args: argparse.Namespace) -> None:
    """Refuse ``--bits`` and ``--threads`` out of their ranges, in the command's words, before
    anything is said of their values or any input is read."""
    if args.bits_per_value is not None:
        try:
            OPTIONS["bits_per_value"].check("--bits", args.bits_per_value)
        except TgmCodecError as error:
            raise UsageError(str(error)) from None
    if args.threads is not None and not 1 <= args.threads <= MAX_THREADS:
        raise UsageError(f"--threads must be an integer from 1 to {MAX_THREADS}; got {args.threads}")


def _report_written(output: str, messages: int, source: str, why: str | None) -> None:
    """The line saying what ``output`` got, and a warning when it is not one Dataset (``why``)."""
    size = os.path.getsize(output)
    print(f"{output}: wrote {plural(messages, 'message')} from {source}; file size {size:,} bytes",
          flush=True)
    if why:
        warnings.warn(f"{output} will not open as one Dataset: {why}", stacklevel=1)


@dataclass(frozen=True)
class Planner:
    """The encoding options of the command, checked once, turned into the plans of Datasets."""

    bits: int | None
    compression: str | None
    options: dict
    layout: str
    field_dims: list[str] | None
    advice: str | None  # the pipeline's advice on --bits, given once in the command's words

    @classmethod
    def of(cls, args: argparse.Namespace) -> Planner:
        compression = args.compression or OPTIONS["compression"].default
        advice = bits_advice(args.bits_per_value, compression)
        said = bits_advice(args.bits_per_value, compression, spelling="--bits ")
        if said:
            warnings.warn(said, stacklevel=1)
        field_dims = [d for d in args.field_dims.split(",") if d] if args.field_dims else None
        return cls(args.bits_per_value, args.compression, _options(args.option), args.layout or "field",
                   field_dims, advice)

    def plans(self, datasets: Sequence) -> Plans:
        """Plans of ``datasets`` (on the main thread: warning filters are process-wide)."""
        from tgm_xarray.layout import Plans, plan

        with warnings.catch_warnings():
            if self.advice:  # said once already, not for every variable
                warnings.filterwarnings("ignore", message=re.escape(self.advice))
            return Plans([plan(ds, encoding=cli_encoding(ds, self.bits, self.compression, self.options),
                               layout=self.layout, field_dims=self.field_dims) for ds in datasets])


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


def _convert_each(args: argparse.Namespace, inputs: list[str]) -> int:
    """``convert INPUT... DIRECTORY``: one ``DIRECTORY/<stem>.tgm`` per input, the inputs
    converted at once on ``--threads`` worker threads in all (each writer on its share), with
    one progress bar over every input's fields. An input that fails gets no output (the
    writes are atomic) and is named on stderr; the others are written; the status is then 1.

    Threads, not processes: ecCodes' decoding and our encoding run with the interpreter
    released, and each GRIB input has a lock of its own (``grib_lock``). On 2 cores, 200 GRIB
    inputs went 1.3x faster on 2 threads than on 1, and on 2 processes 1.2x with forkserver
    (each imports xarray and cfgrib first) or 1.4x with fork, which is unsafe in a process
    running threads (numpy's included); threads share the Datasets, the bar and the errors as
    they are. The ``convert`` benchmark measures both.
    """
    from concurrent.futures import ThreadPoolExecutor

    outputs = dict(zip(inputs, outputs_in(args.output, inputs)))
    for path, output in outputs.items():
        check_output(output, [path], force=args.force, append=bool(args.append))
    budget = args.threads or os.cpu_count() or 1
    planner = Planner.of(args)
    progress = _progress(args.progress)
    os.makedirs(args.output, exist_ok=True)
    workers = min(budget, len(inputs))
    pool = ThreadPoolExecutor(workers, thread_name_prefix="tgm-convert")
    stop = threading.Event()  # set on Ctrl-C: the writes in progress stop at their next message
    try:
        opened = dict(zip(inputs, pool.map(functools.partial(
            _attempt, open_inputs, engine=args.engine, chunks=args.chunks, storage_options=args.storage_options),
            inputs)))
        failed = {path: result for path, result in opened.items() if isinstance(result, BaseException)}
        # --variables and --drop-variables name what some input has, as for one OUTPUT.tgm
        # (unless an input failed to open: the names may be its, and its error says more)
        if not failed:
            check_selection(args, [ds for datasets in opened.values() for ds in datasets])
        jobs = {}
        for path in inputs:
            if path in failed:
                continue
            datasets = _select(args, opened[path])
            if not datasets:
                warnings.warn(f"input {path!r} has none of --variables: no output written", stacklevel=1)
                continue
            try:
                jobs[path] = planner.plans(datasets)
            except Exception as error:
                failed[path] = error
        written = _write_each(pool, {outputs[path]: plans for path, plans in jobs.items()}, args,
                              max(1, budget // workers), progress, stop)
    except BaseException:
        stop.set()
        pool.shutdown(cancel_futures=True)
        raise
    finally:
        pool.shutdown()
    for path in jobs:
        result = written[outputs[path]]
        if isinstance(result, BaseException):
            failed[path] = result
        else:
            messages, why = result
            _report_written(outputs[path], messages, path, why)
    failures = [path for path in inputs if path in failed]
    for path in failures:
        print(f"tgm-xarray: error: {_naming_input(path, failed[path])}; no output written", file=sys.stderr)
    if failures:
        print(f"tgm-xarray: error: {plural(len(failures), 'input')} of {len(inputs)} failed: "
              f"{', '.join(failures)}", file=sys.stderr)
    return 1 if failures else 0


def _write_each(pool, jobs: dict, args: argparse.Namespace, threads: int, progress: bool | None,
                stop: threading.Event) -> dict:
    """Writes each ``output: plans`` of ``jobs`` on ``pool``, each writer on ``threads``
    threads, under one bar; returns, for each output, the messages written and why it is not
    one Dataset (``why_not_one_dataset``), or the exception."""
    from tgm_xarray.writer import TgmWriter, progress_bar

    bar = progress_bar(progress, sum(p.count for p in jobs.values())) if progress is not False else None
    ticking = threading.Lock()

    def tick(count: int) -> None:
        if stop.is_set():
            raise KeyboardInterrupt
        if bar is not None:
            with ticking:
                bar.update(count)

    def write(output: str, plans: Plans) -> tuple[int, str | None]:
        with TgmWriter(output, "a" if args.append else "w", hash=args.hash is not False,
                       threads=threads, progress=tick, durable=args.durable) as writer:
            writer.write_plan(plans)
        return writer.messages, why_not_one_dataset(output)  # here: it overlaps the other writes

    try:
        futures = {output: pool.submit(_attempt, write, output, plans) for output, plans in jobs.items()}
        return {output: future.result() for output, future in futures.items()}
    finally:
        if bar is not None:
            bar.close()


def _attempt(function: Callable, *args, **kwargs) -> Any:
    """``function``'s result, or the exception it raised (one input's failure is not the others')."""
    try:
        return function(*args, **kwargs)
    except Exception as error:
        return error


def _naming_input(path: str, error: BaseException) -> str:
    """``error_line(error)``, starting with the input it is about."""
    text, prefix = error_line(error), f"input {path!r}: "
    return text if text.startswith(prefix) else prefix + text


def why_not_one_dataset(path: str, storage_options: dict | None = None) -> str | None:
    """Why ``xr.open_dataset(path, engine="tgm")`` fails to make one Dataset of the file (the
    conflict's message, which names the keyword that opens it), or None when it does. Reads the
    metadata only, and writes no index."""
    from tgm_xarray.hypercube import PlanOptions
    from tgm_xarray.plans import planned

    try:
        planned(path, storage_options, False, PlanOptions(), groups=False)
    except TgmConflictError as error:
        return str(error)
    return None


def _convert_from_tgm(args: argparse.Namespace, fmt: str) -> int:
    """``convert in.tgm out.nc`` / ``out.zarr``: the Dataset of one .tgm file, written by
    xarray with each variable's encoding translated (:mod:`tgm_xarray.export`)."""
    from tgm_xarray.export import export

    name = {"netcdf": "NetCDF", "zarr": "Zarr", "grib": "GRIB"}[fmt]
    # a GRIB OUTPUT takes --bits: ecCodes packs every field with that many instead of its own
    given = [flag for key, flag in TGM_ONLY.items() if getattr(args, key) not in (None, [])
             and not (fmt == "grib" and key == "bits_per_value")]
    if given:
        raise ValueError(f"{', '.join(given)}: only for .tgm outputs; a {name} OUTPUT keeps each "
                         f"variable's encoding where {name} has an equivalent (docs/cli.md)")
    if len(args.inputs) != 1 or not args.inputs[0].rstrip("/").lower().endswith(".tgm"):
        raise ValueError(f"OUTPUT {args.output!r} is a {name} name: convert writes {name} from one "
                         f".tgm INPUT (got {', '.join(map(repr, args.inputs))}); give OUTPUT.tgm "
                         f"to convert into Tensogram")
    check_export_output(args.output, args.inputs, force=args.force)
    [ds] = _selected(args, open_inputs(args.inputs[0], args.engine, args.chunks, args.storage_options))
    if fmt == "grib":
        from tgm_xarray.grib import to_grib

        messages = to_grib(ds, args.output, bits=args.bits_per_value, durable=args.durable)
        print(f"{args.output}: wrote {plural(messages, 'message')} of {plural(len(ds.data_vars), 'variable')} "
              f"from {args.inputs[0]} as GRIB 2")
        return 0
    export(ds, args.output, fmt, lambda text: print(f"tgm-xarray: warning: {text}", file=sys.stderr),
           durable=args.durable)
    print(f"{args.output}: wrote {plural(len(ds.data_vars), 'variable')} from {args.inputs[0]} as {name}")
    return 0


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


def _selected(args: argparse.Namespace, datasets: list) -> list:
    """``datasets`` with ``--drop-variables`` left out and only ``--variables`` kept."""
    check_selection(args, datasets)
    return _select(args, datasets)


def check_selection(args: argparse.Namespace, datasets: list) -> None:
    """Refuse, as usage errors naming what the inputs have, a ``--drop-variables`` or
    ``--variables`` name that none of ``datasets`` has (a dropped variable counts as absent),
    and a ``--chunks`` or ``--field-dims`` dimension none of them has (xarray ignores those, so
    ``time=1`` on an input with ``valid_time`` would chunk nothing)."""
    dims = {str(d) for ds in datasets for d in ds.dims}
    for flag, names in (("--chunks", list(args.chunks) if isinstance(args.chunks, dict) else []),
                        ("--field-dims", args.field_dims.split(",") if args.field_dims else [])):
        _refuse_unknown(flag, "the dimensions ", [d for d in names if d], dims)
    dropped = [v for v in args.drop_variables.split(",") if v] if args.drop_variables else []
    _refuse_unknown("--drop-variables", "", dropped, {str(v) for ds in datasets for v in ds.variables})
    wanted = [v for v in args.variables.split(",") if v] if args.variables else []
    _refuse_unknown("--variables", "", wanted, {str(v) for ds in datasets for v in ds.data_vars} - set(dropped))


def _refuse_unknown(option: str, what: str, given: list[str], there: set[str]) -> None:
    unknown = [name for name in given if name not in there]
    if unknown:
        raise UsageError(f"{option}: no input has {what}{unknown}; theirs are {sorted(there)}")


def _select(args: argparse.Namespace, datasets: list) -> list:
    if args.drop_variables:
        datasets = [ds.drop_vars([v for v in args.drop_variables.split(",") if v], errors="ignore")
                    for ds in datasets]
    if args.variables:
        wanted = [v for v in args.variables.split(",") if v]
        datasets = [ds[[v for v in wanted if v in ds.data_vars]] for ds in datasets]
        datasets = [ds for ds in datasets if ds.data_vars]
    return datasets


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


def _progress(wanted: bool | None) -> bool | None:
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


def expand_inputs(paths: Sequence[str], engine: str | None) -> list[str]:
    """``paths`` with each local directory that is not a Zarr store replaced by its files, sorted:
    those of a format ``convert`` reads (any file but hidden ones when ``engine`` is given), the
    others skipped with a warning naming them."""
    from tgm_xarray.export import NETCDF_SUFFIXES, ZARR_SUFFIXES

    readable = (*GRIB_SUFFIXES, *NETCDF_SUFFIXES, *ZARR_SUFFIXES, ".h5", ".hdf5", ".tgm")
    expanded = []
    for path in paths:
        if is_url(path) or not os.path.isdir(path) or is_zarr_store(path):
            expanded.append(path)
            continue
        taken, skipped = [], []
        for name in sorted(os.listdir(path)):
            full = os.path.join(path, name)
            wanted = engine is not None or name.lower().endswith(readable)
            if not name.startswith(".") and wanted and (os.path.isfile(full) or is_zarr_store(full)):
                taken.append(full)
            else:
                skipped.append(name + "/" if os.path.isdir(full) else name)
        if not taken:
            raise ValueError(f"input {path!r}: a directory without GRIB, NetCDF, Zarr or .tgm files, "
                             f"and not a Zarr store (no {', '.join(ZARR_MARKERS)})")
        if skipped:
            warnings.warn(f"input {path!r}: skipped {plural(len(skipped), 'entry', 'entries')} "
                          f"not GRIB, NetCDF, Zarr or .tgm: {', '.join(skipped)}", stacklevel=1)
        expanded.extend(taken)
    return expanded


def is_zarr_store(path: str) -> bool:
    return os.path.isdir(path) and any(os.path.exists(os.path.join(path, m)) for m in ZARR_MARKERS)


def open_inputs(path: str, engine: str | None, chunks: Any, storage_options: dict | None = None) -> list:
    """The Datasets of one input: one for NetCDF/Zarr/.tgm, one per hypercube for GRIB (cfgrib).
    ``storage_options`` go to the ``.tgm`` and Zarr engines (remote inputs).

    A failure names the input; a corrupt GRIB message is an error, not a field left out.
    """
    import xarray as xr

    from tgm_xarray.backend import TensogramBackendEntrypoint

    if not is_url(path) and not os.path.exists(path):
        raise FileNotFoundError(errno.ENOENT, "input does not exist", path)
    opener: str | type[TensogramBackendEntrypoint] | None = engine
    if engine is None:
        lower = path.rstrip("/").lower()
        opener = "cfgrib" if lower.endswith(GRIB_SUFFIXES) else \
            "zarr" if lower.endswith(".zarr") or is_zarr_store(path) else \
            TensogramBackendEntrypoint if lower.endswith(".tgm") else None
    try:
        if opener == "cfgrib":
            try:
                import cfgrib
            except ImportError:
                raise ImportError(f"GRIB inputs need cfgrib and eccodes ({install_hint('cfgrib', 'eccodes')})") from None
            # No index files next to inputs (they may be read-only); errors="raise": cfgrib
            # would otherwise log a corrupt message or variable and leave it out.
            return cfgrib.open_datasets(path, backend_kwargs={"indexpath": "", "errors": "raise",
                                                              "lock": grib_lock()}, chunks=chunks)
        remote = {"storage_options": storage_options} if storage_options is not None else None
        return [xr.open_dataset(path, engine=opener, chunks=chunks, backend_kwargs=remote)]
    except Exception as error:
        raise ValueError(f"input {path!r}: {error_line(error)}") from error


def grib_lock() -> Any:
    """The lock of one GRIB input's reads. cfgrib's default is one lock for every file of the
    process, so fields of different files never decode at once (40 fields took 2.2x longer to
    decode on 2 threads under it than each file under its own lock); an ecCodes built with
    thread support (as its wheels are) decodes them on several threads: each input gets its own
    lock. None (cfgrib's lock) for an ecCodes without."""
    return threading.Lock() if _eccodes_threaded() else None


@functools.cache
def _eccodes_threaded() -> bool:
    import eccodes

    try:
        return "ECCODES_THREADS" in eccodes.codes_get_features().split()
    except Exception:  # an ecCodes too old to say (no such function, or an error of its own)
        return False


def cli_encoding(ds, bits: int | None, compression: str | None, options: dict) -> dict:
    """Per-variable encodings from the command line. Lossy settings (``--bits``, zfp, sz3 and
    their options) apply to floating-point variables only; the rest to every variable.

    >>> import xarray as xr, numpy as np
    >>> ds = xr.Dataset({"t": ("x", np.zeros(2)), "n": ("x", np.zeros(2, "int8"))})
    >>> cli_encoding(ds, 16, "szip", {})
    {'t': {'bits_per_value': 16, 'compression': 'szip'}, 'n': {'compression': 'szip'}}
    """
    settings = {k: v for k, v in (("bits_per_value", bits), ("compression", compression)) if v is not None}
    settings.update(options)
    lossy_codec = compression in ("zfp", "sz3")
    lossless = {k: v for k, v in settings.items() if not lossy_codec
                and (k not in NAMES or NAMES[k].stage != "simple_packing" and k != "encoding")}
    encoding = {}
    for name, var in ds.data_vars.items():
        chosen = settings if var.dtype.kind == "f" else lossless
        if chosen:
            encoding[name] = dict(chosen)
    return encoding


def _options(items: list[str]) -> dict:
    options = {}
    for item in items:
        key, sep, text = item.partition("=")
        if not sep:
            raise UsageError(f"--option {item!r}: expected KEY=VALUE")
        try:
            canonical(key)  # an unknown KEY fails at once, as in to_tgm
        except TgmCodecError as error:
            raise UsageError(f"--option {item!r}: {error}") from None
        options[key] = _number(text)
    return options


def chunks_spec(spec: str) -> str | dict:
    """``--chunks``: the ``chunks=`` that xarray opens inputs with.

    >>> chunks_spec("auto"), chunks_spec("{}"), chunks_spec("time=1,step=auto")
    ('auto', {}, {'time': 1, 'step': 'auto'})
    >>> chunks_spec("step=a")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: expected 'auto', '{}' or DIM=N,... (N an integer or auto); got 'step=a'
    """
    if spec == "auto":
        return spec
    if spec == "{}":
        return {}
    chunks = {}
    for item in spec.split(","):
        dim, sep, size = item.partition("=")
        value = _number(size)
        if not sep or not dim or not (isinstance(value, int) or value == "auto"):
            raise argparse.ArgumentTypeError(f"expected 'auto', '{{}}' or DIM=N,... (N an integer or auto); "
                                             f"got {spec!r}")
        chunks[dim] = value
    return chunks


def _number(text: str) -> Any:
    for convert in (int, float):
        try:
            return convert(text)
        except ValueError:
            pass
    return text


# --------------------------------------------------------------------------------------------
# info and dump
# --------------------------------------------------------------------------------------------


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


def _info(args: argparse.Namespace) -> int:
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


def _dump(args: argparse.Namespace) -> int:
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


# --------------------------------------------------------------------------------------------
# index
# --------------------------------------------------------------------------------------------


def _index(args: argparse.Namespace) -> int:
    from tgm_xarray.hypercube import PlanOptions
    from tgm_xarray.plans import index, planned

    paths = [p if is_url(p) else os.path.abspath(os.path.expanduser(p)) for p in args.paths]
    if args.beside and any(is_url(p) for p in paths):
        raise ValueError("--beside writes next to local files only: index URLs into the cache, "
                         "or run the command where the files are")
    progress = _progress(args.progress)
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


# --------------------------------------------------------------------------------------------
# cache
# --------------------------------------------------------------------------------------------


def _cache_list(args: argparse.Namespace) -> int:
    from tgm_xarray.plans import index

    directory = index.cache_dir()
    indexes = index.cached_indexes(directory)
    print(f"{directory}: {plural(len(indexes), 'index', 'indexes')}, {_size(sum(c.size for c in indexes))} "
          f"(limit {_size(index.cache_limit())}, {index.CACHE_MB_ENV})")
    return 0


def _cache_prune(args: argparse.Namespace) -> int:
    from tgm_xarray.plans import index

    directory = index.cache_dir()
    limit = 0 if args.all else args.max_mb if args.max_mb is not None else index.cache_limit()
    removed = index.prune_cache(directory, limit)
    left = index.cached_indexes(directory)
    print(f"{directory}: removed {plural(len(removed), 'index', 'indexes')} ({_size(sum(c.size for c in removed))}); "
          f"{plural(len(left), 'index', 'indexes')}, {_size(sum(c.size for c in left))} left")
    return 0


def _size(n: int) -> str:
    """
    >>> _size(0), _size(9216), _size(256 * 2**20)
    ('0 bytes', '9.0 KiB', '256.0 MiB')
    """
    if n < 1024:
        return plural(n, "byte")
    power = min((n.bit_length() - 1) // 10, 3)  # 1024 ** power <= n
    return f"{n / 1024 ** power:.1f} {('KiB', 'MiB', 'GiB')[power - 1]}"


# --------------------------------------------------------------------------------------------
# verify
# --------------------------------------------------------------------------------------------


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


def _verify(args: argparse.Namespace) -> int:
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


if __name__ == "__main__":
    sys.exit(main())
