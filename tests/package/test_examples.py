"""The examples run and show what they claim, on the real IFS fixture.

- ``examples/distributed.ipynb`` is executed top to bottom with nbclient, in a kernel of this
  interpreter, on a ``distributed.LocalCluster`` of worker processes; the checks read its outputs
  and, through one cell appended for the test, the values it computed.
- Each script of ``examples/`` runs in a subprocess of this interpreter; the checks parse what it
  prints.

The examples find their input through ``$TGM_XARRAY_EXAMPLE_FILE`` (here: the shared fixture);
nothing is downloaded. Optional dependencies missing (ipykernel or matplotlib on a free-threaded
CPython, say) skip the test that needs them.
"""

from __future__ import annotations

import base64
import json
import os
import re
import shutil
import subprocess
import sys

import numpy as np
import pytest

from tests.helpers.oracle import ENGINE
from tests.helpers.shared import REAL, REPO, require_shared

EXAMPLES = REPO / "examples"
NOTEBOOK = EXAMPLES / "distributed.ipynb"
IFS = REAL / "ifs-0p25-20260404.tgm"
FIELD = 721 * 1440
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
#: The fields of the IFS file: the notebook's row label -> (message, variable name).
IFS_FIELDS = {"2t": (0, "2t"), "lsm": (1, "lsm"), "q 150 hPa": (2, "q"), "t 600 hPa": (3, "t")}

pytestmark = pytest.mark.thread_unsafe(reason="starts subprocesses and kernels, sets environment variables")


@pytest.fixture
def example_file(monkeypatch) -> str:
    """The examples' input: the shared IFS fixture, through the environment variable."""
    path = str(require_shared(IFS))
    monkeypatch.setenv("TGM_XARRAY_EXAMPLE_FILE", path)
    monkeypatch.setenv("MPLBACKEND", "Agg")
    return path


def run_example(script: str, *args: str, cwd) -> str:
    """Runs ``examples/<script>`` with this interpreter; returns its standard output."""
    result = subprocess.run([sys.executable, str(EXAMPLES / script), *args], capture_output=True,
                            text=True, cwd=cwd, timeout=300)
    assert result.returncode == 0, f"{script} failed:\n{result.stdout}\n{result.stderr}"
    return result.stdout


def number(pattern: str, text: str) -> float:
    """The number the regex ``pattern``'s group 1 matches in ``text`` (thousands separators allowed)."""
    match = re.search(pattern, text, re.MULTILINE)
    assert match, f"{pattern!r} not in:\n{text}"
    return float(match.group(1).replace(",", ""))


def expected_statistics() -> dict[str, dict[str, float]]:
    """cos(latitude)-weighted mean, min and max of each IFS field, computed here with numpy."""
    import tgm_xarray

    f = tgm_xarray.open_file(IFS)
    weights = np.broadcast_to(np.cos(np.deg2rad(f.read(0, 1)))[:, None], (721, 1440))
    stats = {}
    for label, (msg, name) in IFS_FIELDS.items():
        assert f.metadata(msg)["base"][0]["name"] == name
        values = f.read(msg, 0)
        stats[label] = {"mean": float(np.average(values, weights=weights)),
                        "min": float(values.min()), "max": float(values.max())}
    return stats


# --------------------------------------------------------------------------------------------
# The notebook


def test_notebook_is_committed_without_outputs():
    notebook = json.loads(NOTEBOOK.read_text())
    assert notebook["nbformat"] == 4
    code = [cell for cell in notebook["cells"] if cell["cell_type"] == "code"]
    assert code and all(cell["outputs"] == [] and cell["execution_count"] is None for cell in code)
    # The data's licence is stated in the notebook itself.
    text = "".join("".join(cell["source"]) for cell in notebook["cells"] if cell["cell_type"] == "markdown")
    assert "CC BY 4.0" in text and "Copyright ECMWF" in text


