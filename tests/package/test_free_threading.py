"""The free-threaded build stays free-threaded: nothing we import turns the GIL back on."""

import subprocess
import sys
import sysconfig

import pytest

FREE_THREADED = bool(sysconfig.get_config_var("Py_GIL_DISABLED"))


@pytest.mark.skipif(not FREE_THREADED, reason="needs a free-threaded (3.13t/3.14t) interpreter")
@pytest.mark.thread_unsafe(reason="runs a subprocess")
def test_imports_leave_the_gil_disabled():
    # A fresh interpreter without PYTHON_GIL: an extension that does not declare free-threading
    # support re-enables the GIL on import, which this catches.
    code = (
        "import sys, tgm_xarray, tgm_xarray._core, tgm_xarray.backend, xarray, dask.array, zarr, "
        "tgm_xarray.zarr_codec, tgm_xarray.writer\n"
        "print(sys._is_gil_enabled())"
    )
    env = {k: v for k, v in __import__("os").environ.items() if k != "PYTHON_GIL"}
    run = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert run.returncode == 0, run.stderr
    assert run.stdout.strip() == "False", run.stderr
