#!/usr/bin/env bash
# Free-threaded Python for the test suite: finds or builds a free-threaded CPython, keeps a venv
# with the test stack outside the clone (so CI reuses it across runs on one machine), builds this
# project's extension into it, and prints that venv's python as the LAST LINE OF STDOUT:
#     FT=$(scripts/free-threaded-python.sh | tail -1)
# Progress goes to stderr; verbose logs to /tmp/tgm-ft-*.log. Run as root (writes under /opt).
# The steps are scripts/python-lane.sh's, shared with scripts/newest-python.sh.
#
# Interpreter: the first of these that works
#   1. $TGM_FT_PYTHON
#   2. `uv python install 3.14t` (if uv is on PATH; fails without access to GitHub releases)
#   3. a cached build at /opt/python3.13t
#   4. CPython 3.13t built from Debian's source package into /opt/python3.13t (~10-15 min)
set -euo pipefail
LANE=ft
# A free-threaded build whose GIL is really off (PYTHON_GIL=0 would hide an extension re-enabling it).
lane_python() {
  [ -n "$1" ] && [ -x "$1" ] && env -u PYTHON_GIL "$1" -c 'import sys, sysconfig
sys.exit(not (sysconfig.get_config_var("Py_GIL_DISABLED") == 1 and not sys._is_gil_enabled()))' 2>/dev/null
}
# shellcheck source=python-lane.sh
. "$(dirname "${BASH_SOURCE[0]}")/python-lane.sh"

# --- 1. the interpreter ---------------------------------------------------------------------
find_python "${TGM_FT_PYTHON:-}" 3.14t "${FT_PREFIX:-/opt/python3.13t}" python3.13t --disable-gil

# --- 2. the venv and the test stack ---------------------------------------------------------
PYV=$("$PY" -c 'import sys; print(f"{sys.version_info[0]}{sys.version_info[1]}")')
VENV=${TGM_FT_VENV:-/opt/venv${PYV}t-tgm}
VPY=$VENV/bin/python
# cmake>=3.26: libaec-sys (szip) needs it, Debian has 3.25. scipy: xarray's NetCDF (3) writer, as
# netCDF4 and h5py have no cp313t wheels.
REQS=(numpy xarray "dask[array]" distributed numcodecs google-crc32c pytest pytest-run-parallel
      tqdm packaging scipy "fsspec>=2024.6" aiohttp "pooch>=1.8" "maturin>=1.16,<2" "cmake>=3.26")
CONSTRAINTS=()
if [ "$PYV" = 313 ]; then
  # zarr 3.4 requires msgspec, whose C code refuses to build on 3.13t
  # ('#error "Py_GIL_DISABLED is only supported in Python 3.14+"').
  REQS+=("zarr>=3,<3.4"); CONSTRAINTS=(-c "$ROOT/scripts/constraints-313t.txt")
else
  REQS+=("zarr>=3,<4")
fi
want=$( { echo "$PY"; printf '%s\n' "${REQS[@]}"; cat "$ROOT/scripts/constraints-313t.txt"; } | sha256sum | cut -c1-64)
ensure_venv "$VENV"
if [ "$(cat "$VENV/.tgm-stack" 2>/dev/null)" != "$want" ]; then
  say "venv $VENV: installing the test stack (log $LOG-pip.log)"
  "$VPY" -m pip install -q --upgrade pip >"$LOG-pip.log" 2>&1
  # Upstream tensogram is only a test oracle/writer: install it if PyPI has a wheel for this
  # interpreter (never build its Rust sdist); the tests that need it skip otherwise.
  rm -rf /tmp/tgm-ft-dl
  if "$VPY" -m pip download -q --no-deps --only-binary :all: -d /tmp/tgm-ft-dl "tensogram==0.24.0" >>"$LOG-pip.log" 2>&1; then
    REQS+=("tensogram==0.24.0")
  else
    say "tensogram 0.24.0 has no wheel for this interpreter: skipped (its oracle tests will skip)"
  fi
  # --prefer-binary: the newest numpy/pandas no longer ship cp313t wheels, so take the newest
  #   release that does instead of building sdists (numcodecs and pyyaml have none: built, ~3 min).
  # google-crc32c (required by zarr/numcodecs): its C extension does not declare free-threading
  #   support and re-enables the GIL on import -> install it pure-Python instead.
  CRC32C_PURE_PYTHON=1 "$VPY" -m pip install --prefer-binary --no-binary google-crc32c \
    "${CONSTRAINTS[@]}" "${REQS[@]}" >>"$LOG-pip.log" 2>&1 || die "pip install failed, see $LOG-pip.log"
  echo "$want" >"$VENV/.tgm-stack"
fi

# The GIL must stay disabled once the stack is imported (an extension without free-threading
# support silently turns it back on). Core modules are required; the others only warn.
env -u PYTHON_GIL "$VPY" -W ignore - >&2 <<'EOF' || die "the GIL does not stay disabled (see above)"
import importlib, sys
core = ["numpy", "xarray", "dask", "dask.array", "zarr", "numcodecs", "google_crc32c", "pytest"]
extra = ["distributed", "pytest_run_parallel", "tqdm", "scipy.io", "tensogram", "fsspec", "aiohttp", "pooch"]
gil_on = False
for m in core + extra:
    try:
        importlib.import_module(m)
    except ImportError as e:
        if m in core:
            sys.exit(f"cannot import {m}: {e}")
        print(f"  warning: {m} not importable ({e})")
        continue
    if sys._is_gil_enabled() and not gil_on:
        if m in core:
            sys.exit(f"importing {m} re-enabled the GIL")
        print(f"  warning: importing {m} re-enabled the GIL (the tests force it off: PYTHON_GIL=0)")
        gil_on = True
print("  GIL", "ON" if gil_on else "disabled", "with the stack imported")
EOF
print_stack "$VENV"

# --- 3. the extension -----------------------------------------------------------------------
# PyO3 >= 0.29 supports free-threaded CPython from 3.14 on and refuses 3.13t at build time; it
# still carries 3.13t's object layout, and 3.13t is the only free-threaded CPython these CI
# machines can build (no 3.14 source is reachable). So on 3.13t only, the CI lane skips PyO3's
# version check: users get 3.14t, which PyO3 supports.
if [ "$PYV" = 313 ]; then UNSAFE_PYO3_SKIP_VERSION_CHECK=1 build_extension "$VENV"; else build_extension "$VENV"; fi
env -u PYTHON_GIL "$VPY" -c 'import sys, tgm_xarray._core
assert not sys._is_gil_enabled(), "tgm_xarray._core re-enabled the GIL"' \
  || die "tgm_xarray._core does not import with the GIL disabled"
say "ready in $(( $(date +%s) - T0 )) s"
echo "$VPY"
