"""Open a remote `.tgm` (https://, s3://) lazily and read a window of it by range requests.

Opening reads only the messages' headers and descriptors; each chunk read fetches the one frame
it needs (docs/remote.md). Needs `pip install fsspec aiohttp` (`pip install ".[remote]"` in the
clone; s3:// needs s3fs too).

    python examples/remote_http.py URL [--anon]

URL is any `.tgm` on a server that answers HTTP range requests, or an `s3://` object (`--anon`
for public buckets), e.g. the tutorial's files served from a copy: see docs/tutorial.md.
"""

from __future__ import annotations

import argparse
import time

import xarray as xr

import tgm_xarray


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("url", help="an http(s):// or s3:// URL of a .tgm file")
    parser.add_argument("--anon", action="store_true", help="anonymous access (public s3 buckets)")
    args = parser.parse_args()
    options = {"anon": True} if args.anon else None

    start = time.perf_counter()
    f = tgm_xarray.open_file(args.url, storage_options=options)
    print(f"{f}: indexed {f.handle.file_size:,} bytes in {time.perf_counter() - start:.2f} s")

    ds = xr.open_dataset(args.url, engine="tgm", chunks={}, storage_options=options)
    print(ds)
    name = next(n for n, v in ds.data_vars.items() if {"latitude", "longitude"} <= set(v.dims))
    window = ds[name].sel(latitude=slice(72, 34), longitude=slice(-12, 32))  # Europe
    start = time.perf_counter()
    values = window.compute(scheduler="threads")
    print(f"{name} over Europe: shape {values.shape}, mean {float(values.mean()):.3f}, "
          f"read in {time.perf_counter() - start:.2f} s")


if __name__ == "__main__":
    main()
