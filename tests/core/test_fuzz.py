"""A seeded mutation fuzz of the read path: every codec's payloads (the codec matrix of
``tests.helpers.matrix`` and the shared ``2t-codecs.tgm``, written by upstream ``tensogram`` without
hashes) and their descriptors, with bytes flipped, ranges overwritten and shapes rewritten, read
whole and by window in child processes under an address-space limit.

Every case must end in values or an ``Exception``: no crash (a child that dies), no hang (a
batch past its time limit), no ``BaseException`` that is not an ``Exception`` (a Rust panic),
and no child whose peak RSS grows past ``RSS_BOUND``.

``TGM_XARRAY_FUZZ_CASES`` sets the number of cases (default 2,000, about 25 s on two cores),
``TGM_XARRAY_FUZZ_SEED`` the seed (default 0).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections import Counter

import numpy as np
import pytest

from tests.helpers.hostile import FRAME_HEADER, MEMORY_LIMIT, data_frames
from tests.helpers.matrix import MATRIX_SPECS, encode_message
from tests.helpers.shared import REAL, optional_shared

pytestmark = pytest.mark.thread_unsafe(reason="runs subprocesses")

CASES = int(os.environ.get("TGM_XARRAY_FUZZ_CASES", "2000"))
SEED = int(os.environ.get("TGM_XARRAY_FUZZ_SEED", "0"))
PER_CHILD = 250
#: Address space a child may add after its imports, and the peak RSS growth allowed.
AS_BUDGET = 1024 << 20
RSS_BOUND = 256 << 20
#: Seconds a batch of PER_CHILD cases may take.
BATCH_TIMEOUT = 120

CHILD = textwrap.dedent("""
    import json, os, sys
    import tgm_xarray
    folder, budget, first, count = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
