"""The zarr codec ``tensogram`` against zarr's lossless codecs and numcodecs' lossy ones.

On a real field (the IFS 0.25 degree 2 m temperature of the shared fixtures, 721 x 1440 float64),
cut into zarr chunks, for each codec: the compressed size against raw float64, encode and decode
throughput (MB of float64 per second) of the codec itself on one thread and on two (each thread
takes whole chunks, as zarr's pipeline does), a read of the whole array through zarr, and the
largest absolute error. Every time is the median of several runs; the machines have 2 noisy cores.

    .venv/bin/python benchmarks/zarr_codec.py [--runs 7] [--chunks 103 720] [--messages 0 1 2 3]

The tensogram rows run ``TensogramCodec``'s synchronous encode and decode (the Rust core, the
interpreter released); the baselines run zarr's ``BytesCodec`` + ``ZstdCodec`` / ``BloscCodec`` and
numcodecs' ``BitRound`` + zarr's ``ZstdCodec`` the same way.
"""

from __future__ import annotations

import argparse
import statistics
import time
import warnings
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

import numcodecs
import numpy as np
import zarr
from zarr.codecs import BloscCodec, BytesCodec, ZstdCodec
from zarr.core.array_spec import ArrayConfig, ArraySpec
from zarr.core.buffer import default_buffer_prototype
from zarr.core.dtype import Float64

from tgm_xarray import TensogramCodec, _core, open_file

SHARED = Path(__file__).resolve().parents[2] / "shared" / "fixtures"
IFS = SHARED / "real" / "ifs-0p25-20260404.tgm"
GRIB_2T = SHARED / "upstream" / "grib" / "2t.grib2"
PROTOTYPE = default_buffer_prototype()


@dataclass
class Candidate:
    """One way to store the chunks: a chunk encoder and decoder, and the zarr array arguments."""

    name: str
    encode: Callable[[object], object]
    decode: Callable[[object], np.ndarray]
    zarr_kwargs: dict


def tensogram(name: str, codec: TensogramCodec, spec: ArraySpec) -> Candidate:
    return Candidate(
        name,
        lambda chunk: codec._encode_sync(chunk, spec),
        lambda buf: codec._decode_sync(buf, spec).as_numpy_array(),
        {"serializer": codec, "compressors": None},
    )


def bytes_then(name: str, spec: ArraySpec, compressor, keepbits: int | None = None) -> Candidate:
    """zarr's default layout: raw bytes then a compressor, after numcodecs' BitRound if `keepbits`."""
    raw = BytesCodec()
    bitround = None if keepbits is None else numcodecs.BitRound(keepbits=keepbits)

    def encode(chunk):
        if bitround is not None:  # its decode is the identity: nothing to undo on the way back
            chunk = PROTOTYPE.nd_buffer.from_numpy_array(bitround.encode(chunk.as_numpy_array()))
        return compressor._encode_sync(raw._encode_sync(chunk, spec), spec)

    def decode(buf):
        return raw._decode_sync(compressor._decode_sync(buf, spec), spec).as_numpy_array()

    with warnings.catch_warnings():  # "numcodecs codecs are not in the Zarr version 3 specification"
        warnings.simplefilter("ignore")
        filters = None if keepbits is None else [zarr.codecs.numcodecs.BitRound(keepbits=keepbits)]
    return Candidate(name, encode, decode, {"filters": filters, "compressors": compressor})


def candidates(spec: ArraySpec) -> list[Candidate]:
    zstd = ZstdCodec(level=3)
    return [
        tensogram("tgm sp24+szip", TensogramCodec(encoding="simple_packing", bits_per_value=24,
                                                  compression="szip"), spec),
        tensogram("tgm sp16+szip", TensogramCodec(encoding="simple_packing", bits_per_value=16,
                                                  compression="szip"), spec),
        tensogram("tgm sp24+blosc2", TensogramCodec(encoding="simple_packing", bits_per_value=24,
                                                    compression="blosc2"), spec),
        tensogram("tgm shuffle+zstd", TensogramCodec(filter="shuffle", compression="zstd"), spec),
        bytes_then("zarr Zstd(3)", spec, zstd),
        bytes_then("zarr Blosc(lz4,shuffle)", spec, BloscCodec().evolve_from_array_spec(spec)),
        bytes_then("BitRound(23)+Zstd(3)", spec, zstd, keepbits=23),
        bytes_then("BitRound(15)+Zstd(3)", spec, zstd, keepbits=15),
    ]


