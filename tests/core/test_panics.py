"""No call into the Rust binding lets a panic reach Python: each public function and method of
``tgm_xarray._core`` runs behind one guard (codec-rs/src/guard.rs) that raises a ``TgmError``
naming the call, where PyO3 would raise ``PanicException``, a ``BaseException`` that
``except Exception`` misses.

``TGM_XARRAY_PANIC_IN`` (read once at import; names, comma-separated) makes the named calls
panic on entry. Child processes make every public call of ``_core``, one phase's calls panicking
while the others build what those need.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import numpy as np
import pytest

from tgm_xarray import _core

pytestmark = pytest.mark.thread_unsafe(reason="runs subprocesses")

BINDING = Path(__file__).resolve().parents[2] / "codec-rs" / "src"

# The child: `path` (one message), the phase, and the calls, made in that order; prints per call
# the exception's class and message. Arguments only need the right types: the guard is entered
# before anything is read.
CHILD = textwrap.dedent("""
    import json, sys
    import numpy as np
    from tgm_xarray import _core

    path, phase = sys.argv[1], sys.argv[2]
    data = open(path, "rb").read()
    settings = {"first_block": 1 << 16, "max_block": 1 << 20, "read_ahead": 4, "whole_message_max": 1 << 18,
                "header_guess": 1 << 12, "tail_guess": 1 << 12}
    f64, f32 = np.dtype("float64"), np.dtype("float32")

    def remote():
        scan = _core.scan_remote("mem.tgm", len(data), **settings)
        while (ranges := scan.wanted()) is not None:
            scan.feed([data[a:b] for a, b in ranges])
        return scan.finish()

    if phase == "functions":
        calls = {
            "empty": lambda: _core.empty((3,), f64),
            "buffer_pool": lambda: _core.buffer_pool(),
            "encode_message": lambda: _core.encode_message({}, []),
            "decode_message_into": lambda: _core.decode_message_into(data, 0, None, np.empty((4, 6))),
            "writable_szip_flags": lambda: _core.writable_szip_flags(8),
            "parse_message": lambda: _core.parse_message(data),
            "read_frame": lambda: _core.read_frame(data),
            "frame_fingerprint": lambda: _core.frame_fingerprint(data),
            "check_frame_hash": lambda: _core.check_frame_hash(data),
            "table_of_files": lambda: _core.table_of_files([]),
            "table_of_bytes": lambda: _core.table_of_bytes(data),
            "numpy_dtype": lambda: _core.numpy_dtype("float32"),
            "decoded_bytes": lambda: _core.decoded_bytes("float32", 3),
            "read_dtype": lambda: _core.read_dtype(f64, f32),
            "outer_key": lambda: _core.outer_key((0,), (4, 6)),
            "scan_remote": lambda: _core.scan_remote("mem.tgm", len(data), **settings),
            "decoded_elements": lambda: _core.decoded_elements(),
            "take_max_concurrent_reads": lambda: _core.take_max_concurrent_reads(),
        }
    elif phase == "files and scans":
        scan = _core.scan_remote("mem.tgm", len(data), **settings)
        calls = {"FileHandle.__new__": lambda: _core.FileHandle(path),
                 "RemoteScan.wanted": scan.wanted, "RemoteScan.feed": lambda: scan.feed([]),
                 "RemoteScan.finish": scan.finish}
    elif phase == "file methods":
        f = _core.FileHandle(path)
        calls = {
            "FileHandle.message_span": lambda: f.message_span(0), "FileHandle.parse_all": f.parse_all,
            "FileHandle.metadata": lambda: f.metadata(0), "FileHandle.descriptors": lambda: f.descriptors(0),
            "FileHandle.object_layouts": lambda: f.object_layouts(0),
            "FileHandle.fingerprint": lambda: f.fingerprint(0, 0), "FileHandle.check_hash": lambda: f.check_hash(0, 0),
            "FileHandle.fingerprints": lambda: f.fingerprints(_core.table_of_bytes(data)),
            "FileHandle.read": lambda: f.read(0, 0), "FileHandle.read_into": lambda: f.read_into(0, 0, None, np.empty(1)),
        }
    elif phase == "remote messages":
        m, table = remote(), _core.table_of_bytes(data)
        calls = {"RemoteMessages.from_index": lambda: _core.RemoteMessages.from_index("mem.tgm", len(data), table, 64)}
        calls |= {f"RemoteMessages.{name}": (lambda name=name, args=args: getattr(m, name)(*args)) for name, args in [
            ("span", (0,)), ("is_described", (0,)), ("reads_need_description", (0,)), ("frame_range", (0, 0)),
            ("check_frame", (0, 0, data)), ("frame_spans", (0,)), ("describe", ([0],)), ("metadata", (0,)),
            ("descriptors", (0,)), ("object_layouts", (0,)), ("fingerprint", (0, 0)),
            ("payload_read", (0, 0, (slice(0, 1), slice(0, 1)))),
        ]}
    elif phase == "tables":
        table = _core.table_of_bytes(data)
        calls = {"Table.column": lambda: table.column("msg"), "Table.to_bytes": table.to_bytes,
                 "Table.fingerprints": table.fingerprints,
                 "Table.from_bytes": lambda: _core.Table.from_bytes(b"")}
    elif phase == "remote descriptions":
        walk = remote().describe([0])
        calls = {"RemoteDescription.wanted": walk.wanted, "RemoteDescription.feed": lambda: walk.feed([]),
                 "RemoteDescription.finish": walk.finish}
    else:  # "remote reads": of a message described first (by calls that do not panic here)
        m = remote()
        described = m.describe([0])
        while (ranges := described.wanted()) is not None:
            described.feed([data[a:b] for a, b in ranges])
        described.finish()
        read = m.payload_read(0, 0, (slice(0, 1), slice(0, 1)))
        calls = {"RemoteRead.wanted": read.wanted, "RemoteRead.feed": lambda: read.feed([]),
                 "RemoteRead.finish": read.finish}
    out = {}
    for name, call in calls.items():
        try:
            call()
            out[name] = ["returned", ""]
        except BaseException as e:
            out[name] = [type(e).__module__ + "." + type(e).__name__, str(e)]
    print(json.dumps(out))
