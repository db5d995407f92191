"""Hunt 19 (vlog19): kvplan capacity against more real vLLM startup logs.

Each test names the log (https://github.com/ + the path), the vLLM version, GPU and flags, and
the lines it printed. "blocks" tests give vLLM's printed "Available KV cache memory" to kvplan
as ``kv_cache_memory_bytes`` (a byte count inside the printed 0.01 GiB) and check the block,
token and concurrency arithmetic; the golden values are worked by hand in the comments.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kvplan.costs.memory.activation import rope_cache_bytes
from kvplan.costs.memory.plan import MemoryPlan, plan_memory
from kvplan.specs.catalog import load_model
from kvplan.specs.hardware import load_gpu
from kvplan.specs.hf_config import parse_config
from kvplan.specs.model import ModelSpec
from kvplan.specs.serving import EngineConfig
from kvplan.units import GiB

CATALOG = Path(__file__).resolve().parents[1] / "src/kvplan/specs/catalog/models"
H100, H200, L40S = load_gpu("H100"), load_gpu("H200"), load_gpu("L40S")


def _printed(n: int) -> str:
    return f"{n / GiB:.2f}"


def _catalog(name: str, **fields: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = json.loads((CATALOG / f"{name}.json").read_text(encoding="utf-8"))
    cfg.update(fields)
    return cfg


def _plan(model: ModelSpec, gpu: Any, **engine: Any) -> MemoryPlan:
    return plan_memory(model, gpu, EngineConfig(**engine))


# --------------------------------------------- gemma-3-1b-it, vLLM 0.13.0 (eole-nlp/eole)

GEMMA3_1B = {  # google/gemma-3-1b-it config.json
    "architectures": ["Gemma3ForCausalLM"], "model_type": "gemma3_text",
    "hidden_size": 1152, "intermediate_size": 6912, "num_hidden_layers": 26,
    "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 256,
    "query_pre_attn_scalar": 256, "sliding_window": 512, "sliding_window_pattern": 6,
    "rope_theta": 1_000_000, "rope_local_base_freq": 10_000, "rope_scaling": None,
    "max_position_embeddings": 32768, "vocab_size": 262144, "rms_norm_eps": 1e-6,
    "hidden_activation": "gelu_pytorch_tanh", "attention_bias": False,
    "final_logit_softcapping": None, "attn_logit_softcapping": None,
    "torch_dtype": "bfloat16",
}


def _gemma3_1b() -> ModelSpec:
    return parse_config(GEMMA3_1B, name="gemma-3-1b-it", file="test")


def test_gemma3_1b_builds_two_unscaled_rope_caches_eole_results() -> None:
    # gemma3.py: sliding layers get_rope(base=rope_local_base_freq 10,000, rope_scaling=
    # {"rope_type": "default"}), global layers get_rope(base=rope_theta 1e6, rope_scaling None):
    # two keys of get_rope's cache, so two caches of 32,768 x 256 x 2 B = 16 MiB each, not one.
    m = _gemma3_1b()
    assert m.rope_cache_positions == 2 * 32768
    assert rope_cache_bytes(m) == 33_554_432
    # Parameters: embed (tied) 262,144 x 1152 = 301,989,888; per layer qkv 1152 x 1536 +
    # o 1024 x 1152 + MLP 3 x 1152 x 6912 + 4 norms x 1152 + q/k norms 2 x 256 = 26,842,112,
    # x 26 = 697,894,912; final norm 1152: 999,885,952 x 2 B = 1,999,771,904 B + 32 MiB of
    # rope = 2,033,326,336 B = 1.8937 GiB (one cache: 1.8781). eole-nlp/eole
    # benchmarks/genai/results.md (vLLM 0.13.0, `LLM(model="google/gemma-3-1b-it",
    # max_model_len=2048, gpu_memory_utilization=0.95)`) logs "Model loading took 1.9148 GiB":
    # 0.021 GiB above even with both caches, a term not identified.
    p = _plan(m, H100, max_model_len=2048)
    assert p.budget.weights_bytes == 2_033_326_336


def test_gemma3_1b_hybrid_blocks_and_concurrency_eole_results() -> None:
    # Same log: "Available KV cache memory: 25.39 GiB", "Add 2 padding layers, may waste at
    # most 9.09% KV cache memory", "GPU KV cache size: 950,864 tokens", "Maximum concurrency
    # for 2,048 tokens per request: 461.21x" (max_num_batched_tokens=8192).
    # 22 sliding + 4 full layers: groups of 4 -> 1 full + cdiv(22, 4) = 6 sliding groups
    # (2 padding layers); a block across a group: 4 x 16 x 2 x 1 x 256 x 2 B = 65,536 B.
    avail = 416_008 * 65_536  # 27,263,500,288 B = 25.391 GiB
    assert _printed(avail) == "25.39"
    p = _plan(_gemma3_1b(), H100, max_model_len=2048, max_num_batched_tokens=8192,
              kv_cache_memory_bytes=avail)
    assert (p.num_blocks, p.num_padding_layers) == (416_008, 2)
    assert p.kv_cache_tokens == 950_864  # 416,008 // 7 groups x 16
    # per request: full 2048 / 16 = 128 blocks; sliding min(511 + 8192, 2048) / 16 + 1 = 129,
    # x 6 groups = 774; 416,008 / 902 = 461.206
    assert f"{p.max_concurrency:.2f}" == "461.21"


# ------------------- Mistral-7B-Instruct-v0.2-GPTQ, vLLM 0.11.0 (NGC 25.11), DGX Spark

MISTRAL_V02_GPTQ = _catalog(  # TheBloke/Mistral-7B-Instruct-v0.2-GPTQ: v0.2 has no window
    "mistralai--Mistral-7B-v0.1", rope_theta=1_000_000.0, sliding_window=None,
    torch_dtype="bfloat16",
    quantization_config={"bits": 4, "group_size": 128, "desc_act": True, "sym": True,
                         "quant_method": "gptq"})


def test_mistral_7b_v02_gptq_blocks_dgx_spark_arm_learning_paths() -> None:
    # ArmDeveloperEcosystem/arm-learning-paths content/learning-paths/laptops-and-desktops/
    # dgx_spark_voicechatbot/4_vllm.md: `vllm serve /models/mistral-7b --quantization gptq
    # --gpu-memory-utilization 0.9 --dtype float16` (vLLM 0.11.0+582e4e37.nv25.11, GB10):
    # "Available KV cache memory: 102.56 GiB", "GPU KV cache size: 840,160 tokens",
    # "Maximum concurrency for 32,768 tokens per request: 25.64x", num_gpu_blocks 52510.
    # A block: 16 x 32 layers x 2 x 8 x 128 x 2 B = 2 MiB; 102.56 GiB / 2 MiB = 52,510.7.
    # (GB10 is not in kvplan's GPU table: an H200 holds the given KV size.)
    m = parse_config(MISTRAL_V02_GPTQ, name="Mistral-7B-Instruct-v0.2-GPTQ", file="test")
    avail = 52_510 * 2 * 2**20 + 2**20
    assert _printed(avail) == "102.56"
    p = _plan(m, H200, max_model_len=32768, dtype="float16", quantization="gptq",
              kv_cache_memory_bytes=avail)
    assert (p.num_blocks, p.kv_cache_tokens) == (52_510, 840_160)
    assert f"{p.max_concurrency:.2f}" == "25.64"  # 840,160 / 32,768 = 25.640


def test_mistral_7b_v02_gptq_weights_arm_learning_paths() -> None:
    # Same log: "Model loading took 3.8844 GiB". GPTQ (exllama, desc_act) per linear:
    # in x out x (1/2 qweight + 1/256 qzeros + 1/64 fp16 scales) + 4 x in (g_idx). Per layer
    # in x out = 4096 x 6144 + 4096 x 4096 + 4096 x 28,672 + 14,336 x 4096 = 218,103,808
    # -> 113,311,744 + g_idx 4 x 26,624 = 106,496 + norms 16,384 = 113,434,624, x 32 =
    # 3,629,907,968; embed + lm_head 2 x 32,000 x 4096 x 2 = 524,288,000; norm 8192; rope
    # 32,768 x 128 x 2 = 8,388,608: 4,162,592,768 B = 3.8767 GiB, 0.0077 GiB (8.3 MB, about
    # one more rope cache) below the log: not identified.
    m = parse_config(MISTRAL_V02_GPTQ, name="Mistral-7B-Instruct-v0.2-GPTQ", file="test")
    p = _plan(m, H200, max_model_len=32768, dtype="float16", quantization="gptq")
    assert p.budget.weights_bytes == 4_162_592_768


# ----------------------------------- Qwen3-14B on an L40S (samilazrak/vllm-optimization-lab)

QWEN3_14B = {
    "architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "hidden_size": 5120,
    "num_hidden_layers": 40, "num_attention_heads": 40, "num_key_value_heads": 8,
    "head_dim": 128, "intermediate_size": 17408, "vocab_size": 151936,
    "max_position_embeddings": 40960, "tie_word_embeddings": False,
    "torch_dtype": "bfloat16",
}


def test_qwen3_14b_l40s_blocks_vllm_optimization_lab() -> None:
    # samilazrak/vllm-optimization-lab README.md (vLLM 0.29.0, L40S, `vllm serve
    # Qwen/Qwen3-14B`, max_model_len 40,960): "Available KV cache memory: 11.06 GiB",
    # "GPU KV cache size: 72,496 tokens", "Maximum concurrency for 40,960 tokens per request:
    # 1.77x"; the book's run it reproduces: 11.00 GiB, 72,064 tokens, 1.76x; Qwen3-14B-AWQ:
    # 29.09 GiB -> 190,672 tokens, 4.66x; AWQ at util 0.95: 30.03 GiB -> 196,784, 4.80x.
    # A block: 16 x 40 x 2 x 8 x 128 x 2 B = 2.5 MiB; tokens = blocks x 16 (one group, so
    # 0.29's max concurrency x max_model_len gives the same count).
    m = parse_config(QWEN3_14B, name="Qwen3-14B", file="test")
    block = 5 * 2**19
    for blocks, printed, conc in ((4531, "11.06", "1.77"), (4504, "11.00", "1.76"),
                                  (11_917, "29.09", "4.66"), (12_299, "30.03", "4.80")):
        avail = blocks * block + 1024  # (AWQ's fp16 KV has the bf16 model's page size)
        assert _printed(avail) == printed
        p = _plan(m, L40S, max_model_len=40960, kv_cache_memory_bytes=avail)
        assert (p.num_blocks, p.kv_cache_tokens) == (blocks, blocks * 16)
        assert f"{p.max_concurrency:.2f}" == conc  # blocks / (40,960 / 16)
        assert p.kv_cache_tokens_newer_vllm == blocks * 16


def test_qwen3_14b_bf16_weights_vllm_optimization_lab() -> None:
    # Same README: "Model loading took 27.52 GiB" (0.29), the book's "27.5185 GiB". Per layer
    # in x out = 5120 x 7168 + 5120 x 5120 + 5120 x 34,816 + 17,408 x 5120 = 330,301,440 x 2 B
    # x 40 = 26,424,115,200; norms 40 x (2 x 5120 + 2 x 128) x 2 = 839,680; embed + lm_head
    # 2 x 151,936 x 5120 x 2 = 3,111,649,280; norm 10,240; rope 40,960 x 128 x 2 = 10,485,760:
    # 29,547,100,160 B = 27.5178 GiB (the book's 27.5185 is 0.0007 above).
    m = parse_config(QWEN3_14B, name="Qwen3-14B", file="test")
    p = _plan(m, L40S, max_model_len=40960)
    assert p.budget.weights_bytes == 29_547_100_160
    assert _printed(p.budget.weights_bytes) == "27.52"


# ------------------------------------------- gpt-oss-120b (alvarobartt/hf-mem/issues/60)


def test_gpt_oss_120b_hybrid_tokens_hf_mem_60() -> None:
    # alvarobartt/hf-mem/issues/60, vLLM logs for openai/gpt-oss-120b: "Available KV cache
    # memory: 5.38 GiB", "GPU KV cache size: 78,384 tokens". 18 sliding + 18 full layers:
    # 2 groups of 18; a block across a group: 18 x 16 x 2 x 8 x 64 x 2 B = 589,824 B.
    # tokens = blocks // 2 groups x 16 = 78,384 -> blocks 9,798 or 9,799.
    avail = 9_798 * 589_824 + 294_912
    assert _printed(avail) == "5.38"
    p = _plan(load_model("openai/gpt-oss-120b"), H100, kv_cache_memory_bytes=avail)
    assert (p.num_blocks, p.kv_cache_tokens) == (9_798, 78_384)


# ------------- Qwen3-235B-A22B-Instruct-2507-FP8, TP 8 + EP, 8 x L40S, vLLM 0.10.2
# tim-roethig/ai-platform platform/docs/qwen3_235b_on_8xl40s.md: `vllm serve
# Qwen/Qwen3-235B-A22B-Instruct-2507-FP8 --tensor-parallel-size 8 --enable-expert-parallel
# --gpu-memory-utilization 0.90 --swap-space 0 --max-model-len 32K`.


def test_l40s_cuda_total_is_what_vllm_logs_ai_platform() -> None:
    # "Free memory on device (43.93/44.42 GiB) on startup. Desired GPU memory utilization is
    # (0.9, 39.98 GiB)": 0.9 x 44.42 = 39.978. kvplan derived 46,068 - 467 MiB = 44.53 GiB
    # (0.9 x: 40.08 GiB, 0.1 GiB of KV per GPU that vLLM does not have).
    from kvplan.costs.memory.vllm_defaults import cuda_total_bytes

    total = cuda_total_bytes(L40S)
    assert _printed(total) == "44.42"
    assert _printed(int(total * 0.9)) == "39.98"


def test_qwen3_235b_tp8_replicated_kv_head_blocks_ai_platform() -> None:
    # Same log, every rank's report (0.10.2 logs each rank's config before taking the
    # minimum): ranks with "Available KV cache memory: 10.64 GiB" print "GPU KV cache size:
    # 237,344 tokens", "7.24x"; the engine keeps the minimum, num_gpu_blocks 14,834. 4 KV
    # heads over TP 8: one replicated head per GPU, 94 x 16 x 2 x 1 x 128 x 2 B = 770,048 B
    # a block; 10.64 GiB / 770,048 = 14,836.4 (the printed 0.01 GiB spans 14,830-14,843).
    m = load_model("Qwen/Qwen3-235B-A22B")
    avail = 14_834 * 770_048 + 1024
    assert _printed(avail) == "10.64"
    p = _plan(m, L40S, tensor_parallel_size=8, enable_expert_parallel=True,
              max_model_len=32768, kv_cache_memory_bytes=avail)
    assert (p.page_size_bytes * p.layers_per_group, p.num_blocks) == (770_048, 14_834)
    assert p.kv_cache_tokens == 237_344
    assert f"{p.max_concurrency:.2f}" == "7.24"  # 14,834 / (32,768 / 16)


def test_pcie_only_comm_buffers_ai_platform() -> None:
    # Same log, "Free memory on device" lines: "Actual usage is 27.72 GiB for weight, 1.4 GiB
    # for peak activation, 0.21 GiB for non-torch memory" (0.17-0.21 over the 8 ranks; the
    # log's "Custom allreduce is disabled because it's not supported on more than two
    # PCIe-only GPUs"). kvplan priced 133 + 420 MiB = 0.54 GiB (NVLink TP2 logs), KV 10.37 GiB
    # against the logged 10.64-10.68. PCIe-only parts: 133 + 80 = 213 MiB = 0.208 GiB; KV =
    # 39.98 - 27.66 (kvplan's weights, 0.06 below the log) - 1.41 - 0.21 = 10.70 GiB.
    q = load_model("Qwen/Qwen3-235B-A22B")
    m = parse_config(_catalog("Qwen--Qwen3-235B-A22B", quantization_config={
        "quant_method": "fp8", "weight_block_size": [128, 128], "fmt": "e4m3",
        "activation_scheme": "dynamic"}), name="Qwen3-235B-A22B-Instruct-2507-FP8", file="test")
    b = _plan(m, L40S, tensor_parallel_size=8, enable_expert_parallel=True,
              max_model_len=32768).budget
    assert b.non_torch_bytes == 213 * 2**20 and _printed(b.non_torch_bytes) == "0.21"
    assert _printed(b.activation_bytes) == "1.41"
    assert abs(b.available_kv_bytes / GiB - 10.66) < 0.05
    # NVLink parts keep the TP2-calibrated 553 MiB; one GPU has no communication buffers
    assert _plan(q, H100, tensor_parallel_size=8).budget.non_torch_bytes == 553 * 2**20
    one = parse_config(QWEN3_14B, name="Qwen3-14B", file="test")
    assert _plan(one, L40S, max_model_len=32768).budget.non_torch_bytes == 133 * 2**20
