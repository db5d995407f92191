"""The fuzz suite: every input family through the CLI entry point, in-process (see harness.py
for the property and strategies.py for the generators).

Examples per family = EXAMPLES x KVPLAN_FUZZ_SCALE (default 1: 11 families x 185 = 2,035 in
.ci/run, fixed seed); ``scripts/fuzz.sh`` runs scale 5 (10,175) and prints counts per family.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from tests.fuzz.harness import check, run_cli
from tests.fuzz.strategies import FAMILIES, Case, materialize

EXAMPLES = 185
SCALE = float(os.environ.get("KVPLAN_FUZZ_SCALE", "1"))
FUZZ_SETTINGS = settings(
    max_examples=max(1, int(EXAMPLES * SCALE)),
    deadline=None,
    database=None,
    derandomize=os.environ.get("KVPLAN_FUZZ_RANDOM") is None,
    suppress_health_check=list(HealthCheck),
    print_blob=True,
)


def run_case(family: str, case: Case) -> None:
    with tempfile.TemporaryDirectory(prefix="kvplan-fuzz-") as folder:
        root = Path(folder)
        inputs = materialize(case, root)
        check(family, run_cli(list(case.argv), inputs, cwd=root))


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_fuzz_family(family: str) -> None:
    @FUZZ_SETTINGS
    @given(FAMILIES[family])
    def examples(case: Case) -> None:
        run_case(family, case)

    examples()
