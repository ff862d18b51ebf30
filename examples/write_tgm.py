"""Build a small forecast Dataset, write it with `tgm_xarray.to_tgm`, append a step, read it back.

The Dataset looks like one cfgrib returns: 2 m temperature and temperature on two pressure levels,
a forecast reference `time`, 6-hourly `step`s, on a 0.5-degree grid over Europe. `to_tgm` writes
one message per field (GRIB-like: `time`, `step` and the level become MARS keys), here with
16-bit packing + szip for `t` and the lossless default (blosc2 + zstd) for `2t`; `mode="a"`
appends a later step; `xr.open_dataset(..., engine="tgm")` rebuilds the hypercube. See
docs/writer.md. No input file: the values are synthetic.

    python examples/write_tgm.py [--out DIR]
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import pandas as pd
import xarray as xr

import tgm_xarray
from _data import output_dir


def forecast(steps: list[int]) -> xr.Dataset:
    """A smooth synthetic forecast: a north-south gradient, a wave, and a diurnal cycle."""
    lat = np.arange(72.0, 34.9, -0.5)  # north to south, as in GRIB
    lon = np.arange(-25.0, 45.01, 0.5)
    step = pd.to_timedelta(steps, unit="h")
    hours = np.asarray(steps, dtype=float)[:, None, None]
    y, x = np.deg2rad(lat)[None, :, None], np.deg2rad(lon)[None, None, :]
    t2m = 255 + 35 * np.cos(y) ** 2 + 3 * np.sin(3 * x + y) + 4 * np.sin(2 * np.pi * hours / 24 + x)
    levels = np.array([850, 500])
    t = t2m[:, None] - np.array([12.0, 35.0])[None, :, None, None]  # colder aloft
    ds = xr.Dataset(
        {
            "2t": (("step", "latitude", "longitude"), t2m, {"units": "K", "long_name": "2 metre temperature"}),
            "t": (("step", "isobaricInhPa", "latitude", "longitude"), t, {"units": "K", "long_name": "Temperature"}),
        },
        coords={
            "time": np.datetime64("2026-04-04T00:00", "ns"),
            "step": step,
            "isobaricInhPa": ("isobaricInhPa", levels, {"units": "hPa", "positive": "down"}),
            "latitude": ("latitude", lat, {"units": "degrees_north", "standard_name": "latitude"}),
            "longitude": ("longitude", lon, {"units": "degrees_east", "standard_name": "longitude"}),
        },
        attrs={"institution": "tgm-xarray example (synthetic data)"},
    )
    return ds


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="directory for forecast.tgm (default: a temp dir)")
    args = parser.parse_args()
    with output_dir(args.out, "tgm-write-") as out_dir:
        path = out_dir / "forecast.tgm"

        ds = forecast([0, 6, 12, 18])
        encoding = {"t": {"bits": 16, "compression": "szip"}}  # 2t: the lossless default
        first, last = ds.isel(step=slice(0, 3)), ds.isel(step=[3])

        tgm_xarray.to_tgm(first, path, encoding=encoding)            # atomic: the file appears when complete
        print(f"wrote {path}: {len(tgm_xarray.open_file(path))} messages, {path.stat().st_size / 1e3:.0f} kB")
        last.tgm.to_file(path, mode="a", encoding=encoding)         # ds.tgm (import tgm_xarray registers it): + step 18
        print(f"appended step 18: {len(tgm_xarray.open_file(path))} messages, {path.stat().st_size / 1e3:.0f} kB "
              f"({ds.nbytes / 1e3:.0f} kB in memory)\n")

        with xr.open_dataset(path, engine="tgm") as back:
            print(back)
            back = back.load()
        steps = (back.step.values / np.timedelta64(1, "h")).astype(int).tolist()
        print(f"\nsteps read back (h): {steps}; valid_time: "
              f"{[str(v)[:16] for v in back.valid_time.values]}")
        exact = bool((back["2t"] == ds["2t"]).all())
        t_error = float(abs(back["t"] - ds["t"]).max())
        t_bound = float((ds["t"].max() - ds["t"].min()) / (2**16 - 1))
        print(f"2t (lossless) identical: {exact}")
        print(f"t (16-bit packing) max abs error: {t_error:.3g} K (bound over the data's range: {t_bound:.3g} K)")
        assert exact and t_error <= t_bound


if __name__ == "__main__":
    main()
