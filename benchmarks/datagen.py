"""The benchmark data: made once from the shared real fields, cached under ``data/bench/``.

Every file is written field by field (never the whole dataset in memory) to a temporary name and
renamed when complete; ``manifest.json`` is written last, so a cache without it (or from another
``VERSION``) is regenerated.

``e2e``: 4 parameters (t, q, gh, r) x 5 steps (0..24 h) x 10 pressure levels = 200 fields of
721 x 1440, derived from the real IFS fields (t 600 hPa, q 150 hPa, 2 m temperature, land-sea mask)
plus smooth, field-dependent perturbations, stored five ways:

- ``e2e.tgm``: one message per field (the field, latitude, longitude), MARS metadata, 24-bit simple
  packing + szip (rsi 128, block 32, flags 8), float64, xxh3 hashes: like the shared IFS fixture.
- ``e2e.grib2``: the same fields as GRIB2 cloned from ``2t.grib2`` (CCSDS packing kept, 24 bits).
- ``e2e.nc``: NetCDF4, float32, zlib level 4 + shuffle, one HDF5 chunk per field.
- ``e2e.zarr``: zarr v3, float32, zstd level 3, one chunk per field.

``e2e-quick``: the same with 2 steps x 3 levels (24 fields), for ``run.py --quick``.

``open``: 10 parameters x 20 steps x 10 levels = 2,000 small fields (73 x 144, 2.5 degrees, the real
2 m temperature subsampled), as ``open2000.tgm`` and ``open2000.grib2``; ``open-quick``: 200 of
them (2 steps), as ``open200.*``.

``packed``: the real 2 m temperature as one ``.tgm`` message (24-bit packing + szip), as a GRIB2
message repacked at 24 bits, and the original GRIB2 message (12-bit CCSDS).

``raw``: one 1M-element float32 object, uncompressed (``raw1m.tgm``).
"""

from __future__ import annotations

import functools
import json
import os
import shutil
import time
import zlib
from pathlib import Path

import numpy as np

from tgm_xarray import _core

ROOT = Path(__file__).resolve().parents[1]
CACHE = ROOT / "data" / "bench"
SHARED = ROOT.parent / "shared" / "fixtures"
GRIB_DIR = SHARED / "upstream" / "grib"
GRIB_2T = GRIB_DIR / "2t.grib2"
THOUSAND = SHARED / "upstream" / "remote-parity" / "thousand-msg.tgm"

#: Bump when the generated data change: the cache is then regenerated.
VERSION = 3

DATE, TIME = "20260404", "0000"
PARAMS = {  # name: (paramId, units, long name)
    "t": (130, "K", "Temperature"),
    "q": (133, "kg kg**-1", "Specific humidity"),
    "gh": (156, "gpm", "Geopotential height"),
    "r": (157, "%", "Relative humidity"),
}
STEPS = (0, 6, 12, 18, 24)
LEVELS = (1000, 925, 850, 700, 600, 500, 400, 300, 250, 200)  # stored as cfgrib orders them
#: name: (steps, levels) of the e2e datasets
E2E_SETS = {"e2e": (STEPS, LEVELS), "e2e-quick": ((0, 6), (1000, 500, 200))}
NY, NX = 721, 1440

OPEN_PARAMS = {"t": 130, "q": 133, "gh": 156, "r": 157, "u": 131, "v": 132, "w": 135, "vo": 138,
               "d": 155, "pv": 60}
#: name: steps of the open datasets (x 10 parameters x 10 levels)
OPEN_SETS = {"open2000": tuple(range(0, 120, 6)), "open200": (0, 6)}
OPEN_LEVELS = LEVELS
OPEN_STRIDE = 10  # 721 x 1440 -> 73 x 144

#: An object stored as it is: no encoding, filter or compression (add its dtype and shape).
PLAIN = {"type": "ntensor", "byte_order": "little", "encoding": "none", "filter": "none", "compression": "none"}
PACKING = {"encoding": "simple_packing", "sp_bits_per_value": 24, "filter": "none",
           "compression": "szip", "szip_rsi": 128, "szip_block_size": 32, "szip_flags": 8}
NC_ENCODING = {"zlib": True, "complevel": 4, "shuffle": True, "dtype": "float32"}


