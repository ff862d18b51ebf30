"""A forecast archive of many `.tgm` files as one Icechunk repository of virtual references.

Writes a small archive (one `.tgm` file per forecast step, as an operational suite would), turns
every file into virtual Zarr references with `tgm_xarray.virtual.TensogramParser` and
VirtualiZarr, commits them to an Icechunk repository (the first file, then one commit per
appended step), reopens the repository lazily with `xr.open_zarr` — zarr and the `tensogram`
codec alone — checks the values against `engine="tgm"`, and plots one field. No byte of
the archive is copied: the repository holds references to each object's bytes. See
docs/virtual.md. Needs `pip install '.[virtual]' matplotlib` in the clone.

    python examples/virtual_icechunk.py [--out DIR] [--steps 8]
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import xarray as xr
from obspec_utils.registry import ObjectStoreRegistry
from obstore.store import LocalStore
from virtualizarr import open_virtual_dataset

import tgm_xarray
from _data import output_dir
from tgm_xarray.virtual import TensogramParser, local_repository
from write_tgm import forecast  # the synthetic forecast of examples/write_tgm.py


def write_archive(archive: Path, steps: list[int]) -> list[Path]:
    """One file per forecast step: `2t` and `t` on two levels, 16-bit packing + szip."""
    archive.mkdir(parents=True, exist_ok=True)
    paths = []
    for step in steps:
        path = archive / f"fc-step{step:03d}.tgm"
        tgm_xarray.to_tgm(forecast([step]), path, encoding={"2t": {"bits": 16}, "t": {"bits": 16}})
        paths.append(path)
    return paths


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=None, help="where to write (default: a temporary directory)")
    parser.add_argument("--steps", type=int, default=8, help="forecast steps, one file each (default 8)")
    args = parser.parse_args()
    with output_dir(args.out, "tgm-virtual-") as out:
        archive, repo_dir = out / "archive", out / "repo"
        steps = [6 * i for i in range(args.steps)]
        paths = write_archive(archive, steps)
        print(f"archive: {len(paths)} files, {sum(p.stat().st_size for p in paths):,} bytes in {archive}")

        registry = ObjectStoreRegistry({"file://": LocalStore()})
        repo = local_repository(repo_dir, archive)
        t0 = time.perf_counter()
        for i, path in enumerate(paths):
            vds = open_virtual_dataset(path.resolve().as_uri(), registry=registry, parser=TensogramParser(),
                                       drop_variables=["valid_time"])
            # One step per file reads as a scalar coordinate (as cfgrib has it): the dimension to append along.
            vds = vds.expand_dims("step")
            session = repo.writable_session("main")
            vds.vz.to_icechunk(session.store, **({"append_dim": "step"} if i else {}))
            session.commit(f"forecast step {steps[i]} h")
        print(f"committed {len(paths)} files as {len(paths)} commits in {time.perf_counter() - t0:.2f} s")

        t0 = time.perf_counter()
        ds = xr.open_zarr(repo.readonly_session("main").store, consolidated=False, chunks={})
        print(f"reopened lazily in {time.perf_counter() - t0:.3f} s: {dict(ds.sizes)}; "
              f"2t chunks {ds['2t'].data.chunksize}")

        with xr.open_mfdataset(paths, engine="tgm", combine="nested", concat_dim="step",
                               drop_variables=["valid_time"]) as direct:
            same = all(np.array_equal(ds[name].values, direct[name].values, equal_nan=True) for name in direct.data_vars)
        print(f"identical to engine='tgm': {same}")

        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        field = ds["2t"].isel(step=len(steps) // 2)
        field.plot(cmap="RdYlBu_r")
        plt.title(f"2 m temperature, step {field.step.values.astype('timedelta64[h]')} (virtual, Icechunk)")
        png = out / "virtual_2t.png"
        plt.savefig(png, dpi=80)
        print(f"plot: {png}" + ("" if args.out else " (removed with the temporary directory: pass --out to keep it)"))


if __name__ == "__main__":
    main()
