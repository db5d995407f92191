"""Same seed -> the same plan JSON whatever runs the jobs: 1 or 2 local workers, or Ray."""

from __future__ import annotations

import json
from typing import Any

import kvplan
from kvplan.report.plan.plan_json import plan_json
from tests.plan_helpers import poisson_workload, slo

RUN_KEYS = ("executor", "workers", "wall_s")
"""search_report keys that describe the run, not the answer."""


def _doc(**kw: Any) -> str:
    work = poisson_workload(240, 10.0, 1000, 120)
    p = kvplan.plan("meta-llama/Llama-3.1-8B", work, slo("ttft:p99:1200", "tpot:p99:60"),
                    gpus=["L40S", "H100"], tensor_parallel_sizes=[1, 2],
                    kv_cache_dtypes=["auto", "fp8"], sample_requests=100, **kw)
    doc = plan_json(p)
    for key in RUN_KEYS:
        doc["search_report"].pop(key)
    return json.dumps(doc, sort_keys=True, allow_nan=False)


def test_local_worker_count_does_not_change_the_plan() -> None:
    assert _doc(workers=1) == _doc(workers=2)


def test_ray_executor_gives_the_local_plan() -> None:
    """Ray on a local 2-CPU cluster (kvplan[ray] is installed by scripts/setup.sh)."""
    assert _doc(executor="ray", workers=2) == _doc(workers=1)
