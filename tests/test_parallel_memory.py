"""Memory per GPU under data and expert parallelism, checked by hand (docs/parallelism.md)."""

from __future__ import annotations

from pathlib import Path

import pytest

from kvplan.costs.memory import vllm_defaults as vd
from kvplan.costs.memory.ep_layout import (
    expert_weight_bytes,
    parallel_layout,
    parallel_weight_bytes,
)
from kvplan.costs.memory.params import weight_bytes_per_gpu
from kvplan.costs.memory.plan import plan_memory
from kvplan.errors import InputError
from kvplan.specs.catalog import load_model
from kvplan.specs.hardware import load_gpu
from kvplan.specs.serving import EngineConfig

QWEN = "Qwen/Qwen3-30B-A3B"
# Qwen3-30B-A3B, bf16: 48 layers, hidden 2048, 128 experts of intermediate 768, top-8.
# One expert: gate_up 2 x 768 x 2048 + down 2048 x 768 values, 2 bytes each.
QWEN_EXPERT_BYTES = (2 * 768 * 2048 + 2048 * 768) * 2  # 9,437,184
# Everything else at TP1 (embedding and untied lm_head 151,936 x 2048; per layer q 4096 x 2048,
# k and v 512 x 2048, o 2048 x 4096, q/k norms 2 x 128, router 128 x 2048, 2 norms of 2048;
# the final norm 2048), 2 bytes per value.
QWEN_LAYER_OTHER = ((4096 + 512 + 512) * 2048 + 2048 * 4096 + 2 * 128 + 128 * 2048
                    + 2 * 2048) * 2  # 38,281,728
QWEN_OTHER_TP1 = 2 * 151_936 * 2048 * 2 + 48 * QWEN_LAYER_OTHER + 2048 * 2
QWEN_ROPE = 40_960 * 128 * 2  # max_position_embeddings x head_dim, bf16


def _plan(model: str, gpu: str = "H200", **engine: object):
    return plan_memory(load_model(model), load_gpu(gpu),
                       EngineConfig(max_model_len=8192, **engine))  # type: ignore[arg-type]


def test_hand_numbers() -> None:
    assert QWEN_EXPERT_BYTES == 9_437_184
    assert QWEN_LAYER_OTHER == 38_281_728
    assert QWEN_OTHER_TP1 == 3_082_186_752


def test_qwen3_moe_dp8_ep_weights_per_gpu_to_the_byte() -> None:
    """DP8 + EP: 16 whole experts per GPU, attention and embeddings whole on every GPU."""
    m = load_model(QWEN)
    layout = parallel_layout(m, 1, 1, 8, True)
    assert (layout.ep, layout.moe_tp, layout.local_experts) == (8, 1, 16)
    experts = 16 * 48 * QWEN_EXPERT_BYTES
    assert experts == 7_247_757_312
    assert expert_weight_bytes(m, layout) == experts
    assert parallel_weight_bytes(m, layout) == experts + QWEN_OTHER_TP1 == 10_329_944_064
    assert _plan(QWEN, data_parallel_size=8,
                 enable_expert_parallel=True).budget.weights_bytes == 10_329_944_064 + QWEN_ROPE


def test_qwen3_moe_tp8_holds_the_same_expert_bytes_as_dp8_ep() -> None:
    """TP8: every expert's intermediate / 8 on each GPU; 128 x 96-wide = 16 x 768-wide."""
    m = load_model(QWEN)
    tp8 = parallel_layout(m, 8, 1, 1, False)
    assert tp8.is_plain_tp and expert_weight_bytes(m, tp8) == 7_247_757_312
    assert parallel_weight_bytes(m, tp8) == weight_bytes_per_gpu(m, tp=8)


def test_dp_without_ep_shards_experts_over_tp_times_dp() -> None:
    """vLLM's flatten_tp_across_dp: without EP the MoE TP group spans every DP rank."""
    m = load_model(QWEN)
    layout = parallel_layout(m, 1, 1, 8, False)
    assert (layout.ep, layout.moe_tp, layout.local_experts) == (1, 8, 128)
    assert expert_weight_bytes(m, layout) == 7_247_757_312


def test_deepseek_v3_dp8_ep_experts_per_gpu_to_the_byte() -> None:
    """DeepSeek-V3 fp8 (128 x 128 blocks, fp32 scales): 32 of 256 experts on each of 58 MoE
    layers. One expert: w13 4096 x 7168 + 32 x 56 scales, w2 7168 x 2048 + 56 x 16."""
    m = load_model("deepseek-ai/DeepSeek-V3")
    one = 4096 * 7168 + 32 * 56 * 4 + 7168 * 2048 + 56 * 16 * 4
    assert one == 44_050_944
    layout = parallel_layout(m, 1, 1, 8, True)
    assert expert_weight_bytes(m, layout) == 58 * 32 * one == 81_758_552_064


def test_uneven_split_follows_vllm() -> None:
    """determine_expert_map: 128 experts over 3 GPUs = 43, 43, 42; the fullest holds 43."""
    m = load_model(QWEN)
    layout = parallel_layout(m, 1, 1, 3, True)
    assert layout.uneven_experts and layout.local_experts == 43
    assert expert_weight_bytes(m, layout) == 43 * 48 * QWEN_EXPERT_BYTES


@pytest.mark.parametrize("model", [QWEN, "deepseek-ai/DeepSeek-V3", "openai/gpt-oss-120b",
                                   "mistralai/Mixtral-8x7B-v0.1"])
def test_more_ep_ranks_never_add_expert_bytes_per_gpu(model: str) -> None:
    m = load_model(model)
    assert m.moe is not None
    last = None
    for ranks in range(1, m.moe.num_experts + 1):
        layout = parallel_layout(m, 1, 1, ranks, True)
        got = expert_weight_bytes(m, layout)
        assert last is None or got <= last, ranks
        last = got


