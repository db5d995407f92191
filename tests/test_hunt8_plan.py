"""Eighth hunt round, step-time pricing and the planner (helper hunt8-plan): each defect
pinned by a hand-checkable golden value."""

from __future__ import annotations

import numpy as np
import pytest

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


# -------------------- D3: the "optimistic" prefill ceilings took one prompt per step
# The planner's prefill_compute ceiling (c_min) and the disaggregated screen's prefill rate
# priced a step of n tokens as ONE prompt of n tokens. Several shorter prompts in the same
# step score fewer attention pairs (sum n(n+1)/2), so a real step is cheaper: Qwen3-30B-A3B on
# H100, 8,192 tokens as one prompt 141.8 ms, as four prompts of 2,048 110.1 ms. The capacity
# search never probes above the ceiling, so 2,048 + 2-token requests were capped at
# 1 / (min(141.8 ms / 8192, 65.9 ms / 4096) x 2049) = 30.35 req/s, $18.26 per M output tokens,
# while the same replica passes p99 TTFT <= 60 s at 35.5 req/s (kvplan simulate: 669 ms).
QWEN_MOE = "Qwen/Qwen3-30B-A3B"


def _four_prompt_step_s() -> float:
    t = _timer(QWEN_MOE, "H100", max_num_batched_tokens=8192)
    return t.step_time_s(np.full(4, 2048), np.zeros(4, dtype=np.int64))


def test_capacity_ceiling_admits_a_step_of_four_prompts() -> None:
    slo = kvplan.Slo(bounds=kvplan.parse_slo(["ttft:p99:60000"]))
    work = kvplan.WorkloadArgs(dataset="random", random_input_len=2048, random_output_len=2,
                               num_prompts=400)
    p = kvplan.plan(QWEN_MOE, work, slo, gpus=["H100"], tensor_parallel_sizes=(1,),
                    data_parallel_sizes=(1,), max_num_batched_tokens=(8192,), workers=1)
    ceiling = dict(p.winner.ceilings_rps)["prefill_compute"]
    # a replica running only steps of four 2,048-token prompts: 8192 / step / (2048 + 2 - 1)
    four = 8192 / _four_prompt_step_s() / 2049
    assert four == pytest.approx(36.3, abs=0.1)  # 110.07 ms a step: 13.44 us a token
    assert ceiling >= four  # was 30.35: below what the same step model runs
    assert p.winner.capacity is not None and p.winner.capacity.rate_rps > 35.5


def test_disagg_prefill_rate_admits_a_step_of_four_prompts() -> None:
    from kvplan.analysis.disagg.work_bounds import best_tokens_per_s

    t = _timer(QWEN_MOE, "H100", max_num_batched_tokens=8192)
    best = best_tokens_per_s(t, 8192, 1024)  # max_num_seqs 1024 (H100's default)
    assert best >= 8192 / _four_prompt_step_s()  # 74,425 tokens/s; was 62,262 (one prompt)
