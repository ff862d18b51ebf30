"""The ``virtual`` case of ``run.py``: virtual Zarr references over a ``.tgm`` archive.

An archive of 200 files x 48 messages (one forecast step per file: 4 parameters x 12 pressure
levels of a 2.5-degree field, 24-bit packing + szip, with latitude/longitude objects) is turned
into references with ``tgm_xarray.virtual.TensogramParser`` and committed to an Icechunk
repository. Measured in the same run: building the references (parse every file, concatenate,
commit), reopening the committed store, and the end-to-end reduction (open lazily + the global
mean of every field with dask's threaded scheduler) through ``xr.open_zarr`` on the repository
against ``xr.open_mfdataset(..., engine="tgm")`` on the same files. Beside them, with the same
dask chunks, the same values decoded once and stored as ordinary zarr chunks without compression
(on a local zarr store and in an Icechunk repository, same chunk shape): what zarr itself costs
for that read when a chunk has nothing to decode. On zarr >= 3.3, the virtual store and the raw
chunks are read again through zarr's synchronous pipeline (``FusedCodecPipeline``).
"""

from __future__ import annotations

import shutil
import statistics
import time
import warnings
from pathlib import Path

import numpy as np

import datagen
from common import CaseResult, Context, Skip, Table, Target, optional
from harness import Samples, fmt_time, rounds
from tgm_xarray import handles

FILES, PARAMS, LEVELS = 200, ("t", "q", "r", "gh"), (1000, 925, 850, 700, 600, 500, 400, 300, 250, 200, 150, 100)
NY, NX = 73, 144
QUICK_FILES = 20


def _archive(root: Path, files: int) -> list[Path]:
    """The archive, made once (about 30 s for 200 files)."""
    done = root / ".complete"
    paths = [root / f"fc-step{3 * i:03d}.tgm" for i in range(files)]
    if done.exists():
        return paths
    shutil.rmtree(root, ignore_errors=True)
    root.mkdir(parents=True)
    lat = np.linspace(90, -90, NY)
    lon = np.linspace(0, 357.5, NX)
    coords = datagen.coordinate_objects(lat, lon)
    y, x = np.deg2rad(lat)[:, None], np.deg2rad(lon)[None, :]
    for i, path in enumerate(paths):
        step = 3 * i
        with open(path, "wb") as f:
            for p, param in enumerate(PARAMS):
                for k, level in enumerate(LEVELS):
                    values = 250 + 30 * np.cos(y) ** 2 + 5 * np.sin(3 * x + p + k / 7 + step / 24) + 0 * x
                    f.write(datagen.tgm_message(values, datagen.field_base(param, step, level, "K"), coords))
    done.touch()
    return paths


def _native_copies(root: Path, paths: list[Path]) -> tuple[Path, Path]:
    """The archive's values as ordinary zarr chunks (raw little-endian bytes, no compression, one
    field per chunk, as the references have it): a local zarr store and an Icechunk repository,
    made once from the engine's Dataset."""
    import icechunk
    import xarray as xr

    from common import ours_entrypoint

    local, repo_dir = root / "native-raw.zarr", root / "native-raw.icechunk"
    done = root / ".native-complete"
    if done.exists():
        return local, repo_dir
    for path in (local, repo_dir):
        shutil.rmtree(path, ignore_errors=True)
    with xr.open_mfdataset(paths, engine=ours_entrypoint(), combine="nested", concat_dim="step",
                           coords="minimal", compat="override", data_vars="minimal") as ds:
        ds = ds[list(PARAMS)].load()
    encoding = {name: {"chunks": (1, 1, NY, NX), "compressors": None} for name in PARAMS}
    ds.to_zarr(local, zarr_format=3, encoding=encoding, consolidated=False)
    repo = icechunk.Repository.create(icechunk.local_filesystem_storage(str(repo_dir)))
    session = repo.writable_session("main")
    ds.to_zarr(session.store, zarr_format=3, encoding=encoding, consolidated=False)
    session.commit("the archive's values, raw")
    done.touch()
    return local, repo_dir