@pytest.mark.parametrize("model", [QWEN, "deepseek-ai/DeepSeek-V3", "openai/gpt-oss-20b",
                                   "meta-llama/Llama-3.1-8B"])
@pytest.mark.parametrize("tp", [1, 2, 4, 8])
def test_plain_layout_is_the_tp_arithmetic(model: str, tp: int) -> None:
    m = load_model(model)
    assert parallel_weight_bytes(m, parallel_layout(m, tp, 1, 1, False)) == \
        weight_bytes_per_gpu(m, tp=tp)


def test_dp8_ep_budget_is_a_tp1_budget_with_its_weights_and_comm_buffers() -> None:
    """Each DP rank is one TP1 engine: the same activation peak and KV page as TP1; only
    the weights (16 experts, not 128) and the communication buffers differ."""
    ep, tp1 = _plan(QWEN, data_parallel_size=8, enable_expert_parallel=True), _plan(QWEN)
    b, b1 = ep.budget, tp1.budget
    assert b.activation_bytes == b1.activation_bytes
    assert b.non_torch_bytes == b1.non_torch_bytes + vd.COMM_BUFFER_BYTES
    assert b.available_kv_bytes == (b.requested_bytes - b.weights_bytes - b.activation_bytes
                                    - b.non_torch_bytes)
    per_token = 48 * 2 * 4 * 128 * 2  # layers x (K, V) x kv heads x head_dim x bf16
    assert ep.num_blocks == b.available_kv_bytes // (16 * per_token)
    assert ep.kv_cache_tokens == ep.num_blocks * 16


def test_dense_dp_is_replication() -> None:
    one, dp = _plan("meta-llama/Llama-3.1-8B", "H100"), _plan(
        "meta-llama/Llama-3.1-8B", "H100", data_parallel_size=4)
    assert dp.budget.weights_bytes == one.budget.weights_bytes
    assert dp.num_blocks <= one.num_blocks  # only the communication buffers differ


def test_more_experts_than_gpus_is_refused() -> None:
    m = load_model("mistralai/Mixtral-8x7B-v0.1")
    with pytest.raises(InputError, match="exceeds the 8 experts"):
        parallel_layout(m, 1, 1, 16, True)


def test_dp_times_tp_beyond_a_node_without_interconnect_is_refused() -> None:
    with pytest.raises(InputError, match="--data-parallel-size 8 at --tensor-parallel-size 1"):
        _plan(QWEN, "L40S", data_parallel_size=16, enable_expert_parallel=True)


def test_multi_node_is_priced_where_the_catalog_knows_the_link() -> None:
    hw = load_gpu("H200")
    assert hw.node_gpus == 8 and hw.scale_out_bytes_per_s == 50e9
    plan = _plan("deepseek-ai/DeepSeek-V3", data_parallel_size=16, tensor_parallel_size=2,
                 enable_expert_parallel=True)
    m = load_model("deepseek-ai/DeepSeek-V3")
    assert expert_weight_bytes(m, parallel_layout(m, 2, 1, 16, True)) == 58 * 8 * 44_050_944
    assert plan.num_blocks > 0


def test_a_gpu_file_with_scale_out_prices_multi_node(tmp_path: Path) -> None:
    import json

    entry = {"id": "my-l40s", "memory_gb": 48, "mem_bw_tbps": 0.864, "bf16_tflops_dense": 362,
             "interconnect_gbps": 64, "node_gpus": 4, "scale_out_gbps": 25}
    path = tmp_path / "gpu.json"
    path.write_text(json.dumps(entry), encoding="utf-8")
    hw = load_gpu(str(path))
    assert (hw.node_gpus, hw.scale_out_bytes_per_s) == (4, 25e9)
    plan = plan_memory(load_model(QWEN), hw, EngineConfig(
        data_parallel_size=8, enable_expert_parallel=True, max_model_len=4096))
    assert plan.num_blocks > 0
    no_link = tmp_path / "gpu2.json"
    no_link.write_text(json.dumps({**entry, "scale_out_gbps": 0}), encoding="utf-8")
    with pytest.raises(InputError, match="more than one 4-GPU node"):
        plan_memory(load_model(QWEN), load_gpu(str(no_link)), EngineConfig(
            data_parallel_size=8, enable_expert_parallel=True, max_model_len=4096))


def test_block_fp8_experts_whole_under_ep_load_where_tp8_is_refused() -> None:
    """Qwen3-235B-A22B-FP8 (moe_intermediate_size 1536, 128 x 128 blocks): TP 8 cuts each
    expert to 192 (vLLM refuses: not a multiple of block_n 128); with EP each GPU holds whole
    experts (1536 = 12 x 128) and vLLM's recipes run it; DP 8 without EP shards over 8 again."""
    from tests.test_vllm_logs import _model, _qwen3_235b_fp8

    m, h200 = _model(_qwen3_235b_fp8(), "Qwen3-235B-A22B-FP8"), load_gpu("H200")
    with pytest.raises(InputError, match=r"= 192 per GPU .* or add --enable-expert-parallel"):
        plan_memory(m, h200, EngineConfig(tensor_parallel_size=8))
    for engine in (EngineConfig(tensor_parallel_size=8, enable_expert_parallel=True),
                   EngineConfig(data_parallel_size=8, enable_expert_parallel=True)):
        assert plan_memory(m, h200, engine).num_blocks > 0
    with pytest.raises(InputError, match="= 192 per GPU"):
        plan_memory(m, h200, EngineConfig(data_parallel_size=8))
