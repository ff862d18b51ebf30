#!/usr/bin/env bash
# The second and third interpreters of `make test` built while the first lane runs:
#   bash scripts/lanes.sh start   builds them (scripts/free-threaded-python.sh, then
#                                 scripts/newest-python.sh) in the background, logs in /tmp/tgm-lanes-*.log
#   bash scripts/lanes.sh wait    returns when that build is over (at once when none runs)
# A fresh machine spends ~25 minutes building CPython twice; begun at the start of `make test`,
# that overlaps lint, the Rust tests and the 3.11 suite instead of following them. The lanes'
# own runs then find what was built (each script finds before it builds); a build that failed
# is tried again there, where its error is shown. Each lane builds the extension in a cargo target
# dir of its own (LANE_TARGET_DIR/<lane>), so that no build waits for or undoes another's.
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
PIDFILE=/tmp/tgm-lanes.pid
case "${1:-}" in
  start)
    : "${LANE_TARGET_DIR:?set LANE_TARGET_DIR (the Makefile does)}"
    nohup bash -c '
      CARGO_TARGET_DIR=$0/ft bash scripts/free-threaded-python.sh >/tmp/tgm-lanes-ft.log 2>&1 || true
      CARGO_TARGET_DIR=$0/newest bash scripts/newest-python.sh >/tmp/tgm-lanes-newest.log 2>&1 || true
    ' "$LANE_TARGET_DIR" >/dev/null 2>&1 &
    echo $! >"$PIDFILE"
    echo "lanes: building the free-threaded and newest interpreters in the background (pid $!, /tmp/tgm-lanes-*.log)"
    ;;
  wait)
    pid=$(cat "$PIDFILE" 2>/dev/null || true)
    if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
      echo "lanes: waiting for the background interpreter builds (pid $pid)"
      while kill -0 "$pid" 2>/dev/null; do sleep 5; done
    fi
    rm -f "$PIDFILE"
    ;;
  *) echo "usage: $0 start|wait" >&2; exit 2 ;;
esac
