"""The codec matrix, written with upstream ``tensogram``: every codec and filter upstream 0.24
supports, float32 and float64 where upstream allows them (simple packing, zfp and sz3 take
float64 only), integer, float16 and complex types, shapes 1-D to 4-D of about 3,000 elements
(more than one szip RSI block, so range reads cross blocks), NaN/Inf masks
(``allow_nan``/``allow_inf``, encoding ``none`` only), big-endian objects, and several objects
per message. ``MATRIX_IDS`` is known at collection time so tests can parametrize over it; the
``codec_matrix`` fixture (``write_codec_matrix``) maps each id to its ``MatrixObject``.

Also small files of upstream's writing (``write_message_file``, ``small_file``)."""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from tests.helpers.oracle import upstream_decode_cached

S1, S2, S3, S4 = (3001,), (45, 67), (7, 19, 23), (3, 5, 11, 17)
SZIP_SMALL = {"szip_rsi": 8, "szip_block_size": 16, "szip_flags": 8}  # 128 values per RSI block
SZIP_TINY = {"szip_rsi": 4, "szip_block_size": 8, "szip_flags": 8}  # 32
SZIP_MID = {"szip_rsi": 32, "szip_block_size": 32, "szip_flags": 8}  # 1024


@dataclass(frozen=True)
class Spec:
    """One object of the matrix, before it is written."""

    id: str
    dtype: str
    shape: tuple[int, ...]
    params: dict
    big_endian: bool = False
    nan: bool = False  # put NaNs in (the message is written with allow_nan)
    inf: bool = False  # put +-Inf in (allow_inf)
    lossy: bool = False

    def descriptor(self) -> dict:
        d = {"type": "ntensor", "shape": list(self.shape), "dtype": self.dtype,
             "byte_order": "big" if self.big_endian else "little",
             "encoding": "none", "filter": "none", "compression": "none"}
        d.update(self.params)
        return d

    def values(self) -> np.ndarray:
        """Deterministic data: a smooth field plus noise (so compressors have work to do)."""
        seed = sum(ord(c) * 131**i for i, c in enumerate(self.id)) % 2**32
        rng = np.random.default_rng(seed)
        n = int(np.prod(self.shape))
        t = np.linspace(0, 12 * np.pi, n)
        field = 40 * np.sin(t) + 15 * np.cos(3.7 * t) + rng.standard_normal(n)
        dt = np.dtype(self.dtype)
        if dt.kind == "c":
            values = (field + 1j * np.roll(field, 7)).astype(dt)
        elif dt.kind in "iu":
            info = np.iinfo(dt)
            scaled = field * (min(info.max, 2**20) / 60.0)
            values = np.clip(np.round(scaled - (0 if dt.kind == "i" else scaled.min())), info.min, info.max).astype(dt)
        else:
            values = (field + 250.0).astype(dt)
        if self.nan:
            values[rng.random(n) < 0.2] = np.nan
            values[:3] = np.nan
        if self.inf:
            values[rng.random(n) < 0.05] = np.inf
            values[rng.random(n) < 0.05] = -np.inf
        return values.reshape(self.shape)


def _sp(bits):
    return {"encoding": "simple_packing", "sp_bits_per_value": bits}


