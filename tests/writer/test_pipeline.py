"""The pipeline's option table is the one vocabulary of ``to_tgm(encoding=...)``, ``tgm-xarray
convert`` and ``TensogramCodec``: the same options store byte-identical objects through all three,
and a bad option fails with the same error and message from each."""

from __future__ import annotations

import itertools
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest
import xarray as xr
import zarr

from tgm_xarray import _core, to_tgm
from tgm_xarray.cli import main
from tgm_xarray.errors import TgmCodecError
from tgm_xarray.pipeline import (
    COMPRESSIONS,
    ENCODINGS,
    FILTERS,
    NAMES,
    OPTIONS,
    TABLE,
    ZFP_MODES,
    Pipeline,
    bits_advice,
    markdown_table,
    reader_options,
    resolve,
)
from tgm_xarray.zarr_codec import TensogramCodec

DOCS = Path(__file__).resolve().parents[2] / "docs"

# Every encoding x filter x compression (16 bits: a width szip and shuffle both take).
STAGES = [{"encoding": e, "filter": f, "compression": c, **({"bits_per_value": 16} if e != "none" else {})}
          for e, f, c in itertools.product(ENCODINGS, FILTERS, COMPRESSIONS)]
# Every option of the table with a value other than its default, and the aliases.
PARAMETERS = [
    {"bits": 24, "compression": "szip", "szip_rsi": 4, "szip_block_size": 16, "szip_flags": 0},
    {"bits_per_value": 12, "sp_decimal_scale_factor": 2},
    {"bits_per_value": 10, "decimal_scale_factor": -1, "compression": "lz4"},
    {"zstd_level": -5},
    {"zstd_level": 22, "filter": "shuffle"},
    {"compression": "blosc2", "blosc2_codec": "lz4hc", "blosc2_clevel": 9},
    *({"zfp_mode": mode, key: value} for (mode, key), value in zip(ZFP_MODES.items(), (8.0, 20, 0.01))),
    *({"sz3_error_bound_mode": mode, "sz3_error_bound": 0.01} for mode in ("abs", "rel", "psnr")),
    {},
]
INVALID = [
    {"bits": 0}, {"bits": 16.0}, {"bits": 12, "compression": "szip"}, {"bits": 12, "filter": "shuffle"},
    {"bits": 16, "compression": "zfp"}, {"compression": "sz3", "filter": "shuffle"},
    {"encoding": "simple_packing"}, {"encoding": "none", "bits": 8}, {"decimal_scale_factor": 1},
    {"compression": "gzip"}, {"zstd_level": 23}, {"compression": "lz4", "zstd_level": 1},
    {"zfp_mode": "fixed_accuracy"}, {"zfp_mode": "fixed_rate", "zfp_precision": 3},
    {"szip_block_size": 12}, {"blosc2_codec": "snappy"}, {"sz3_error_bound": -1.0},
    {"bits": 8, "bits_per_value": 8}, {"level": 3},
]


def _values() -> np.ndarray:
    rng = np.random.default_rng(7)
    return (250.0 + 40.0 * rng.random((32, 48))).astype(np.float32)


def _frame(message: bytes, obj: int = 0) -> bytes:
    _, objects = _core.parse_message(message)
    _, start, length = objects[obj]
    return message[start:start + length]


def _writer_frame(tmp_path: Path, options: dict) -> bytes:
    path = tmp_path / "writer.tgm"
    to_tgm(xr.Dataset({"v": (("y", "x"), _values())}), path, encoding={"v": options})
    return _frame(path.read_bytes())


def _cli_args(options: dict) -> list[str]:
    return [arg for key, value in options.items() for arg in ("--option", f"{key}={value}")]


def _cli_frame(tmp_path: Path, options: dict) -> bytes:
    source, path = tmp_path / "in.nc", tmp_path / "cli.tgm"
    if not source.exists():
        xr.Dataset({"v": (("y", "x"), _values())}).to_netcdf(source)
    assert main(["convert", str(source), str(path), "--force", "--no-progress", *_cli_args(options)]) == 0
    return _frame(path.read_bytes())


