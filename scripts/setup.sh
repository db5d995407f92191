#!/usr/bin/env bash
# Create .venv (if missing) and install kvplan with its test tools. Idempotent and quiet:
# pip's output goes to .venv/pip.log and is shown only if the install fails.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
log=.venv/pip.log
if ! { .venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip &&
       .venv/bin/python -m pip install -q --disable-pip-version-check -e '.[dev,ray]'; } >"$log" 2>&1; then
  echo "setup failed; the end of $log:" >&2
  tail -n 40 "$log" >&2
  exit 1
fi
