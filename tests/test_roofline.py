"""Roofline step cost: hand-checkable numbers, bounds on every GPU, and the StepTimer contract."""

from __future__ import annotations

import numpy as np
import pytest

from kvplan.costs.memory.params import active_weight_bytes_per_gpu
from kvplan.costs.step.roofline import Profile, StepCostModel, has_prefill
from kvplan.specs.catalog import load_model
from kvplan.specs.hardware import gpu_catalog, load_gpu
from kvplan.specs.serving import EngineConfig

LLAMA2 = "meta-llama/Llama-2-7b-hf"
NO_OVERHEAD = Profile(step_overhead_s=0.0, prefill_overhead_s=0.0)


def one(n: int) -> np.ndarray:
    return np.array([n], dtype=np.int64)


def timer(model: str = LLAMA2, gpu: str = "A100-80GB-SXM", profile: Profile = NO_OVERHEAD,
          **engine: object) -> StepCostModel:
    return StepCostModel(load_model(model), load_gpu(gpu), EngineConfig(**engine), profile,
                         silicon=False)


def test_llama2_decode_batch1_a100_is_weights_over_bandwidth() -> None:
    # Llama-2-7B fp16: 6.74e9 params x 2 B = 13.48 GB; the step reads all but the embedding
    # table (32000 x 4096 x 2 B = 262 MB, a lookup reads one row). A100-80GB: 2.039 TB/s.
    t = timer()
    cost = t.cost(one(1), one(1))
    assert cost.bytes.weights == 13_476_831_232 - 32000 * 4096 * 2
    expected = cost.bytes.weights / (2.039e12 * 0.8)
    assert cost.bound == "memory"
    assert t.step_time_s(one(1), one(1)) == pytest.approx(expected, rel=0.01)
    # a decode step pays the per-step overhead only; the prefill overhead is not charged
    with_overhead = timer(profile=Profile(step_overhead_s=0.7e-3, prefill_overhead_s=4e-3))
    assert with_overhead.step_time_s(one(1), one(1)) == pytest.approx(expected + 0.7e-3,
                                                                      rel=0.01)


def test_prefill_overhead_is_charged_once_to_steps_with_prefill_work() -> None:
    prof = Profile(step_overhead_s=1e-3, prefill_overhead_s=4e-3)
    t, bare = timer(profile=prof), timer()
    cases = [  # (new, ctx) -> holds prefill?
        ([1], [100], False),         # pure decode
        ([1, 1], [5, 9], False),
        ([1], [0], True),            # a 1-token prompt: nothing cached yet
        ([128], [0], True),          # a prompt
        ([64], [512], True),         # a later chunk of a chunked prefill
        ([1, 1, 300], [7, 8, 0], True),  # decodes riding with a prefill: charged once
    ]
    for new, ctx, prefill in cases:
        n, c = np.array(new, dtype=np.int64), np.array(ctx, dtype=np.int64)
        assert has_prefill(n, c) is prefill
        extra = t.step_time_s(n, c) - bare.step_time_s(n, c)
        assert extra == pytest.approx(1e-3 + 4e-3 * prefill, abs=1e-12)
        assert t.cost(n, c).seconds.overhead_s == pytest.approx(1e-3 + 4e-3 * prefill)


