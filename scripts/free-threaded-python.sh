#!/usr/bin/env bash
# Free-threaded Python for the test suite: finds or builds a free-threaded CPython, keeps a venv
# with the test stack outside the clone (so CI reuses it across runs on one machine), builds this
# project's extension into it, and prints that venv's python as the LAST LINE OF STDOUT:
#     FT=$(scripts/free-threaded-python.sh | tail -1)
# Progress goes to stderr; verbose logs to /tmp/tgm-ft-*.log. Run as root (writes under /opt).
#
# Interpreter: the first of these that works
#   1. $TGM_FT_PYTHON
#   2. `uv python install 3.14t` (if uv is on PATH; fails without access to GitHub releases)
#   3. a cached build at /opt/python3.13t
#   4. CPython 3.13t built from Debian's source package into /opt/python3.13t (~10-15 min)
set -euo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
FT_PREFIX=${FT_PREFIX:-/opt/python3.13t}
LOG=/tmp/tgm-ft
T0=$(date +%s)
say() { echo "[ft +$(( $(date +%s) - T0 ))s] $*" >&2; }
die() { say "ERROR: $*"; exit 1; }
# A free-threaded build whose GIL is really off (PYTHON_GIL=0 would hide an extension re-enabling it).
is_ft() {
  [ -n "$1" ] && [ -x "$1" ] && env -u PYTHON_GIL "$1" -c 'import sys, sysconfig
sys.exit(not (sysconfig.get_config_var("Py_GIL_DISABLED") == 1 and not sys._is_gil_enabled()))' 2>/dev/null
}

# apt-get that waits for the dpkg lock (unattended-upgrades, or scripts/setup.sh at the same time)
# instead of failing.
apt_get() { apt-get -o DPkg::Lock::Timeout=600 "$@"; }

# Build CPython 3.13t (--disable-gil, no PGO/LTO) into $FT_PREFIX, using only deb.debian.org
# (a *source* package from a newer suite) and the bookworm archive. Adapted from
# shared/tools/build-free-threaded-python.sh.
build_cpython() {
  [ "$(id -u)" = 0 ] || die "building CPython needs root (apt-get, $FT_PREFIX)"
  local work=/tmp/tgm-ftbuild src_list=/etc/apt/sources.list.d/tgm-ft-python-src.sources suite
  export DEBIAN_FRONTEND=noninteractive

  # 1) Build dependencies -- all from bookworm itself
  say "apt: CPython build deps (log $LOG-apt.log)"
  { apt_get update -qq
    apt_get install -y -qq --no-install-recommends \
      build-essential pkg-config xz-utils ca-certificates \
      libssl-dev zlib1g-dev libffi-dev libbz2-dev liblzma-dev libsqlite3-dev \
      libreadline-dev uuid-dev libncurses-dev libgdbm-dev libgdbm-compat-dev \
      tk-dev libexpat1-dev libzstd-dev
  } >"$LOG-apt.log" 2>&1 || die "apt-get failed, see $LOG-apt.log"

  # 2) Upstream CPython source = Debian's python3.13 .orig.tar.xz (pristine Python-3.13.x tree).
  #    Temporary *deb-src only* entry (no "deb" line, so nothing can be upgraded from the newer
  #    suite). apt verifies the tarball against the signed Sources index. forky had 3.13.15;
  #    trixie (3.13.5) is the fallback once forky drops python3.13.
  mkdir -p "$work" && chmod 777 "$work"   # 777: lets the _apt user download (no warning)
  rm -f "$work"/python3.13_*
  # shellcheck disable=SC2064  # expand now: $src_list is local to this function
  trap "rm -f $src_list" EXIT
  for suite in ${FT_SRC_SUITES:-forky trixie}; do
    say "apt: fetch python3.13 source from $suite"
    printf 'Types: deb-src\nURIs: http://deb.debian.org/debian\nSuites: %s\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n' \
      "$suite" >"$src_list"
    if { apt_get update -qq && (cd "$work" && apt_get source --download-only "python3.13/$suite"); } \
         >>"$LOG-apt.log" 2>&1; then break; fi
  done
  rm -f "$src_list"; apt_get update -qq >>"$LOG-apt.log" 2>&1   # back to plain bookworm
  local orig; orig=$(ls "$work"/python3.13_*.orig.tar.xz 2>/dev/null | sort -V | tail -1)
  [ -n "$orig" ] || die "could not fetch the python3.13 source package, see $LOG-apt.log"
  say "source: $(basename "$orig") sha256 $(sha256sum "$orig" | cut -c1-16)..."
  rm -rf "$work"/Python-3.13.*/ && tar xf "$orig" -C "$work"
  local srcdirs=("$work"/Python-3.13.*/); cd "${srcdirs[0]}"

  # 3) Configure / build / install (no PGO, no LTO)
  say "configure + make -j$(nproc) + install (logs $LOG-{configure,make,install}.log)"
  ./configure --disable-gil --prefix="$FT_PREFIX" >"$LOG-configure.log" 2>&1 || die "configure failed"
  make -j"$(nproc)" >"$LOG-make.log" 2>&1 || die "make failed, see $LOG-make.log"
  make install >"$LOG-install.log" 2>&1 || die "make install failed"
  cd "$ROOT"
}

