#!/usr/bin/env bash
# Set up (if needed) and run kvplan's main job on a bundled example.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
.venv/bin/kvplan request meta-llama/Llama-2-70b-hf --prompt 2048 --output 128 --chunk 512