""") + MEMORY_LIMIT + textwrap.dedent("""
    def outcome(call):
        try:
            call()
            return "values"
        except Exception as e:
            return type(e).__name__
        except BaseException as e:  # a Rust panic: PanicException is a BaseException
            return "NOT-AN-EXCEPTION:" + type(e).__name__ + ":" + str(e)[:200]
    for case in range(first, first + count):
        print("start", case, flush=True)
        path = os.path.join(folder, f"{case}.tgm")
        results = []
        def read_all():
            f = tgm_xarray.open_file(path)
            for msg in range(len(f)):
                for obj in range(len(f.descriptors(msg))):
                    shape = f.layout(msg, obj)[0]
                    results.append(outcome(lambda: f.read(msg, obj)))
                    window = tuple(slice(n // 3, n // 3 + 2) for n in shape)
                    results.append(outcome(lambda: f.read(msg, obj, window)))
        opened = outcome(read_all)
        print("done", case, json.dumps(results + ([] if opened == "values" else [opened])), flush=True)
    grew = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) * 1024
    print("rss_growth", grew, flush=True)
""")


def base_messages(left_out: frozenset[str] = frozenset(), ids_left_out: frozenset[str] = frozenset()) -> list[bytes]:
    """One unhashed message per codec-matrix object (but those compressed by a codec in
    ``left_out``, and the objects ``ids_left_out`` names), and the shared real file's messages."""
    specs = [s for s in MATRIX_SPECS if s.params.get("compression") not in left_out and s.id not in ids_left_out]
    messages = [encode_message([s], hashed=False) for s in specs]
    real = optional_shared(REAL / "2t-codecs.tgm")
    if real is not None:
        import tensogram

        data = real.read_bytes()
        messages += [data[off : off + length] for off, length in tensogram.scan(data)]
    return messages


def mutate(message: bytes, rng: np.random.Generator) -> bytes:
    """One mutation of one data-object frame: its payload or its descriptor bytes."""
    out = bytearray(message)
    frames = data_frames(message)
    pos, flen = frames[int(rng.integers(len(frames)))]
    body = (pos + FRAME_HEADER, pos + flen)
    start, end = body
    kind = rng.integers(5)
    if kind == 0:  # flip a few bits anywhere in the frame body
        for _ in range(int(rng.integers(1, 9))):
            i = int(rng.integers(start, end))
            out[i] ^= 1 << int(rng.integers(8))
    elif kind == 1:  # overwrite a short range with random bytes
        n = int(rng.integers(1, 33))
        i = int(rng.integers(start, max(start + 1, end - n)))
        out[i : i + n] = rng.bytes(min(n, end - i))
    elif kind == 2:  # the first bytes of the payload (codec headers live there)
        i = start + int(rng.integers(0, 32))
        out[i] = int(rng.integers(256))
    elif kind == 3:  # a descriptor integer (shape, params) made bigger or smaller
        body_bytes = np.frombuffer(message, np.uint8)[start:end]
        hits = np.flatnonzero(np.isin(body_bytes[:max(len(body_bytes) - 2, 0)], (0x18, 0x19, 0x1A)))
        if len(hits):
            i = start + hits[int(rng.integers(len(hits)))]
            width = {0x18: 1, 0x19: 2, 0x1A: 4}[out[i]]
            out[i + 1 : i + 1 + width] = rng.bytes(width)
    else:  # a descriptor string byte (dtype, codec names)
        body_bytes = np.frombuffer(message, np.uint8)[start:end]
        hits = np.flatnonzero((body_bytes >= 0x61) & (body_bytes <= 0x7A))
        if len(hits):
            i = start + hits[int(rng.integers(len(hits)))]
            out[i] = int(rng.integers(0x61, 0x7B))
    return bytes(out)


def run_batch(folder, first: int, count: int) -> dict:
    try:
        run = subprocess.run([sys.executable, "-c", CHILD, os.fspath(folder), str(AS_BUDGET), str(first), str(count)],
                             capture_output=True, text=True, timeout=BATCH_TIMEOUT)
        stdout, returncode = run.stdout, run.returncode
    except subprocess.TimeoutExpired as e:
        stdout, returncode = (e.stdout or b"").decode(), "timeout"
    started, outcomes, rss = None, Counter(), None
    for line in stdout.splitlines():
        word, _, rest = line.partition(" ")
        if word == "start":
            started = int(rest)
        elif word == "done":
            case, _, results = rest.partition(" ")
            outcomes.update(json.loads(results))
            started = None
        elif word == "rss_growth":
            rss = int(rest)
    return {"returncode": returncode, "unfinished": started, "outcomes": outcomes, "rss_growth": rss,
            "stderr": "" if returncode == "timeout" else run.stderr[-2000:]}


def test_fuzz_read_path(tmp_path):
    rng = np.random.default_rng(SEED)
    messages = base_messages()
    for case in range(CASES):
        (tmp_path / f"{case}.tgm").write_bytes(mutate(messages[case % len(messages)], rng))
    failures, outcomes, peak = [], Counter(), 0
    for first in range(0, CASES, PER_CHILD):
        batch = run_batch(tmp_path, first, min(PER_CHILD, CASES - first))
        outcomes += batch["outcomes"]
        peak = max(peak, batch["rss_growth"] or 0)
        if batch["returncode"] != 0:
            failures.append(f"case {batch['unfinished']}: {batch['returncode']}: {batch['stderr']}")
    bad = {k: v for k, v in outcomes.items() if k.startswith("NOT-AN-EXCEPTION")}
    print(f"fuzz: {CASES} cases (seed {SEED}), outcomes {dict(outcomes)}, peak RSS growth {peak >> 20} MiB")
    assert not failures, failures
    assert not bad, bad
    assert peak < RSS_BOUND, peak
    assert outcomes["values"] > 0 and len(outcomes) > 1, outcomes


def test_blosc2_frames_that_crashed_the_chunk_copy(tmp_path):
    """Cases of the 50,000-case run (seed 1) whose corrupt blosc2 frames made c-blosc2 free
    pointers it never set while copying their chunks out (a segfault): a clean error now."""
    rng = np.random.default_rng(1)
    # The list of that run: the matrix without sz3 and the objects it gained since.
    messages = base_messages(left_out=frozenset({"sz3"}), ids_left_out=frozenset({"sp16+blosc2-f64-3d", "sp12+blosc2-f64-2d"}))
    crashed = {3198, 5355}
    for case in range(max(crashed) + 1):
        mutated = mutate(messages[case % len(messages)], rng)
        if case in crashed:
            (tmp_path / f"{len(list(tmp_path.iterdir()))}.tgm").write_bytes(mutated)
    batch = run_batch(tmp_path, 0, len(crashed))
    assert batch["returncode"] == 0, batch
    assert batch["outcomes"] == Counter({"TgmCodecError": 4}), batch["outcomes"]