def _codec_frame(options: dict) -> bytes:
    store = zarr.storage.MemoryStore()
    array = zarr.create_array(store, shape=(32, 48), chunks=(32, 48), dtype="float32",
                              serializer=TensogramCodec(**options), compressors=None)
    array[:] = _values()
    chunk = store._store_dict["c/0/0"].to_bytes()
    return _frame(chunk)


def _error(call) -> TgmCodecError:
    with pytest.raises(TgmCodecError) as info:
        call()
    return info.value


@pytest.mark.parametrize("options", STAGES + PARAMETERS, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()))
def test_same_options_same_object_everywhere(tmp_path, options, capsys):
    """to_tgm, convert and the zarr codec store the same object (descriptor, payload, hash)
    from the same options, or refuse them with the same error and message."""
    try:
        Pipeline.from_options(options)
    except TgmCodecError:  # e.g. packing with zfp
        _assert_same_error(tmp_path, options, capsys)
        return
    written = _writer_frame(tmp_path, options)
    assert _cli_frame(tmp_path, options) == written
    assert _codec_frame(options) == written
    # and the object decodes to the values within the pipeline's bounds
    decoded = _core.read_frame(written, None, None, True, "test")
    assert decoded.shape == (32, 48)


@pytest.mark.parametrize("options", INVALID, ids=lambda o: ",".join(f"{k}={v}" for k, v in o.items()))
def test_invalid_option_same_error_everywhere(tmp_path, options, capsys):
    _assert_same_error(tmp_path, options, capsys)


def _assert_same_error(tmp_path: Path, options: dict, capsys) -> None:
    message = str(_error(lambda: Pipeline.from_options(options)))
    writer = _error(lambda: _writer_frame(tmp_path, options))
    assert str(writer) == message
    assert writer.__notes__ == ["in the encoding of variable 'v'"]
    assert str(_error(lambda: TensogramCodec(**options))) == message
    xr.Dataset({"v": (("y", "x"), _values())}).to_netcdf(tmp_path / "in.nc")
    capsys.readouterr()
    args = ["convert", str(tmp_path / "in.nc"), str(tmp_path / "cli.tgm"), "--no-progress", *_cli_args(options)]
    if "did you mean" in message or "unknown encoding option" in message:
        # an unknown --option KEY is a usage error (exit 2), before any variable is planned
        with pytest.raises(SystemExit) as usage:
            main(args)
        assert usage.value.code == 2
        assert ' '.join(message.split()) in ' '.join(capsys.readouterr().err.split())
    else:
        assert main(args) == 1
        assert capsys.readouterr().err == \
            f"tgm-xarray: error: {' '.join(message.split())} (in the encoding of variable 'v')\n"
    assert not (tmp_path / "cli.tgm").exists()


def test_dtype_errors_same_in_writer_and_codec():
    """What depends on the values' dtype fails alike in the writer and the codec."""
    ints = np.arange(6, dtype="int64").reshape(2, 3)
    # szip on raw 8-byte values is refused alike, with or without filter="none": the writer
    # adds no shuffle that the codec would not
    for options in ({"bits": 8}, {"compression": "zfp"}, {"compression": "szip", "filter": "none"},
                    {"compression": "szip"}):
        message = str(_error(lambda: Pipeline.from_options(options).stored_dtype(ints.dtype)))
        assert str(_error(lambda: to_tgm(xr.Dataset({"n": (("y", "x"), ints)}), {}, encoding={"n": options}))) \
            == message
        codec = TensogramCodec(**options)
        assert str(_error(lambda: zarr.create_array({}, shape=(2, 3), dtype="int64", serializer=codec,
                                                    compressors=None))) == message