def seconds(run: Callable[[], object]) -> float:
    start = time.perf_counter()
    run()
    return time.perf_counter() - start


def split(field: np.ndarray, chunks: tuple[int, int]) -> list[np.ndarray]:
    rows, cols = chunks
    if field.shape[0] % rows or field.shape[1] % cols:
        raise SystemExit(f"--chunks {rows} {cols} must divide the field's shape {field.shape}")
    return [np.ascontiguousarray(field[i : i + rows, j : j + cols])
            for i in range(0, field.shape[0], rows) for j in range(0, field.shape[1], cols)]


def operations(candidate: Candidate, field: np.ndarray, chunks: tuple[int, int], pool) -> tuple[dict, dict]:
    """``(timed operations by name, static results)`` for one candidate."""
    arrays = split(field, chunks)
    buffers = [PROTOTYPE.nd_buffer.from_numpy_array(a) for a in arrays]
    encoded = [candidate.encode(b) for b in buffers]
    decoded = [candidate.decode(e) for e in encoded]
    z = zarr.create_array(zarr.storage.MemoryStore(), shape=field.shape, chunks=chunks, dtype=field.dtype,
                          **candidate.zarr_kwargs)
    z[...] = field
    timed = {
        "encode": lambda: [candidate.encode(b) for b in buffers],
        "decode": lambda: [candidate.decode(e) for e in encoded],
        "decode2": lambda: list(pool.map(candidate.decode, encoded)),
        "zarr_read": lambda: z[...],
    }
    static = {
        "ratio": sum(len(e) for e in encoded) / field.nbytes,
        "error": max(float(np.max(np.abs(d - a))) for d, a in zip(decoded, arrays)),
    }
    return timed, static


def measure(candidates: list[Candidate], field: np.ndarray, chunks: tuple[int, int], runs: int) -> dict:
    """MB/s (median of `runs`) of each operation of each candidate. The runs go round-robin over
    the candidates so that a noisy spell on the machine does not land on one codec only."""
    mb = field.nbytes / 1e6
    with ThreadPoolExecutor(2) as pool:
        setups = {c.name: operations(c, field, chunks, pool) for c in candidates}
        times = {name: {op: [] for op in timed} for name, (timed, _) in setups.items()}
        for _ in range(runs):
            for name, (timed, _) in setups.items():
                for op, run in timed.items():
                    times[name][op].append(seconds(run))
    return {name: {**static, **{op: mb / statistics.median(t) for op, t in times[name].items()}}
            for name, (_, static) in setups.items()}


