"""Convert real ECMWF GRIB fields to Tensogram, open the result, and map 2 m temperature.

    python examples/grib_to_tgm.py [--shared ../shared] [--output ./output] [--bits 16]

The inputs are the IFS 0.25-degree open-data fields of the shared fixtures (2t, lsm, q at 150 hPa,
t at 600 hPa; CC-BY-4.0, Copyright ECMWF). Writes ``fields.tgm`` and ``2t.png`` into the output
directory (``*.tgm`` and ``*.png`` are git-ignored).
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # no display needed

import cfgrib  # noqa: E402
import matplotlib.pyplot as plt  # noqa: E402
import xarray as xr  # noqa: E402

from tgm_xarray.writer import TgmWriter  # noqa: E402

REPO = Path(__file__).resolve().parents[1]
FIELDS = ("2t", "lsm", "q_150", "t_600")


def convert(grib_dir: Path, target: Path, bits: int) -> None:
    """Every field into one file, as GRIB-like messages (one per field, MARS keys)."""
    with TgmWriter(target) as writer:  # atomic: `target` appears once everything is written
        for name in FIELDS:
            # indexpath="": cfgrib must not write index files next to (read-only) inputs
            for ds in cfgrib.open_datasets(str(grib_dir / f"{name}.grib2"), backend_kwargs={"indexpath": ""}):
                writer.write(ds, encoding={var: {"bits": bits} for var in ds.data_vars})


def plot_2t(ds: xr.Dataset, png: Path) -> None:
    celsius = ds["t2m"] - 273.15
    lat, lon = ds["latitude"].values, ds["longitude"].values
    fig, ax = plt.subplots(figsize=(10, 5.2))
    image = ax.imshow(celsius.values, extent=(lon.min(), lon.max(), lat.min(), lat.max()),
                      origin="upper" if lat[0] > lat[-1] else "lower", cmap="RdYlBu_r",
                      vmin=-40, vmax=40, interpolation="nearest")
    fig.colorbar(image, ax=ax, shrink=0.8, label="2 m temperature (°C)")
    when = str(ds["valid_time"].values)[:16].replace("T", " ")
    ax.set(title=f"IFS 2 m temperature, {when} UTC (read from Tensogram)",
           xlabel="longitude (°E)", ylabel="latitude (°N)")
    ax.text(0.005, 0.01, "Copyright ECMWF, CC BY 4.0", transform=ax.transAxes, fontsize=7)
    fig.savefig(png, dpi=100, bbox_inches="tight")
    plt.close(fig)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shared", type=Path, default=REPO.parent / "shared",
                        help="the shared fixtures directory (default: ../shared next to the repository)")
    parser.add_argument("--output", type=Path, default=Path("output"),
                        help="where to write fields.tgm and 2t.png (default: ./output)")
    parser.add_argument("--bits", type=int, default=16, help="packing bits (default: 16)")
    args = parser.parse_args(argv)

    grib_dir = args.shared / "fixtures" / "upstream" / "grib"
    if not grib_dir.is_dir():
        parser.error(f"no GRIB fixtures in {grib_dir}; pass --shared")
    args.output.mkdir(parents=True, exist_ok=True)
    target, png = args.output / "fields.tgm", args.output / "2t.png"

    convert(grib_dir, target, args.bits)
    with xr.open_dataset(target, engine="tgm") as ds:
        print(ds)
        plot_2t(ds, png)
    grib_bytes = sum((grib_dir / f"{name}.grib2").stat().st_size for name in FIELDS)
    print(f"\n{target}: {target.stat().st_size:,} bytes (the GRIB inputs: {grib_bytes:,})")
    print(f"{png}: map of 2 m temperature")
    return 0


if __name__ == "__main__":
    sys.exit(main())