def test_aliases_name_the_table_option():
    assert Pipeline.from_options({"bits": 16, "sp_decimal_scale_factor": 1}) == \
        Pipeline.from_options({"bits_per_value": 16, "decimal_scale_factor": 1})
    assert TensogramCodec(bits=16).to_dict()["configuration"]["bits_per_value"] == 16
    assert TensogramCodec(bits=16) == TensogramCodec(bits_per_value=16, encoding="simple_packing")
    assert set(NAMES) == set(OPTIONS) | {"bits", "sp_decimal_scale_factor"}


def test_codec_configuration_round_trips_and_is_complete():
    """to_dict names every option of the chosen stages by its table name; from_dict reads it back."""
    for options in STAGES + PARAMETERS:
        try:
            codec = TensogramCodec(**options)
        except TgmCodecError:
            continue
        configuration = codec.to_dict()["configuration"]
        assert set(configuration) - {"hash"} <= set(OPTIONS)
        assert TensogramCodec.from_dict(codec.to_dict()) == codec
        assert Pipeline.from_options({k: v for k, v in configuration.items() if k != "hash"}) == codec._pipeline


def test_defaults_are_the_tables():
    p = Pipeline.from_options({"compression": "szip"})
    assert p.filter == "none"  # raw 8-byte values then need filter="shuffle" (stored_dtype says so)
    assert p.params == {"szip_rsi": 4, "szip_block_size": 32, "szip_flags": 8}  # 128-value RSI
    assert Pipeline.from_options({}).params == {"blosc2_codec": "zstd", "blosc2_clevel": 1}
    assert Pipeline.from_options({"zstd_level": 9}).compression == "zstd"
    assert Pipeline.from_options({"compression": "zfp"}).params == {"zfp_mode": "fixed_precision", "zfp_precision": 32}
    for option in TABLE:
        if option.default is not None:
            assert option.check(option.name, option.default) == option.default


def test_reader_options_repeat_the_stored_pipeline(tmp_path):
    """A .tgm read back and written again keeps its pipeline, through the table's names."""
    options = {"bits": 24, "compression": "szip", "szip_rsi": 4}
    to_tgm(xr.Dataset({"v": (("y", "x"), _values())}), tmp_path / "a.tgm", encoding={"v": options})
    with xr.open_dataset(tmp_path / "a.tgm", engine="tgm") as ds:
        reused = reader_options(ds["v"].encoding)
        assert Pipeline.from_options(reused) == Pipeline.from_options(options)
        to_tgm(ds, tmp_path / "b.tgm")
    assert _frame((tmp_path / "b.tgm").read_bytes()) == _frame((tmp_path / "a.tgm").read_bytes())


@pytest.mark.parametrize("page", ["writer.md", "zarr.md"])
def test_docs_show_the_table(page):
    """The docs' option tables are the table's (regenerate with pipeline.markdown_table())."""
    text = (DOCS / page).read_text()
    assert markdown_table() in text, f"docs/{page}: the option table differs from pipeline.markdown_table()"


def test_table_covers_every_compression_and_stage():
    stages = {o.stage for o in TABLE}
    assert stages <= {"pipeline", "simple_packing", *COMPRESSIONS}
    assert set(FILTERS) == {"none", "shuffle"}


# --------------------------------------------------------------------------------------------
# Packing parameters, stored dtypes, descriptors and the writer's resolve
# --------------------------------------------------------------------------------------------


def _stored_params(values: np.ndarray, bits: int, decimal: int = 0) -> dict:
    """The packing parameters the core's encode stores for ``values`` (it finds them)."""
    pipeline = Pipeline.from_options({"bits": bits, "decimal_scale_factor": decimal, "compression": "none"})
    message = _core.encode_message({"base": [{}]}, [pipeline.prepare(values)], allow_nan=True, allow_inf=True)
    stored = _core.parse_message(message)[1][0][0]["params"]
    return {k: stored[k] for k in ("sp_reference_value", "sp_binary_scale_factor", "sp_decimal_scale_factor")}


