"""simulate_serving / simulate_deployment with --data-parallel-size: the lockstep fleet,
its per-rank results behind the fleet's, the header's DP keys."""

from __future__ import annotations

import numpy as np

from kvplan.analysis.metrics import compute_metrics
from kvplan.analysis.serving import simulate_deployment, simulate_serving
from kvplan.specs.catalog import load_model
from kvplan.specs.deployment import Deployment
from kvplan.specs.hardware import load_gpu
from kvplan.specs.requests.workload import WorkloadArgs
from kvplan.specs.serving import EngineConfig

QWEN = "Qwen/Qwen3-30B-A3B"
EP2 = EngineConfig(data_parallel_size=2, enable_expert_parallel=True, max_model_len=8192)
WORK = WorkloadArgs(num_prompts=60, request_rate=30.0, random_input_len=512,
                    random_output_len=32)


def test_fleet_is_the_ranks_merged() -> None:
    run = simulate_serving(QWEN, "H200", EP2, WORK)
    assert run.dp is not None and run.result is run.dp.fleet
    f, ranks = run.result, run.dp.ranks
    assert len(ranks) == 2 and f.finished.all()
    counts = np.bincount(run.dp.rank_of, minlength=2)
    assert counts.sum() == 60 and counts.min() > 0
    for k in (0, 1):  # a rank's own result holds exactly the requests routed to it
        assert set(np.flatnonzero(ranks[k].finished)) == set(np.flatnonzero(run.dp.rank_of == k))
    np.testing.assert_array_equal(f.steps.used_blocks,
                                  ranks[0].steps.used_blocks + ranks[1].steps.used_blocks)
    assert f.usable_blocks == 2 * (run.plan.num_blocks - 1)
    m = compute_metrics(f)
    assert m.completed == 60 and m.num_steps == len(run.dp.padded_tokens)
    h = run.header(WORK)
    assert h["data_parallel_size"] == 2 and [r["rank"] for r in h["dp_ranks"]] == [0, 1]
    assert sum(r["requests"] for r in h["dp_ranks"]) == 60


def test_deployment_path_is_the_same_run() -> None:
    d = Deployment(model=load_model(QWEN), gpu=load_gpu("H200"), engine=EP2)
    a = simulate_deployment(d, WORK)
    b = simulate_serving(QWEN, "H200", EP2, WORK)
    np.testing.assert_array_equal(a.result.finish_s, b.result.finish_s)

