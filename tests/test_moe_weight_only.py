"""Weight-only (w4a16) MoE kernels: gpt-oss's MXFP4 experts priced from the w4a16 tables, and
on A100 (no such table) by its bf16 MoE x the datasheet roofline ratio at 4.25 bits."""

from __future__ import annotations

import numpy as np
import pytest

from kvplan.costs import kernels as kn
from kvplan.costs.kernels import moe_weight_only as wo
from kvplan.costs.step.ops import stage_ops
from kvplan.specs.catalog import load_model
from kvplan.specs.serving import EngineConfig

GPT_OSS = {"hidden": 2880, "inter": 2880, "num_experts": 128, "topk": 4}


def test_gpt_oss_experts_run_the_mxfp4_kernels() -> None:
    ops = stage_ops(load_model("openai/gpt-oss-120b"), EngineConfig(tensor_parallel_size=8))
    assert ops.moe is not None and ops.moe.dtype == "w4a16_mxfp4"
    mixtral = stage_ops(load_model("mistralai/Mixtral-8x7B-v0.1"), EngineConfig())
    assert mixtral.moe is not None and mixtral.moe.dtype is None


def test_a100_w4a16_is_its_bf16_times_the_roofline_ratio() -> None:
    t = np.array([1, 64, 1024])
    a100 = kn.moe("A100-80GB-SXM", t, dtype="w4a16_mxfp4", **GPT_OSS)
    bf16 = kn.moe_s("A100-80GB-SXM", t, dtype="bfloat16", **GPT_OSS)
    local = 128 * 3 * 2880 * 2880 * 2.0  # bf16 bytes of the local experts
    ratio = wo.roofline_ratio("A100-80GB-SXM", t, local_bytes=local,
                              flops_per_token=6.0 * 2880 * 2880 * 4,
                              touched=np.minimum(1.0, t * 4 / 128), hidden=2880,
                              width=4.25 / 8, rate=1.0)
    # no faster than reading the touched experts at 4.25 bits + the routed hidden states at
    # A100's 2.039 TB/s (binds at 64 tokens: all 128 experts, 1.69 GB, 0.832 ms)
    touched = np.minimum(128, t * 4) * 3 * 2880 * 2880 * 4.25 / 8
    floor = (touched + t * 4 * (2 * 2880 + 2880) * 2.0) / 2.039e12
    assert np.allclose(a100.seconds, np.maximum(bf16 * ratio, floor), rtol=1e-9)
    assert a100.seconds[1] == pytest.approx(floor[1], rel=1e-12)
    assert any("4-bit Marlin MoE" in n for n in a100.notes)
    # 4.25-bit weights: decode (64 tokens) reads under half the bytes, never more time
    assert a100.seconds[1] < 0.5 * bf16[1]
    assert (a100.seconds <= bf16).all()


def test_hopper_prices_mxfp4_from_its_own_table() -> None:
    r = kn.moe("H200-SXM-141GB", np.array([64]), dtype="w4a16_mxfp4", tp=8, **GPT_OSS)
    assert not r.notes  # gpt-oss's shape is measured there
    bf16 = kn.moe_s("H200-SXM-141GB", np.array([64]), dtype="bfloat16", tp=8, **GPT_OSS)
    assert r.seconds[0] < bf16[0]
