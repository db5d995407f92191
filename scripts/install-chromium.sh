#!/usr/bin/env bash
# The browser tests drive Debian's chromium (Playwright's own download needs the internet).
# Install the package when it is missing; quiet, non-interactive; apt's log shown on failure.
set -euo pipefail
CHROMIUM=${KVPLAN_CHROMIUM:-/usr/bin/chromium}
[ -x "$CHROMIUM" ] && exit 0
if [ "$(id -u)" != 0 ] || ! command -v apt-get >/dev/null; then
  echo "note: $CHROMIUM is missing and cannot be installed here (needs root and apt-get);" \
       "the browser tests will fail: apt-get install chromium" >&2
  exit 0
fi
log=$(mktemp)
export DEBIAN_FRONTEND=noninteractive
if ! { apt-get install -y -q --no-install-recommends chromium ||
       { apt-get update -q && apt-get install -y -q --no-install-recommends chromium; }; } \
     >"$log" 2>&1; then
  echo "installing chromium failed; the end of the apt log:" >&2
  tail -n 30 "$log" >&2
  exit 1
fi
rm -f "$log"
