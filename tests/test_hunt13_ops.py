"""Hunt 13, the step-time model op by op (``kvplan latency --explain``'s rows): physics each
op must keep, hand-checked."""

from __future__ import annotations

import numpy as np

from kvplan.costs.step.explain import op_times
from kvplan.costs.step.roofline import StepCostModel
from kvplan.specs.catalog import load_model
from kvplan.specs.hardware import load_gpu
from kvplan.specs.serving import EngineConfig


def _rows(model: str, gpu: str, tp: int, new: list[int], ctx: list[int],
          **engine: object) -> dict[str, float]:
    timer = StepCostModel(load_model(model), load_gpu(gpu),
                          EngineConfig(tensor_parallel_size=tp, **engine))  # type: ignore[arg-type]
    n, c = np.array(new, dtype=np.int64), np.array(ctx, dtype=np.int64)
    timer.step_time_s(n, c)
    assert timer.measured is not None and timer.ops is not None
    ops = op_times(timer.ops, timer.measured, timer.gemm_dtype, timer.aggregates(n, c))
    return {o.op: o.seconds for o in ops}


def test_mla_decode_core_reads_the_latent_below_the_datasheet_bandwidth() -> None:
    # DeepSeek-V3 (block fp8) TP8 on B200, fp8 KV, 64 decodes over 4,096 cached tokens: 61
    # layers read 64 x 4,096 x 576 B of latent = 9.21 GB; at 8 TB/s no faster than 1.15 ms.
    # The core was the bf16-GEMM MLA block less block-fp8 projections (2-3x slower at m=64
    # than the GEMMs inside the block): 0.617 ms, 14.9 TB/s.
    rows = _rows("deepseek-ai/DeepSeek-V3", "B200", 8, [1] * 64, [4096] * 64,
                 kv_cache_dtype="fp8")
    latent_bytes = 64 * 4096 * 576 * 61
    assert latent_bytes == 9_210_691_584
    assert rows["attention_mla"] >= latent_bytes / 8e12
    assert 2.9e-3 < rows["attention_mla"] < 3.2e-3  # block less bf16 projections: 3.03 ms