""")

PHASES = ("functions", "files and scans", "file methods", "tables", "remote messages", "remote descriptions", "remote reads")


def _public_calls() -> set[str]:
    """Every public function of ``_core`` and method of its classes (getters aside)."""
    calls = {name for name, v in vars(_core).items()
             if callable(v) and not isinstance(v, type) and not name.startswith("_")}
    for cls in (_core.FileHandle, _core.Table, _core.RemoteScan, _core.RemoteMessages, _core.RemoteDescription, _core.RemoteRead):
        calls |= {f"{cls.__name__}.{name}" for name, v in vars(cls).items()
                  if not name.startswith("__")
                  and type(v).__name__ in ("method_descriptor", "builtin_function_or_method", "staticmethod")}
    calls.add("FileHandle.__new__")  # the one class Python makes directly
    return calls


def _guarded_in_source() -> set[str]:
    return {m for path in BINDING.glob("*.rs") for m in re.findall(r'guarded\("([^"]+)"', path.read_text())}


@pytest.fixture(scope="module")
def message_file(tmp_path_factory) -> Path:
    desc = {"type": "ntensor", "shape": [40, 60], "dtype": "float64", "byte_order": "little",
            "encoding": "simple_packing", "sp_bits_per_value": 16, "filter": "none", "compression": "none"}
    path = tmp_path_factory.mktemp("panics") / "one.tgm"
    path.write_bytes(_core.encode_message({"base": [{"name": "t"}]}, [(desc, np.arange(2400.0).reshape(40, 60))]))
    return path


def _calls_of(path: Path, phase: str, panics: str) -> dict:
    env = {**os.environ, "TGM_XARRAY_PANIC_IN": panics}
    done = subprocess.run([sys.executable, "-c", CHILD, str(path), phase], capture_output=True, text=True,
                          env=env, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_every_public_call_is_guarded():
    """A function or method added to the binding without the guard fails here."""
    assert _public_calls() <= _guarded_in_source(), sorted(_public_calls() - _guarded_in_source())


@pytest.mark.parametrize("phase", PHASES)
def test_a_panic_in_any_call_is_a_tgm_error_naming_it(message_file, phase):
    made = _calls_of(message_file, phase, "")  # no panic: the calls' own outcomes
    assert not any(kind == "pyo3_runtime.PanicException" for kind, _ in made.values()), made
    panicked = _calls_of(message_file, phase, ",".join(made))
    assert set(panicked) == set(made)
    for name, (kind, message) in panicked.items():
        assert kind == "tgm_xarray.errors.TgmError", (name, kind, message)
        assert message.startswith(f"internal error in tgm_xarray._core.{name}: TGM_XARRAY_PANIC_IN="), message


def test_the_phases_make_every_public_call(message_file):
    made = set().union(*(_calls_of(message_file, phase, "") for phase in PHASES))
    assert made == _public_calls(), sorted(made ^ _public_calls())
