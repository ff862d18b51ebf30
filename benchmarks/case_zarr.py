"""The ``zarr`` case of ``run.py``: The zarr codec against zarr's codecs (benchmarks/zarr_codec.py)."""

from __future__ import annotations

import subprocess
import sys

from common import HERE, CaseResult, Context, Skip, Table


def case_zarr(ctx: Context) -> CaseResult:
    script = HERE / "zarr_codec.py"
    res = CaseResult("zarr", "The zarr codec against zarr's codecs (benchmarks/zarr_codec.py)",
                     "Runs `benchmarks/zarr_codec.py` (the codec against zarr's and numcodecs' codecs) in this interpreter and keeps "
                     "its output: compressed size, codec encode/decode throughput on 1 and 2 threads and "
                     "zarr reads of the real 2t field.")
    if not script.exists():
        raise Skip("benchmarks/zarr_codec.py does not exist")
    runs = max(ctx.repeats, 5)
    proc = subprocess.run([sys.executable, str(script), "--runs", str(runs)], capture_output=True, text=True,
                          cwd=HERE.parent, timeout=1800)
    text = "\n".join(line for line in proc.stdout.splitlines())
    if proc.returncode != 0:
        raise Skip(f"zarr_codec.py failed ({proc.returncode}): {proc.stderr.strip().splitlines()[-1:]}")
    res.tables.append(Table("output of zarr_codec.py", ["text"], [[text]], note="preformatted"))
    res.raw = {"stdout": proc.stdout, "runs": runs}
    return res