def say(text: str) -> None:
    print(f"[data] {text}", flush=True)


# --- the real fields -------------------------------------------------------------------------

_REAL: dict[str, np.ndarray] = {}


def grib_values(name: str) -> np.ndarray:
    """The values of one shared GRIB file as a (721, 1440) float64 array, cached in memory and
    under ``data/bench/`` (so interpreters without ecCodes, the free-threaded one, read them
    once another has decoded them)."""
    if name not in _REAL:
        saved = CACHE / f"{name}-values-v{VERSION}.npy"
        if saved.exists():
            _REAL[name] = np.load(saved)
        else:
            import eccodes

            with open(GRIB_DIR / f"{name}.grib2", "rb") as f:
                handle = eccodes.codes_new_from_message(f.read())
            try:
                _REAL[name] = eccodes.codes_get_values(handle).reshape(NY, NX)
            finally:
                eccodes.codes_release(handle)
            CACHE.mkdir(parents=True, exist_ok=True)
            np.save(saved, _REAL[name])
    return _REAL[name]


def coordinates() -> tuple[np.ndarray, np.ndarray]:
    """Latitudes (90 .. -90) and longitudes (-180 .. 179.75), as ecCodes reports the grid."""
    return 90.0 - 0.25 * np.arange(NY), -180.0 + 0.25 * np.arange(NX)


def _perturbation(seed_text: str, shape=(NY, NX)) -> np.ndarray:
    """A smooth field in [-1, 1]: a few low-order waves whose phases depend on the seed."""
    rng = np.random.default_rng(zlib.crc32(seed_text.encode()))
    ny, nx = shape
    lat = np.linspace(-np.pi / 2, np.pi / 2, ny)[:, None]
    lon = np.linspace(0, 2 * np.pi, nx, endpoint=False)[None, :]
    total = np.zeros(shape)
    for k in (1, 2, 3, 5):
        a, b, c = rng.uniform(0, 2 * np.pi, 3)
        total += np.cos(k * lon + a) * np.cos((k + 1) * lat + b) * np.cos(lat + c) / k
    return total / 2.1


def field(param: str, step: int, level: int) -> np.ndarray:
    """One e2e field (float64, C-contiguous), a deterministic function of its keys."""
    p = _perturbation(f"{param}/{step}/{level}")
    hours = step / 24.0
    if param == "t":
        values = grib_values("t_600") + 0.045 * (level - 600) + 2.0 * p + 0.5 * hours
    elif param == "q":
        values = grib_values("q_150") * (level / 150.0) ** 1.2 * (1.0 + 0.3 * p)
    elif param == "gh":
        values = grib_values("2t") * 29.3 * np.log(1013.25 / level) + 40.0 * p + 5.0 * hours
    elif param == "r":
        values = np.clip(50.0 + 30.0 * grib_values("lsm") + 15.0 * p + level / 100.0, 0.0, 100.0)
    else:
        raise KeyError(param)
    return np.ascontiguousarray(values, dtype=np.float64)


def e2e_keys(name: str = "e2e"):
    """(param, step, level) of every field of e2e dataset ``name``, in file order."""
    steps, levels = E2E_SETS[name]
    for param in PARAMS:
        for step in steps:
            for level in levels:
                yield param, step, level


# --- writers ---------------------------------------------------------------------------------

def coordinate_objects(lat: np.ndarray, lon: np.ndarray) -> list[tuple[dict, dict, np.ndarray]]:
    plain = {**PLAIN, "dtype": "float64"}
    return [
        ({"name": "latitude", "standard_name": "latitude", "units": "degrees_north",
          "dim_names": ["latitude"]}, {**plain, "shape": [lat.size]}, lat),
        ({"name": "longitude", "standard_name": "longitude", "units": "degrees_east",
          "dim_names": ["longitude"]}, {**plain, "shape": [lon.size]}, lon),
    ]


def tgm_message(values: np.ndarray, base: dict, coords) -> bytes:
    """One message: the packed field then the coordinate objects (the shared IFS fixture's layout)."""
    desc = {"type": "ntensor", "shape": list(values.shape), "dtype": "float64",
            "byte_order": "little", **PACKING}
    objects = [(desc, values)] + [(d, a) for _, d, a in coords]
    meta = {"base": [base] + [b for b, _, _ in coords]}
    return _core.encode_message(meta, objects)


