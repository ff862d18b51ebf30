"""tgm-xarray in one minute: write an operational-style forecast, then read it with xarray + dask.

Builds a realistic multi-variable forecast on the real 0.25-degree grid (2 m temperature, the
land-sea mask, and temperature and specific humidity on pressure levels over several steps,
derived from the real ECMWF fields in ../shared/fixtures), writes it as a GRIB-like `.tgm` (one
message per field, 24-bit packing + szip, as ECMWF's CCSDS GRIB), then opens it lazily and
reduces it with dask's threaded scheduler.

    python examples/demo.py [--out DIR] [--steps N]
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import dask
import numpy as np
import pandas as pd
import xarray as xr

import tgm_xarray
from _data import output_dir

REPO = Path(__file__).resolve().parent.parent
REAL_FILE = REPO.parent / "shared" / "fixtures" / "real" / "ifs-0p25-20260404.tgm"
LEVELS = [1000, 850, 700, 500, 300]


def forecast(steps: int) -> xr.Dataset:
    """A forecast Dataset shaped like cfgrib's, its fields derived from the real analysis."""
    real = xr.open_dataset(REAL_FILE, engine="tgm").load()
    lat, lon = real.latitude, real.longitude
    step = pd.to_timedelta(np.arange(steps) * 6, unit="h")
    hours = step / pd.Timedelta(hours=1)
    # A diurnal cycle and a travelling wave: smooth, so packing and szip behave as on real data.
    wave = np.sin(np.deg2rad(lon.values)[None, None, :] - 0.1 * hours.values[:, None, None])
    diurnal = 3 * np.cos(np.deg2rad(lat.values))[None, :, None] * wave
    t2m = real["2t"].values[None] + diurnal
    profile = np.array([0.0, -10, -20, -35, -60])[:, None, None]
    t_pl = real["t"].sel(isobaricInhPa=600).values[None, None] + profile[None] + diurnal[:, None] * 0.5
    q_pl = np.clip(real["q"].sel(isobaricInhPa=150).values[None, None] * np.exp(-profile[None] / 30)
                   * (1 + 0.1 * wave[:, None]), 0, None)
    coords = {"time": np.datetime64("2026-04-04T00:00", "ns"), "step": step,
              "isobaricInhPa": LEVELS, "latitude": lat, "longitude": lon}
    pl_dims = ("step", "isobaricInhPa", "latitude", "longitude")
    ds = xr.Dataset(
        {
            "2t": (("step", "latitude", "longitude"), t2m, {"units": "K", "long_name": "2 metre temperature"}),
            "lsm": (("latitude", "longitude"), real["lsm"].values, {"units": "(0 - 1)", "long_name": "Land-sea mask"}),
            "t": (pl_dims, t_pl, {"units": "K", "long_name": "Temperature"}),
            "q": (pl_dims, q_pl, {"units": "kg kg**-1", "long_name": "Specific humidity"}),
        },
        coords=coords,
        attrs={"institution": "tgm-xarray demo (derived from ECMWF open data, CC-BY-4.0)"},
    )
    ds.isobaricInhPa.attrs.update(units="hPa", long_name="pressure", positive="down")
    return ds


def timed(label: str, fn):
    start = time.perf_counter()
    result = fn()
    print(f"  {label:<46} {1e3 * (time.perf_counter() - start):8.1f} ms")
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="directory for forecast.tgm (default: a temp dir)")
    parser.add_argument("--steps", type=int, default=5, help="forecast steps (6-hourly)")
    args = parser.parse_args()
    with output_dir(args.out, "tgm-demo-") as out_dir:
        path = out_dir / "forecast.tgm"

        print(f"tgm-xarray {tgm_xarray.__version__} on {os.cpu_count()} CPUs")
        ds = forecast(args.steps)
        n_fields = sum(int(np.prod(v.shape[:-2])) for v in ds.data_vars.values())
        packing = {"bits": 24, "compression": "szip"}
        print(f"\nWriting {n_fields} fields of 721 x 1440 ({ds.nbytes / 1e6:.0f} MB in memory), 24-bit packing + szip:")
        timed("to_tgm", lambda: tgm_xarray.to_tgm(ds, path, encoding={v: packing for v in ds.data_vars}))
        print(f"  {path}: {path.stat().st_size / 1e6:.1f} MB ({ds.nbytes / path.stat().st_size:.1f}x smaller)")

        print("\nReading it back:")
        lazy = timed("xr.open_dataset(engine='tgm', chunks={})",
                     lambda: xr.open_dataset(path, engine="tgm", chunks={}))
        print()
        print(lazy)
        print()
        weights = np.cos(np.deg2rad(lazy.latitude))
        with dask.config.set(scheduler="synchronous"):
            timed("area means of every field, 1 thread", lambda: lazy.weighted(weights).mean(("latitude", "longitude")).compute())
        with dask.config.set(scheduler="threads"):
            means = timed("area means of every field, dask threads",
                          lambda: lazy.weighted(weights).mean(("latitude", "longitude")).compute())
        europe = timed("a Europe window of t at 500 hPa, all steps",
                       lambda: lazy.t.sel(isobaricInhPa=500, latitude=slice(72, 35), longitude=slice(-25, 45)).compute())
        print(f"\n  global mean 2 m temperature by step (K): {np.round(means['2t'].values, 2).tolist()}")
        print(f"  Europe window: shape {europe.shape}, mean {float(europe.mean()):.2f} K")
        error = float(abs(lazy["2t"].load() - ds["2t"]).max())
        print(f"  largest 2 m temperature error after packing: {error:.2e} K")
        lazy.close()


if __name__ == "__main__":
    main()
