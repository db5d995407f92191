#!/usr/bin/env bash
# Set up (if needed) and run the whole test suite, then ruff and mypy.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
bash scripts/install-chromium.sh
.venv/bin/python -m pytest -p no:cacheprovider "$@"  # -q comes from pyproject: one summary line
.venv/bin/ruff check src tests benchmarks
.venv/bin/mypy src/kvplan