def field_base(param: str, step: int, level: int, units: str, long_name: str | None = None) -> dict:
    base = {"name": param, "units": units, "dim_names": ["latitude", "longitude"],
            "mars": {"class": "od", "stream": "oper", "type": "fc", "param": param, "date": DATE,
                     "time": TIME, "step": step, "levtype": "pl", "levelist": level}}
    if long_name:
        base["long_name"] = long_name
    return base


class GribTemplate:
    """Clones of one GRIB message with new keys and values (ecCodes)."""

    def __init__(self, message: bytes):
        import eccodes

        self.eccodes = eccodes
        self.template = eccodes.codes_new_from_message(message)

    def make(self, values: np.ndarray, **keys) -> bytes:
        ec = self.eccodes
        h = ec.codes_clone(self.template)
        try:
            for key, value in keys.items():
                ec.codes_set(h, key, value)
            ec.codes_set_values(h, values.ravel())
            return ec.codes_get_message(h)
        finally:
            ec.codes_release(h)

    def close(self) -> None:
        self.eccodes.codes_release(self.template)


def _pl_keys(param_id: int, step: int, level: int) -> dict:
    return {"paramId": param_id, "typeOfLevel": "isobaricInhPa", "level": level, "step": step}


def _atomic(path: Path):
    tmp = path.with_name(path.name + ".part")
    if tmp.is_dir():
        shutil.rmtree(tmp)
    elif tmp.exists():
        tmp.unlink()
    return tmp


