"""The ``e2e`` case of ``run.py``: e2e."""

from __future__ import annotations

import statistics
import warnings
from collections.abc import Callable
from typing import Any

import numpy as np

import datagen
from common import (
    CaseResult,
    Context,
    Skip,
    Table,
    Target,
    best_ratio,
    check,
    optional,
    ours_entrypoint,
    time_ratio,
    upstream_xarray_entrypoint,
)
from harness import Samples, fmt_ratio, fmt_time, perf, rounds
from tgm_xarray import open_file
from tgm_xarray.source import handles


def _hours(value) -> float:
    if isinstance(value, np.timedelta64):
        return float(value / np.timedelta64(1, "h"))
    return float(value)


def _means_of_dataset(result) -> dict[tuple, float]:
    """{(param, step in hours, level): value} of a reduced (step, level) Dataset."""
    out = {}
    for name, da in result.data_vars.items():
        step_dim = next(d for d in da.dims if "step" in d)
        level_dim = next(d for d in da.dims if d != step_dim)
        da = da.transpose(step_dim, level_dim)
        steps = [_hours(v) for v in da[step_dim].values]
        levels = [float(v) for v in da[level_dim].values]
        values = np.asarray(da.values, dtype=np.float64)
        for i, st in enumerate(steps):
            for j, lev in enumerate(levels):
                out[(str(name), st, lev)] = float(values[i, j])
    return out


