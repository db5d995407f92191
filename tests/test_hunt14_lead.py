"""Session 13's own fixes (the lead's, beside the helpers' tests/test_hunt14_*.py)."""

from __future__ import annotations

from tests.conftest import run_cli


def test_latency_notes_a_batch_vllms_default_max_num_seqs_would_queue() -> None:
    """vLLM's default --max-num-seqs is 256 on GPUs under 70 GiB (L40S) and 1024 on H100,
    capped at a given --max-num-batched-tokens (300 here): a static batch of 512 is priced in
    one batch, which vLLM would not run at once; the answer now says so (it said nothing)."""
    args = ("latency", "meta-llama/Llama-3.1-8B", "--batch", "512", "--prompt", "128",
            "--output", "128", "--json")
    l40s = run_cli(*args, "--gpu", "L40S")
    assert l40s.code == 0, l40s.err
    assert ("a batch of 512 on each engine is above vLLM's default --max-num-seqs on L40S "
            "(256)") in l40s.err
    h100 = run_cli(*args, "--gpu", "H100")
    assert h100.code == 0 and "max-num-seqs" not in h100.err
    capped = run_cli(*args, "--gpu", "H100", "--max-num-batched-tokens", "300")
    assert "default --max-num-seqs on H100-SXM-80GB (300)" in capped.err


def test_plan_capacity_mode_simulates_the_verify_lines_send_times() -> None:
    """Capacity mode (no --request-rate) sizes a replica on unit-rate gaps scaled to the
    rate it finds; its Verify line then asks `vllm bench serve --request-rate R --seed 0`,
    which sends vLLM's gaps (numpy's legacy stream seeded by --seed) at R. The unit gaps
    were drawn from default_rng(0) (first five: 0.748, 1.870, 1.892, 1.894, 2.5 s scaled to
    rate 2); they are now vLLM's, so at any R the sample is what the line sends."""
    import numpy as np

    from kvplan.analysis.plan.traffic import plan_traffic
    from kvplan.specs.requests.workload import WorkloadArgs, build_workload

    args = WorkloadArgs(num_prompts=40, random_input_len=100, random_output_len=10, seed=0)
    unit = plan_traffic(args, sample=20).unit.arrival_s
    sent = build_workload(WorkloadArgs(num_prompts=20, random_input_len=100,
                                       random_output_len=10, request_rate=2.0,
                                       seed=0)).arrival_s
    assert np.allclose(unit / 2.0, sent, rtol=1e-12, atol=1e-12)
