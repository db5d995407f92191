"""Session 16 defect hunt: MoE data + expert + pipeline parallelism in capacity, latency and
simulate (-dp, --enable-expert-parallel, -tp, -pp), checked against vLLM 0.11's arithmetic."""

from __future__ import annotations

from tests.conftest import assert_one_line_error, run_cli

QWEN = "Qwen/Qwen3-30B-A3B"


def test_simulate_dp_with_pp_is_refused_not_priced_as_one_batch() -> None:
    """vLLM 0.11 runs each DP rank's engine with a queue of pp batches in flight
    (v1/engine/core.py: step_fn = step_with_batch_queue when max_concurrent_batches = pp > 1;
    DPEngineCoreProc inherits it). kvplan's lockstep fleet (sim/dp/lockstep.py) steps one
    batch per rank at the whole pipeline's latency, so -dp 2 -pp 2 printed the -pp 1 fleet's
    throughput (539.5 vs 539.9 tok/s at 5 req/s) whatever the queue would do. Refused now."""
    r = run_cli("simulate", QWEN, "--gpu", "H100", "-dp", "2", "-pp", "2",
                "--enable-expert-parallel", "--num-prompts", "8", "--request-rate", "5")
    assert_one_line_error(r)
    assert "--data-parallel-size 2 with --pipeline-parallel-size 2 is not simulated" in r.err