def _finish(tmp: Path, path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()
    os.replace(tmp, path)


def own_keys_file(directory: Path, n_messages: int) -> Path:
    """``n_messages`` one-value messages, each with 100 metadata keys no other message has."""
    path = directory / f"own-keys-{n_messages}.tgm"
    if not path.exists():
        directory.mkdir(parents=True, exist_ok=True)
        desc = {"type": "ntensor", "shape": [1], "dtype": "float64", "byte_order": "little"}
        tmp = _atomic(path)
        with open(tmp, "wb") as f:
            for i in range(n_messages):
                base = {"name": "x", **{f"k{i}_{j}": j for j in range(100)}}
                f.write(_core.encode_message({"base": [base]}, [(desc, np.array([float(i)]))]))
        _finish(tmp, path)
    return path


def write_e2e_tgm_grib(directory: Path, name: str) -> None:
    lat, lon = coordinates()
    coords = coordinate_objects(lat, lon)
    with open(GRIB_2T, "rb") as f:
        template = GribTemplate(f.read())
    tgm_path, grib_path = directory / f"{name}.tgm", directory / f"{name}.grib2"
    tgm_tmp, grib_tmp = _atomic(tgm_path), _atomic(grib_path)
    t0 = time.perf_counter()
    with open(tgm_tmp, "wb") as tgm, open(grib_tmp, "wb") as grib:
        for i, (param, step, level) in enumerate(e2e_keys(name)):
            values = field(param, step, level)
            param_id, units, long_name = PARAMS[param]
            tgm.write(tgm_message(values, field_base(param, step, level, units, long_name), coords))
            grib.write(template.make(values, bitsPerValue=24, **_pl_keys(param_id, step, level)))
            if i % 50 == 49:
                say(f"{name} .tgm + .grib2: {i + 1} fields, {time.perf_counter() - t0:.0f} s")
    template.close()
    _finish(tgm_tmp, tgm_path)
    _finish(grib_tmp, grib_path)


def lazy_e2e_dataset(name: str):
    """The e2e fields as a dask-backed Dataset: each chunk (one field) is computed when written."""
    import dask
    import dask.array as da
    import xarray as xr

    lat, lon = coordinates()
    steps, levels = E2E_SETS[name]
    make = dask.delayed(field, pure=True)
    data_vars = {}
    for param, (_, units, long_name) in PARAMS.items():
        rows = [da.stack([da.from_delayed(make(param, step, level), (NY, NX), np.float64)
                          for level in levels]) for step in steps]
        data_vars[param] = (("step", "isobaricInhPa", "latitude", "longitude"), da.stack(rows),
                            {"units": units, "long_name": long_name})
    coords = {
        "step": ("step", np.array(steps, dtype="timedelta64[h]").astype("timedelta64[ns]")),
        "isobaricInhPa": ("isobaricInhPa", np.array(levels, dtype=np.int64),
                          {"units": "hPa", "standard_name": "air_pressure", "positive": "down"}),
        "latitude": ("latitude", lat, {"units": "degrees_north", "standard_name": "latitude"}),
        "longitude": ("longitude", lon, {"units": "degrees_east", "standard_name": "longitude"}),
        "time": ((), np.datetime64("2026-04-04T00:00", "ns")),
    }
    return xr.Dataset(data_vars, coords)


def write_e2e_netcdf(directory: Path, name: str) -> None:
    import dask

    path = directory / f"{name}.nc"
    tmp = _atomic(path)
    ds = lazy_e2e_dataset(name)
    encoding = {name: {**NC_ENCODING, "chunksizes": (1, 1, NY, NX)} for name in PARAMS}
    t0 = time.perf_counter()
    with dask.config.set(scheduler="threads", num_workers=2):
        ds.to_netcdf(tmp, engine="netcdf4", format="NETCDF4", encoding=encoding)
    say(f"{name} .nc: {time.perf_counter() - t0:.0f} s")
    _finish(tmp, path)


def write_e2e_zarr(directory: Path, name: str) -> None:
    import dask
    from zarr.codecs import ZstdCodec

    path = directory / f"{name}.zarr"
    tmp = _atomic(path)
    ds = lazy_e2e_dataset(name)
    encoding = {name: {"dtype": "float32", "chunks": (1, 1, NY, NX),
                       "compressors": [ZstdCodec(level=3)]} for name in PARAMS}
    t0 = time.perf_counter()
    with dask.config.set(scheduler="threads", num_workers=2):
        ds.to_zarr(tmp, mode="w", encoding=encoding, zarr_format=3, consolidated=True)
    say(f"{name} .zarr: {time.perf_counter() - t0:.0f} s")
    _finish(tmp, path)


def small_field(param: str, step: int, level: int) -> np.ndarray:
    base = grib_values("2t")[::OPEN_STRIDE, ::OPEN_STRIDE]
    return np.ascontiguousarray(base + 0.01 * level + 0.1 * step + OPEN_PARAMS[param] * 0.001)


def write_open(directory: Path, name: str) -> None:
    import eccodes

    lat, lon = coordinates()
    lat, lon = np.ascontiguousarray(lat[::OPEN_STRIDE]), np.ascontiguousarray(lon[::OPEN_STRIDE])
    coords = coordinate_objects(lat, lon)
    sample = eccodes.codes_grib_new_from_samples("regular_ll_pl_grib2")
    ny, nx = lat.size, lon.size
    grid = {"Ni": nx, "Nj": ny, "latitudeOfFirstGridPointInDegrees": float(lat[0]),
            "latitudeOfLastGridPointInDegrees": float(lat[-1]),
            "longitudeOfFirstGridPointInDegrees": float(lon[0] % 360),
            "longitudeOfLastGridPointInDegrees": float(lon[-1] % 360),
            "iDirectionIncrementInDegrees": 2.5, "jDirectionIncrementInDegrees": 2.5,
            "dataDate": int(DATE), "dataTime": int(TIME), "centre": "ecmf"}
    for key, value in grid.items():
        eccodes.codes_set(sample, key, value)
    template = GribTemplate(eccodes.codes_get_message(sample))
    eccodes.codes_release(sample)
    tgm_path, grib_path = directory / f"{name}.tgm", directory / f"{name}.grib2"
    tgm_tmp, grib_tmp = _atomic(tgm_path), _atomic(grib_path)
    with open(tgm_tmp, "wb") as tgm, open(grib_tmp, "wb") as grib:
        for param, param_id in OPEN_PARAMS.items():
            for step in OPEN_SETS[name]:
                for level in OPEN_LEVELS:
                    values = small_field(param, step, level)
                    tgm.write(tgm_message(values, field_base(param, step, level, "1"), coords))
                    grib.write(template.make(values, **_pl_keys(param_id, step, level)))
    template.close()
    _finish(tgm_tmp, tgm_path)
    _finish(grib_tmp, grib_path)


def write_packed(directory: Path) -> None:
    lat, lon = coordinates()
    values = np.ascontiguousarray(grib_values("2t"))
    base = {"name": "2t", "units": "K", "dim_names": ["latitude", "longitude"],
            "mars": {"param": "2t", "date": DATE, "time": TIME, "step": 0, "levtype": "sfc"}}
    path = directory / "packed-2t.tgm"
    tmp = _atomic(path)
    tmp.write_bytes(tgm_message(values, base, coordinate_objects(lat, lon)))
    _finish(tmp, path)
    with open(GRIB_2T, "rb") as f:
        template = GribTemplate(f.read())
    path = directory / "packed-2t-24bit.grib2"
    tmp = _atomic(path)
    tmp.write_bytes(template.make(values, bitsPerValue=24))
    template.close()
    _finish(tmp, path)


def raw_values() -> np.ndarray:
    return np.random.default_rng(4).standard_normal(1 << 20).astype(np.float32)


def write_raw(directory: Path) -> None:
    values = raw_values()
    desc = {**PLAIN, "shape": [values.size], "dtype": "float32"}
    path = directory / "raw1m.tgm"
    tmp = _atomic(path)
    tmp.write_bytes(_core.encode_message({"base": [{"name": "x", "dim_names": ["x"]}]}, [(desc, values)]))
    _finish(tmp, path)


WRITERS = {  # group: (files, writer)
    "raw": (("raw1m.tgm",), write_raw),
    "packed": (("packed-2t.tgm", "packed-2t-24bit.grib2"), write_packed),
}
for _name in OPEN_SETS:
    WRITERS[_name] = ((f"{_name}.tgm", f"{_name}.grib2"), functools.partial(write_open, name=_name))
for _name in E2E_SETS:
    WRITERS[f"{_name}-tgm-grib"] = ((f"{_name}.tgm", f"{_name}.grib2"),
                                    functools.partial(write_e2e_tgm_grib, name=_name))
    WRITERS[f"{_name}-nc"] = ((f"{_name}.nc",), functools.partial(write_e2e_netcdf, name=_name))
    WRITERS[f"{_name}-zarr"] = ((f"{_name}.zarr",), functools.partial(write_e2e_zarr, name=_name))


def group_spec(group: str) -> str:
    """What a group's files depend on besides the code (``VERSION``): its keys and encodings."""
    name = group.rsplit("-", 1)[0].removesuffix("-tgm")
    return repr((VERSION, E2E_SETS.get(name), OPEN_SETS.get(name), PACKING, NC_ENCODING))


def _size(path: Path) -> int:
    if path.is_dir():
        return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())
    return path.stat().st_size


