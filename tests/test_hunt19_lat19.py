"""Hunt 19 (lat19): step-model physics found by sweeping every catalog model x GPU x TP x
precision x shape through the Python API the CLI uses."""

from __future__ import annotations

import numpy as np

from kvplan.costs.step.roofline import StepCostModel
from kvplan.specs.catalog import load_model
from kvplan.specs.hardware import load_gpu
from kvplan.specs.serving import EngineConfig


def _pp2_timer(gpu: str) -> StepCostModel:
    return StepCostModel(load_model("deepseek-ai/DeepSeek-V3"), load_gpu(gpu),
                         EngineConfig(tensor_parallel_size=1, pipeline_parallel_size=2))


def test_pipeline_stage_ops_and_bytes_come_from_one_stage() -> None:
    # vLLM's get_pp_indices splits DeepSeek-V3's 61 layers 31 + 30: stage 0 = layers 0-30
    # (3 dense, first_k_dense_replace = 3, + 28 MoE), stage 1 = layers 31-60 (30 MoE). The
    # step priced stage 0's ops (the most layers) with stage 1's routed-expert bytes (the
    # fullest GPU): 28 MoE layers of kernels against 30 layers of expert weights.
    t = _pp2_timer("H100-SXM-80GB")
    assert t.ops is not None and t.ops.moe is not None
    assert t.ops.moe.count == t.constants.moe_layers == 30  # the heavier stage: 30 MoE layers
    one = StepCostModel(load_model("deepseek-ai/DeepSeek-V3"), load_gpu("H100-SXM-80GB"),
                        EngineConfig(tensor_parallel_size=1))
    # routed-expert bytes per MoE layer are the same at pp 1 (58 layers) and pp 2 (30 layers)
    per_layer = one.constants.routed_expert_bytes / 58
    assert abs(t.constants.routed_expert_bytes / 30 - per_layer) < 1e-6 * per_layer


def test_a_pipeline_stage_reads_its_weights_no_faster_than_the_hbm() -> None:
    # before: 346.2 GB of stage-1 weights over stage 0's 101.7 ms of kernels = 3.41 TB/s on
    # H100 (3.35 TB/s HBM3); L40S 0.894 TB/s against its 0.864 TB/s
    for gpu in ("H100-SXM-80GB", "H200-SXM-141GB", "L40S"):
        t, hw = _pp2_timer(gpu), load_gpu(gpu)
        for new, ctx in ((np.array([256]), np.array([0])),
                         (np.ones(64, dtype=np.int64), np.full(64, 512))):
            cost = t.cost(new, ctx)
            moved = cost.bytes.weights + cost.bytes.kv_read
            assert moved / cost.seconds.roofline_s <= hw.mem_bw_bytes_per_s, gpu


def test_fp32_is_never_priced_faster_than_the_gpus_own_bf16_step() -> None:
    # --dtype float32 takes the roofline (no table measures fp32 GEMMs) with the datasheet's
    # PCIe link, while bf16 reads L40S's measured (slow) PCIe all-reduces: Llama-3.1-8B TP8,
    # one 8,192-token prefill step: bf16 4.006 s, fp32 0.994 s before. fp32 runs the same ops
    # at the FP32 rate (L40S 91.6 against 362 TFLOP/s bf16) on twice the bytes (4-byte
    # activations, weights, KV): no part of it can be faster than the bf16 step's.
    model = load_model("meta-llama/Llama-3.1-8B")
    for gpu, tp in (("L40S", 8), ("L40S", 4), ("L4", 8), ("H100-SXM-80GB", 8)):
        bf16 = StepCostModel(model, load_gpu(gpu), EngineConfig(tensor_parallel_size=tp))
        fp32 = StepCostModel(model, load_gpu(gpu),
                             EngineConfig(tensor_parallel_size=tp, dtype="float32"))
        for new, ctx in ((np.array([8192]), np.array([0])),
                         (np.ones(256, dtype=np.int64), np.full(256, 1024))):
            assert fp32.step_time_s(new, ctx) >= bf16.step_time_s(new, ctx), (gpu, tp)
