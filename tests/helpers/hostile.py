"""Hostile files for the tests: upstream ``tensogram``'s encoder output with bytes edited in
place (a payload swapped for one of the same length, a shape widened in its CBOR), and reads of
them in a child process under an address-space limit, so that a crash or a runaway allocation
fails the test instead of killing pytest."""

from __future__ import annotations

import json
import os
import struct
import subprocess
import sys
import textwrap

import numpy as np

#: Bytes of a data-object frame's header; its payload follows.
FRAME_HEADER = 16


def data_frames(message: bytes) -> list[tuple[int, int]]:
    """``(offset, length)`` of each data-object frame (type 9) of one message."""
    pos, frames = 24, []
    while message[pos : pos + 2] == b"FR":
        ftype, _, _, flen = struct.unpack(">HHHQ", message[pos + 2 : pos + 16])
        if ftype == 9:
            frames.append((pos, flen))
        pos = (pos + flen + 7) // 8 * 8  # frames start 8-byte aligned
    return frames


def payload_span(message: bytes, obj: int = 0) -> tuple[int, int]:
    """``(start, end)`` of object ``obj``'s payload (and mask bytes) in ``message``. Read from
    the frame's bytes, not through our core, so that the tests run against any build of it."""
    pos, flen = data_frames(message)[obj]
    flags = struct.unpack(">H", message[pos + 6 : pos + 8])[0]
    assert flags & 1, "the descriptor precedes the payload"  # upstream writes it after
    # The footer: [cbor_offset u64][hash u64]["ENDF"], the descriptor's offset in the frame.
    (cbor_offset,) = struct.unpack(">Q", message[pos + flen - 20 : pos + flen - 12])
    return pos + FRAME_HEADER, pos + cbor_offset


def encode(desc: dict, values: np.ndarray, hashed: bool = False, **keys) -> bytearray:
    """One message of one object, named ``v`` (and ``keys`` in its metadata entry)."""
    import tensogram

    return bytearray(tensogram.encode({"base": [{"name": "v", **keys}]}, [(desc, values)],
                                      hash="xxh3" if hashed else None))


def descriptor(shape, dtype="float64", **params) -> dict:
    d = {"type": "ntensor", "shape": list(shape), "dtype": dtype, "byte_order": "little",
         "encoding": "none", "filter": "none", "compression": "none"}
    d.update(params)
    return d


def cbor_uint(n: int, width: int) -> bytes:
    """``n`` as a CBOR unsigned int in the ``width``-byte argument form (1, 2, 4 or 8)."""
    head = {1: 0x18, 2: 0x19, 4: 0x1A, 8: 0x1B}[width]
    return bytes([head]) + n.to_bytes(width, "big")


def cbor_compact(n: int) -> bytes:
    """``n`` as a CBOR unsigned int in its shortest form, as encoders write it."""
    if n < 24:
        return bytes([n])
    return cbor_uint(n, next(w for w in (1, 2, 4, 8) if n < 256**w))


#: Room for :func:`widen_shape`: a text value written beside the shape in the descriptor
#: (``descriptor(..., **PAD)``) and in the metadata (``encode(..., **PAD)``), which the wider shape
#: takes its bytes from so that every frame keeps its length.
PAD = {"pad": "x" * 200}


def widen_shape(message: bytearray, old: list[int], new: list[int], width: int) -> None:
    """Rewrites the object's ``shape`` in place, in its descriptor and in the metadata's copy,
    from the encoder's shortest CBOR ints to ``width``-byte ones, which may hold what no
    encodable shape holds (dimensions whose product overflows). The bytes that adds are taken
    from the :data:`PAD` text before each copy. Unhashed messages only: the frame changes."""
    before = b"eshape" + bytes([0x80 + len(old)]) + b"".join(map(cbor_compact, old))
    after = b"eshape" + bytes([0x80 + len(new)]) + b"".join(cbor_uint(n, width) for n in new)
    grow = len(after) - len(before)
    pad_key = b"cpad\x78"  # the key, then a text of 24-255 bytes: its length in one byte
    at, found = 0, 0
    while (at := message.find(before, at)) >= 0:
        pad = message.rfind(pad_key, 0, at)
        assert pad >= 0, "no pad before the shape: encode with **PAD"
        length, text = message[pad + len(pad_key)], pad + len(pad_key) + 1
        assert length - grow >= 24, "the pad is too short for this shape"
        between = message[text + grow:at]  # the pad's text less `grow` bytes, and what follows it
        message[pad:at + len(before)] = pad_key + bytes([length - grow]) + between + after
        at, found = text + len(between) + len(after), found + 1
    assert found, "the shape is not where it was expected"