def case_e2e(ctx: Context) -> CaseResult:
    import dask
    import xarray as xr

    name = "e2e-quick" if ctx.quick else "e2e"
    keys = list(datagen.e2e_keys(name))
    res = CaseResult("e2e", f"End to end: open lazily + global means of {len(keys)} fields of 721 x 1440",
                     f"`xr.open_dataset(path, chunks={{}})` then `ds.mean((\"latitude\", \"longitude\"))"
                     f".compute()` over every variable with dask's threaded scheduler. Data: {len(keys)} "
                     "fields (t, q, gh, r on pressure levels x steps) derived from the real IFS fields "
                     "(see `benchmarks/datagen.py`), the same values in every format: `.tgm` (24-bit "
                     "packing + szip, float64, one message per field with latitude/longitude objects), "
                     "GRIB2 (CCSDS 24 bits, through cfgrib, `indexpath=\"\"` so no index file is reused), "
                     "NetCDF4 (float32, zlib 4 + shuffle, one chunk per field, through h5netcdf) and zarr v3 "
                     "(float32, zstd 3, one chunk per field). Upstream tensogram-xarray 0.24 cannot stack "
                     "packed fields into one Dataset (it treats each field's packing parameters as "
                     "metadata that varies, so `merge_objects=True` keeps one field per variable): its "
                     "contender opens each message (`message_index=i`) and computes all the means in one "
                     "`dask.compute`. Open and reduce are timed separately; a sample is one whole "
                     "workflow. Two floors show what the same means cost without xarray and dask: "
                     "each library's own read of every field plus `np.nanmean` (what `mean` does "
                     "on floats) in a thread pool of as many threads.")
    groups = [f"{name}-tgm-grib", f"{name}-nc", f"{name}-zarr"]
    if optional("eccodes") is None:
        groups = [g for g in groups if not g.endswith("tgm-grib")]
        if not (ctx.data / f"{name}.tgm").exists():
            raise Skip(f"{name}.tgm is missing and ecCodes (to make it) is not installed here: "
                       "run the suite under CPython 3.11 first")
    datagen.ensure(groups, ctx.data)
    tgm, grib, nc, zarr_path = (ctx.data / f"{name}{ext}" for ext in (".tgm", ".grib2", ".nc", ".zarr"))
    dims = ("latitude", "longitude")
    ours_cls = ours_entrypoint()

    def ours_open():
        handles.CACHE.clear()  # a real open: map the file and index it again
        return xr.open_dataset(tgm, engine=ours_cls, chunks={})

    def reduce_ds(ds):
        try:
            return _means_of_dataset(ds.mean(dims).compute())
        finally:
            ds.close()

    # label: (open, reduce -> {(param, step, level): mean})
    flows: dict[str, tuple[Callable[[], Any], Callable[[Any], dict]]] = {"tgm_xarray": (ours_open, reduce_ds)}
    upstream_cls = upstream_xarray_entrypoint()
    tensogram = optional("tensogram")
    if upstream_cls is not None and tensogram is not None:
        def upstream_open():
            count = tensogram.TensogramFile.open(str(tgm)).message_count()
            return [xr.open_dataset(tgm, engine=upstream_cls, chunks={}, message_index=i) for i in range(count)]

        def upstream_reduce(datasets):
            try:
                results = dask.compute(*[ds[v].mean(dims) for ds in datasets for v in ds.data_vars])
                out = {}
                for da in results:
                    mars = da.attrs["mars"]
                    out[(str(da.name), float(mars["step"]), float(mars["levelist"]))] = float(da.values)
                return out
            finally:
                for ds in datasets:
                    ds.close()

        flows["upstream tensogram-xarray"] = (upstream_open, upstream_reduce)
    else:
        res.notes.append("upstream tensogram-xarray is not installed: its row is skipped "
                         "(pip install --no-deps --target data/bench/_pkgs tensogram-xarray==0.24.0)")
    if optional("cfgrib") is not None and grib.exists():
        flows["cfgrib (GRIB2)"] = (lambda: xr.open_dataset(grib, engine="cfgrib", indexpath="",
                                                           chunks={"step": 1, "isobaricInhPa": 1}), reduce_ds)
    else:
        res.notes.append("cfgrib is not installed in this interpreter: its row is skipped")
    if optional("h5netcdf") is not None and optional("h5py") is not None:
        flows["h5netcdf (NetCDF4)"] = (lambda: xr.open_dataset(nc, engine="h5netcdf", chunks={}), reduce_ds)
    else:
        res.notes.append("h5netcdf/h5py are not installed in this interpreter: their row is skipped "
                         "(pip install --no-deps --target data/bench/_pkgs h5py)")
    if optional("zarr") is not None:
        flows["zarr (zstd)"] = (lambda: xr.open_dataset(zarr_path, engine="zarr", chunks={}, consolidated=True),
                                reduce_ds)

    # the floors: the same means without xarray or dask (a thread pool over the fields)
    from concurrent.futures import ThreadPoolExecutor

    def floor(read_mean):
        def open_fn():
            return ThreadPoolExecutor(max_workers=dask.config.get("num_workers"))

        def reduce_fn(pool):
            with pool:
                return dict(zip(keys, pool.map(read_mean, range(len(keys)))))
        return open_fn, reduce_fn

    floor_file = {}

    def ours_read_mean(i):
        return float(np.nanmean(floor_file["f"].read(i, 0)))

    def ours_floor():
        open_fn, reduce_fn = floor(ours_read_mean)

        def open_all():
            handles.CACHE.clear()
            floor_file["f"] = open_file(tgm)
            return open_fn()
        return open_all, reduce_fn

    flows["floor: tgm_xarray read + np.nanmean, thread pool"] = ours_floor()
    if tensogram is not None:
        up_file = {}

        def up_read_mean(i):
            return float(np.nanmean(tensogram.decode_object(up_file["f"].read_message(i), 0)[2]))

        up_open, up_reduce = floor(up_read_mean)

        def up_open_all():
            up_file["f"] = tensogram.TensogramFile.open(str(tgm))
            return up_open()
        flows["floor: upstream decode_object + np.nanmean, thread pool"] = (up_open_all, up_reduce)

    def run(label):
        open_fn, reduce_fn = flows[label]
        t0 = perf()
        opened = open_fn()
        t1 = perf()
        values = reduce_fn(opened)
        return values, t1 - t0, perf() - t1

    rows, raw = [], {}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for n in ctx.e2e_threads:
            with dask.config.set(scheduler="threads", num_workers=n):
                # one untimed run of each: the agreement check and the warm-up
                reference, _, _ = run("tgm_xarray")
                res.notes.append(check(len(reference) == len(keys),
                                       f"tgm_xarray: {len(reference)} means, one per field"))
                for label in list(flows)[1:]:
                    values, _, _ = run(label)
                    worst = max(abs(values[k] - v) / max(abs(v), 1e-30) for k, v in reference.items()
                                if k in values) if values else float("inf")
                    res.notes.append(check(set(values) == set(reference) and worst < 1e-5,
                                           f"{label}: the same {len(values)} means as tgm_xarray "
                                           f"(max relative difference {worst:.1e}, {n} dask threads)"))
                opens: dict[str, list[float]] = {label: [] for label in flows}
                reduces: dict[str, list[float]] = {label: [] for label in flows}
                s = {label: Samples() for label in flows}

                def sample(label, keep):
                    _, open_s, reduce_s = run(label)
                    if keep:
                        opens[label].append(open_s)
                        reduces[label].append(reduce_s)
                        s[label].seconds.append(open_s + reduce_s)

                rounds(list(flows), ctx.repeats, sample, warmup=0)
            mine = s["tgm_xarray"]
            for label, sm in s.items():
                rows.append([label, str(n), fmt_time(statistics.median(opens[label])),
                             fmt_time(statistics.median(reduces[label])),
                             f"{fmt_time(sm.min())} / {fmt_time(sm.median())}",
                             "1.00x" if label == "tgm_xarray" else fmt_ratio(time_ratio(sm, mine))])
                raw[f"{label} @{n}"] = {**sm.to_json(), "open_s": opens[label], "reduce_s": reduces[label]}
            if "upstream tensogram-xarray" in s:
                up = s["upstream tensogram-xarray"]
                res.targets.append(Target(f"e2e ({n} dask threads): speed-up over upstream tensogram-xarray",
                                          time_ratio(up, mine), 3.0, ">=",
                                          f"[best samples: {best_ratio(mine, up):.2f}]"))
            for label in ("cfgrib (GRIB2)", "h5netcdf (NetCDF4)"):
                if label in s:
                    res.targets.append(Target(f"e2e ({n} dask threads): speed-up over {label}",
                                              time_ratio(s[label], mine), 1.0, ">=",
                                              f"[best samples: {best_ratio(mine, s[label]):.2f}]"))
    res.tables.append(Table(f"{len(keys)} fields of 721 x 1440: open + global mean of every field",
                            ["contender", "dask threads", "open (median)", "reduce (median)",
                             "total (min / median)", "total / tgm_xarray's"], rows))
    res.raw = raw
    return res
