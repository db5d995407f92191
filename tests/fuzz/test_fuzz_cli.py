"""The fuzz suite: every input family through the CLI entry point, in-process (see harness.py
for the property, strategies.py and strategies_io.py for the generators).

Examples per family = EXAMPLES x KVPLAN_FUZZ_SCALE (default 1: 16 families x 185 + 60 for the
slow plan family = 3,020 in .ci/run, fixed seed); ``scripts/fuzz.sh`` runs scale 5 (15,100)
and prints counts per family. The fuzz-3 families (strategies_io.py): price files, nested JSON
in every JSON input, Hugging Face cache layouts with outputs aimed into them, FIFOs/devices/
folders/link loops as every kind of input, and a standard output that cannot be written.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings

from tests.fuzz.harness import check, run_cli
from tests.fuzz.strategies import FAMILIES as CLI_FAMILIES
from tests.fuzz.strategies import Case, materialize
from tests.fuzz.strategies_io import IO_FAMILIES

FAMILIES = {**CLI_FAMILIES, **IO_FAMILIES}
EXAMPLES = 185
SLOW = {"args: plan, prices, report": 60}
"""Families whose ok runs take a second or more (a plan simulates several configurations)."""
SCALE = float(os.environ.get("KVPLAN_FUZZ_SCALE", "1"))
FUZZ_SETTINGS = dict(
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
        check(family, run_cli(list(case.argv), inputs, cwd=root, env=case.env,
                              stdout=case.stdout))


@pytest.mark.parametrize("family", sorted(FAMILIES))
def test_fuzz_family(family: str) -> None:
    examples_n = max(1, int(SLOW.get(family, EXAMPLES) * SCALE))

    @settings(max_examples=examples_n, **FUZZ_SETTINGS)
    @given(FAMILIES[family])
    def examples(case: Case) -> None:
        run_case(family, case)

    examples()