MATRIX_SPECS: list[Spec] = [
    # encoding none, compression none (raw bytes copied straight from the map)
    Spec("none-f32-2d", "float32", S2, {}),
    Spec("none-f64-3d", "float64", S3, {}),
    Spec("none-f32-4d", "float32", S4, {}),
    Spec("none-f64-1d", "float64", S1, {}),
    Spec("none-i8-2d", "int8", S2, {}),
    Spec("none-u16-3d", "uint16", S3, {}),
    Spec("none-i32-1d", "int32", S1, {}),
    Spec("none-i64-4d", "int64", S4, {}),
    Spec("none-f16-2d", "float16", S2, {}),
    Spec("none-c64-3d", "complex64", S3, {}),
    # simple packing (float64 only upstream)
    Spec("sp16-f64-1d", "float64", S1, _sp(16)),
    Spec("sp16-f64-3d", "float64", S3, _sp(16)),
    Spec("sp24-f64-2d", "float64", S2, _sp(24)),
    Spec("sp24-f64-4d", "float64", S4, _sp(24)),
    Spec("sp12-f64-2d", "float64", S2, _sp(12)),
    Spec("sp8-f64-3d", "float64", S3, _sp(8)),
    Spec("sp32-f64-1d", "float64", S1, _sp(32)),
    # szip on raw values
    Spec("szip-f32-2d", "float32", S2, {"compression": "szip", **SZIP_SMALL}),
    Spec("szip-f32-4d", "float32", S4, {"compression": "szip", **SZIP_MID}),
    Spec("szip-i16-3d", "int16", S3, {"compression": "szip", **SZIP_SMALL}),
    Spec("szip-u8-1d", "uint8", S1, {"compression": "szip", **SZIP_TINY}),
    Spec("szip-i32-2d", "int32", S2, {"compression": "szip", **SZIP_SMALL}),
    Spec("szip-u16-1d", "uint16", S1, {"compression": "szip", **SZIP_MID}),
    # simple packing + szip (the operational GRIB-like combination)
    Spec("sp16+szip-f64-2d", "float64", S2, {**_sp(16), "compression": "szip", **SZIP_SMALL}),
    Spec("sp24+szip-f64-3d", "float64", S3, {**_sp(24), "compression": "szip", **SZIP_SMALL}),
    Spec("sp24+szip-f64-1d", "float64", S1, {**_sp(24), "compression": "szip", **SZIP_MID}),
    Spec("sp16+szip-f64-4d", "float64", S4, {**_sp(16), "compression": "szip", **SZIP_TINY}),
    Spec("sp8+szip-f64-2d", "float64", S2, {**_sp(8), "compression": "szip", **SZIP_SMALL}),
    Spec("sp32+szip-f64-3d", "float64", S3, {**_sp(32), "compression": "szip", **SZIP_MID}),
    # simple packing + blosc2 (the writer's default compression of packed fields)
    Spec("sp16+blosc2-f64-3d", "float64", S3, {**_sp(16), "compression": "blosc2", "blosc2_codec": "zstd", "blosc2_clevel": 3}),
    Spec("sp12+blosc2-f64-2d", "float64", S2, {**_sp(12), "compression": "blosc2", "blosc2_codec": "lz4"}),
    # zstd, lz4, blosc2
    Spec("zstd-f32-2d", "float32", S2, {"compression": "zstd", "zstd_level": 3}),
    Spec("zstd-f64-4d", "float64", S4, {"compression": "zstd", "zstd_level": 9}),
    Spec("zstd-i32-3d", "int32", S3, {"compression": "zstd"}),
    Spec("lz4-f32-3d", "float32", S3, {"compression": "lz4"}),
    Spec("lz4-f64-1d", "float64", S1, {"compression": "lz4"}),
    Spec("lz4-i16-2d", "int16", S2, {"compression": "lz4"}),
    Spec("blosc2-f32-2d", "float32", S2, {"compression": "blosc2", "blosc2_codec": "lz4", "blosc2_clevel": 5}),
    Spec("blosc2-f64-3d", "float64", S3, {"compression": "blosc2", "blosc2_codec": "zstd", "blosc2_clevel": 3}),
    Spec("blosc2-i16-4d", "int16", S4, {"compression": "blosc2", "blosc2_codec": "blosclz", "blosc2_clevel": 9}),
    Spec("blosc2-f32-1d", "float32", S1, {"compression": "blosc2", "blosc2_codec": "zlib", "blosc2_clevel": 1}),
    # shuffle filter
    Spec("shuffle+zstd-f32-2d", "float32", S2, {"filter": "shuffle", "shuffle_element_size": 4, "compression": "zstd"}),
    Spec("shuffle+zstd-f64-3d", "float64", S3, {"filter": "shuffle", "shuffle_element_size": 8, "compression": "zstd"}),
    Spec("shuffle+szip-f32-4d", "float32", S4, {"filter": "shuffle", "shuffle_element_size": 4, "compression": "szip", **SZIP_SMALL}),
    Spec("shuffle+szip-f64-2d", "float64", S2, {"filter": "shuffle", "shuffle_element_size": 8, "compression": "szip", **SZIP_MID}),
    # zfp and sz3 (float64 only upstream; lossy)
    Spec("zfp-rate-f64-2d", "float64", S2, {"compression": "zfp", "zfp_mode": "fixed_rate", "zfp_rate": 16.0}, lossy=True),
    Spec("zfp-rate-f64-1d", "float64", S1, {"compression": "zfp", "zfp_mode": "fixed_rate", "zfp_rate": 12.0}, lossy=True),
    Spec("zfp-accuracy-f64-3d", "float64", S3, {"compression": "zfp", "zfp_mode": "fixed_accuracy", "zfp_tolerance": 0.01}, lossy=True),
    Spec("zfp-precision-f64-4d", "float64", S4, {"compression": "zfp", "zfp_mode": "fixed_precision", "zfp_precision": 20}, lossy=True),
    Spec("sz3-abs-f64-2d", "float64", S2, {"compression": "sz3", "sz3_error_bound_mode": "abs", "sz3_error_bound": 0.01}, lossy=True),
    Spec("sz3-abs-f64-3d", "float64", S3, {"compression": "sz3", "sz3_error_bound_mode": "abs", "sz3_error_bound": 0.5}, lossy=True),
    Spec("sz3-rel-f64-4d", "float64", S4, {"compression": "sz3", "sz3_error_bound_mode": "rel", "sz3_error_bound": 0.001}, lossy=True),
    # NaN / Inf masks (encoding none only upstream)
    Spec("nan-none-f32-2d", "float32", S2, {}, nan=True),
    Spec("nan-zstd-f64-3d", "float64", S3, {"compression": "zstd"}, nan=True),
    Spec("nan-shuffle+szip-f32-4d", "float32", S4,
         {"filter": "shuffle", "shuffle_element_size": 4, "compression": "szip", **SZIP_SMALL}, nan=True),
    Spec("nan-blosc2-f32-1d", "float32", S1, {"compression": "blosc2", "blosc2_codec": "lz4"}, nan=True),
    Spec("nan-szip-f32-2d", "float32", S2, {"compression": "szip", **SZIP_SMALL}, nan=True),
    Spec("nan-lz4-f64-4d", "float64", S4, {"compression": "lz4"}, nan=True),
    Spec("inf-none-f64-2d", "float64", S2, {}, inf=True),
    Spec("naninf-zstd-f32-3d", "float32", S3, {"compression": "zstd"}, nan=True, inf=True),
    # big-endian objects
    Spec("be-none-f32-2d", "float32", S2, {}, big_endian=True),
    Spec("be-none-f64-3d", "float64", S3, {}, big_endian=True),
    Spec("be-none-i32-1d", "int32", S1, {}, big_endian=True),
    Spec("be-sp16-f64-2d", "float64", S2, _sp(16), big_endian=True),
    Spec("be-sp24+szip-f64-1d", "float64", S1, {**_sp(24), "compression": "szip", **SZIP_SMALL}, big_endian=True),
    Spec("be-szip-f32-3d", "float32", S3, {"compression": "szip", **SZIP_SMALL}, big_endian=True),
    Spec("be-zstd-f64-4d", "float64", S4, {"compression": "zstd"}, big_endian=True),
    Spec("be-blosc2-i32-2d", "int32", S2, {"compression": "blosc2", "blosc2_codec": "lz4"}, big_endian=True),
    Spec("be-shuffle+zstd-f32-2d", "float32", S2, {"filter": "shuffle", "shuffle_element_size": 4, "compression": "zstd"}, big_endian=True),
    Spec("be-nan-none-f32-2d", "float32", S2, {}, big_endian=True, nan=True),
    Spec("be-zfp-f64-3d", "float64", S3, {"compression": "zfp", "zfp_mode": "fixed_rate", "zfp_rate": 16.0}, big_endian=True, lossy=True),
]
MATRIX_IDS = [s.id for s in MATRIX_SPECS]
_SPECS_BY_ID = {s.id: s for s in MATRIX_SPECS}

