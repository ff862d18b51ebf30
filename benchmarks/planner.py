"""The planner alone: ``build_hypercube`` over archive-shaped metadata tables.

Each message holds a 32x64 float32 field (``p0``..``p9``, 10 levels, N steps, MARS keys) and
its latitude/longitude objects, as the archive benchmark's files do. Tables are built by the
core from encoded messages (``MetadataTable.of_bytes``, not timed); the planner is timed as the
median of several runs, on a table whose frames carry inline hashes (what a file written with hashes gives: no
fingerprint call) and on one without (one fingerprint call per coordinate object).

``--distinct-steps`` times instead one-value messages each at a step of its own (one axis of N
distinct values: the pass that groups them must stay linear in N; a quadratic one takes
minutes at 10^6).

    python benchmarks/planner.py [--sizes 1000 10000 100000] [--repeat 5] [--distinct-steps]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

import numpy as np

# The checkout on sys.path: the distinct-steps table is the test suite's (tests.helpers).
sys.path.append(str(Path(__file__).resolve().parents[1]))

from tests.helpers.tables import distinct_steps_table  # noqa: E402
from tgm_xarray._core import encode_message  # noqa: E402
from tgm_xarray.hypercube import build_hypercube  # noqa: E402
from tgm_xarray.table import MetadataTable  # noqa: E402

PARAMS = 10
LEVELS = (1000, 925, 850, 700, 500, 400, 300, 250, 200, 100)
NY, NX = 32, 64


def _object(shape, dtype: str) -> tuple[dict, np.ndarray]:
    # zstd: the zero values take a few bytes (100,000 messages of 10 KB would be a gigabyte).
    descriptor = {"type": "ntensor", "shape": list(shape), "dtype": dtype, "byte_order": "little",
                  "encoding": "none", "filter": "none", "compression": "zstd"}
    return descriptor, np.zeros(shape, dtype=dtype)


def archive_bytes(n_messages: int, hashed: bool = False) -> bytes:
    """``n_messages`` archive messages (10 params x 10 levels x ``n_messages / 100`` steps), as
    a file holds them, with inline hashes or without (``hashed``). The messages of one step are encoded once, with a step
    written as a 2-byte CBOR integer, and each step's are those with the step's bytes in its
    place (CBOR integers may take more bytes than they need; encoding 100,000 messages would
    take minutes)."""
    objects = [_object((NY, NX), "float32"), _object((NY,), "float64"), _object((NX,), "float64")]
    lat = {"name": "latitude", "units": "degrees_north", "dim_names": ["latitude"]}
    lon = {"name": "longitude", "units": "degrees_east", "dim_names": ["longitude"]}
    mark = b"dstep\x19\x12\x34"  # "step": 0x1234
    one_step = []
    for i in range(PARAMS * len(LEVELS)):
        level, param = divmod(i, PARAMS)
        mars = {"class": "od", "stream": "oper", "type": "fc", "param": f"p{param}",
                "date": "20260404", "time": "0000", "step": 0x1234, "levtype": "pl",
                "levelist": LEVELS[level]}
        field = {"mars": mars, "dim_names": ["latitude", "longitude"]}
        message = encode_message({"base": [field, lat, lon]}, objects, hash=hashed)
        assert message.count(mark) == 1
        one_step.append(message)
    steps = -(-n_messages // len(one_step))
    messages = [m.replace(mark, b"dstep\x19" + step.to_bytes(2, "big")) for step in range(steps) for m in one_step]
    return b"".join(messages[:n_messages])


def time_plan(table: MetadataTable, repeat: int) -> tuple[float, int]:
    """Median seconds of ``build_hypercube`` and the fingerprint calls of one run."""
    calls = [0]

    def fingerprint(msg: int, obj: int) -> str:
        calls[0] += 1
        return f"coordinate {obj}"  # every message's latitude (longitude) holds the same bytes

    times = []
    for _ in range(repeat):
        calls[0] = 0
        start = time.perf_counter()
        build_hypercube(table, source="archive.tgm", fingerprint=fingerprint)
        times.append(time.perf_counter() - start)
    return statistics.median(times), calls[0]


def main(argv: list[str] | None = None) -> dict[str, dict[int, float]]:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", type=int, nargs="+", default=[1_000, 10_000, 100_000])
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--distinct-steps", action="store_true",
                        help="one-value messages, each at its own step")
    args = parser.parse_args(argv)
    results: dict[str, dict[int, float]] = \
        {"distinct steps": {}} if args.distinct_steps else {"hashed": {}, "callback": {}}
    print(f"{'messages':>9} {'frames':>14} {'median s':>9} {'us/msg':>7} {'fingerprint calls':>18}")
    for n in args.sizes:
        if args.distinct_steps:
            tables = [("distinct steps", distinct_steps_table(n))]
        else:
            tables = [("hashed", MetadataTable.of_bytes(archive_bytes(n, hashed=True))),
                      ("callback", MetadataTable.of_bytes(archive_bytes(n)))]
        for kind, t in tables:
            seconds, calls = time_plan(t, args.repeat)
            results[kind][n] = seconds
            print(f"{n:>9} {kind:>14} {seconds:>9.4f} {seconds / n * 1e6:>7.2f} {calls:>18}")
    for kind, by_size in results.items():
        sizes = sorted(by_size)
        for small, big in zip(sizes, sizes[1:]):
            print(f"{kind}: {big} / {small} messages = {by_size[big] / by_size[small]:.1f}x the time "
                  f"for {big / small:.0f}x the messages")
    return results


if __name__ == "__main__":
    main()
