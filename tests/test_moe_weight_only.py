"""Weight-only (w4a16) MoE kernels: gpt-oss's MXFP4 experts priced from the w4a16 tables, and
on A100 (no such table) by the H100 w4a16 / bf16 ratio at the same place against the ridge."""

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


def test_ridge_scale_by_hand() -> None:
    # A100: 312e12 / 2.039e12 = 153.0 FLOP/B; H100: 989.4e12 / 3.35e12 = 295.3 FLOP/B
    assert wo.ridge_flop_per_byte("A100-80GB-SXM") == pytest.approx(153.016, rel=1e-4)
    assert wo.ridge_flop_per_byte("H100-SXM-80GB") == pytest.approx(295.343, rel=1e-4)
    assert wo.token_scale("A100-80GB-SXM") == pytest.approx(1.9301, rel=1e-4)


def test_a100_w4a16_is_its_bf16_times_the_h100_ratio() -> None:
    t = np.array([1, 64, 1024])
    a100 = kn.moe("A100-80GB-SXM", t, dtype="w4a16_mxfp4", **GPT_OSS)
    bf16 = kn.moe_s("A100-80GB-SXM", t, dtype="bfloat16", **GPT_OSS)
    at = t * wo.token_scale("A100-80GB-SXM")
    ratio = (kn.moe_s("H100-SXM-80GB", at, dtype="w4a16_mxfp4", **GPT_OSS)
             / kn.moe_s("H100-SXM-80GB", at, dtype="bfloat16", **GPT_OSS))
    assert np.allclose(a100.seconds, bf16 * ratio, rtol=1e-12)
    assert any("H100-SXM-80GB w4a16_mxfp4 / bf16 ratio" in n for n in a100.notes)
    # 4.25-bit weights: decode (64 tokens) reads under half the bytes, never more time
    assert a100.seconds[1] < 0.5 * bf16[1]
    assert (a100.seconds <= bf16).all()


def test_hopper_prices_mxfp4_from_its_own_table() -> None:
    r = kn.moe("H200-SXM-141GB", np.array([64]), dtype="w4a16_mxfp4", tp=8, **GPT_OSS)
    assert not r.notes  # gpt-oss's shape is measured there
    bf16 = kn.moe_s("H200-SXM-141GB", np.array([64]), dtype="bfloat16", tp=8, **GPT_OSS)
    assert r.seconds[0] < bf16[0]
