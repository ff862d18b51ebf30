"""Fuzzing a real index (``tgm_xarray.plans.index``): byte flips, truncations and inserted bytes, with
fixed seeds. Whatever the damage, an open warns (``TgmIndexWarning``) or not at all, and gives
the values of a cold open: never an error, a hang or another value."""

from __future__ import annotations

import random
import warnings
from pathlib import Path

import pytest
import xarray as xr

from tests.helpers.index import open_cold
from tests.helpers.oracle import ENGINE
from tgm_xarray.errors import TgmIndexWarning
from tgm_xarray.plans import index
from tgm_xarray.source import handles

SEEDS = range(100)  # about 12 s on a busy 2-core machine

pytestmark = pytest.mark.usefixtures("own_cache")  # each test its own index cache


def mutate(data: bytes, rng: random.Random) -> bytes:
    out = bytearray(data)
    kind = rng.choice(["flip", "flips", "truncate", "insert", "delete"])
    # Half of them in the first 4 KiB: the header, where most bytes say something.
    at = rng.randrange(min(len(out), 4096) if rng.random() < 0.5 else len(out))
    if kind == "flip":
        out[at] ^= 1 << rng.randrange(8)
    elif kind == "flips":
        for _ in range(rng.randint(2, 64)):
            out[rng.randrange(len(out))] = rng.randrange(256)
    elif kind == "truncate":
        del out[at:]
    elif kind == "insert":
        out[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 32)))
    else:
        del out[at:at + rng.randint(1, 32)]
    return bytes(out)


@pytest.fixture
def indexed(archive):
    """The archive (a smaller one would do: its index is what is fuzzed), its cold open and
    its index's bytes (with the default plan)."""
    cold = open_cold(archive)
    with xr.open_dataset(archive, engine=ENGINE) as ds:
        ds.load()
    target = Path(index.cached(str(archive)))
    return archive, cold, target, target.read_bytes()


def test_a_mutated_index_warns_or_is_not_used_and_values_equal_a_cold_open(indexed):
    archive, cold, target, good = indexed
    for seed in SEEDS:
        rng = random.Random(seed)
        target.write_bytes(mutate(good, rng))
        handles.CACHE.clear()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            with xr.open_dataset(archive, engine=ENGINE) as ds:
                now = ds.load()
        others = [w for w in caught if not issubclass(w.category, (TgmIndexWarning, RuntimeWarning))
                  and "engine" not in str(w.message)]
        assert not others, (seed, [str(w.message) for w in others])
        assert now.identical(cold), seed
        # An unused index was replaced by the cold open's: trusted again.
        with warnings.catch_warnings():
            warnings.simplefilter("error", TgmIndexWarning)
            assert index.load(str(target), index.Identity.of_file(str(archive))) is not None, seed