def where_time_goes(field: np.ndarray, chunks: tuple[int, int], runs: int, spec: ArraySpec) -> list[str]:
    """tensogram sp24+szip decode split into szip, unpacking 24-bit values and the Python wrapper.

    The three are timed chunk after chunk, in turn, so that they share the machine's noise; the
    shares are medians over the runs."""
    arrays = split(field, chunks)
    codec = TensogramCodec(encoding="simple_packing", bits_per_value=24, compression="szip")
    unpacked = TensogramCodec(encoding="simple_packing", bits_per_value=24)
    messages = [codec._encode_sync(PROTOTYPE.nd_buffer.from_numpy_array(a), spec) for a in arrays]
    plain = [unpacked._encode_sync(PROTOTYPE.nd_buffer.from_numpy_array(a), spec) for a in arrays]
    out = np.empty(chunks)
    shares, per_chunk = [], []
    for _ in range(3 * runs):
        whole = in_core = unpack = 0.0
        for message, packed in zip(messages, plain):
            raw, raw_plain = message.to_bytes(), packed.to_bytes()
            whole += seconds(lambda: codec._decode_sync(message, spec))
            in_core += seconds(lambda: _core.decode_message_into(raw, 0, None, out))
            unpack += seconds(lambda: _core.decode_message_into(raw_plain, 0, None, out))
        shares.append(((in_core - unpack) / whole, unpack / whole, (whole - in_core) / whole))
        per_chunk.append(whole / len(arrays))
    szip, unpacking, wrapper = (statistics.median(s) for s in zip(*shares))
    return [
        f"  per {field.nbytes / len(arrays) / 1e6:.2f} MB chunk: {statistics.median(per_chunk) * 1e3:.2f} ms "
        f"in TensogramCodec._decode_sync, of which",
        f"    szip (libaec) decode       {szip:6.1%}",
        f"    unpack 24-bit -> float64   {unpacking:6.1%}   (same values packed without szip)",
        f"    Python wrapper + copies    {wrapper:6.1%}   (bytes copy, output array)",
    ]


def report(message: int, chunks: tuple[int, int], runs: int) -> dict:
    """Prints the table for field `message` of the IFS file and returns its numbers."""
    field = open_file(IFS).read(message, 0)
    spec = ArraySpec(shape=chunks, dtype=Float64(), fill_value=np.nan, config=ArrayConfig.from_dict({}),
                     prototype=PROTOTYPE)
    print(f"field: {IFS.name} message {message}, {field.shape} float64 ({field.nbytes / 1e6:.1f} MB), "
          f"chunks {chunks}, median of {runs} runs, tensogram {_core.TENSOGRAM_VERSION}, "
          f"zarr {zarr.__version__}")
    header = (f"{'codec':26s} {'size/raw':>8s} {'enc MB/s':>9s} {'dec MB/s':>9s} {'dec 2thr':>9s} "
              f"{'scaling':>7s} {'zarr read':>9s} {'max abs err':>11s}")
    print(header)
    print("-" * len(header))
    results = measure(candidates(spec), field, chunks, runs)
    for name, r in results.items():
        print(f"{name:26s} {r['ratio']:8.3f} {r['encode']:9.0f} {r['decode']:9.0f} {r['decode2']:9.0f} "
              f"{r['decode2'] / r['decode']:6.2f}x {r['zarr_read']:9.0f} {r['error']:11.2g}")
    if message == 0 and GRIB_2T.exists():
        print(f"{'(source GRIB2, CCSDS)':26s} {GRIB_2T.stat().st_size / field.nbytes:8.3f}")

    packed, zstd = results["tgm sp24+szip"], results["zarr Zstd(3)"]
    print()
    print(f"tgm sp24+szip size: {packed['ratio']:.3f} x raw float64 (target <= 0.3): "
          f"{'met' if packed['ratio'] <= 0.3 else 'NOT met'}")
    for key, what in (("decode", "decode, 1 thread"), ("decode2", "decode, 2 threads"),
                      ("zarr_read", "zarr read")):
        print(f"tgm sp24+szip / zarr Zstd(3), {what}: {packed[key] / zstd[key]:.2f}x")
    print("where tgm sp24+szip decode time goes:")
    print("\n".join(where_time_goes(field, chunks, runs, spec)))
    return results


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=7, help="runs per timing (the median is kept)")
    parser.add_argument("--chunks", type=int, nargs=2, default=(103, 720),
                        help="chunk shape (must divide 721 x 1440)")
    parser.add_argument("--messages", type=int, nargs="+", default=[0],
                        help="fields of the IFS file: 0 2t, 1 lsm, 2 q (150 hPa), 3 t (600 hPa)")
    args = parser.parse_args()
    for message in args.messages:
        report(message, tuple(args.chunks), args.runs)
        print()


if __name__ == "__main__":
    main()