def test_distributed_notebook(example_file, tmp_path, monkeypatch):
    pytest.importorskip("distributed")
    pytest.importorskip("matplotlib")
    pytest.importorskip("ipykernel")
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")

    # Kernel "python3" is this interpreter: a kernel spec of our own, found first on JUPYTER_PATH.
    spec = tmp_path / "jupyter" / "kernels" / "python3"
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "Python 3 (test)", "language": "python",
    }))
    monkeypatch.setenv("JUPYTER_PATH", str(tmp_path / "jupyter"))
    # The kernel's working and temporary directory: the notebook must leave nothing there.
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.setenv("TMPDIR", str(work))

    notebook = nbformat.read(NOTEBOOK, as_version=4)
    # One more cell, for the test only: what the notebook computed, as JSON.
    notebook.cells.append(nbformat.v4.new_code_cell(
        "import json, os, sys\n"
        "print('RESULTS ' + json.dumps({\n"
        "    'table': {label: {k: (v if isinstance(v, str) else float(v)) for k, v in row.items()}\n"
        "              for label, row in table.iterrows()},\n"
        "    'per_worker': per_worker, 'decoded_here': decoded_here,\n"
        "    'pid': os.getpid(), 'executable': sys.executable, 'prefix': sys.prefix,\n"
        "}))"
    ))
    client = nbclient.NotebookClient(notebook, kernel_name="python3", timeout=300, startup_timeout=120,
                                     resources={"metadata": {"path": str(work)}})
    client.execute()  # raises CellExecutionError, naming the cell, if any cell fails

    outputs = [(cell, out) for cell in notebook.cells if cell.cell_type == "code" for out in cell.outputs]
    assert not [out for _, out in outputs if out.output_type == "error"]

    def tagged(tag: str) -> str:
        """The text the cell tagged ``tag`` printed or returned."""
        cell = next(c for c in notebook.cells if tag in c.metadata.get("tags", []))
        return "".join(o.get("text", "") + o.get("data", {}).get("text/plain", "") for o in cell.outputs)

    assert f"{example_file}: 7.1 MB, 4 messages" in tagged("path")
    dataset = tagged("dataset")
    assert "isobaricInhPa: 2" in dataset and dataset.count("dask.array") == 4
    table_text = tagged("statistics")
    for label in IFS_FIELDS:
        assert label in table_text
    assert "all workers" in tagged("workers") and "local threaded result == cluster result" in tagged("workers")

    (line,) = [line for out in notebook.cells[-1].outputs for line in out.get("text", "").splitlines()
               if line.startswith("RESULTS ")]
    results = json.loads(line.removeprefix("RESULTS "))
    # The kernel ran this interpreter in this environment (paths compared resolved: a venv's python
    # is a link, and the kernel may name it by another path to the same file).
    assert os.path.realpath(results["executable"]) == os.path.realpath(sys.executable)
    assert os.path.realpath(results["prefix"]) == os.path.realpath(sys.prefix)

    # The statistics: one row per stored field (the holes left out), equal to numpy's.
    table = results["table"]
    assert set(table) == set(IFS_FIELDS)
    for label, want in expected_statistics().items():
        got = table[label]
        assert got["min"] == want["min"] and got["max"] == want["max"], label
        assert got["mean"] == pytest.approx(want["mean"], rel=1e-9), label
    assert 280 < table["2t"]["mean"] < 295 and table["2t"]["units"] == "K"
    assert 0.2 < table["lsm"]["mean"] < 0.4

    # The workers decoded the four fields; the notebook's own process decoded nothing meanwhile.
    per_worker = results["per_worker"]
    assert len(per_worker) == 2
    assert sum(per_worker.values()) >= 4 * FIELD
    assert results["decoded_here"] == 0

    # The map, displayed inline; no file left behind (dask's workers keep their scratch space).
    images = [out for _, out in outputs if "image/png" in out.get("data", {})]
    assert len(images) == 1
    image = base64.b64decode(images[0]["data"]["image/png"])
    assert image[:8] == PNG_SIGNATURE and len(image) > 10_000
    assert [p.name for p in work.iterdir() if not p.name.startswith("dask-scratch")] == []


# --------------------------------------------------------------------------------------------
# The scripts


def test_open_lazily(example_file, tmp_path):
    pytest.importorskip("dask")
    out = run_example("open_lazily.py", cwd=tmp_path)
    assert "dask chunks, nothing decoded yet" in out
    assert "Europe window {'latitude': 149, 'longitude': 281}" in out
    expected = expected_statistics()
    for label in IFS_FIELDS:
        shown = label.replace(" ", " at ", 1) if " " in label else label
        value = number(rf"^  {re.escape(shown)} +(\S+) ", out)
        assert value == pytest.approx(expected[label]["mean"], rel=1e-5), label
    assert "q at 600 hPa" not in out and "t at 150 hPa" not in out  # the hypercube's holes


def test_partial_read(example_file, tmp_path, monkeypatch):
    # The file as an argument, without the environment variable.
    monkeypatch.delenv("TGM_XARRAY_EXAMPLE_FILE")
    out = run_example("partial_read.py", example_file, "--message", "3", cwd=tmp_path)
    assert "message 3, object 0: t (721, 1440) float64, encoding simple_packing" in out
    assert "41,869 values" in out  # the Europe window: 149 rows x 281 columns
    whole = number(r"^  the whole field +([\d,]+)$", out)
    again = number(r"^  the window again +([\d,]+)$", out)
    strided = number(r"^  every 4th row and column +([\d,]+) ", out)
    assert whole == FIELD
    assert 41_869 <= again <= 160 * 1440  # the rows spanning the window, not the field
    assert strided < FIELD / 3
    assert "-> (181, 360)" in out


def test_scripts_fall_back_to_the_tutorial_file(example_file, tmp_path, monkeypatch):
    """Without an argument or $TGM_XARRAY_EXAMPLE_FILE, a script takes the tutorial's file: here
    a copy already in the tutorial cache, so nothing is downloaded."""
    pytest.importorskip("pooch")
    cache = tmp_path / "cache"
    cache.mkdir()
    shutil.copyfile(example_file, cache / "ifs-0p25-20260404.tgm")
    monkeypatch.delenv("TGM_XARRAY_EXAMPLE_FILE")
    monkeypatch.delenv("TGM_XARRAY_TUTORIAL_URL", raising=False)
    monkeypatch.setenv("TGM_XARRAY_DATA_DIR", str(cache))
    out = run_example("partial_read.py", cwd=tmp_path)
    assert f"<TgmFile '{cache / 'ifs-0p25-20260404.tgm'}': 4 messages>" in out