OBJECTS_PER_MESSAGE = 3
MESSAGES_PER_FILE = 4
#: Files written without hashes (for verify_hash on an unhashed file).
UNHASHED_FILES = {"matrix-unhashed"}


@dataclass(frozen=True)
class MatrixObject:
    path: str
    msg: int
    obj: int
    description: str
    spec: Spec
    #: What was given to the encoder (native order): the decode must equal it when lossless.
    input: np.ndarray
    hashed: bool

    @property
    def shape(self) -> tuple[int, ...]:
        return self.spec.shape

    @property
    def dtype(self) -> np.dtype:
        return np.dtype(self.spec.dtype)

    def upstream(self) -> np.ndarray:
        """Upstream's full decode of this object."""
        return upstream_decode_cached(self.path, self.msg)[self.obj]


def _layout(specs: list[Spec]) -> list[tuple[str, list[list[Spec]]]]:
    """Groups specs into messages (masked objects together: allow_nan is per message) and files."""
    plain = [s for s in specs if not (s.nan or s.inf)]
    masked = [s for s in specs if s.nan or s.inf]
    messages = [plain[i:i + OBJECTS_PER_MESSAGE] for i in range(0, len(plain), OBJECTS_PER_MESSAGE)]
    messages += [masked[i:i + OBJECTS_PER_MESSAGE] for i in range(0, len(masked), OBJECTS_PER_MESSAGE)]
    files = []
    for i in range(0, len(messages), MESSAGES_PER_FILE):
        files.append((f"matrix-{len(files):02d}", messages[i:i + MESSAGES_PER_FILE]))
    # One more file, unhashed, with a few objects again.
    files.append(("matrix-unhashed", [[_SPECS_BY_ID["none-f32-2d"], _SPECS_BY_ID["sp24+szip-f64-3d"],
                                       _SPECS_BY_ID["zstd-f32-2d"]]]))
    return files


