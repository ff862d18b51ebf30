"""Archives of many small messages for the remote-opening and index tests and measurements:
``benchmarks/archive_data.py``'s generator (one 32 x 64 float32 field per message with its
latitude and longitude objects and MARS metadata: 10 params x 10 levels x steps of 6 hours)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))
import archive_data  # noqa: E402


def write_archive(path, messages: int = 10_000, first_step: int = 0) -> str:
    """Writes ``messages`` messages (a multiple of 100: 10 params x 10 levels per step), steps
    6 hours apart from ``first_step``."""
    per_step = len(archive_data.PARAMS) * len(archive_data.LEVELS)
    if messages % per_step:
        raise ValueError(f"messages must be a multiple of {per_step}; got {messages}")
    return archive_data.write_archive(path, range(first_step, first_step + 6 * messages // per_step, 6))


def measure(path, url_of, server) -> tuple[int, int, float]:
    """``(requests, bytes, seconds)`` of ``xr.open_dataset`` on ``path`` served by ``server``."""
    import time

    import xarray as xr

    from tgm_xarray.source import handles

    handles.CACHE.clear()
    server.reset()
    began = time.perf_counter()
    with xr.open_dataset(url_of(path), engine="tgm") as ds:
        ds.data_vars  # noqa: B018 - opened: every message's metadata read
    return server.count(), server.sent_bytes(), time.perf_counter() - began


if __name__ == "__main__":  # python -m tests.helpers.remote_archive (in the repository): what opening over loopback HTTP costs
    import shutil
    import tempfile

    from tests.helpers.range_server import RangeServer
    from tests.helpers.shared import REMOTE_PARITY

    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        write_archive(root / "archive.tgm", 10_000)
        thousand = REMOTE_PARITY / "thousand-msg.tgm"
        shutil.copyfile(thousand, root / thousand.name)
        server = RangeServer(root).start()
        for name in ("archive.tgm", thousand.name):
            size = (root / name).stat().st_size
            requests, sent, seconds = measure(root / name, lambda p: server.url(p.name), server)
            print(f"{name}: {size:,} bytes, open_dataset: {requests:,} requests, {sent:,} bytes, {seconds:.2f} s")
        server.stop()