# --- 1. the interpreter ---------------------------------------------------------------------
PY=
if [ -n "${TGM_FT_PYTHON:-}" ]; then
  cand=$(command -v "$TGM_FT_PYTHON" || true)
  if is_ft "$cand"; then PY=$cand; else say "TGM_FT_PYTHON=$TGM_FT_PYTHON is not a working free-threaded python"; fi
fi
if [ -z "$PY" ] && command -v uv >/dev/null; then
  say "trying: uv python install 3.14t (log $LOG-uv.log)"
  if timeout 300 uv python install 3.14t >"$LOG-uv.log" 2>&1; then
    cand=$(uv python find 3.14t 2>>"$LOG-uv.log" || true)
    if is_ft "$cand"; then PY=$cand; fi
  fi
  [ -n "$PY" ] || say "uv could not provide 3.14t; falling back to CPython 3.13t"
fi
if [ -z "$PY" ] && ! is_ft "$FT_PREFIX/bin/python3.13t"; then
  say "no cached free-threaded build in $FT_PREFIX: building CPython 3.13t (~10-15 min)"
  build_cpython
  is_ft "$FT_PREFIX/bin/python3.13t" || die "the build in $FT_PREFIX is not free-threaded"
fi
PY=${PY:-$FT_PREFIX/bin/python3.13t}
say "interpreter: $PY ($("$PY" -VV | head -1))"

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
prefix() { "$1" -c 'import sys; print(sys.base_prefix)' 2>/dev/null; }
if ! is_ft "$VPY" || [ "$(prefix "$VPY")" != "$(prefix "$PY")" ]; then
  say "venv $VENV: creating it from $PY"
  rm -rf "$VENV"; "$PY" -m venv "$VENV"
fi
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
import importlib, importlib.metadata as md, sys
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
vers = []
for d in ["numpy", "xarray", "dask", "distributed", "zarr", "numcodecs", "tensogram"]:
    try:
        vers.append(f"{d} {md.version(d)}")
    except md.PackageNotFoundError:
        vers.append(f"{d} -")
print("  stack:", ", ".join(vers), "| GIL", "ON" if gil_on else "disabled")
EOF

# --- 3. the extension -----------------------------------------------------------------------
# Same cargo target dir as the 3.11 build (so the C codecs compile once); switching interpreter
# only rebuilds pyo3 and this crate. Set CARGO_TARGET_DIR to keep the two builds apart.
# PyO3 >= 0.29 supports free-threaded CPython from 3.14 on and refuses 3.13t at build time; it
# still carries 3.13t's object layout, and 3.13t is the only free-threaded CPython these CI
# machines can build (no 3.14 source is reachable). So on 3.13t only, the CI lane skips PyO3's
# version check: users get 3.14t, which PyO3 supports.
skip_check=; [ "$PYV" = 313 ] && skip_check=1
say "maturin develop --release into $VENV (log $LOG-maturin.log)"
( cd "$ROOT" && unset CONDA_PREFIX PYO3_PYTHON &&
  if [ -n "$skip_check" ]; then export UNSAFE_PYO3_SKIP_VERSION_CHECK=1; fi &&
  VIRTUAL_ENV=$VENV PATH="$VENV/bin:$HOME/.cargo/bin:$PATH" maturin develop --release
) >"$LOG-maturin.log" 2>&1 || { tail -n 25 "$LOG-maturin.log" >&2; die "extension build failed, see $LOG-maturin.log"; }
env -u PYTHON_GIL "$VPY" -c 'import sys, tgm_xarray._core
assert not sys._is_gil_enabled(), "tgm_xarray._core re-enabled the GIL"' \
  || die "tgm_xarray._core does not import with the GIL disabled"
say "ready in $(( $(date +%s) - T0 )) s"
echo "$VPY"
