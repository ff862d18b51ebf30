#!/usr/bin/env bash
# CPython 3.13 with the GIL and the NEWEST release of every dependency, for the test suite: what a
# user on Python >= 3.12 gets from pip (zarr, VirtualiZarr, Icechunk, numpy... of today), where
# the 3.11 lane tests the oldest versions we support and the 3.13t lane has no virtual-Zarr stack.
# Finds or builds the interpreter, keeps a venv with every dependency and every extra of
# pyproject.toml outside the clone (so CI reuses it across runs on one machine; pip upgrades it to
# the newest releases on the first run of each day), builds this project's extension into it,
# prints the versions it holds, and prints that venv's python as the LAST LINE OF STDOUT:
#     PY=$(scripts/newest-python.sh | tail -1)
# Progress goes to stderr; verbose logs to /tmp/tgm-newest-*.log. Run as root (writes under /opt).
# The steps are scripts/python-lane.sh's, shared with scripts/free-threaded-python.sh.
#
# Interpreter: the first of these that works
#   1. $TGM_NEWEST_PYTHON
#   2. `uv python install 3.13` (if uv is on PATH; fails without access to GitHub releases)
#   3. a cached build at /opt/python3.13
#   4. CPython 3.13 built from Debian's source package (the one 3.13t is built from) into
#      /opt/python3.13 (~3 min on 2 idle cores; 13 min measured on a busy CI machine)
set -euo pipefail
LANE=newest
# CPython >= 3.13 with the GIL (a free-threaded build is the ft lane's).
lane_python() {
  [ -n "$1" ] && [ -x "$1" ] && "$1" -c 'import sys, sysconfig
sys.exit(not (sys.version_info >= (3, 13) and not sysconfig.get_config_var("Py_GIL_DISABLED")))' 2>/dev/null
}
# shellcheck source=python-lane.sh
. "$(dirname "${BASH_SOURCE[0]}")/python-lane.sh"

# --- 1. the interpreter ---------------------------------------------------------------------
find_python "${TGM_NEWEST_PYTHON:-}" 3.13 "${NEWEST_PREFIX:-/opt/python3.13}" python3.13

# --- 2. the venv and the newest stack -------------------------------------------------------
PYV=$("$PY" -c 'import sys; print(f"{sys.version_info[0]}{sys.version_info[1]}")')
VENV=${TGM_NEWEST_VENV:-/opt/venv${PYV}-tgm-newest}
VPY=$VENV/bin/python
ensure_venv "$VENV"
# The package's dependencies and every extra's, as pyproject.toml states them; cmake>=3.26:
# libaec-sys (szip) needs it, Debian has 3.25.
mapfile -t REQS < <("$VPY" -c 'import tomllib
p = tomllib.load(open("'"$ROOT"'/pyproject.toml", "rb"))["project"]
print("\n".join(p["dependencies"] + [r for extra in p["optional-dependencies"].values() for r in extra]))')
[ ${#REQS[@]} -gt 0 ] || die "could not read the dependencies from pyproject.toml"
REQS+=("maturin>=1.16,<2" "cmake>=3.26")
# The day is part of the stamp: the first run of a day upgrades everything to the newest release.
want=$( { echo "$PY"; date -u +%F; printf '%s\n' "${REQS[@]}"; } | sha256sum | cut -c1-64)
if [ "$(cat "$VENV/.tgm-stack" 2>/dev/null)" != "$want" ]; then
  say "venv $VENV: installing/upgrading to the newest stack (log $LOG-pip.log)"
  "$VPY" -m pip install -q --upgrade pip >"$LOG-pip.log" 2>&1
  # No --prefer-binary: it would take an older wheel over the newest release's sdist.
  "$VPY" -m pip install --upgrade --upgrade-strategy eager "${REQS[@]}" >>"$LOG-pip.log" 2>&1 \
    || die "pip install failed, see $LOG-pip.log"
  # What is still not the newest release: held back by some package's pin (ours or upstream's).
  "$VPY" -m pip list --outdated >"$LOG-outdated.log" 2>&1 || true
  say "not the newest release (held back by a pin): $(tail -n +3 "$LOG-outdated.log" | awk '{printf "%s %s<%s  ", $1, $2, $3}')"
  echo "$want" >"$VENV/.tgm-stack"
fi
# Upstream's tensogram-xarray registers engine="tensogram" too; the test extra installed it here
# before it moved to an isolated folder (tests/helpers/upstream.py), and pip -U never removes a package.
"$VPY" -m pip uninstall -q -y tensogram-xarray >/dev/null 2>&1 || true
print_stack "$VENV"

# --- 3. the extension -----------------------------------------------------------------------
build_extension "$VENV"
"$VPY" -c 'import tgm_xarray._core' || die "tgm_xarray._core does not import"
say "ready in $(( $(date +%s) - T0 )) s"
echo "$VPY"
