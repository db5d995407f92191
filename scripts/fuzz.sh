#!/usr/bin/env bash
# The long fuzz run: every input family through the CLI in-process, 15,100 examples
# (5 x the .ci/run profile: 16 families x 185 + 60 for plan) with a random-but-printed seed;
# prints the counts per family.
#   bash scripts/fuzz.sh            # seed 1
#   SEED=7 SCALE=10 bash scripts/fuzz.sh
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
SEED=${SEED:-1}
SCALE=${SCALE:-5}
echo "fuzz: scale $SCALE (185 x $SCALE examples per family, 60 x $SCALE for plan), hypothesis seed $SEED" >&2
KVPLAN_FUZZ_SCALE=$SCALE KVPLAN_FUZZ_RANDOM=1 \
  .venv/bin/python -m pytest -p no:cacheprovider tests/fuzz "--hypothesis-seed=$SEED" "$@"
