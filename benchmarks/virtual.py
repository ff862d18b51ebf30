"""The ``virtual`` case of ``run.py``: virtual Zarr references over ``.tgm`` archives, at two resolutions.

Two archives, one forecast step per file, 24-bit packing + szip, with latitude/longitude objects:
200 files x 48 fields of 73 x 144 (4 parameters x 12 pressure levels, smooth synthetic fields)
and 12 files x 8 fields of 721 x 1440 (4 parameters x 2 levels, ``datagen.field``'s fields
derived from real IFS ones). Each is turned into references with
``tgm_xarray.virtual.TensogramParser`` and committed to an Icechunk repository. Measured in the
same run, per archive: building the references (parse every file, concatenate, commit),
reopening the committed store, and the end-to-end reduction (open lazily + the global mean of
every field, a step's levels per dask task, dask's threaded scheduler) through ``xr.open_zarr``
on the repository against ``xr.open_mfdataset(..., engine="tgm")`` on the same files. The
virtual store is read with zarr's default codec pipeline, with ``READ_CONFIG`` and (zarr >= 3.3)
with zarr's synchronous pipeline (``FusedCodecPipeline``); beside it, the same values decoded
once and stored as raw zarr chunks (no compression, same chunk shape) in an Icechunk
repository, read on both pipelines: what zarr and Icechunk cost per chunk when a chunk has
nothing to decode.
"""

from __future__ import annotations

import shutil
import statistics
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import datagen
from common import CaseResult, Context, Skip, Table, Target, optional
from harness import fmt_time, rounds
from tgm_xarray.source import handles

PARAMS = ("t", "q", "r", "gh")
FUSED = {"codec_pipeline.path": "zarr.core.codec_pipeline.FusedCodecPipeline"}
#: The dask chunks of every read: a step's levels per task (docs/virtual.md, "Reading an archive fast").
CHUNKS = {"isobaricInhPa": -1}
#: The recommended configuration against Icechunk serving raw chunks on the same pipeline.
RAW_TARGET = 0.95
SMALL_LEVELS = (1000, 925, 850, 700, 600, 500, 400, 300, 250, 200, 150, 100)


def _smooth_field(lat: np.ndarray, lon: np.ndarray, param: str, step: int, level: int) -> np.ndarray:
    """A synthetic field of the 73 x 144 archive (any grid)."""
    y, x = np.deg2rad(lat)[:, None], np.deg2rad(lon)[None, :]
    p, k = PARAMS.index(param), SMALL_LEVELS.index(level)
    return 250 + 30 * np.cos(y) ** 2 + 5 * np.sin(3 * x + p + k / 7 + step / 24) + 0 * x


def _real_field(lat: np.ndarray, lon: np.ndarray, param: str, step: int, level: int) -> np.ndarray:
    """A field of the 721 x 1440 archive, derived from the real IFS fields (``datagen.coordinates()``'s grid)."""
    return datagen.field(param, step, level)


@dataclass(frozen=True, eq=False)
class Archive:
    """One archive of the case: ``files`` files (``quick_files`` with ``--quick``), one forecast
    step each, of ``len(PARAMS) * len(levels)`` fields on the ``lat`` x ``lon`` grid. The
    recommended configuration's targets: ``engine_target`` x the engine's speed, or at least
    ``RAW_TARGET`` x Icechunk serving raw chunks (where zarr's own cost per chunk bounds it)."""

    files: int
    quick_files: int
    levels: tuple[int, ...]
    lat: np.ndarray
    lon: np.ndarray
    values: Callable[[np.ndarray, np.ndarray, str, int, int], np.ndarray]
    engine_target: float

    @property
    def grid(self) -> str:
        return f"{self.lat.size} x {self.lon.size}"

    @property
    def fields(self) -> int:
        return len(PARAMS) * len(self.levels)


ARCHIVES = (
    Archive(200, 20, SMALL_LEVELS, np.linspace(90, -90, 73), np.linspace(0, 357.5, 144), _smooth_field, 0.8),
    Archive(12, 2, (850, 500), *datagen.coordinates(), _real_field, 0.9),
)


def _write_archive(root: Path, archive: Archive, files: int) -> list[Path]:
    """The archive's files, made once (about 30 s for 200 files of 73 x 144, 12 of 721 x 1440)."""
    done = root / ".complete"
    paths = [root / f"fc-step{3 * i:03d}.tgm" for i in range(files)]
    if done.exists():
        return paths
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    coords = datagen.coordinate_objects(archive.lat, archive.lon)
    for i, path in enumerate(paths):
        step = 3 * i
        with open(path, "wb") as f:
            for param in PARAMS:
                for level in archive.levels:
                    values = archive.values(archive.lat, archive.lon, param, step, level)
                    f.write(datagen.tgm_message(values, datagen.field_base(param, step, level, "K"), coords))
    done.touch()
    return paths


