"""szip flags are accepted by what they produce: every libaec flag combination (0 to 127) is
written at several widths, shapes and thread counts, and a stream that is written must decode
back within a packing step, by this package and by upstream; the flags whose streams would not
(``AEC_PAD_RSI``; ``AEC_RESTRICTED`` on samples over 4 bits, which libaec refuses on some paths
only) are refused before anything is written, by ``to_tgm``, the core's encode and the zarr
codec alike."""

from __future__ import annotations

import itertools
import os

import numpy as np
import pytest
import xarray as xr

import tgm_xarray
from tests.helpers.oracle import upstream_decode
from tgm_xarray import _core
from tgm_xarray.errors import TgmCodecError

AEC_RESTRICTED, AEC_PAD_RSI = 16, 32
FLAGS = range(128)
#: The widths the writer packs for szip (8, 16, 24, 32 bits), small and large fields (one RSI
#: and many; a large one is encoded in pieces on 2 threads).
CASES = [(bits, shape, threads) for (bits, shape), threads in
         zip(itertools.product([8, 16, 24, 32], [(20, 30), (300, 500)]), itertools.cycle([1, 2, 2, 1]))]


def field(shape) -> np.ndarray:
    return 250 + 50 * np.random.default_rng(shape[0]).random(shape)


def test_the_core_refuses_exactly_the_padded_flags_and_restricted_ones_on_wide_samples():
    for flags in FLAGS:
        if flags & AEC_PAD_RSI:
            with pytest.raises(TgmCodecError, match="AEC_PAD_RSI"):
                _core.writable_szip_flags(flags)
        else:
            assert _core.writable_szip_flags(flags) == flags == _core.writable_szip_flags(flags, 4)
        if flags & AEC_RESTRICTED and not flags & AEC_PAD_RSI:
            with pytest.raises(TgmCodecError, match="AEC_RESTRICTED"):
                _core.writable_szip_flags(flags, 8)
    for bad in (-1, 128, 2**40):
        with pytest.raises(TgmCodecError, match="from 0 to 127"):
            _core.writable_szip_flags(bad)


@pytest.mark.parametrize("flags", FLAGS)
def test_each_flag_combination_written_reads_back_or_is_refused(tmp_path, flags):
    ds = {shape: field(shape) for shape in {shape for _, shape, _ in CASES}}
    for bits, shape, threads in CASES:
        path = tmp_path / f"f{bits}-{shape[0]}.tgm"
        encoding = {"t": {"bits": bits, "compression": "szip", "szip_flags": flags}}
        values = ds[shape]
        write = xr.Dataset({"t": (("y", "x"), values)})
        refused = "AEC_PAD_RSI" if flags & AEC_PAD_RSI else "AEC_RESTRICTED" if flags & AEC_RESTRICTED else None
        if refused:  # (the writer packs 8 bits at least, too wide for AEC_RESTRICTED)
            with pytest.raises(TgmCodecError, match=refused):
                tgm_xarray.to_tgm(write, path, encoding=encoding, threads=threads)
            assert not path.exists()
            continue
        tgm_xarray.to_tgm(write, path, encoding=encoding, threads=threads)
        step = (values.max() - values.min()) / (2**bits - 1)
        ours = _core.FileHandle(os.fspath(path)).read(0, 0)
        assert np.abs(ours - values).max() <= step, (bits, shape, threads)
        np.testing.assert_array_equal(upstream_decode(path, 0)[0], ours)


def test_the_core_s_encode_refuses_padded_flags_whatever_the_caller_checked():
    """The rule holds below the writer's option check: a descriptor handed to the core as is."""
    values = field((20, 30))
    descriptor = {"type": "ntensor", "shape": [20, 30], "dtype": "float64", "byte_order": "little",
                  "encoding": "simple_packing", "filter": "none", "compression": "szip",
                  "sp_bits_per_value": 16, "szip_rsi": 128, "szip_block_size": 32, "szip_flags": 8 | AEC_PAD_RSI}
    with pytest.raises(TgmCodecError, match="object 0.*AEC_PAD_RSI"):
        _core.encode_message({}, [(descriptor, values)])


def test_the_zarr_codec_refuses_padded_flags():
    zarr_codec = pytest.importorskip("tgm_xarray.zarr_codec")
    with pytest.raises(TgmCodecError, match="AEC_PAD_RSI"):
        zarr_codec.TensogramCodec(encoding="simple_packing", bits_per_value=16, compression="szip",
                                  szip_flags=8 | AEC_PAD_RSI)
