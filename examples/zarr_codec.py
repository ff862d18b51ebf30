"""Store a field in a zarr v3 array with the `tensogram` codec: GRIB-style simple packing + szip.

`tgm_xarray.TensogramCodec` is a zarr array-to-bytes codec (a *serializer*): every chunk becomes
one self-describing Tensogram message. This writes the 2 m temperature field into a zarr array
with 24-bit packing + szip (as ECMWF's CCSDS GRIB), reads it back in a fresh array object (zarr
finds the codec through its `zarr.codecs` entry point), and prints the stored size against the raw
float64 size, and the largest error against the packing's bound. See docs/zarr.md.

    python examples/zarr_codec.py [FILE] [--bits 24] [--out DIR]

FILE defaults to $TGM_XARRAY_EXAMPLE_FILE, else the tutorial file ifs-0p25-20260404.tgm
(ECMWF open data, CC-BY-4.0) from `tgm_xarray.tutorial` (see examples/_data.py). The field is
message 0, object 0.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import zarr

import tgm_xarray
from _data import output_dir, parse_args
from tgm_xarray import TensogramCodec


def main() -> None:
    args = parse_args(__doc__, **{
        "--bits": {"type": int, "default": 24, "choices": (8, 16, 24, 32),
                   "help": "bits per packed value (szip takes 8, 16, 24 or 32; default 24)"},
        "--out": {"type": Path, "default": None, "help": "directory for t2m.zarr (default: a temp dir)"},
    })
    source = tgm_xarray.open_file(args.path)
    field = source.read(0, 0)
    name = source.metadata(0)["base"][0].get("name", "field")
    print(f"{name}: {field.shape} {field.dtype}, {field.nbytes / 1e6:.1f} MB raw")

    codec = TensogramCodec(encoding="simple_packing", bits_per_value=args.bits, compression="szip")
    print(f"codec: {codec.to_dict()}")
    with output_dir(args.out, "tgm-zarr-") as out_dir:
        store = out_dir / "t2m.zarr"

        start = time.perf_counter()
        # compressors=None: the codec is the whole pipeline (zarr would add zstd after it otherwise),
        # fill_value=NaN: edge chunks are padded with it, and NaN stays out of the packing range.
        z = zarr.create_array(store, shape=field.shape, chunks=(361, 720), dtype=field.dtype,
                              fill_value=np.nan, serializer=codec, compressors=None, overwrite=True)
        z[:] = field
        written = time.perf_counter() - start

        start = time.perf_counter()
        back = zarr.open_array(store, mode="r")[:]
        read = time.perf_counter() - start

        stored = sum(p.stat().st_size for p in (store / "c").rglob("*") if p.is_file())
        error = float(np.max(np.abs(back - field)))
        bound = float((field.max() - field.min()) / (2**args.bits - 1))
        print(f"\n{store}: {z.nchunks} chunks of {z.chunks}, written in {1e3 * written:.0f} ms, "
              f"read in {1e3 * read:.0f} ms")
        print(f"size ratio (stored chunks / raw float64): {stored / field.nbytes:.3f} "
              f"({stored / 1e6:.2f} MB of {field.nbytes / 1e6:.2f} MB)")
        print(f"max abs error: {error:.3g} (bound for {args.bits} bits: (max - min) / (2^bits - 1) = {bound:.3g})")
        if error == 0:
            print("  (exact: the values already lie on a grid that this packing contains; the tutorial's "
                  "fields come from 12-bit GRIB packing)")
        assert error <= bound, "the packing error exceeds its documented bound"


if __name__ == "__main__":
    main()