@pytest.mark.parametrize("bits", [1, 8, 12, 16, 24, 32])
@pytest.mark.parametrize("decimal", [0, 2, -1])
def test_packing_params_are_upstreams(bits, decimal):
    """The same reference and binary scale as upstream's own computation, on finite values;
    with NaN and infinities, upstream's on the finite ones (which it cannot take itself)."""
    tensogram = pytest.importorskip("tensogram")
    values = 250.0 + 40.0 * np.random.default_rng(bits).standard_normal(500)
    theirs = tensogram.compute_packing_params(values, bits, decimal)
    assert _stored_params(values, bits, decimal) == {k: v for k, v in theirs.items() if k != "sp_bits_per_value"}
    holes = values.copy()
    holes[::7], holes[1], holes[2] = np.nan, np.inf, -np.inf
    assert _stored_params(holes, bits, decimal) == _stored_params(values[np.isfinite(holes)], bits, decimal)


@pytest.mark.parametrize("bits", [8, 16, 24])
def test_packing_error_is_within_half_a_step(bits):
    """Encoded by the core from the descriptor built here and decoded by upstream: every value
    within half the packing step 2**E / 10**D of the input, NaN where the input had NaN."""
    tensogram = pytest.importorskip("tensogram")
    values = 250.0 + 40.0 * np.random.default_rng(bits).standard_normal((20, 30))
    values[3, 4] = np.nan
    pipeline = Pipeline.from_options({"bits": bits, "decimal_scale_factor": 1, "compression": "none"})
    message = _core.encode_message({"base": [{}]}, [pipeline.prepare(values)], allow_nan=True)
    descriptor, decoded = tensogram.decode_object(message, 0)[1:]
    step = 2.0 ** descriptor.params["sp_binary_scale_factor"] / 10.0 ** descriptor.params["sp_decimal_scale_factor"]
    assert np.isnan(decoded[3, 4]) and np.isnan(decoded).sum() == 1
    assert np.nanmax(np.abs(decoded - values)) <= step / 2
    assert step <= (np.nanmax(values) - np.nanmin(values)) / (2**bits - 1) * 2


def test_packing_params_of_constant_empty_and_unpackable_values():
    assert _stored_params(np.full(4, 7.5), 16) == {"sp_reference_value": 7.5, "sp_binary_scale_factor": 0,
                                                   "sp_decimal_scale_factor": 0}
    assert _stored_params(np.array([]), 16)["sp_reference_value"] == 0.0
    assert _stored_params(np.array([np.nan, np.inf]), 16)["sp_reference_value"] == 0.0
    with pytest.raises(TgmCodecError, match=r"cannot hold values from -1e300 to 1e300: .* 2\*\*982, "):
        _stored_params(np.array([-1e300, 1e300]), 16)
    with pytest.raises(TgmCodecError, match=r"to 1\.7e308: the packing step would be outside float64's range"):
        _stored_params(np.array([-1.7e308, 1.7e308]), 16)  # the spread overflows
    with pytest.raises(TgmCodecError, match=r"the packing step would be 2\*\*-322, .*\(drop bits_per_value\)"):
        _stored_params(np.array([0.0, 1e-90]), 24)


@pytest.mark.parametrize(("options", "dtype", "stored"), [
    ({}, "float32", "float32"), ({}, ">i2", "int16"), ({}, "complex64", "complex64"), ({}, "float16", "float16"),
    ({"bits": 16}, "float32", "float64"), ({"compression": "zfp"}, "float32", "float64"),
    ({"compression": "szip"}, "uint32", "uint32"), ({"compression": "szip", "filter": "shuffle"}, "int64", "int64"),
])
def test_stored_dtype(options, dtype, stored):
    got = Pipeline.from_options(options).stored_dtype(np.dtype(dtype))
    assert got == np.dtype(stored) and got.isnative


