"""Hand-computed step times with every step-time term on: a dense TP1, a dense TP8 and a MoE
TP8 decode step (docs/formulas-latency.md, "Worked examples: the overhead terms").

All byte counts below are worked out from the models' config.json by hand (shapes in the
comments) and checked against kvplan's own constants, then the seconds are summed term by term.
"""

from __future__ import annotations

import numpy as np
import pytest

from kvplan.costs.step.roofline import Profile, StepCostModel
from kvplan.specs.catalog import load_model
from kvplan.specs.hardware import load_gpu
from kvplan.specs.serving import EngineConfig

P = Profile(compute_eff=0.6, bandwidth_eff=0.8, comm_eff=0.7, step_overhead_s=0.5e-3,
            prefill_overhead_s=4e-3, allreduce_latency_s=10e-6, layer_overhead_s=10e-6,
            moe_layer_overhead_s=50e-6, request_overhead_s=20e-6)


def timer(model: str, gpu: str, tp: int, **engine: object) -> StepCostModel:
    return StepCostModel(load_model(model), load_gpu(gpu),
                         EngineConfig(tensor_parallel_size=tp, **engine), P,  # type: ignore[arg-type]
                         silicon=False)


def decode(batch: int, ctx: int) -> tuple[np.ndarray, np.ndarray]:
    return np.ones(batch, dtype=np.int64), np.full(batch, ctx, dtype=np.int64)


def test_dense_tp1_llama2_7b_a100() -> None:
    """One decode over 1023 cached tokens. Weights read: 6,738,415,616 params x 2 B minus the
    32000 x 4096 embedding = 13,214,687,232 B; residual stream 2 x 4096 x 2 B x 32 layers =
    524,288 B; KV 2 x 32 heads x 128 x 2 B x 32 layers = 524,288 B/token, 1023 read + 1 written.
    All memory-bound at B = 2.039 TB/s x 0.8; fixed: 0.5 ms + 32 layers x 10 us + 1 x 20 us."""
    t = timer("meta-llama/Llama-2-7b-hf", "A100-80GB-SXM", 1)
    k = t.constants
    assert (k.weight_bytes, k.kv_bytes_per_token, k.layers, k.moe_layers) == (
        13_214_687_232, 524_288, 32, 0)
    bw = 2.039e12 * 0.8
    expected = (13_214_687_232 + 524_288) / bw + 1024 * 524_288 / bw + 0.5e-3 + 32 * 10e-6 + 20e-6
    assert t.step_time_s(*decode(1, 1023)) == pytest.approx(expected, rel=1e-9)
    assert expected == pytest.approx(9.2707e-3, rel=1e-4)  # 8.43 ms of bytes + 0.84 ms fixed


def test_dense_tp8_llama31_70b_h100() -> None:
    """8 decodes over 2047 cached tokens each, TP8. Per GPU per layer: q,o 8192x8192/8,
    k,v 8192x1024/8, MLP 3x8192x28672/8, two norms 8192 = 106,971,136 params; x 80 layers +
    lm_head 128256x8192/8 + final norm = 8,689,033,216 params x 2 B = 17,378,066,432 B.
    KV per GPU: 1 head x 128 x 2 x 2 B x 80 = 40,960 B/token. 2 x 80 + 1 (the embedding's)
    = 161 all-reduces of
    8 tokens x 8192 x 2 B, ring 2 x 7/8 of that over 450 GB/s x 0.7, plus 10 us each."""
    t = timer("meta-llama/Llama-3.1-70B", "H100-SXM-80GB", 8)
    k = t.constants
    assert (k.weight_bytes, k.kv_bytes_per_token, k.allreduces) == (17_378_066_432, 40_960, 161)
    bw, link = 3.35e12 * 0.8, 450e9 * 0.7
    weights = (17_378_066_432 + 8 * 2 * 8192 * 2 * 80) / bw
    kv = (8 * 2047 * 40_960 + 8 * 40_960) / bw
    allreduce = 161 * (2 * 7 / 8 * 8 * 8192 * 2 / link + 10e-6)
    fixed = 80 * 10e-6 + 0.5e-3 + 8 * 20e-6
    expected = weights + kv + allreduce + fixed
    assert t.step_time_s(*decode(8, 2047)) == pytest.approx(expected, rel=1e-9)
    # the all-reduce latency alone (1.6 ms) is a sixth of the step: why TP8 batch-1 is slow
    assert 161 * 10e-6 / expected == pytest.approx(0.162, abs=0.002)