def test_zarr_codec(example_file, tmp_path):
    pytest.importorskip("zarr")
    out = run_example("zarr_codec.py", "--out", str(tmp_path / "out"), cwd=tmp_path)
    ratio = number(r"size ratio \(stored chunks / raw float64\): (\S+) ", out)
    assert 0.05 < ratio <= 0.3  # docs/zarr.md: at most 0.3 with 24-bit packing + szip
    error = number(r"max abs error: (\S+) ", out)
    bound = number(r"bound for 24 bits: .* = (\S+)\)", out)
    assert 0 <= error <= bound
    metadata = json.loads((tmp_path / "out" / "t2m.zarr" / "zarr.json").read_text())
    (codec,) = metadata["codecs"]
    assert codec["name"] == "tensogram"
    assert codec["configuration"]["bits_per_value"] == 24 and codec["configuration"]["compression"] == "szip"


def test_write_tgm(tmp_path):
    import xarray as xr

    out = run_example("write_tgm.py", "--out", str(tmp_path / "out"), cwd=tmp_path)
    assert "wrote" in out and ": 9 messages" in out and "appended step 18: 12 messages" in out
    assert "steps read back (h): [0, 6, 12, 18]" in out
    assert "2t (lossless) identical: True" in out
    error = number(r"max abs error: (\S+) K", out)
    bound = number(r"bound over the data's range: (\S+) K", out)
    assert 0 < error <= bound
    with xr.open_dataset(tmp_path / "out" / "forecast.tgm", engine=ENGINE) as ds:
        assert dict(ds.sizes) == {"step": 4, "isobaricInhPa": 2, "latitude": 75, "longitude": 141}
        assert set(ds.data_vars) == {"2t", "t"}


@pytest.mark.parametrize("script", ["write_tgm.py", "zarr_codec.py", "demo.py"])
def test_scripts_leave_no_temporary_files(example_file, tmp_path, monkeypatch, script):
    """Without ``--out`` a script writes into a temporary directory and removes it."""
    pytest.importorskip("zarr")
    pytest.importorskip("dask")
    temp = tmp_path / "temp"
    temp.mkdir()
    monkeypatch.setenv("TMPDIR", str(temp))
    run_example(script, *(["--steps", "1"] if script == "demo.py" else []), cwd=tmp_path)
    assert list(temp.iterdir()) == []


def test_remote_http(example_file, tmp_path, range_server):
    pytest.importorskip("fsspec")
    pytest.importorskip("aiohttp")
    shutil.copyfile(example_file, range_server.root / "ifs.tgm")
    out = run_example("remote_http.py", range_server.url("ifs.tgm"), cwd=tmp_path)
    assert f"<TgmFile '{range_server.url('ifs.tgm')}': 4 messages>: indexed 7,111,632 bytes" in out
    mean = number(r"over Europe: shape \(153, 177\), mean (\S+),", out)
    import xarray as xr

    with xr.open_dataset(example_file, engine=ENGINE) as ds:
        name = next(n for n, v in ds.data_vars.items() if {"latitude", "longitude"} <= set(v.dims))
        window = ds[name].sel(latitude=slice(72, 34), longitude=slice(-12, 32))
        assert mean == pytest.approx(float(window.mean()), abs=1e-3)
    # Opening read headers only; the window fetched its frames, never the whole file.
    assert range_server.sent_bytes() < 7_111_632


def test_scripts_document_themselves():
    """Every script says what it shows and how to run it."""
    for name in ("open_lazily", "partial_read", "remote_http", "zarr_codec", "write_tgm"):
        source = (EXAMPLES / f"{name}.py").read_text()
        assert source.startswith('"""'), name
        assert f"python examples/{name}.py" in source.split('"""')[1], name


def test_demo_prints_no_warning(tmp_path, monkeypatch):
    """``make demo``'s environment has no other package registering ``engine="tensogram"``
    (pyproject's extras): there the demo prints no warning at all. Checked in this environment
    less upstream's ``tensogram-xarray`` (an older setup installed it)."""
    pytest.importorskip("dask")
    from tests.helpers.cli import site_without

    monkeypatch.setenv("TMPDIR", str(tmp_path))
    monkeypatch.setenv("PYTHONWARNINGS", "always")  # every warning printed, none hidden by a filter
    site = site_without(tmp_path, {"tensogram_xarray"})
    result = subprocess.run(
        [sys.executable, "-S", "-c", "import os, runpy, site, sys; site.addsitedir(sys.argv.pop(1)); "
         "script = sys.argv.pop(1); sys.argv[0] = script; sys.path.insert(0, os.path.dirname(script)); "
         "runpy.run_path(script, run_name='__main__')",
         site, str(EXAMPLES / "demo.py"), "--steps", "1"],
        capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert result.returncode == 0, result.stderr
    assert "largest 2 m temperature error" in result.stdout
    assert result.stderr == "", result.stderr