def ensure(groups: list[str], directory: Path = CACHE) -> Path:
    """Makes the files of ``groups`` (keys of ``WRITERS``) unless the cache already has them."""
    directory.mkdir(parents=True, exist_ok=True)
    manifest_path = directory / "manifest.json"
    try:
        manifest = json.loads(manifest_path.read_text())
    except (OSError, ValueError):
        manifest = {}
    done = manifest.get("groups", {})
    for group in groups:
        files, writer = WRITERS[group]
        entry = done.get(group) or {}
        sizes = entry.get("files", {})
        if entry.get("spec") == group_spec(group) and all(
                (directory / f).exists() and _size(directory / f) == sizes.get(f) for f in files):
            continue
        say(f"generating {group} in {directory} (one-off) ...")
        t0 = time.perf_counter()
        writer(directory)
        sizes = {f: _size(directory / f) for f in files}
        done[group] = {"spec": group_spec(group), "files": sizes}
        manifest = {"groups": done}
        manifest_path.write_text(json.dumps(manifest, indent=1))
        say(f"{group}: {time.perf_counter() - t0:.0f} s, "
            + ", ".join(f"{f} {sizes[f] / 1e6:.1f} MB" for f in files))
    return directory


if __name__ == "__main__":
    import sys

    ensure(sys.argv[1:] or list(WRITERS))
