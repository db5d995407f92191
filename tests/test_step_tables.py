"""The op-sum step model against its ops' shapes and the measured tables, by hand."""

from __future__ import annotations

import numpy as np
import pytest

from kvplan.costs import kernels as kn
from kvplan.costs.step.ops import stage_ops
from kvplan.costs.step.roofline import StepCostModel
from kvplan.specs.catalog import load_model
from kvplan.specs.hardware import load_gpu
from kvplan.specs.serving import EngineConfig


def gemms(model: str, tp: int) -> dict[str, tuple[int, int, int, str]]:
    ops = stage_ops(load_model(model), EngineConfig(tensor_parallel_size=tp))
    return {g.name: (g.n, g.k, g.count, g.per) for g in ops.gemms}


def test_llama_8b_gemms_are_vllms_fused_layers() -> None:
    # q 32 x 128 + k 8 x 128 + v 8 x 128 = 6,144 rows; gate + up 2 x 14,336 = 28,672
    assert gemms("meta-llama/Llama-3.1-8B", 1) == {
        "qkv_proj": (6144, 4096, 32, "token"), "o_proj": (4096, 4096, 32, "token"),
        "gate_up_proj": (28672, 4096, 32, "token"), "down_proj": (4096, 14336, 32, "token"),
        "lm_head": (128256, 4096, 1, "request")}


def test_llama_70b_tp8_shards_every_gemm() -> None:
    g = gemms("meta-llama/Llama-3.1-70B", 8)
    assert g["qkv_proj"] == ((8192 + 2 * 1024) // 8, 8192, 80, "token")  # 1,280
    assert g["gate_up_proj"] == (2 * 28672 // 8, 8192, 80, "token")
    assert g["down_proj"] == (8192, 28672 // 8, 80, "token")
    assert g["lm_head"] == (128256 // 8, 8192, 1, "request")


def test_the_docs_worked_70b_row() -> None:
    # docs/formulas-latency.md: 80 x gemm(H100, 64, 7,168, 8,192) = 80 x 42.2 us = 3.37 ms
    t = float(kn.gemm_s("H100-SXM-80GB", np.array([64]), 7168, 8192, "bfloat16")[0])
    assert 80 * t == pytest.approx(3.374e-3, rel=2e-3)
    assert 7168 * 8192 * 2 / 3.35e12 / t == pytest.approx(0.83, abs=0.01)


def test_the_dense_table_is_the_sum_of_its_gemm_lookups() -> None:
    t = StepCostModel(load_model("meta-llama/Llama-3.1-8B"), load_gpu("H100"), EngineConfig())
    ms = t.measured
    assert ms is not None and t.ops is not None
    for tokens in (1, 64, 4096):
        want = sum(g.count * float(kn.gemm_s("H100-SXM-80GB", np.array([tokens]), g.n, g.k)[0])
                   for g in t.ops.gemms if g.per == "token")
        assert ms.dense_s[tokens] == pytest.approx(want, rel=1e-12)
    assert ms.lm_fixed_s == pytest.approx(
        float(kn.gemm_s("H100-SXM-80GB", np.array([1]), 128256, 4096)[0]), rel=1e-12)


@pytest.mark.parametrize(("batch", "kv_len"), [(8, 1024), (64, 1024), (64, 8192), (16, 4096)])
def test_decode_attention_linear_form_against_the_table(batch: int, kv_len: int) -> None:
    # floor + per_request x B + per_context x B x L, least squares through the grid, follows
    # the table within 30% across the grid (the kernel is not linear at small batches; the
    # attention share of a step is 5-25%, so the step moves by at most ~8%)
    t = StepCostModel(load_model("meta-llama/Llama-3.1-8B"), load_gpu("H100"), EngineConfig())
    assert t.measured is not None and t.measured.full is not None
    r = t.measured.full
    linear = r.per_step_s + r.per_request_s * batch + r.per_context_s * batch * kv_len
    table = 32 * float(kn.decode_attention_s("H100-SXM-80GB", batch, kv_len, num_heads=32,
                                             num_kv_heads=8, head_dim=128)[()])
    assert linear == pytest.approx(table, rel=0.30)


def test_prefill_attention_rate_is_the_chunks_measured_rate() -> None:
    t = StepCostModel(load_model("meta-llama/Llama-3.1-8B"), load_gpu("H100"),
                      EngineConfig(max_num_batched_tokens=4096))
    assert t.measured is not None and t.measured.full is not None
    one = float(kn.context_attention_s("H100-SXM-80GB", 1, 4096, num_heads=32, num_kv_heads=8,
                                       head_dim=128)[()])
    assert t.measured.full.per_pair_s * (4096 * 4097 // 2) == pytest.approx(32 * one, rel=1e-12)


@pytest.mark.parametrize("model,tp,kv", [("meta-llama/Llama-2-7b-hf", 1, "auto"),
                                         ("meta-llama/Llama-3.1-70B", 4, "fp8"),
                                         ("google/gemma-3-27b-it", 1, "auto"),
                                         ("openai/gpt-oss-120b", 2, "auto")])
def test_decode_grid_is_the_scalar_lookups_float_for_float(model: str, tp: int,
                                                           kv: str) -> None:
    from kvplan.costs.step import tables

    ops = stage_ops(load_model(model), EngineConfig(tensor_parallel_size=tp))
    kv_dtype = "fp8" if kv == "fp8" else "bfloat16"
    for a in ops.attention:
        grid = tables._decode_grid("H100", a, kv_dtype)
        assert grid is not None and len(grid) == 25
        scalar = [tables._decode_s("H100", a, kv_dtype, b, ln)
                  for b in tables._DECODE_B for ln in tables._DECODE_L]
        assert grid == scalar  # bit for bit: one lookup of 25 points, not 25 of one
