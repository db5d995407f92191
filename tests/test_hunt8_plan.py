"""Eighth hunt round, step-time pricing and the planner (helper hunt8-plan): each defect
pinned by a hand-checkable golden value."""

from __future__ import annotations

import numpy as np

import kvplan
from kvplan.costs.step.profiles import profile_for
from kvplan.costs.step.roofline import StepCostModel

NEXT = "Qwen/Qwen3-Next-80B-A3B-Thinking"


def _timer(model: str, gpu: str, **engine: object) -> StepCostModel:
    m, hw = kvplan.load_model(model), kvplan.load_gpu(gpu)
    eng = kvplan.EngineConfig(**engine)  # type: ignore[arg-type]
    return StepCostModel(m, hw, eng, profile_for(m, hw, eng))


# -------------------- D1: a roofline GPU floored by a measured one crashed on a long step
# H100-PCIe has no tables; H100-SXM beats it on every datasheet figure, so its measured step
# floors the roofline (coefficients.floored), GDN sequence table included. The tables start at
# 8,192 tokens; a 9,000-token step grows them to 16,384, but the grown roofline kept the old
# 8,193-entry GDN table and np.maximum(8193, 16385) raised ValueError (a traceback from
# `kvplan latency Qwen/Qwen3-Next-80B-A3B-Thinking --gpu H100-PCIe-80GB -tp 4 --prompt 9000`).
def test_floored_roofline_grows_past_8192_tokens_with_gdn() -> None:
    pcie = _timer(NEXT, "H100-PCIe-80GB", tensor_parallel_size=4)
    sxm = _timer(NEXT, "H100-SXM-80GB", tensor_parallel_size=4)
    new, ctx = np.array([9000]), np.array([0])
    slow, fast = pcie.step_time_s(new, ctx), sxm.step_time_s(new, ctx)
    assert pcie.table_tokens == 2 * 8192  # grown: max(9000, 2 x 8192)
    assert slow >= fast > 0  # the floor's promise: never faster than the dominating H100-SXM


# -------------------- D2: --sweep max-num-batched-tokens refused what the flag takes
# `--max-num-batched-tokens 8k` is vLLM's human_readable_int (8k = 8,000, 8K = 8,192), but
# `--sweep max-num-batched-tokens=512,8k` read each value with int(): "values must be whole
# numbers, got '8k'", exit 2. Each row must be the plain command's answer at that flag value.
def test_sweep_reads_the_budget_as_its_flag_does() -> None:
    from kvplan.costs.step.latency import RequestShape, request_latency, sweep

    m, hw = kvplan.load_model("meta-llama/Llama-3.1-8B"), kvplan.load_gpu("H100")
    shape = RequestShape(batch=8, prompt_tokens=2048, output_tokens=4)
    rows = sweep(m, hw, kvplan.EngineConfig(), shape, "max-num-batched-tokens", ["8k", "8K"])
    for row, budget in zip(rows, (8000, 8192), strict=True):  # 8 x 1000, 8 x 1024
        alone = request_latency(m, hw, kvplan.EngineConfig(max_num_batched_tokens=budget),
                                shape)
        assert row.result.ttft_s == alone.ttft_s
    # 16,384 prompt tokens: 8k cuts them into 3 steps (8000 + 8000 + 384), 8K into 2
    assert rows[0].result.prefill.steps == 3 and rows[1].result.prefill.steps == 2