def set_shape(message: bytearray, old: list[int], new: list[int], width: int) -> None:
    """Rewrites the object's ``shape`` in place, in its descriptor and in the metadata's copy:
    every dimension in the same CBOR width."""
    key = b"eshape" + bytes([0x80 + len(old)])
    before = key + b"".join(cbor_uint(n, width) for n in old)
    after = key + b"".join(cbor_uint(n, width) for n in new)
    assert message.count(before) >= 1, "the shape is not where it was expected"
    message[:] = message.replace(before, after)


def zstd_zeros(blocks: int) -> bytes:
    """A zstd frame of ``blocks`` RLE blocks of 128 KiB of zeros: 4 bytes per 128 KiB."""
    size = 128 * 1024
    # No content size recorded, a 128 KiB window (so blocks may be 128 KiB).
    out = bytearray(b"\x28\xb5\x2f\xfd\x00" + bytes([(17 - 10) << 3]))
    for i in range(blocks):
        last = int(i == blocks - 1)
        out += ((size << 3) | (1 << 1) | last).to_bytes(3, "little") + b"\x00"
    return bytes(out)


def zstd_padded(stream: bytes, length: int) -> bytes:
    """``stream`` followed by a skippable frame (which decoders skip) up to ``length`` bytes."""
    pad = length - len(stream) - 8
    assert pad >= 0, f"the payload slot is {length} bytes, the stream needs {len(stream) + 8}"
    return stream + struct.pack("<II", 0x184D2A50, pad) + bytes(pad)


def swap_payload(message: bytearray, payload: bytes, obj: int = 0) -> None:
    start, end = payload_span(message, obj)
    assert len(payload) == end - start
    message[start:end] = payload


# Limits a child to its address space after its imports plus `budget` bytes (a Python prelude;
# `budget` must be defined): `rss0` is its peak RSS before the work.
MEMORY_LIMIT = textwrap.dedent("""
    import resource
    def vm_size():
        for line in open("/proc/self/status"):
            if line.startswith("VmSize:"):
                return int(line.split()[1]) * 1024
    limit = vm_size() + budget
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
""")

# A read in a child process. It sets RLIMIT_AS to its address space after the imports plus a
# budget, reads, and prints one JSON line: the outcome and how much its peak RSS grew.
CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np, tgm_xarray
    path, budget = sys.argv[1], int(sys.argv[2])
    keys = json.loads(sys.argv[3])
""") + MEMORY_LIMIT + textwrap.dedent("""
    outcomes = []
    f = tgm_xarray.open_file(path)
    for key in keys:
        key = None if key is None else tuple(slice(*k) for k in key)
        for msg in range(len(f)):
            for obj in range(len(f.descriptors(msg))):
                try:
                    f.read(msg, obj, key)
                    outcomes.append(["values", ""])
                except Exception as e:
                    outcomes.append([type(e).__module__ + "." + type(e).__name__, str(e)])
    grew = (resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss0) * 1024
    print(json.dumps({"outcomes": outcomes, "rss_growth": grew}))
""")


def read_in_child(path, budget: int, keys=(None,), timeout: float = 120) -> dict:
    """Reads every object of ``path`` (with each of ``keys``: ``None`` or a list of
    ``(start, stop)`` per axis) in a child process limited to ``budget`` more bytes of address
    space; returns ``{"returncode", "stderr", "outcomes": [[exception class or "values",
    message], ...], "rss_growth"}``."""
    run = subprocess.run([sys.executable, "-c", CHILD, os.fspath(path), str(budget), json.dumps(list(keys))],
                         capture_output=True, text=True, timeout=timeout)
    result = {"returncode": run.returncode, "stderr": run.stderr[-3000:], "outcomes": [], "rss_growth": None}
    if run.returncode == 0 and run.stdout.strip():
        result.update(json.loads(run.stdout.strip().splitlines()[-1]))
    return result