def _raw_copy(root: Path, paths: list[Path], archive: Archive) -> Path:
    """The archive's values as ordinary zarr chunks in an Icechunk repository (raw little-endian
    bytes, no compression, one field per chunk, as the references have it), made once from the
    engine's Dataset, a field at a time (dask streams it); made again for another Icechunk
    version (its format changed across major versions)."""
    import icechunk
    import xarray as xr

    from common import ours_entrypoint

    repo_dir, done = root / "native-raw.icechunk", root / ".native-complete"
    made_by = f"icechunk {icechunk.__version__}"
    if done.exists() and done.read_text() == made_by:
        return repo_dir
    shutil.rmtree(repo_dir, ignore_errors=True)
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(str(repo_dir)))
    session = repo.writable_session("main")
    encoding = {name: {"chunks": (1, 1, archive.lat.size, archive.lon.size), "compressors": None} for name in PARAMS}
    with xr.open_mfdataset(paths, engine=ours_entrypoint(), combine="nested", concat_dim="step", chunks={},
                           coords="minimal", compat="override", data_vars="minimal") as ds:
        ds[list(PARAMS)].to_zarr(session.store, zarr_format=3, encoding=encoding, consolidated=False)
    session.commit("the archive's values, raw")
    done.write_text(made_by)
    return repo_dir


def case_virtual(ctx: Context) -> CaseResult:
    if optional("virtualizarr") is None or optional("icechunk") is None or optional("obstore") is None:
        raise Skip("virtualizarr, icechunk or obstore is not installed in this interpreter "
                   "(pip install 'tgm-xarray[virtual]'; no free-threaded wheels)")
    import icechunk
    import zarr

    from tgm_xarray.virtual import READ_CONFIG
    from tgm_xarray.zarr_codec import ZARR_SYNC_PIPELINE

    icechunk.set_logs_filter("error")  # not its warning on every open of a local repository

    res = CaseResult("virtual", "Virtual Zarr: .tgm archives as Icechunk references, read through zarr's pipelines",
                     __doc__.split("\n\n")[1].replace("\n", " "))
    res.notes.append(f"zarr {zarr.__version__}; both sides: dask's threaded scheduler with {ctx.e2e_threads[0]} "
                     f"threads, dask chunks {CHUNKS} (a step's levels per task); zarr's async.concurrency "
                     f"{zarr.config.get('async.concurrency')}, threading.max_workers "
                     f"{zarr.config.get('threading.max_workers')}; READ_CONFIG is tgm_xarray.virtual.READ_CONFIG "
                     f"{READ_CONFIG}; fused is {FUSED}"
                     + ("" if ZARR_SYNC_PIPELINE else " (not on this zarr: < 3.3)"))
    for archive in ARCHIVES:
        _measure(ctx, res, archive, READ_CONFIG, ZARR_SYNC_PIPELINE)
    return res