def test_two_kernel_families_each_take_their_own_bound() -> None:
    # B=768 decode at 192 tokens of context (TensorRT-LLM's 128/128 row): the GEMMs are
    # compute-bound, attention is bound by the KV it reads; they run one after the other,
    # so the step costs the sum, not max(total compute, total bytes)
    t = timer(gpu="H100-SXM-80GB", quantization="fp8", kv_cache_dtype="fp8")
    n, c = np.ones(768, dtype=np.int64), np.full(768, 192, dtype=np.int64)
    cost = t.cost(n, c)
    f = t.profile.compute_eff * load_gpu("H100-SXM-80GB").peak_flops_for("fp8")
    b = t.profile.bandwidth_eff * load_gpu("H100-SXM-80GB").mem_bw_bytes_per_s
    dense = max((cost.flops.dense_gemm + cost.flops.lm_head) / f,
                (cost.bytes.weights + cost.bytes.activations) / b)
    mixer = max(cost.flops.attention / f, (cost.bytes.kv_read + cost.bytes.kv_write) / b)
    assert cost.seconds.roofline_s == pytest.approx(dense + mixer)
    assert dense == pytest.approx((cost.flops.dense_gemm + cost.flops.lm_head) / f)  # GEMMs
    assert mixer == pytest.approx((cost.bytes.kv_read + cost.bytes.kv_write) / b)  # KV reads
    assert cost.seconds.roofline_s > 1.3 * max(cost.seconds.compute_s, cost.seconds.memory_s)
    assert t.step_time_s(n, c) == pytest.approx(cost.seconds.total_s)


@pytest.mark.parametrize("gpu", sorted(g.id for g in gpu_catalog().values()))
def test_prefill_compute_bound_decode_memory_bound_on_every_gpu(gpu: str) -> None:
    t = timer(gpu=gpu)
    assert t.cost(one(2048), one(0)).bound == "compute"
    assert t.cost(one(1), one(2048)).bound == "memory"


def test_fp8_kv_saves_the_kv_share_of_a_long_context_decode() -> None:
    ctx = np.full(8, 32_000, dtype=np.int64)
    new = np.ones(8, dtype=np.int64)
    fp16, fp8 = timer(), timer(kv_cache_dtype="fp8")
    a, b = fp16.cost(new, ctx), fp8.cost(new, ctx)
    assert b.bytes.kv_read * 2 == a.bytes.kv_read  # 512 KiB -> 256 KiB per token
    saved = (a.bytes.kv_read + a.bytes.kv_write - b.bytes.kv_read - b.bytes.kv_write)
    assert a.bytes.total - b.bytes.total == saved
    bw = 2.039e12 * 0.8
    assert fp16.step_time_s(new, ctx) - fp8.step_time_s(new, ctx) == pytest.approx(saved / bw)


def test_tp2_halves_weight_bytes_and_adds_allreduce() -> None:
    model = load_model(LLAMA2)
    one_gpu, two_gpu = timer(), timer(tensor_parallel_size=2)
    w1, w2 = one_gpu.cost(one(1), one(0)).bytes.weights, two_gpu.cost(one(1), one(0)).bytes.weights
    assert w2 == pytest.approx(w1 / 2, rel=0.001)
    # norms are replicated, so "half" is to 0.1%
    assert active_weight_bytes_per_gpu(model, tp=2) * 2 == pytest.approx(
        active_weight_bytes_per_gpu(model), rel=0.001)
    cost = two_gpu.cost(one(1), one(0))
    # 2 all-reduces per layer x 32 layers + the embedding's; 1 token x 4096 x 2 B: ring
    # 2(tp-1)/tp x bytes / link
    link = 600e9 / 2 * 0.7
    per = 8192 / link + 10e-6
    assert cost.seconds.communication_s == pytest.approx(65 * per)
    assert one_gpu.cost(one(1), one(0)).seconds.communication_s == 0.0


def test_pp_adds_a_bubble() -> None:
    cost = timer(pipeline_parallel_size=2).cost(one(1), one(0))
    assert cost.seconds.pipeline_s > max(cost.seconds.compute_s, cost.seconds.memory_s)


def test_attention_flops_are_causal_within_a_chunk() -> None:
    t = timer()
    a = t.cost(one(10), one(0)).flops.attention
    b = t.cost(one(10), one(100)).flops.attention
    coeff = t.constants.attn_flops_per_pair  # 2 x 32 heads x (128 + 128) x 32 layers
    assert coeff == 2 * 32 * 256 * 32
    assert a == coeff * 55  # 1 + 2 + ... + 10
    assert b == coeff * (10 * 100 + 55)