def encode_message(specs: list[Spec], *, hashed: bool = True, extra: dict | None = None) -> bytes:
    """One message of ``specs`` written by upstream ``tensogram.encode``."""
    import tensogram

    pairs = []
    for s in specs:
        values = s.values()
        if s.big_endian:
            data = values.astype(values.dtype.newbyteorder(">")).tobytes()
        elif values.dtype.kind == "c" or values.dtype == np.float16:
            data = values.tobytes()  # upstream's Python API takes these dtypes as bytes only
        else:
            data = values
        pairs.append((s.descriptor(), data))
    meta = {"base": [{"name": s.id, "codec": s.id} for s in specs]}
    if extra:
        meta.update(extra)
    return tensogram.encode(meta, pairs, hash="xxh3" if hashed else None,
                            allow_nan=any(s.nan for s in specs), allow_inf=any(s.inf for s in specs))


def write_codec_matrix(root) -> dict[str, MatrixObject]:
    """Writes the matrix's files into ``root``; ``id -> MatrixObject`` for every object."""
    objects: dict[str, MatrixObject] = {}
    for name, messages in _layout(MATRIX_SPECS):
        path = root / f"{name}.tgm"
        hashed = name not in UNHASHED_FILES
        with open(path, "wb") as f:
            for specs in messages:
                f.write(encode_message(specs, hashed=hashed, extra={"matrix_file": name}))
        for msg, specs in enumerate(messages):
            for obj, s in enumerate(specs):
                key = s.id if hashed else f"unhashed:{s.id}"
                objects[key] = MatrixObject(os.fspath(path), msg, obj, f"{name} msg {msg} obj {obj}: {s.id}",
                                            s, s.values(), hashed)
    return objects


def write_message_file(path, specs_per_message: list[list[Spec]], **kw) -> str:
    """Writes a ``.tgm`` file of one message per entry (upstream's encoder)."""
    with open(path, "wb") as f:
        for specs in specs_per_message:
            f.write(encode_message(specs, **kw))
    return os.fspath(path)


def small_file(path, seed: int = 0, messages: int = 1) -> str:
    """A small hashed file whose values depend on ``seed`` (for cache and rewrite tests)."""
    import tensogram

    rng = np.random.default_rng(seed)
    with open(path, "wb") as f:
        for m in range(messages):
            values = rng.standard_normal((8, 9)).astype(np.float32)
            desc = {"type": "ntensor", "shape": [8, 9], "dtype": "float32", "byte_order": "little",
                    "encoding": "none", "filter": "none", "compression": "zstd"}
            f.write(tensogram.encode({"base": [{"name": "v", "seed": seed, "message": m}]}, [(desc, values)]))
    return os.fspath(path)

