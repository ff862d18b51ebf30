"""Golden byte fixtures (``tests/golden``): what ``to_tgm`` and ``TensogramCodec`` write for rows
of the option table, committed, so that an accidental change of the format written fails here.

Each case is written again and compared with its fixture, and each fixture is decoded and compared
with the values recorded when it was made. The encoder puts the time of writing and a random
UUID into each message's metadata (``_reserved_``: ``time``, ``uuid``, and the encoder's version):
those are left out of the comparison; everything else is compared byte for byte, i.e. every
data-object frame (descriptor, payload, NaN/Inf masks, hash) and the rest of the metadata.
After a change of the bytes that is meant, run ``python tests/golden/regenerate.py`` (README.md).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np
import pytest

import tgm_xarray
from tests.helpers.oracle import assert_same_bits, upstream_decode
from tgm_xarray import _core

GOLDEN = Path(__file__).resolve().parents[1] / "golden"
sys.path.insert(0, str(GOLDEN))
import regenerate  # noqa: E402
from regenerate import CASES, Case  # noqa: E402

KINDS = ("writer", "codec")
#: The message-level ``_reserved_`` entries that differ on every write.
VOLATILE = {"encoder", "time", "uuid"}
PARAMS = [pytest.param(case, kind, id=f"{kind}-{case.name}") for case in CASES for kind in KINDS]


def _fixture(case: Case, kind: str) -> Path:
    return GOLDEN / f"{kind}-{case.name}.tgm"


def _written(case: Case, kind: str, tmp_path: Path) -> bytes:
    if kind == "codec":
        pytest.importorskip("zarr")  # (no free-threaded zarr on 3.13t)
        return regenerate.codec_chunk(case)
    regenerate.write_writer(case, tmp_path / "v.tgm")
    return (tmp_path / "v.tgm").read_bytes()


def _stable_parts(message: bytes) -> tuple[dict, list[bytes]]:
    """The metadata without the volatile ``_reserved_`` entries, and every object's frame bytes."""
    metadata, objects = _core.parse_message(message)  # refuses a buffer of more than one message
    reserved = metadata.pop("_reserved_")
    assert set(reserved) == VOLATILE, f"new message-level _reserved_ entries: {set(reserved) - VOLATILE}"
    assert reserved["encoder"]["name"] == "tensogram"
    return metadata, [message[start:start + length] for _, start, length in objects]


@pytest.mark.parametrize(("case", "kind"), PARAMS)
def test_written_bytes_are_the_fixtures(case, kind, tmp_path):
    golden_metadata, golden_frames = _stable_parts(_fixture(case, kind).read_bytes())
    metadata, frames = _stable_parts(_written(case, kind, tmp_path))
    assert metadata == golden_metadata
    assert len(frames) == len(golden_frames) == 1
    assert frames[0] == golden_frames[0], (
        f"{kind} {case.name}: the object written differs from tests/golden/{kind}-{case.name}.tgm "
        f"({len(frames[0])} bytes vs {len(golden_frames[0])}); if that is meant, run tests/golden/regenerate.py")


@pytest.mark.parametrize(("case", "kind"), PARAMS)
def test_fixtures_decode_to_the_recorded_values(case, kind):
    """Our reader gives the values recorded in the manifest, which are upstream's decode of the
    fixture, and the input itself where the pipeline is lossless."""
    path = _fixture(case, kind)
    entry = json.loads((GOLDEN / "manifest.json").read_text())[case.name]
    with tgm_xarray.open_file(path) as f:
        decoded = f.read(0, 0, verify_hash=True)
    assert regenerate.decoded_digest(decoded) == entry["decoded_sha256"][kind]
    (upstream,) = upstream_decode(path, 0, verify_hash=True)
    assert_same_bits(decoded, upstream, f"{path.name}: ours vs upstream")
    values = case.values()
    if _lossless(case):
        assert_same_bits(decoded, values, f"{path.name}: decoded vs input")
    else:
        finite = np.isfinite(values)
        assert np.array_equal(decoded[~finite], values[~finite], equal_nan=True)  # NaN and Inf kept
        # (1e-9: a value halfway between two steps may round either way, in floating point)
        assert np.abs(decoded[finite] - values[finite]).max() <= _bound(case, path) * (1 + 1e-9)


def _lossless(case: Case) -> bool:
    return "bits" not in case.options and case.options.get("compression") not in ("zfp", "sz3")


def _bound(case: Case, path: Path) -> float:
    """The pipeline's stated error bound: half the packing step, zfp's tolerance, sz3's bound;
    zfp's fixed rate states none (its error is recorded by the digest alone)."""
    options = case.options
    if "bits" in options:
        params = _core.FileHandle(str(path)).descriptors(0)[0]["params"]
        return 2.0 ** params["sp_binary_scale_factor"] / 10.0 ** params["sp_decimal_scale_factor"] / 2
    if options.get("zfp_mode") == "fixed_accuracy":
        return options["zfp_tolerance"]
    if options.get("sz3_error_bound_mode") == "abs":
        return options["sz3_error_bound"]
    return np.inf


def test_the_manifest_and_the_files_are_the_cases():
    manifest = json.loads((GOLDEN / "manifest.json").read_text())
    assert list(manifest) == [case.name for case in CASES]
    for case in CASES:
        assert manifest[case.name]["options"] == case.options and manifest[case.name]["dtype"] == case.dtype
    expected = {_fixture(case, kind).name for case in CASES for kind in KINDS}
    assert {p.name for p in GOLDEN.glob("*.tgm")} == expected
    assert max(p.stat().st_size for p in GOLDEN.glob("*.tgm")) < 4096  # small: a few KB each


def test_the_cases_cover_the_option_table():
    """Raw values, packing to 8, 16 and 24 bits, every compression, the shuffle filter and NaN
    masks, each in at least one case."""
    from tgm_xarray.pipeline import COMPRESSIONS, Pipeline

    pipelines = [Pipeline.from_options(case.options) for case in CASES]
    assert {p.compression for p in pipelines} == set(COMPRESSIONS)
    assert {8, 16, 24} <= {p.bits_per_value for p in pipelines}
    assert {p.filter for p in pipelines} == {"none", "shuffle"}
    assert any(case.nan and p.encoding == "simple_packing" for case, p in zip(CASES, pipelines))
    assert any(case.nan and p.encoding == "none" for case, p in zip(CASES, pipelines))
