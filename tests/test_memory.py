"""vLLM 0.11 memory budget and block arithmetic against public vLLM logs (sources cited)."""

from __future__ import annotations

import pytest

from kvplan.costs.memory.plan import MemoryPlan, plan_memory
from kvplan.errors import DoesNotFitError, InputError
from kvplan.specs.catalog import load_model
from kvplan.specs.hardware import HardwareSpec, load_gpu
from kvplan.specs.hf_config import parse_config
from kvplan.specs.serving import EngineConfig
from kvplan.units import GiB, MiB

H100 = load_gpu("H100")
RTX3090 = HardwareSpec(id="RTX-3090", memory_bytes=24 * 10**9, mem_bw_bytes_per_s=936e9)


def _printed(n: int) -> str:
    return f"{n / GiB:.2f}"


def plan(name: str, hw: HardwareSpec = H100, **kw: object) -> MemoryPlan:
    return plan_memory(load_model(name), hw, EngineConfig(**kw))  # type: ignore[arg-type]


def test_llama31_8b_rtx3090_issue_10517() -> None:
    # vLLM issue #10517: "# GPU blocks: 1952", KV 3.81 GiB, max_model_len 20000 -> 1.56x
    page = 16 * 8 * 128 * 2 * 2  # block x KV heads x head_dim x (K,V) x bf16 = 64 KiB
    block = 32 * page  # one block spans all 32 layers: 2 MiB
    avail = 1952 * block + block // 3  # any byte count in [1952, 1953) blocks
    assert _printed(avail) == "3.81"
    p = plan("meta-llama/Llama-3.1-8B", RTX3090, max_model_len=20000, kv_cache_memory_bytes=avail)
    assert (p.num_blocks, p.page_size_bytes, p.layers_per_group) == (1952, page, 32)
    assert p.kv_cache_tokens == 1952 * 16
    assert p.pages_per_request == 1250  # cdiv(20000, 16)
    assert f"{p.max_concurrency:.2f}" == "1.56"


def test_gemma3_27b_seven_groups_eight_padding_layers() -> None:
    # vLLM 0.11, max_model_len 4096, max_num_batched_tokens 8192, "Available KV cache memory:
    # 109.86 GiB" -> 89,994 blocks, "GPU KV cache size: 205,696 tokens", 50.05x
    page = 16 * 16 * 128 * 2 * 2  # 16 KV heads x 128, bf16: 128 KiB per layer
    avail = 89_994 * 10 * page + 5 * page  # 10 layers per group
    assert _printed(avail) == "109.86"
    p = plan(
        "google/gemma-3-27b-it",
        load_gpu("H200"),  # 109.86 GiB of KV cache needs a GPU larger than an H100's 80 GB
        max_model_len=4096,
        max_num_batched_tokens=8192,
        kv_cache_memory_bytes=avail,
    )
    assert len(p.groups) == 7 and p.layers_per_group == 10 and p.num_padding_layers == 8
    assert p.num_blocks == 89_994
    assert p.kv_cache_tokens == 89_994 // 7 * 16 == 205_696
    # full group: cdiv(4096,16)=256; each of 6 sliding groups: cdiv(min(1023+8192,4096),16)+1
    assert p.pages_per_request == 256 + 6 * 257
    assert f"{p.max_concurrency:.2f}" == "50.05"


MISTRAL_SMALL_32 = {  # Mistral-Small-3.2-24B text tower (params.json / config.json fields)
    "model_type": "mistral",
    "architectures": ["MistralForCausalLM"],
    "hidden_size": 5120,
    "num_hidden_layers": 40,
    "num_attention_heads": 32,
    "num_key_value_heads": 8,
    "head_dim": 128,
    "intermediate_size": 32768,
    "vocab_size": 131072,
    "max_position_embeddings": 131072,
    "torch_dtype": "bfloat16",
    "sliding_window": None,
}


def test_mistral_small_h100_block_128() -> None:
    # llm-d/llm-d-benchmark config_explorer/empirical-vllm-memory-results.md, vLLM 0.11.0:
    # 28.20 GiB, block 128, max_model_len 16000 -> 1,444 blocks, 184,832 tokens, 11.55x
    model = parse_config(MISTRAL_SMALL_32, name="Mistral-Small-3.2-24B", file="test")
    block = 40 * 128 * 8 * 128 * 2 * 2  # 20 MiB
    avail = 1444 * block + MiB
    assert _printed(avail) == "28.20"
    p = plan_memory(
        model, H100, EngineConfig(block_size=128, max_model_len=16000, kv_cache_memory_bytes=avail)
    )
    assert (p.num_blocks, p.kv_cache_tokens) == (1444, 184_832)
    assert f"{p.max_concurrency:.2f}" == "11.55"  # 1444 / cdiv(16000, 128)


def test_tp_replicates_kv_heads() -> None:
    # Llama-3.1-8B has 8 KV heads: at TP 16 each GPU still keeps one head (64 KiB/16 tokens/8)
    p8 = plan(
        "meta-llama/Llama-3.1-8B",
        tensor_parallel_size=8,
        max_model_len=4096,
        kv_cache_memory_bytes=GiB,
    )
    p32 = plan(
        "meta-llama/Llama-3.1-8B",
        tensor_parallel_size=32,
        max_model_len=4096,
        kv_cache_memory_bytes=GiB,
    )
    assert p8.page_size_bytes == p32.page_size_bytes == 16 * 1 * 128 * 2 * 2
    assert p8.num_blocks == GiB // (16 * 128 * 4) // 32