@pytest.mark.parametrize(("options", "dtype", "message"), [
    ({}, "bool", "not bool values"), ({}, "<U3", "not <U3 values"), ({}, "float128", "not float128 values"),
    ({"bits": 8}, "int16", "encoding 'simple_packing' is lossy and needs floating-point values; got int16"),
    ({"compression": "sz3"}, "complex128", "compression 'sz3' is lossy and needs floating-point values"),
    ({"compression": "szip"}, "float64", "at most 32 bits; float64 values need filter 'shuffle'"),
])
def test_stored_dtype_refuses(options, dtype, message):
    if dtype == "float128" and not hasattr(np, "float128"):
        pytest.skip("no float128 on this platform")
    with pytest.raises(TgmCodecError, match=message):
        Pipeline.from_options(options).stored_dtype(np.dtype(dtype))


def test_descriptor_of_each_stage():
    float64 = np.dtype("float64")
    raw = Pipeline.from_options({"compression": "zstd", "filter": "shuffle"}).descriptor((3, 4), float64)
    assert raw == {"type": "ntensor", "shape": [3, 4], "dtype": "float64", "byte_order": sys.byteorder,
                   "encoding": "none", "filter": "shuffle", "compression": "zstd", "zstd_level": 3,
                   "shuffle_element_size": 8}
    packed = Pipeline.from_options({"bits": 24, "filter": "shuffle", "compression": "lz4"}).descriptor((3, 4), float64)
    assert packed["shuffle_element_size"] == 3  # bytes of a packed sample, not of a value
    assert (packed["sp_bits_per_value"], packed["sp_decimal_scale_factor"]) == (24, 0)
    assert "sp_reference_value" not in packed  # the core's encode finds it in the values
    assert Pipeline.from_options({}).descriptor((), float64)["shape"] == []


def test_writer_warns_when_fewer_bits_make_no_smaller_file(tmp_path):
    """The pipeline's rule (the CLI says it too, with --bits): the same warning for every
    variable (shown once by Python's default filter); whole-byte widths, widths up to 8 and
    other compressions are quiet."""
    values = np.random.default_rng(2).random((16, 16))
    ds = xr.Dataset({"a": (("y", "x"), values), "b": (("y", "x"), values + 1)})
    with pytest.warns(UserWarning) as caught:
        to_tgm(ds, tmp_path / "b12.tgm", encoding={"a": {"bits": 12}, "b": {"bits": 12}})
    assert {str(w.message) for w in caught} == {bits_advice(12, "blosc2")}
    assert str(caught[0].message).startswith(
        "bits_per_value=12 will not make a file smaller than bits_per_value=16 does")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for options in ({"bits": 16}, {"bits": 6}, {"bits": 12, "compression": "none"}):
            to_tgm(ds, tmp_path / "quiet.tgm", encoding={"a": options})


def test_resolve_is_the_writers_view():
    """Coordinates default to no compression; raw values wider than szip's 32 bits need the
    shuffle asked for, as in the codec; errors name the variable."""
    assert resolve("lat", np.dtype("float64"), None, coordinate=True).pipeline.compression == "none"
    assert resolve("v", np.dtype("float64"), None).pipeline.compression == "blosc2"
    wide = resolve("v", np.dtype("float64"), {"compression": "szip", "filter": "shuffle"})
    assert (wide.pipeline.filter, wide.pipeline.params["szip_block_size"], wide.dtype) == \
        ("shuffle", 32, np.dtype("float64"))
    assert resolve("v", np.dtype("float32"), {"compression": "szip"}).pipeline.filter == "none"
    with pytest.raises(TgmCodecError, match="at most 32 bits") as info:
        resolve("v", np.dtype("int64"), {"compression": "szip"})
    assert info.value.__notes__ == ["in the encoding of variable 'v'"]
    with pytest.warns(UserWarning, match="bits_per_value=12 will not make a file smaller"):
        codec = resolve("v", np.dtype(">f4"), {"bits": 12})
    descriptor, array = codec.prepare(np.arange(6, dtype=">f4").reshape(2, 3))
    assert array.dtype == np.dtype("float64") and array.flags.c_contiguous
    assert descriptor["sp_bits_per_value"] == 12
