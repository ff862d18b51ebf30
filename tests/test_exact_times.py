"""Steps and reference times read back to the nanosecond, or refused with a message naming the
file: never rebuilt through a float (steps past 2**53 ns, 104 days, lost their last
nanoseconds), never wrapped around by numpy's conversions to nanoseconds (years past 2261,
steps past 292 years), never a bare ``OverflowError``.

Files written by our writer (``to_tgm``) and by upstream ``tensogram`` with the MARS keys in
their metadata.
"""

from __future__ import annotations

import warnings

import numpy as np
import pytest
import xarray as xr

from tgm_xarray.backend import TensogramBackendEntrypoint as ENGINE
from tgm_xarray.writer import to_tgm

DAY_NS = 86_400 * 10**9
HOUR_NS = 3_600 * 10**9
#: The largest step timedelta64[ns] holds: 2**63 - 1 ns, about 292 years.
LAST_NS = 2**63 - 1


def _upstream_file(path, keys: list[dict]) -> str:
    """One upstream-encoded message of two zeros per entry of ``keys`` (its ``mars`` keys)."""
    tensogram = pytest.importorskip("tensogram")
    desc = {"type": "ntensor", "shape": [2], "dtype": "float64", "byte_order": "little",
            "encoding": "none", "filter": "none", "compression": "none"}
    with open(path, "wb") as f:
        for mars in keys:
            f.write(tensogram.encode({"base": [{"mars": {"param": "t", **mars}}]}, [(desc, np.zeros(2))]))
    return str(path)


def _open(path, **kwargs) -> xr.Dataset:
    return xr.open_dataset(path, engine=ENGINE, index=False, **kwargs)


@pytest.mark.parametrize("step_ns", [104 * DAY_NS + HOUR_NS + 1, 2**53 + 1, 2**62 + 3, LAST_NS],
                         ids=["104-days-1ns", "2^53+1", "2^62+3", "2^63-1"])
def test_steps_written_by_to_tgm_read_back_to_the_nanosecond(tmp_path, step_ns):
    ds = xr.Dataset({"t": (("step", "x"), np.arange(4.0).reshape(2, 2))},
                    coords={"step": np.array([0, step_ns], "m8[ns]")})
    to_tgm(ds, tmp_path / "steps.tgm")
    with _open(tmp_path / "steps.tgm") as back:
        assert back["step"].values.astype(np.int64).tolist() == [0, step_ns]
        np.testing.assert_array_equal(back["t"].values, ds["t"].values)


@pytest.mark.parametrize(("step", "ns"), [
    ("9072000.000000001s", 105 * DAY_NS + 1),
    ("9223372036.854775807s", LAST_NS),
], ids=["105-days-1ns", "2^63-1"])
def test_steps_written_by_upstream_read_back_to_the_nanosecond(tmp_path, step, ns):
    path = _upstream_file(tmp_path / "steps.tgm", [{"step": 0}, {"step": step}])
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no time or step is past what nanoseconds hold
        back = _open(path)
    with back:
        assert back["step"].values.astype(np.int64).tolist() == [0, ns]


def test_a_step_past_what_nanoseconds_hold_is_read_as_its_keys_with_a_warning_naming_the_file(tmp_path):
    path = _upstream_file(tmp_path / "far.tgm", [{"step": 6}, {"step": "3000000h"}])
    with pytest.warns(UserWarning, match=rf"{path}: step '3000000h' is beyond what timedelta64\[ns\] holds"):
        back = _open(path)
    with back:
        assert "step" not in back.coords
        assert sorted(back["mars.step"].values.tolist()) == ["3000000h", "6"]


def test_a_date_past_2261_is_read_as_its_keys_with_a_warning_naming_the_file(tmp_path):
    """numpy's datetime64[ns] of 2999-01-01 is 1829-11-23T00:50:52.580896768."""
    path = _upstream_file(tmp_path / "far.tgm", [{"date": "20260404", "time": "0000"},
                                                 {"date": "29990101", "time": "0000"}])
    with pytest.warns(UserWarning, match=rf"{path}: 2999-01-01T00:00 is beyond what datetime64\[ns\] holds"):
        back = _open(path)
    with back:
        assert "time" not in back.coords
        assert sorted(back["mars.date"].values.tolist()) == ["20260404", "29990101"]


def test_a_valid_time_past_what_nanoseconds_hold_is_left_out_with_a_warning_naming_the_file(tmp_path):
    """2026-04-04 + 2562047 h wrapped around to 1733-12-23."""
    path = _upstream_file(tmp_path / "late.tgm", [{"date": "20260404", "time": "0000", "step": 0},
                                                  {"date": "20260404", "time": "0000", "step": 2562047}])
    with pytest.warns(UserWarning, match=rf"{path}: valid_time = 2026-04-04.* is beyond what datetime64\[ns\]"):
        back = _open(path)
    with back:
        assert "valid_time" not in back.coords
        assert back["step"].values.astype(np.int64).tolist() == [0, 2562047 * HOUR_NS]


def test_to_tgm_keeps_steps_and_times_past_nanoseconds_exact_inside_the_field(tmp_path):
    """A timedelta64[s] step of 10**11 s (3,170 years) was keyed as numpy's wrapped-around
    7766279631452241920 ns, and a datetime64[s] of 2999 as 1829: now each stays in its field,
    stored as CF numbers of its own unit, with the writer's warning."""
    ds = xr.Dataset({"t": (("time", "step", "x"), np.arange(8.0).reshape(2, 2, 2))},
                    coords={"step": np.array([0, 10**11], "m8[s]"),
                            "time": np.array(["2026-04-04", "2999-01-01"], "M8[s]")})
    with pytest.warns(UserWarning) as warned:
        to_tgm(ds, tmp_path / "far.tgm")
    assert sorted(str(w.message).split(" (")[0] for w in warned) == \
        ["dimension 'step' stays inside each field", "dimension 'time' stays inside each field"]
    assert all("past the reader's nanoseconds" in str(w.message) for w in warned)
    with _open(tmp_path / "far.tgm", decode_times=xr.coders.CFDatetimeCoder(time_unit="s")) as back:
        assert back["step"].values.astype("m8[s]").astype(np.int64).tolist() == [0, 10**11]
        assert back["time"].values.astype("M8[s]").tolist() == ds["time"].values.tolist()
        np.testing.assert_array_equal(back["t"].transpose(*ds["t"].dims).values, ds["t"].values)
