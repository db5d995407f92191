"""A block-scaled fp8 checkpoint keeps 16-bit any column-parallel layer with fewer output rows
per GPU than one 128-row block (vLLM cannot shard a partial block): Qwen3-Next's in_proj_ba,
2 x 32 value heads = 64 rows, 32 per GPU at TP2. Sized and priced 16-bit alike."""

from __future__ import annotations

from dataclasses import replace

import numpy as np

from kvplan.costs.memory.params import _pricing, layer_parts
from kvplan.costs.step.ops import GemmOp
from kvplan.costs.step.roofline import StepCostModel
from kvplan.costs.step.tables import gemm_times, op_dtype
from kvplan.specs.catalog import load_model
from kvplan.specs.hardware import load_gpu
from kvplan.specs.serving import EngineConfig

NEXT = "Qwen/Qwen3-Next-80B-A3B-Thinking"


def _block_fp8_next():  # type: ignore[no-untyped-def]
    return replace(load_model(NEXT), weight_block_size=(128, 128))


def test_in_proj_ba_is_sized_16_bit_under_block_fp8() -> None:
    """TP2: 32 rows x 2,048 columns x 2 B = 131,072 B per layer, where block fp8 would be
    65,536 B + one 4-byte scale per 128 x 128 block (1 x 16 blocks) = 65,600 B."""
    m = _block_fp8_next()
    pricing = _pricing(m, "auto", "fp8")
    gdn_layer = next(i for i in range(m.num_layers)
                     if any(p.role == "state_layers" for p in layer_parts(m, i)))
    ba = [p for p in layer_parts(m, gdn_layer) if p.role == "state_layers" and p.rows == 64]
    assert len(ba) == 1
    assert pricing.bytes_of(ba[0], 2) == 32 * 2048 * 2 == 131_072
    qkvz = next(p for p in layer_parts(m, gdn_layer)
                if p.role == "state_layers" and p.rows > 1024 and p.linear)
    rows = qkvz.rows // 2  # 12,288 rows: 6,144 per GPU, whole blocks: stays block fp8
    assert pricing.bytes_of(qkvz, 2) == rows * 2048 + (rows // 128) * 16 * 4


def test_only_layers_under_one_block_fall_back_to_16_bit() -> None:
    small = GemmOp(name="state_in_proj", n=32, k=2048, count=36)
    whole = GemmOp(name="state_in_proj", n=6144, k=2048, count=36)
    assert op_dtype(small, "fp8_block") == "bfloat16"
    assert op_dtype(whole, "fp8_block") == "fp8_block"
    assert op_dtype(small, "fp8") == "fp8"  # per-tensor fp8 has no blocks to split


def test_the_decode_step_prices_in_proj_ba_at_the_bf16_table() -> None:
    """H100, TP2, 64 decodes: in_proj_ba's 36 GEMMs of m=64 n=32 k=2048 at the bf16 rate."""
    from kvplan.costs.step.explain import explain_steps

    t = StepCostModel(_block_fp8_next(), load_gpu("H100"),
                      EngineConfig(tensor_parallel_size=2, quantization="fp8"))
    assert t.gemm_dtype == "fp8_block"
    _, dec = explain_steps(t, 64, 600, 8192)
    rows = [o for o in dec.ops if o.op == "state_in_proj_ba" and o.shape == "m=64 n=32 k=2048"]
    want = 36 * float(gemm_times("H100-SXM-80GB", np.array([64]), 32, 2048, "bfloat16")[0])
    assert len(rows) == 1 and rows[0].seconds == want