def _measure(ctx: Context, res: CaseResult, archive: Archive, read_config: dict, fused: bool) -> None:
    """One archive's rows, tables and targets."""
    import dask
    import icechunk
    import xarray as xr
    import zarr
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import LocalStore
    from virtualizarr import open_virtual_mfdataset

    from common import ours_entrypoint
    from tgm_xarray.virtual import TensogramParser, local_repository

    files = archive.quick_files if ctx.quick else archive.files
    root = ctx.data / f"virtual-{archive.lat.size}x{archive.lon.size}-{files}"
    paths = _write_archive(root / "archive", archive, files)
    what = f"{files} files x {archive.fields} fields of {archive.grid}"
    registry = ObjectStoreRegistry({"file://": LocalStore()})
    urls = [p.resolve().as_uri() for p in paths]
    repo_dir = root / "repo"
    repeats = max(3, ctx.repeats // 2)

    def build():
        handles.CACHE.clear()  # parse every file afresh
        shutil.rmtree(repo_dir, ignore_errors=True)
        vds = open_virtual_mfdataset(urls, registry=registry, parser=TensogramParser(), combine="nested",
                                     concat_dim="step", coords="minimal", compat="override")
        session = local_repository(repo_dir, root / "archive").writable_session("main")
        vds.vz.to_icechunk(session.store)
        session.commit("archive")

    build_s = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        build()
        build_s.append(time.perf_counter() - t0)
    repo = local_repository(repo_dir, root / "archive")
    reopen_s = []
    for _ in range(repeats + 2):
        t0 = time.perf_counter()
        ds = xr.open_zarr(repo.readonly_session("main").store, consolidated=False, zarr_format=3, chunks={})
        reopen_s.append(time.perf_counter() - t0)
        ds.close()
    raw_repo = _raw_copy(root, paths, archive)

    def engine():
        handles.CACHE.clear()
        return xr.open_mfdataset(paths, engine=ours_entrypoint(), combine="nested", concat_dim="step", chunks=CHUNKS,
                                 coords="minimal", compat="override", data_vars="minimal")

    def zarr_open(store_of, config):
        def open_():
            with zarr.config.set(config):  # the arrays keep the settings they were opened with
                return xr.open_zarr(store_of(), consolidated=False, zarr_format=3, chunks=CHUNKS)
        return open_

    def virtual_store():
        return local_repository(repo_dir, root / "archive").readonly_session("main").store

    def raw_store():
        return icechunk.Repository.open(icechunk.local_filesystem_storage(str(raw_repo))).readonly_session("main").store

    engine_label = "engine (open_mfdataset, engine='tgm')"
    virtual, raw = "virtual store (open_zarr)", "Icechunk raw chunks"
    flows = {engine_label: engine,
             f"{virtual}, default pipeline": zarr_open(virtual_store, {}),
             f"{virtual}, READ_CONFIG": zarr_open(virtual_store, read_config),
             f"{raw}, default pipeline": zarr_open(raw_store, {})}
    if fused:
        flows[f"{virtual}, fused pipeline"] = zarr_open(virtual_store, FUSED)
        flows[f"{raw}, fused pipeline"] = zarr_open(raw_store, FUSED)
    seconds = {label: [] for label in flows}
    cpu_s = {label: [] for label in flows}  # the process's CPU time: what a busy machine distorts least
    means = {}

    def sample(label, keep):
        t0, cpu0 = time.perf_counter(), time.process_time()
        ds = flows[label]()
        result = ds[list(PARAMS)].mean(("latitude", "longitude")).compute()
        wall, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        ds.close()
        means[label] = {name: np.asarray(result[name].values) for name in PARAMS}
        if keep:
            seconds[label].append(wall)
            cpu_s[label].append(cpu)

    with warnings.catch_warnings(), dask.config.set(scheduler="threads", num_workers=ctx.e2e_threads[0]):
        warnings.simplefilter("ignore")
        rounds(list(flows), repeats, sample, warmup=1)
    same = all(np.array_equal(means[engine_label][p], means[label][p]) for p in PARAMS for label in flows)

    def speed(reference, contender, samples=seconds):
        ratios = [r / c for r, c in zip(samples[reference], samples[contender])]
        return statistics.median(ratios), ", ".join(f"{r:.2f}" for r in ratios)

    res.tables.append(Table(
        f"{what} ({'every contender' if same else 'MISMATCH: not every contender'}'s {len(PARAMS)} x {files} x "
        f"{len(archive.levels)} means equal the engine's bit for bit)",
        ["what", "median", "min", "CPU median"],
        [["build references + commit (parse, concat, to_icechunk)", fmt_time(statistics.median(build_s)),
          fmt_time(min(build_s)), ""],
         ["reopen the committed store (xr.open_zarr)", fmt_time(statistics.median(reopen_s)),
          fmt_time(min(reopen_s)), ""],
         *[[f"open + means: {label}", fmt_time(statistics.median(s)), fmt_time(min(s)),
            fmt_time(statistics.median(cpu_s[label]))] for label, s in seconds.items()]]))
    pipelines = ("default pipeline", "fused pipeline") if fused else ("default pipeline",)
    pairs = [(label, engine_label) for label in flows if label != engine_label]
    pairs += [(f"{virtual}, {p}", f"{raw}, {q}") for p in pipelines for q in pipelines]
    pairs.append((f"{virtual}, READ_CONFIG", f"{raw}, default pipeline"))
    res.tables.append(Table(
        f"{what}: speed against the engine and against Icechunk serving raw chunks (same dask chunks)",
        ["contender", "vs", "median", "per round", "by CPU time"],
        [[contender, reference, f"{value:.2f}x", ratios, f"{speed(reference, contender, cpu_s)[0]:.2f}x"]
         for contender, reference in pairs for value, ratios in [speed(reference, contender)]],
        "a ratio is the reference's time over the contender's, per round (median): above 1, the contender is "
        "faster; by CPU time: the same with the process's CPU time, what a machine shared with other work "
        "distorts least (it also counts the work of threads that run in parallel)"))
    res.targets.append(Target(f"virtual {archive.grid}: reopen the committed store (s)",
                              statistics.median(reopen_s), 0.5, "<="))
    recommended = f"{virtual}, {'fused pipeline' if fused else 'READ_CONFIG'}"
    floor = f"{raw}, {'fused pipeline' if fused else 'default pipeline'}"
    for reference, threshold in ((engine_label, archive.engine_target), (floor, RAW_TARGET)):
        value, ratios = speed(reference, recommended)
        res.targets.append(Target(f"virtual {archive.grid}: {recommended} vs {reference}", value, threshold, ">=",
                                  f"[per-round ratios {ratios}]"))
    res.raw[archive.grid] = {"files": files, "build_s": build_s, "reopen_s": reopen_s, "seconds": seconds,
                             "cpu_s": cpu_s}