def test_moe_tp8_mixtral_h100() -> None:
    """4 decodes over 511 cached tokens, TP8. Each expert 3 x 4096 x 14336 / 8 params x 2 B =
    44,040,192 B per GPU; 8 experts x 32 layers = 11,274,289,152 B of routed experts, of which
    4 tokens touch 1 - (1 - 2/8)^4 = 0.68359375. Non-expert: attention 41,943,040/8 + router
    4096x8 + norms 8192 per layer, x 32, + lm_head 32000x4096/8 + norm = 370,941,952 B."""
    t = timer("mistralai/Mixtral-8x7B-v0.1", "H100-SXM-80GB", 8)
    k = t.constants
    assert (k.weight_bytes, k.routed_expert_bytes, k.moe_layers) == (
        370_941_952, 11_274_289_152, 32)
    bw, link = 3.35e12 * 0.8, 450e9 * 0.7
    touched = 1 - (1 - 2 / 8) ** 4
    weights = (370_941_952 + touched * 11_274_289_152 + 4 * 2 * 4096 * 2 * 32) / bw
    kv = (4 * 511 * 16_384 + 4 * 16_384) / bw
    allreduce = 65 * (2 * 7 / 8 * 4 * 4096 * 2 / link + 10e-6)  # 2 x 32 + the embedding's
    fixed = 32 * (10e-6 + 50e-6) + 0.5e-3 + 4 * 20e-6
    expected = weights + kv + allreduce + fixed
    assert t.step_time_s(*decode(4, 511)) == pytest.approx(expected, rel=1e-9)
    assert t.cost(*decode(4, 511)).seconds.total_s == pytest.approx(expected, rel=1e-9)


def test_expert_traffic_grows_with_tokens_to_all_experts() -> None:
    t = timer("mistralai/Mixtral-8x7B-v0.1", "H100-SXM-80GB", 8)
    k = t.constants
    for tokens, share in ((1, 0.25), (2, 1 - 0.75**2), (64, 1 - 0.75**64)):
        moved = t.cost(np.ones(tokens, dtype=np.int64), np.full(tokens, 9, dtype=np.int64))
        assert moved.bytes.weights == round(k.weight_bytes + share * k.routed_expert_bytes)


def test_overhead_breakdown_names_each_term() -> None:
    t = timer("mistralai/Mixtral-8x7B-v0.1", "H100-SXM-80GB", 8)
    s = t.cost(*decode(4, 511)).seconds
    assert s.overhead_s == pytest.approx(32 * 60e-6 + 0.5e-3 + 4 * 20e-6)
    assert s.communication_s == pytest.approx(65 * (2 * 7 / 8 * 4 * 8192 / (315e9) + 10e-6))


def test_request_overhead_grows_with_batch() -> None:
    t = timer("meta-llama/Llama-2-7b-hf", "A100-80GB-SXM", 1)
    one = t.decode_run_s(np.full(1, 100, dtype=np.int64), 1)[0]
    zero = t.with_profile(Profile(**{**_fields(P), "request_overhead_s": 0.0}))
    assert one - zero.decode_run_s(np.full(1, 100, dtype=np.int64), 1)[0] == pytest.approx(20e-6)


def _fields(p: Profile) -> dict[str, object]:
    return {f: getattr(p, f) for f in p.__dataclass_fields__}


def test_fp8_weights_speed_gemms_only_where_the_gpu_has_fp8_tensor_cores() -> None:
    """fp8 halves the bytes everywhere; the fp8 tensor rate exists on H100, not on A100
    (Marlin w8a16 there computes at bf16)."""
    h100 = timer("meta-llama/Llama-2-7b-hf", "H100-SXM-80GB", 1, quantization="fp8")
    a100 = timer("meta-llama/Llama-2-7b-hf", "A100-80GB-SXM", 1, quantization="fp8")
    assert h100.ridge_point == pytest.approx(1978.9e12 * 0.6 / (3.35e12 * 0.8))
    assert a100.ridge_point == pytest.approx(312e12 * 0.6 / (2.039e12 * 0.8))
