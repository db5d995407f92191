"""A sliding-window layer's decode attention is fitted on the context it reads (clipped to its
window), so a decode step of a sliding-window model never reads its KV cache faster than the
GPU's datasheet bandwidth. Found by the calibration floors: fitted on the unclipped grid
(128..32,768 tokens), the flat part past the window made the per-token slope ~6x too shallow
(Mistral-7B-v0.1's 256 x 4,000-token decode at 16.3 ms on H100: 8.2 TB/s of KV alone)."""

from __future__ import annotations

import pytest

import kvplan
from kvplan.costs.step.latency import static_batch_latency

ZERO = kvplan.Profile(step_overhead_s=0.0, prefill_overhead_s=0.0, request_overhead_s=0.0,
                      layer_overhead_s=0.0, moe_layer_overhead_s=0.0)


def _tpot_s(model: str, gpu: str, batch: int, cached: int) -> float:
    spec, hw = kvplan.load_model(model), kvplan.load_gpu(gpu)
    timer = kvplan.StepCostModel(spec, hw, kvplan.EngineConfig(), ZERO)
    shape = kvplan.RequestShape(batch=batch, prompt_tokens=cached, output_tokens=2)
    tpot = static_batch_latency(timer, shape).tpot_s
    assert tpot is not None
    return tpot


def test_mistral_decode_reads_its_window_no_faster_than_the_datasheet() -> None:
    """Mistral-7B-v0.1 (32 layers, all sliding, window 4,096; 8 KV heads x 128, bf16:
    2 x 8 x 128 x 2 B = 4,096 B per layer per token, 131,072 B per token) on H100
    (3.35 TB/s): 256 requests at 4,000 cached tokens read 256 x 4,000 x 131,072 =
    134,217,728,000 B of KV per step, at least 134,217,728,000 / 3.35e12 = 40.06 ms before
    any weight is read. Was 16.3 ms."""
    kv_bytes = 256 * 4000 * 32 * 4096
    assert kv_bytes == 134_217_728_000
    assert _tpot_s("mistralai/Mistral-7B-v0.1", "H100", 256, 4000) >= kv_bytes / 3.35e12


def test_mistral_decode_stops_growing_at_the_window() -> None:
    """Past its window a sliding layer reads window tokens, whatever the context: 16,000
    cached tokens cost what 4,096 do (each request reads 4,096 x 131,072 B either way)."""
    at_window = _tpot_s("mistralai/Mistral-7B-v0.1", "H100", 64, 4096)
    past = _tpot_s("mistralai/Mistral-7B-v0.1", "H100", 64, 16000)
    assert past == pytest.approx(at_window, rel=0.01)


@pytest.mark.parametrize("gpu", ["H100", "H200", "A100-80GB", "B200", "L40S"])
@pytest.mark.parametrize(("model", "layers", "kv_heads", "head_dim", "cached"), [
    ("mistralai/Mistral-7B-v0.1", 32, 8, 128, 4000),   # all layers sliding (4,096)
    ("google/gemma-2-9b-it", 42, 8, 256, 4000),        # local 4,096 / global, alternating
    ("google/gemma-3-27b-it", 62, 16, 128, 1000),      # 52 local (1,024), 10 global
])
def test_sliding_models_decode_within_the_datasheet_bandwidth(
        model: str, layers: int, kv_heads: int, head_dim: int, cached: int,
        gpu: str) -> None:
    """Below the smallest window every layer reads the whole context: 64 requests x
    ``cached`` tokens x layers x 2 x KV heads x head dim x 2 B, at most at the GPU's
    datasheet bandwidth."""
    kv_bytes = 64 * cached * layers * 2 * kv_heads * head_dim * 2
    floor_s = kv_bytes / kvplan.load_gpu(gpu).mem_bw_bytes_per_s
    assert _tpot_s(model, gpu, 64, cached) >= floor_s