def test_mla_page_is_one_latent() -> None:
    # DeepSeek-V3: 576-element latent, bf16, no K/V pair, not split by TP; on an H100 vLLM
    # forces FlashMLA's block of 64 tokens (test_vllm_logs.py)
    p = plan(
        "deepseek-ai/DeepSeek-V3",
        H100,
        tensor_parallel_size=8,
        max_model_len=4096,
        kv_cache_memory_bytes=10 * GiB,
    )
    assert p.page_size_bytes == 64 * 576 * 2
    assert p.num_blocks == 10 * GiB // (64 * 576 * 2) // 61


def test_gpt_oss_sliding_and_full_groups() -> None:
    # 12 sliding (window 128) + 12 full layers: two groups of 12, no padding
    p = plan(
        "openai/gpt-oss-20b",
        max_model_len=8192,
        max_num_batched_tokens=2048,
        kv_cache_memory_bytes=4 * GiB,
    )
    page = 16 * 8 * 64 * 2 * 2
    assert (len(p.groups), p.layers_per_group, p.num_padding_layers) == (2, 12, 0)
    assert p.num_blocks == 4 * GiB // page // 12
    assert p.pages_per_request == 8192 // 16 + (2175 // 16 + 1) + 1  # full + sliding


def test_hybrid_mamba_block_size_raised() -> None:
    # Nemotron-H: attention page must cover a Mamba2 state; block a multiple of 16 tokens
    p = plan(
        "nvidia/Nemotron-H-56B-Base-8K", tensor_parallel_size=4, kv_cache_memory_bytes=20 * GiB
    )
    assert p.block_size % 16 == 0 and p.block_size > 16
    pages = {g.page_size_bytes for g in p.groups}
    assert len(pages) == 1


# Estimated from scratch against vLLM 0.11.0 on H100 (block 128, max_model_len 16000, util
# 0.9): llm-d/llm-d-benchmark config_explorer/empirical-vllm-memory-results.md
LOGS = [
    ("meta-llama/Llama-3.1-8B", 1, 51.38),
    ("Qwen/Qwen3-32B", 1, 4.45),
    ("Qwen/Qwen3-32B", 2, 34.49),
    ("openai/gpt-oss-20b", 1, 50.28),
]


@pytest.mark.parametrize(("name", "tp", "gib"), LOGS)
def test_estimate_within_1gib_of_vllm(name: str, tp: int, gib: float) -> None:
    p = plan(name, tensor_parallel_size=tp, block_size=128, max_model_len=16000)
    assert p.settings.max_num_batched_tokens == 8192 and p.settings.max_num_seqs == 1024
    assert abs(p.budget.available_kv_bytes / GiB - gib) < 1.0


def test_budget_components_llama_8b() -> None:
    # same log: requested 71.26, weights 14.99, activation 4.76, non-torch 0.13
    b = plan("meta-llama/Llama-3.1-8B", max_model_len=16000).budget
    assert _printed(b.requested_bytes) == "71.26"
    assert _printed(b.weights_bytes) == "14.99"
    assert abs(b.activation_bytes / GiB - 4.76) < 0.05
    assert b.available_kv_bytes == (
        b.requested_bytes - b.weights_bytes - b.activation_bytes - b.non_torch_bytes
    )


def test_small_gpu_defaults() -> None:
    p = plan("meta-llama/Llama-3.1-8B", RTX3090, max_model_len=4096)
    assert (p.settings.max_num_batched_tokens, p.settings.max_num_seqs) == (2048, 256)


def test_does_not_fit_names_levers() -> None:
    with pytest.raises(DoesNotFitError) as exc:
        plan("Qwen/Qwen3-32B", max_model_len=40960)
    msg = str(exc.value)
    assert "largest --max-model-len that fits is" in msg and "--tensor-parallel-size 2" in msg
    assert exc.value.needed_bytes > exc.value.available_bytes > 0


def test_weights_do_not_fit() -> None:
    with pytest.raises(DoesNotFitError, match="tensor-parallel-size 16"):
        plan("deepseek-ai/DeepSeek-V3", tensor_parallel_size=8)


def test_largest_len_really_is_largest() -> None:
    with pytest.raises(DoesNotFitError) as exc:
        plan("Qwen/Qwen3-32B", max_model_len=40960)
    longest = int(str(exc.value).split("fits is ")[1].split(";")[0])
    assert plan("Qwen/Qwen3-32B", max_model_len=longest).pages_per_request > 0
    with pytest.raises(DoesNotFitError):
        plan("Qwen/Qwen3-32B", max_model_len=longest + 1)


def test_bad_flags() -> None:
    with pytest.raises(InputError, match="divide"):
        plan("meta-llama/Llama-3.1-8B", tensor_parallel_size=3)
    with pytest.raises(InputError, match="max_position_embeddings"):
        plan("meta-llama/Llama-2-7b-hf", max_model_len=8192)
    with pytest.raises(InputError):
        EngineConfig(gpu_memory_utilization=1.5)