def test_moe_touches_only_active_experts_at_batch_one() -> None:
    t = timer("Qwen/Qwen3-30B-A3B", gpu="H100-SXM-80GB")
    model = load_model("Qwen/Qwen3-30B-A3B")
    one_token = t.cost(one(1), one(0)).bytes.weights
    assert one_token < active_weight_bytes_per_gpu(model) * 1.001
    many = t.cost(np.ones(256, dtype=np.int64), np.zeros(256, dtype=np.int64)).bytes.weights
    assert many > 5 * one_token  # 256 tokens route to nearly every expert


@pytest.mark.parametrize("model", [LLAMA2, "google/gemma-2-9b-it", "google/gemma-3-27b-it",
                                   "deepseek-ai/DeepSeek-V2-Lite", "Qwen/Qwen3-30B-A3B",
                                   "Qwen/Qwen3-Next-80B-A3B-Thinking"])
def test_decode_run_equals_step_by_step(model: str) -> None:
    t = timer(model, gpu="H200-SXM-141GB")
    ctx = np.array([0, 5, 1000, 4090, 4096, 4100, 9000], dtype=np.int64)  # around the windows
    steps = 40
    run = t.decode_run_s(ctx, steps)
    one_by_one = [t.step_time_s(np.ones_like(ctx), ctx + k) for k in range(steps)]
    np.testing.assert_array_equal(run, one_by_one)  # same float operations, same order
    summed = t.decode_run_cost(ctx, steps)
    assert summed.steps == steps and summed.tokens == steps * len(ctx)
    per_step = t.cost(np.ones_like(ctx), ctx + 1).bytes.weights  # same tokens every step
    assert summed.bytes.weights == pytest.approx(steps * per_step, rel=1e-9)


@pytest.mark.parametrize("model", [LLAMA2, "google/gemma-2-9b-it", "Qwen/Qwen3-30B-A3B",
                                   "Qwen/Qwen3-Next-80B-A3B-Thinking"])
@pytest.mark.parametrize("engine", [{}, {"tensor_parallel_size": 2},
                                    {"tensor_parallel_size": 2, "pipeline_parallel_size": 2}])
def test_step_time_equals_the_breakdown_small_and_large_batches(model: str, engine: dict) -> None:
    # step_time_s folds the constants and sums small batches in Python; cost() goes term by
    # term through numpy: equal to rounding, and decode runs equal steps bit for bit
    t = timer(model, gpu="H200-SXM-141GB", profile=Profile(), **engine)
    rng = np.random.default_rng(0)
    for size in (0, 1, 7, 48, 49, 300):
        for high in (2, 700):
            n = rng.integers(1, high, size)
            c = rng.integers(0, 9000, size)
            assert t.step_time_s(n, c) == pytest.approx(t.cost(n, c).seconds.total_s, rel=1e-12)
        ctx = rng.integers(0, 5000, size)
        run = t.decode_run_s(ctx, 30)
        np.testing.assert_array_equal(
            run, [t.step_time_s(np.ones_like(ctx), ctx + k) for k in range(30)])


def test_sliding_window_clips_context() -> None:
    t = timer("google/gemma-2-9b-it", gpu="H100-SXM-80GB")
    w = t.constants.window
    near, far = t.cost(one(1), one(w)), t.cost(one(1), one(w + 10_000))
    # sliding layers stop growing past the window; full layers keep growing
    grow = far.bytes.kv_read - near.bytes.kv_read
    assert grow == t.constants.kv_bytes_per_token * 10_000


def test_profile_rejects_unphysical_factors() -> None:
    from kvplan.errors import InputError

    with pytest.raises(InputError, match="compute_eff"):
        Profile(compute_eff=1.5)
    with pytest.raises(InputError, match="step_overhead_s"):
        Profile(step_overhead_s=-1.0)
    with pytest.raises(InputError, match="prefill_overhead_s"):
        Profile(prefill_overhead_s=-1e-3)
