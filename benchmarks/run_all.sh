#!/usr/bin/env bash
# The benchmark suite under both interpreters, one after the other (never at once: the machine has
# 2 cores), then the plots and the results section of docs/benchmarks.md.
#
#     bash benchmarks/run_all.sh                 # full runs (the first one also makes data/bench/)
#     bash benchmarks/run_all.sh --quick         # ~2 minutes per interpreter
#     bash benchmarks/run_all.sh --only e2e      # any run.py arguments pass through
#     NO_DOC=1 bash benchmarks/run_all.sh ...    # leave docs/benchmarks.md alone
#
# Interpreters: $PY311 (default .venv/bin/python) and $PY313T (default /opt/venv313t-tgm/bin/python
# if tgm_xarray._core imports there with the GIL disabled, else whatever
# scripts/free-threaded-python.sh prints, which may build it first). PY313T=none skips it.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT"
PY311=${PY311:-$ROOT/.venv/bin/python}
PKGS=$ROOT/data/bench/_pkgs

ft_ok() {
  [ -x "$1" ] && env -u PYTHON_GIL "$1" -c 'import sys, tgm_xarray._core
sys.exit(sys._is_gil_enabled())' 2>/dev/null
}
if [ -z "${PY313T:-}" ]; then
  if ft_ok /opt/venv313t-tgm/bin/python; then
    PY313T=/opt/venv313t-tgm/bin/python
  else
    echo "[run_all] no ready free-threaded venv: asking scripts/free-threaded-python.sh" >&2
    PY313T=$(bash scripts/free-threaded-python.sh | tail -n 1) || PY313T=none
  fi
fi

# Contenders the shared venv may lack, kept out of it (git-ignored, searched last by run.py):
# upstream tensogram-xarray (pure Python: serves both interpreters) and h5py for h5netcdf.
need=()
"$PY311" -c 'import tensogram_xarray' 2>/dev/null || [ -d "$PKGS/tensogram_xarray" ] || need+=("tensogram-xarray==0.24.0")
"$PY311" -c 'import h5py' 2>/dev/null || [ -d "$PKGS/h5py" ] || need+=("h5py")
if [ ${#need[@]} -gt 0 ]; then
  echo "[run_all] installing ${need[*]} into $PKGS" >&2
  "$PY311" -m pip install -q --no-deps --target "$PKGS" "${need[@]}"
fi

quick=""
for a in "$@"; do [ "$a" = "--quick" ] && quick="-quick"; done

status=0
echo "[run_all] CPython 3.11: $PY311" >&2
"$PY311" benchmarks/run.py "$@" || status=$?
tag311=$("$PY311" -c 'import sys; sys.path.insert(0, "benchmarks"); import report; print(report.python_tag())')
files=("benchmarks/results/$tag311$quick/results.json")
if [ "$PY313T" != "none" ]; then
  echo "[run_all] free-threaded: $PY313T" >&2
  PYTHON_GIL=0 "$PY313T" benchmarks/run.py "$@" || status=$?
  tag313=$("$PY313T" -c 'import sys; sys.path.insert(0, "benchmarks"); import report; print(report.python_tag())')
  files+=("benchmarks/results/$tag313$quick/results.json")
  # no matplotlib there: draw its plot with 3.11
  "$PY311" benchmarks/run.py --plot "benchmarks/results/$tag313$quick" || true
else
  echo "[run_all] no free-threaded interpreter: its runs are skipped" >&2
fi
if [ -z "${NO_DOC:-}" ] && [ -z "$quick" ]; then
  "$PY311" benchmarks/run.py --report "${files[@]}" --update-doc
else
  "$PY311" benchmarks/run.py --report "${files[@]}"
fi
exit $status
