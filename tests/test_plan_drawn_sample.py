"""Capacity mode's sample is the n requests `vllm bench serve --num-prompts n` draws."""

from __future__ import annotations

import numpy as np

from kvplan.analysis.plan.traffic import plan_traffic
from kvplan.specs.requests.workload import WorkloadArgs, build_workload


def test_capacity_sample_draws_the_verify_lines_requests() -> None:
    """1000 random prompts at range ratio 0.5, sampled to 500: vLLM draws 500 input lengths
    then 500 output lengths, so the first 500 of 1000 draws differ in their outputs."""
    args = WorkloadArgs(num_prompts=1000, random_input_len=1024, random_output_len=128,
                        random_range_ratio=0.5)
    traffic = plan_traffic(args, sample=500)
    drawn = build_workload(WorkloadArgs(num_prompts=500, random_input_len=1024,
                                        random_output_len=128, random_range_ratio=0.5))
    first = build_workload(args)
    assert traffic.requests == 500
    np.testing.assert_array_equal(traffic.unit.prompt_tokens, drawn.prompt_tokens)
    np.testing.assert_array_equal(traffic.unit.output_tokens, drawn.output_tokens)
    assert not np.array_equal(first.output_tokens[:500], drawn.output_tokens)


def test_fixed_lengths_keep_the_first_requests() -> None:
    args = WorkloadArgs(num_prompts=1000, random_input_len=1024, random_output_len=128)
    traffic = plan_traffic(args, sample=500)
    assert traffic.requests == 500
    assert set(traffic.unit.prompt_tokens.tolist()) == {1024}
