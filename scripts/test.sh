#!/usr/bin/env bash
# Set up (if needed) and run the whole test suite, then ruff and mypy.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/install-chromium.sh
# the compiled simulator core must have built here (gcc); KVPLAN_REQUIRE_CORE=0 to run without
export KVPLAN_REQUIRE_CORE=${KVPLAN_REQUIRE_CORE:-1}
.venv/bin/python -m pytest -p no:cacheprovider "$@"  # -q comes from pyproject: one summary line
.venv/bin/ruff check src tests benchmarks
.venv/bin/mypy src/kvplan
