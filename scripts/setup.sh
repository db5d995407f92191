#!/usr/bin/env bash
# Create .venv (if missing) and install kvplan with its test tools. Idempotent and quiet:
# it says what it is doing in one line per stage; pip's output goes to .venv/pip.log and is
# shown only if the install fails.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo "setup: creating .venv with $("$PY" --version 2>&1)" >&2
  "$PY" -m venv .venv
  echo "setup: installing kvplan and its test tools into .venv (a few minutes on a fresh" \
       "machine; pip's log: .venv/pip.log)" >&2
else
  echo "setup: checking .venv is up to date (pip install -e '.[dev]'; log: .venv/pip.log)" >&2
fi
log=.venv/pip.log
if ! { .venv/bin/python -m pip install -q --disable-pip-version-check --upgrade pip &&
       .venv/bin/python -m pip install -q --disable-pip-version-check -e '.[dev,ray]'; } >"$log" 2>&1; then
  echo "setup failed; the end of $log:" >&2
  tail -n 40 "$log" >&2
  exit 1
fi
# Byte-compile kvplan once: an editable install under PYTHONDONTWRITEBYTECODE=1 would
# recompile its ~150 modules on every command (0.06-0.07 s of each run; perf-3.md).
if ! .venv/bin/python -m compileall -q src/kvplan >>"$log" 2>&1; then
  echo "setup: byte-compiling src/kvplan failed; the end of $log:" >&2
  tail -n 20 "$log" >&2
  exit 1
fi
echo "setup: ready" >&2
