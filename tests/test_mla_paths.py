"""MLA attention priced as vLLM runs it (vllm/v1/attention/backends/mla/common.py): requests
with query length 1 take the absorbed decode kernel (QK over the 576-wide latent, PV over
512), longer ones the MHA-style prefill path (QK 128 + 64 = 192, V 128) plus kv_b_proj's
up-projection of their cached context. DeepSeek-V3 on 8 GPUs: 128 / 8 = 16 heads per GPU,
61 MLA layers (docs/formulas-latency.md, "MLA: prefill and decode paths")."""

from __future__ import annotations

import numpy as np
import pytest

from kvplan.costs.step.roofline import Profile, StepCostModel
from kvplan.specs.catalog import load_model
from kvplan.specs.hardware import load_gpu
from kvplan.specs.serving import EngineConfig

DECODE_PAIR = 2 * 16 * (576 + 512) * 61  # 2,123,776 FLOPs per (query, key) pair
PREFILL_PAIR = 2 * 16 * (128 + 64 + 128) * 61  # 624,640
UP_PER_CONTEXT = 2 * 16 * 512 * (128 + 128) * 61  # 255,852,544 per cached context token


def v3(tp: int = 8) -> StepCostModel:
    return StepCostModel(load_model("deepseek-ai/DeepSeek-V3"), load_gpu("H200-SXM-141GB"),
                         EngineConfig(tensor_parallel_size=tp), Profile(), silicon=False)


def arr(*x: int) -> np.ndarray:
    return np.array(x, dtype=np.int64)


def test_constants_are_the_hand_counted_widths() -> None:
    k = v3().constants
    assert (DECODE_PAIR, PREFILL_PAIR, UP_PER_CONTEXT) == (2_123_776, 624_640, 255_852_544)
    assert k.attn_flops_per_pair == DECODE_PAIR
    assert k.mla_prefill_pair_delta == PREFILL_PAIR - DECODE_PAIR
    assert k.mla_context_flops_per_token == UP_PER_CONTEXT


def test_a_whole_prompt_takes_the_prefill_width() -> None:
    # 4096 new tokens, nothing cached: 4096 x 4097 / 2 = 8,390,656 causal pairs at 624,640
    # FLOPs = 5.2412e12 (the absorbed width would say 1.7820e13, 3.4x more)
    cost = v3().cost(arr(4096), arr(0))
    assert cost.flops.attention == pytest.approx(8_390_656 * 624_640, rel=1e-12)
    assert cost.flops.attention == pytest.approx(5.2411e12, rel=1e-4)


def test_decodes_keep_the_absorbed_width_and_a_chunk_pays_the_up_projection() -> None:
    # a decode over 1000 cached tokens (1001 pairs, absorbed) beside a 512-token chunk over
    # 2048 cached: 512 x 2048 + 512 x 513 / 2 = 1,179,904 pairs at the prefill width, plus
    # 2048 context tokens up-projected
    got = v3().cost(arr(1, 512), arr(1000, 2048)).flops.attention
    want = 1001 * DECODE_PAIR + 1_179_904 * PREFILL_PAIR + 2048 * UP_PER_CONTEXT
    assert got == pytest.approx(want, rel=1e-12)
    assert want == pytest.approx(2_125_899_776 + 737_015_234_560 + 523_986_010_112, rel=1e-12)


def test_a_one_token_prompt_runs_the_decode_kernel() -> None:
    # query length 1 <= vLLM's reorder_batch_threshold: decode path, 1 pair at 2,123,776
    assert v3().cost(arr(1), arr(0)).flops.attention == DECODE_PAIR


def test_step_time_agrees_with_the_breakdown_and_the_recorded_form() -> None:
    t = v3()
    for n, c in ((arr(4096), arr(0)), (arr(1, 512), arr(1000, 2048)),
                 (np.ones(60, dtype=np.int64), np.full(60, 900, dtype=np.int64)),
                 (np.r_[np.ones(59, dtype=np.int64), 700], np.r_[np.full(59, 50), 300])):
        one = t.step_time_s(n, c)
        assert one == pytest.approx(t.cost(n, c).seconds.total_s, rel=1e-12)
        assert t.times_s(t.aggregates(n, c)) == pytest.approx(one, rel=1e-12)


def test_mla_models_leave_the_aggregate_fast_path_dense_ones_keep_it() -> None:
    assert v3().supports_aggregates is False
    dense = StepCostModel(load_model("meta-llama/Llama-3.1-8B"), load_gpu("H100-SXM-80GB"),
                          EngineConfig(), Profile())
    assert dense.supports_aggregates is True
    assert dense.constants.mla_prefill_pair_delta == 0.0
