# Functions shared by the scripts that give the test suite a second interpreter:
# scripts/free-threaded-python.sh (3.13t) and scripts/newest-python.sh (3.13 with the GIL, newest
# releases). Sourced, not run. Before sourcing, the script sets
#   LANE        short name for logs and messages ("ft", "newest")
#   lane_python a function: `lane_python PATH` succeeds when PATH is an interpreter this lane takes
# Each lane finds or builds its interpreter (find_python), keeps a venv with its stack outside the
# clone (CI reuses it across runs on one machine), builds the extension into it (build_extension)
# and prints the venv's python as the LAST LINE OF STDOUT. Progress goes to stderr; verbose logs to
# /tmp/tgm-$LANE-*.log. Run as root (builds write under /opt).

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
LOG=/tmp/tgm-$LANE
T0=$(date +%s)
say() { echo "[$LANE +$(( $(date +%s) - T0 ))s] $*" >&2; }
die() { say "ERROR: $*"; exit 1; }

# apt-get that waits for the dpkg lock (unattended-upgrades, scripts/setup.sh or the other lane at
# the same time) instead of failing.
apt_get() { apt-get -o DPkg::Lock::Timeout=600 "$@"; }

# build_cpython PREFIX [CONFIGURE-ARGS...]: CPython 3.13 (no PGO/LTO) into PREFIX, using only
# deb.debian.org (a *source* package from a newer suite) and the bookworm archive. Adapted from
# shared/tools/build-free-threaded-python.sh.
build_cpython() {
  local prefix=$1; shift
  [ "$(id -u)" = 0 ] || die "building CPython needs root (apt-get, $prefix)"
  local work=/tmp/tgm-${LANE}build src_list=/etc/apt/sources.list.d/tgm-$LANE-python-src.sources suite
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
  say "configure $* + make -j$(nproc) + install (logs $LOG-{configure,make,install}.log)"
  ./configure "$@" --prefix="$prefix" >"$LOG-configure.log" 2>&1 || die "configure failed"
  make -j"$(nproc)" >"$LOG-make.log" 2>&1 || die "make failed, see $LOG-make.log"
  make install >"$LOG-install.log" 2>&1 || die "make install failed"
  cd "$ROOT"
}

# find_python OVERRIDE UV_VERSION PREFIX EXE [CONFIGURE-ARGS...]: sets PY to the first of
#   1. $OVERRIDE (an environment variable's value; may be empty)
#   2. `uv python install UV_VERSION` (if uv is on PATH; fails without access to GitHub releases)
#   3. a cached build, PREFIX/bin/EXE
#   4. CPython 3.13 built from Debian's source package into PREFIX with CONFIGURE-ARGS
# that lane_python accepts.
find_python() {
  local override=$1 uv_version=$2 prefix=$3 exe=$4 cand; shift 4
  PY=
  if [ -n "$override" ]; then
    cand=$(command -v "$override" || true)
    if lane_python "$cand"; then PY=$cand; else say "$override is not a python this lane takes"; fi
  fi
  if [ -z "$PY" ] && command -v uv >/dev/null; then
    say "trying: uv python install $uv_version (log $LOG-uv.log)"
    if timeout 300 uv python install "$uv_version" >"$LOG-uv.log" 2>&1; then
      cand=$(uv python find "$uv_version" 2>>"$LOG-uv.log" || true)
      if lane_python "$cand"; then PY=$cand; fi
    fi
    [ -n "$PY" ] || say "uv could not provide $uv_version; falling back to a CPython 3.13 build"
  fi
  if [ -z "$PY" ] && ! lane_python "$prefix/bin/$exe"; then
    say "no cached build in $prefix: building CPython 3.13 ($*)"
    build_cpython "$prefix" "$@"
    lane_python "$prefix/bin/$exe" || die "the build in $prefix is not a python this lane takes"
  fi
  PY=${PY:-$prefix/bin/$exe}
  say "interpreter: $PY ($("$PY" -VV | head -1))"
}

base_prefix() { "$1" -c 'import sys; print(sys.base_prefix)' 2>/dev/null; }

# ensure_venv VENV: (re)creates VENV from $PY unless it is already a venv of it.
ensure_venv() {
  local venv=$1
  if ! lane_python "$venv/bin/python" || [ "$(base_prefix "$venv/bin/python")" != "$(base_prefix "$PY")" ]; then
    say "venv $venv: creating it from $PY"
    rm -rf "$venv"; "$PY" -m venv "$venv"
  fi
}

# print_stack VENV: the versions this lane tests, on stderr (CI logs say what was tested).
print_stack() {
  "$1/bin/python" - >&2 <<'EOF'
import importlib.metadata as md, platform, sys, sysconfig
dists = ["numpy", "xarray", "pandas", "zarr", "numcodecs", "dask", "distributed", "virtualizarr",
         "icechunk", "obstore", "fsspec", "aiohttp", "s3fs", "netCDF4", "h5netcdf", "scipy", "cfgrib",
         "tensogram", "tensogram-xarray", "pytest"]
def version(d):
    try:
        return md.version(d)
    except md.PackageNotFoundError:
        return "-"
ft = " free-threaded" if sysconfig.get_config_var("Py_GIL_DISABLED") else ""
print(f"  python {platform.python_version()}{ft}")
print("  stack:", ", ".join(f"{d} {version(d)}" for d in dists))
EOF
}

# build_extension VENV: this project's extension, `maturin develop --release` into VENV. Same cargo
# target dir as the 3.11 build (so the C codecs compile once); switching interpreter only rebuilds
# pyo3 and this crate. Set CARGO_TARGET_DIR to keep the builds apart. Extra environment for maturin
# comes from the caller (VAR=value build_extension ...).
build_extension() {
  local venv=$1
  say "maturin develop --release into $venv (log $LOG-maturin.log)"
  ( cd "$ROOT" && unset CONDA_PREFIX PYO3_PYTHON &&
    VIRTUAL_ENV=$venv PATH="$venv/bin:$HOME/.cargo/bin:$PATH" maturin develop --release
  ) >"$LOG-maturin.log" 2>&1 || { tail -n 25 "$LOG-maturin.log" >&2; die "extension build failed, see $LOG-maturin.log"; }
}
