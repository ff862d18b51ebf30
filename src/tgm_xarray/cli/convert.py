"""``tgm-xarray convert``: inputs xarray opens into one ``.tgm`` file or one per input, and a
``.tgm`` file into NetCDF, Zarr or GRIB. What it reads is :mod:`.inputs`, what it may write
:mod:`.outputs`; the writing is :mod:`tgm_xarray.writer`'s, or :mod:`tgm_xarray.export`'s and
:mod:`tgm_xarray.grib`'s."""

from __future__ import annotations

import argparse
import functools
import os
import re
import sys
import threading
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from tgm_xarray.cli.inputs import check_selection, expand_inputs, open_inputs, select, selected
from tgm_xarray.cli.outputs import check_export_output, check_output, names_a_directory, outputs_in
from tgm_xarray.cli.parser import UsageError, add_progress_options, add_storage_options
from tgm_xarray.cli.report import error_line, plural, writer_progress
from tgm_xarray.errors import TgmCodecError, TgmConflictError
from tgm_xarray.pipeline import COMPRESSIONS, NAMES, OPTIONS, bits_advice, canonical
from tgm_xarray.threads import MAX_THREADS

if TYPE_CHECKING:  # imported where used: `tgm-xarray --help` stays quick
    from tgm_xarray.layout import Plans

#: Options of `convert` that only a .tgm OUTPUT takes (their flags, for the error).
TGM_ONLY = {"bits_per_value": "--bits", "compression": "--compression", "option": "--option",
            "layout": "--layout", "field_dims": "--field-dims", "append": "--append", "threads": "--threads",
            "hash": "--no-hash"}


def add_parser(commands: argparse._SubParsersAction) -> None:
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
    convert.add_argument("--pack-over-range", action="store_true",
                         help="a .nc or .zarr OUTPUT: fields packed each over its own range that float32 "
                              "does not hold become int16 (int8) CF packing over the variable's range, "
                              "adding at most half its step, instead of float64 values (exact, about 4x larger)")
    add_storage_options(convert)
    add_progress_options(convert)
    convert.set_defaults(run=run, parser=convert)


def run(args: argparse.Namespace) -> int:
    from tgm_xarray.export import output_format

    check_ranges(args)
    fmt = output_format(args.output)
    if args.pack_over_range and fmt not in ("netcdf", "zarr"):
        raise UsageError(f"--pack-over-range: only for a .nc or .zarr OUTPUT (got {args.output!r})")
    if fmt is not None:
        return _convert_from_tgm(args, fmt)
    from tgm_xarray.writer import TgmWriter

    inputs = expand_inputs(args.inputs, args.engine)
    if names_a_directory(args.output):
        return _convert_each(args, inputs)
    check_output(args.output, inputs, force=args.force, append=bool(args.append))
    planner = Planner.of(args)
    progress = writer_progress(args.progress)
    datasets = selected(args, [ds for path in inputs
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
    progress = writer_progress(args.progress)
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
            datasets = select(args, opened[path])
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
    [ds] = selected(args, open_inputs(args.inputs[0], args.engine, args.chunks, args.storage_options))
    if fmt == "grib":
        from tgm_xarray.grib import to_grib

        messages = to_grib(ds, args.output, bits=args.bits_per_value, durable=args.durable)
        print(f"{args.output}: wrote {plural(messages, 'message')} of {plural(len(ds.data_vars), 'variable')} "
              f"from {args.inputs[0]} as GRIB 2")
        return 0
    export(ds, args.output, fmt, lambda text: print(f"tgm-xarray: warning: {text}", file=sys.stderr),
           durable=args.durable, pack_over_range=args.pack_over_range)
    print(f"{args.output}: wrote {plural(len(ds.data_vars), 'variable')} from {args.inputs[0]} as {name}")
    return 0


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