def case_virtual(ctx: Context) -> CaseResult:
    if optional("virtualizarr") is None or optional("icechunk") is None or optional("obstore") is None:
        raise Skip("virtualizarr, icechunk or obstore is not installed in this interpreter "
                   "(pip install 'tgm-xarray[virtual]'; no free-threaded wheels)")
    import dask
    import xarray as xr
    import zarr
    from obspec_utils.registry import ObjectStoreRegistry
    from obstore.store import LocalStore
    from virtualizarr import open_virtual_mfdataset

    from common import ours_entrypoint
    from tgm_xarray.virtual import READ_CONFIG, TensogramParser, local_repository
    from tgm_xarray.zarr_codec import ZARR_SYNC_PIPELINE

    files = QUICK_FILES if ctx.quick else FILES
    root = ctx.data / f"virtual-{files}"
    paths = _archive(root / "archive", files)
    res = CaseResult("virtual", f"Virtual Zarr: {files} files x {len(PARAMS) * len(LEVELS)} messages as Icechunk "
                     "references", __doc__.split("\n\n")[1].replace("\n", " "))
    registry = ObjectStoreRegistry({"file://": LocalStore()})
    urls = [p.resolve().as_uri() for p in paths]
    repo_dir = root / "repo"
    repeats = max(3, ctx.repeats // 2)

    def build():
        handles.CACHE.clear()  # parse every file afresh
        shutil.rmtree(repo_dir, ignore_errors=True)
        vds = open_virtual_mfdataset(urls, registry=registry, parser=TensogramParser(), combine="nested",
                                     concat_dim="step", coords="minimal", compat="override")
        repo = local_repository(repo_dir, root / "archive")
        session = repo.writable_session("main")
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

    dims = ("latitude", "longitude")
    ours_cls = ours_entrypoint()
    native_local, native_repo = _native_copies(root, paths)

    def engine_open(chunks):
        def open_():
            handles.CACHE.clear()
            return xr.open_mfdataset(paths, engine=ours_cls, combine="nested", concat_dim="step", chunks=chunks,
                                     coords="minimal", compat="override", data_vars="minimal")
        return open_

    def virtual_open(chunks, config=None):
        def open_():
            with zarr.config.set(config or {}):  # the arrays keep the settings they were opened with
                return xr.open_zarr(local_repository(repo_dir, root / "archive").readonly_session("main").store,
                                    consolidated=False, zarr_format=3, chunks=chunks)
        return open_

    def native_open(store_of, chunks, config=None):
        def open_():
            with zarr.config.set(config or {}):
                return xr.open_zarr(store_of(), consolidated=False, zarr_format=3, chunks=chunks)
        return open_

    def native_icechunk():
        import icechunk
        storage = icechunk.local_filesystem_storage(str(native_repo))
        return icechunk.Repository.open(storage).readonly_session("main").store

    # One field per dask task (both stores' own chunks), and the 12 levels of a step per task:
    # zarr then fetches and decodes a task's chunks concurrently in one call.
    levels = {"isobaricInhPa": -1}
    flows = {"tgm_xarray engine, chunks={}": engine_open({}),
             "virtual store (open_zarr on Icechunk), chunks={}": virtual_open({}),
             f"tgm_xarray engine, chunks={levels}": engine_open(levels),
             f"virtual store (open_zarr on Icechunk), chunks={levels}": virtual_open(levels),
             f"virtual store, chunks={levels}, zarr.config READ_CONFIG": virtual_open(levels, READ_CONFIG),
             "zarr, no references: raw chunks on a local store, chunks={}": native_open(lambda: native_local, {}),
             "Icechunk, no references: raw chunks, chunks={}": native_open(native_icechunk, {}),
             f"zarr, no references: raw chunks on a local store, chunks={levels}":
                 native_open(lambda: native_local, levels),
             f"Icechunk, no references: raw chunks, chunks={levels}": native_open(native_icechunk, levels)}
    fused = {"codec_pipeline.path": "zarr.core.codec_pipeline.FusedCodecPipeline"}
    fused_flows = {  # zarr's synchronous pipeline, where this zarr has it
        f"virtual store, chunks={levels}, FusedCodecPipeline": virtual_open(levels, fused),
        f"zarr, no references: raw chunks on a local store, chunks={levels}, FusedCodecPipeline":
            native_open(lambda: native_local, levels, fused),
        f"Icechunk, no references: raw chunks, chunks={levels}, FusedCodecPipeline":
            native_open(native_icechunk, levels, fused)} if ZARR_SYNC_PIPELINE else {}
    flows.update(fused_flows)
    samples = {label: Samples() for label in flows}
    cpu_s = {label: [] for label in flows}  # the process's CPU time: what a busy machine distorts least
    means = {}

    def sample(label, keep):
        t0, cpu0 = time.perf_counter(), time.process_time()
        ds = flows[label]()
        result = ds[list(PARAMS)].mean(dims).compute()
        seconds, cpu = time.perf_counter() - t0, time.process_time() - cpu0
        ds.close()
        means[label] = {name: np.asarray(result[name].values) for name in PARAMS}
        if keep:
            samples[label].seconds.append(seconds)
            cpu_s[label].append(cpu)

    with warnings.catch_warnings(), dask.config.set(scheduler="threads", num_workers=ctx.e2e_threads[0]):
        warnings.simplefilter("ignore")
        rounds(list(flows), repeats, sample, warmup=1)
    res.notes.append(f"both sides: dask's threaded scheduler with {ctx.e2e_threads[0]} threads, the chunks= "
                     "each label says; the virtual store with zarr's config (async.concurrency "
                     f"{zarr.config.get('async.concurrency')}, threading.max_workers "
                     f"{zarr.config.get('threading.max_workers')}) and Icechunk's; READ_CONFIG is "
                     f"tgm_xarray.virtual.READ_CONFIG {READ_CONFIG}, the settings docs/virtual.md recommends")
    (engine_one, virtual_one, engine_levels, virtual_levels, virtual_read_config,
     zarr_raw, icechunk_raw, zarr_raw_levels, icechunk_raw_levels, *fused_labels) = list(flows)
    same = all(np.array_equal(means[engine_one][p], means[label][p]) for p in PARAMS for label in flows)
    res.notes.append(f"{'ok' if same else 'MISMATCH'}: every contender's {len(PARAMS)} x {files} x "
                     f"{len(LEVELS)} means equal the engine's bit for bit")

    def speed(engine_label, virtual_label):
        ratios = [e / v for e, v in zip(samples[engine_label].seconds, samples[virtual_label].seconds)]
        return statistics.median(ratios), ", ".join(f"{r:.2f}" for r in ratios)
    res.tables.append(Table(
        f"{files} files x {len(PARAMS) * len(LEVELS)} fields of {NY} x {NX}",
        ["what", "median", "min"],
        [["build references + commit (parse, concat, to_icechunk)", fmt_time(statistics.median(build_s)),
          fmt_time(min(build_s))],
         ["reopen the committed store (xr.open_zarr)", fmt_time(statistics.median(reopen_s)), fmt_time(min(reopen_s))],
         *[[f"e2e open + means: {label}", fmt_time(s.median()), fmt_time(s.min())] for label, s in samples.items()],
         *[[f"CPU time of e2e open + means: {label}", fmt_time(statistics.median(c)), fmt_time(min(c))]
           for label, c in cpu_s.items()]]))
    res.targets.append(Target("virtual: reopen the committed store (s)", statistics.median(reopen_s), 0.5, "<="))
    for what, engine_label, virtual_label in (
            ("virtual store chunks={'isobaricInhPa': -1} vs engine chunks={}", engine_one, virtual_levels),
            ("both chunks={}", engine_one, virtual_one),
            ("both chunks={'isobaricInhPa': -1}", engine_levels, virtual_levels),
            ("both chunks={'isobaricInhPa': -1}, the virtual store with READ_CONFIG", engine_levels,
             virtual_read_config)):
        value, ratios = speed(engine_label, virtual_label)
        res.targets.append(Target(f"virtual: e2e speed of open_zarr on the virtual store vs the engine, {what}",
                                  value, 0.8, ">=", f"[per-round ratios {ratios}]"))
    # What zarr costs whatever the codec: raw chunks have nothing to decode.
    res.tables.append(Table(
        "speed against the engine and against zarr on raw chunks, same dask chunks: what zarr itself reaches",
        ["contender", "vs", "median", "per round"],
        [[contender, reference, f"{value:.2f}x", ratios]
         for contender, reference in (
             (virtual_one, engine_one), (zarr_raw, engine_one), (icechunk_raw, engine_one),
             (virtual_one, icechunk_raw), (virtual_one, zarr_raw),
             (virtual_levels, engine_levels), (zarr_raw_levels, engine_levels), (icechunk_raw_levels, engine_levels),
             (virtual_levels, icechunk_raw_levels), (virtual_levels, zarr_raw_levels),
             *_fused_pairs(fused_labels, engine_levels, virtual_levels, icechunk_raw_levels))
         for value, ratios in [speed(reference, contender)]],
        "a ratio is the reference's time over the contender's: above 1, the contender is faster"))
    res.raw = {"build_s": build_s, "reopen_s": reopen_s,
               **{label: s.to_json() for label, s in samples.items()}, "cpu_s": cpu_s, "files": files}
    return res


def _fused_pairs(fused_labels, engine_levels, virtual_levels, icechunk_raw_levels) -> list[tuple[str, str]]:
    """The fused pipeline's rows of the speed table (none on zarr < 3.3): the virtual store against
    the engine, its default pipeline and raw chunks on both pipelines; raw chunks against the engine."""
    if not fused_labels:
        return []
    virtual_fused, zarr_raw_fused, icechunk_raw_fused = fused_labels
    return [(virtual_fused, engine_levels), (virtual_fused, virtual_levels), (virtual_fused, icechunk_raw_levels),
            (virtual_fused, icechunk_raw_fused), (zarr_raw_fused, engine_levels), (icechunk_raw_fused, engine_levels)]
