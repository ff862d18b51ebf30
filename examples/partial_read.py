"""Read a window of one field with the low-level API, and count what the decoder had to produce.

`tgm_xarray.open_file(path).read(msg, obj, index, out=...)` reads an object, or the part an
outer index selects, straight into a numpy array you own. With simple packing + szip (the file's
codec, as in GRIB) only the rows spanning the window are decoded, from szip's block offsets; the
first range read of a field also makes one decoding pass over it to find those offsets (libaec's
recorded ones cannot be trusted, see docs/zarr.md), which the file handle then keeps.
`tgm_xarray._core.decoded_elements()` counts the values the decoders produce in this process.

    python examples/partial_read.py [FILE] [--message N]

FILE defaults to $TGM_XARRAY_EXAMPLE_FILE, else the tutorial file ifs-0p25-20260404.tgm
(ECMWF open data, CC-BY-4.0) from `tgm_xarray.tutorial` (see examples/_data.py). As there, each
message must hold a latitude/longitude field followed by its latitude and longitude coordinates.
"""

from __future__ import annotations

import numpy as np

import tgm_xarray
from _data import parse_args
from tgm_xarray._core import decoded_elements


def counted(read):
    """``read()``'s result and the number of values the decoders produced for it."""
    before = decoded_elements()
    result = read()
    return result, decoded_elements() - before


def main() -> None:
    args = parse_args(__doc__, **{"--message": {"type": int, "default": 0, "help": "message to read (default 0)"}})
    f = tgm_xarray.open_file(args.path)
    msg = args.message
    print(f)
    name = f.metadata(msg)["base"][0].get("name", "?")
    descriptor = f.descriptors(msg)[0]
    shape, dtype = f.layout(msg, 0)
    print(f"message {msg}, object 0: {name} {shape} {dtype}, encoding {descriptor['encoding']}, "
          f"filter {descriptor['filter']}, compression {descriptor['compression']}")

    # Objects 1 and 2 are the latitude and longitude coordinates: find Europe's rows and columns.
    lat, lon = f.read(msg, 1), f.read(msg, 2)
    rows = np.flatnonzero((lat <= 72) & (lat >= 35))
    cols = np.flatnonzero((lon >= -25) & (lon <= 45))
    window = (slice(rows[0], rows[-1] + 1), slice(cols[0], cols[-1] + 1))
    out = np.empty((rows.size, cols.size), dtype)  # the read decodes into this array, no copy
    print(f"window: rows {rows[0]}..{rows[-1]} ({lat[rows[0]]:g}..{lat[rows[-1]]:g} N), "
          f"columns {cols[0]}..{cols[-1]} ({lon[cols[0]]:g}..{lon[cols[-1]]:g} E): {out.size:,} values\n")

    _, first = counted(lambda: f.read(msg, 0, window, out=out))
    _, again = counted(lambda: f.read(msg, 0, window, out=out))
    coarse, strided = counted(lambda: f.read(msg, 0, (slice(None, None, 4), slice(None, None, 4))))
    full, whole = counted(lambda: f.read(msg, 0))

    assert np.array_equal(out, full[window]), "the window differs from the same part of a full read"
    assert np.array_equal(coarse, full[::4, ::4]), "the strided read differs from the full read"
    setup = "  (with a one-time pass over the field: szip's block offsets)" if first > again else ""
    print(f"  {'read':<37} {'values decoded':>14}   (the field holds {full.size:,})")
    print(f"  {'the window, first range read':<37} {first:>14,}{setup}")
    print(f"  {'the window again':<37} {again:>14,}")
    print(f"  {'every 4th row and column':<37} {strided:>14,}   -> {coarse.shape}")
    print(f"  {'the whole field':<37} {whole:>14,}")
    print(f"\nthe window equals the same part of the full read: mean {out.mean():.6g}, "
          f"min {out.min():.6g}, max {out.max():.6g}")


if __name__ == "__main__":
    main()
