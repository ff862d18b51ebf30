"""Open a `.tgm` file lazily with xarray, select a region, and reduce every field with dask threads.

`xr.open_dataset(path, engine="tgm", chunks={})` reads metadata only: each stored field
becomes one dask chunk, decoded when (and as far as) a computation needs it, by the Rust core
with the interpreter released, so dask's threads decode in parallel.

    python examples/open_lazily.py [FILE]

FILE defaults to $TGM_XARRAY_EXAMPLE_FILE, else the tutorial file ifs-0p25-20260404.tgm
(ECMWF open data, CC-BY-4.0) from `tgm_xarray.tutorial` (see examples/_data.py). The selection
below uses its variables (2t, and t at 600 hPa).
"""

from __future__ import annotations

import time

import dask
import numpy as np
import xarray as xr

from _data import parse_args


def main() -> None:
    args = parse_args(__doc__)
    start = time.perf_counter()

    # 1. Open: metadata only, one dask chunk per field.
    ds = xr.open_dataset(args.path, engine="tgm", chunks={})
    print(ds)
    print(f"\nopened in {1e3 * (time.perf_counter() - start):.0f} ms; "
          f"{sum(v.data.npartitions for v in ds.data_vars.values())} dask chunks, nothing decoded yet")

    with dask.config.set(scheduler="threads"):
        # 2. Select: a window over Europe, by coordinate values. Only the window is read (dask
        # passes the slice down to the backend, which decodes the rows it needs).
        europe = ds[["2t", "t"]].sel(isobaricInhPa=600, latitude=slice(72, 35), longitude=slice(-25, 45))
        europe = europe.compute()
        print(f"\nEurope window {dict(europe.sizes)}: mean 2 m temperature {float(europe['2t'].mean()):.2f} K, "
              f"mean temperature at 600 hPa {float(europe['t'].mean()):.2f} K")

        # 3. Reduce: area-weighted global means of every variable (the chunks decode in parallel).
        weights = np.cos(np.deg2rad(ds.latitude))
        means = ds.weighted(weights).mean(("latitude", "longitude")).compute()

    print("\nglobal means (cos(latitude)-weighted):")
    for name, value in means.data_vars.items():
        units = ds[name].attrs.get("units", "")
        if "isobaricInhPa" in value.dims:  # a row per level the file holds (the others are NaN)
            rows = [(f"{name} at {level} hPa", v) for level, v in zip(value.isobaricInhPa.values, value.values)]
        else:
            rows = [(name, float(value))]
        for label, v in rows:
            if np.isfinite(v):
                print(f"  {label:<14} {v:11.6g} {units}")
    ds.close()
    print(f"\ndone in {time.perf_counter() - start:.2f} s")


if __name__ == "__main__":
    main()
