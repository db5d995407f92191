"""Hunt 14 (logs): kvplan capacity against real vLLM startup logs from public issues.

Each test names the log (https://github.com/ + the path), the vLLM version, GPU and flags,
and the lines it printed; the golden values are worked by hand in the comments.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kvplan.costs.memory.params import weight_bytes_per_gpu
from kvplan.costs.memory.plan import MemoryPlan, plan_memory, rope_cache_bytes
from kvplan.specs.catalog import load_model
from kvplan.specs.hardware import load_gpu
from kvplan.specs.hf_config import parse_config
from kvplan.specs.model import ModelSpec
from kvplan.specs.serving import EngineConfig
from kvplan.units import GiB
from tests.conftest import run_cli

CATALOG = Path(__file__).resolve().parents[1] / "src/kvplan/specs/catalog/models"


def _catalog_config(name: str, **fields: Any) -> dict[str, Any]:
    cfg: dict[str, Any] = json.loads((CATALOG / f"{name}.json").read_text(encoding="utf-8"))
    cfg.update(fields)
    return cfg


# ------------------------------------------- 1. compressed-tensors W8A8 int8: fp32 scales

W8A8_INT8 = {  # neuralmagic/Meta-Llama-3.1-70B-Instruct-quantized.w8a8 quantization_config
    "quant_method": "compressed-tensors", "format": "int-quantized", "ignore": ["lm_head"],
    "config_groups": {"group_0": {
        "targets": ["Linear"],
        "weights": {"num_bits": 8, "type": "int", "strategy": "channel", "symmetric": True,
                    "dynamic": False},
        "input_activations": {"num_bits": 8, "type": "int", "strategy": "token",
                              "symmetric": True, "dynamic": True}}},
}


def _w8a8_llama_70b() -> ModelSpec:
    cfg = _catalog_config("meta-llama--Llama-3.1-70B", quantization_config=W8A8_INT8)
    return parse_config(cfg, name="Meta-Llama-3.1-70B-Instruct-quantized.w8a8", file="test")


def test_w8a8_int8_weights_keep_float32_scales_vllm_12569() -> None:
    # vllm-project/vllm/pull/12569 (V1, 2025-01-30 main), `vllm serve
    # neuralmagic/Meta-Llama-3.1-70B-Instruct-quantized.w8a8 --max-model-len 2048
    # --gpu-memory-utilization 0.98`: "Loading model weights took 67.7229 GB" (GiB).
    # CompressedTensorsW8A8Int8 stores an int8 weight and a float32 scale per output row
    # (ChannelQuantScaleParameter, dtype=torch.float32), not a 16-bit one as the weight-only
    # (Marlin) int schemes. Rows per layer: q 8192 + k 1024 + v 1024 + o 8192 + gate/up
    # 2 x 28672 + down 8192 = 83,968; x 80 layers x 4 B = 26,869,760 B of scales (kvplan
    # priced 2 B: 13,434,880 B less, 67.7103 GiB). The rest: 68,451,041,280 int8 weights +
    # 2 x 128,256 x 8192 x 2 B embed / lm_head + norms + the 32 MiB llama3 rope cache.
    m = _w8a8_llama_70b()
    weights = weight_bytes_per_gpu(m) + rope_cache_bytes(m, "auto")
    assert weights == 72_716_795_904
    assert abs(weights / GiB - 67.7229) < 0.0002  # 67.72279: a 0.1 MiB residue, see docs


# ------------------------------- 2. Qwen2.5 Instruct: 32,768 positions, not the base 131,072


def test_qwen25_instruct_serves_32768_tokens_by_default() -> None:
    # vLLM logs "Initializing a V1 LLM engine (v0.13.0) with config: model='Qwen/Qwen2.5-7B-
    # Instruct', ... max_seq_len=32768" (v0.9.0 and v0.18.0 "Using max model len 32768" too)
    # with no --max-model-len: the Instruct repo's config.json holds 32,768 positions, the
    # base Qwen/Qwen2.5-7B's 131,072 (Qwen: "128K context length needs YaRN"). kvplan took
    # the base config for the Instruct id and planned 131,072-token requests. H100, 0.9:
    # 28 x 4 x 128 x 2 x 2 = 57,344 B a token, 917,504 B a block; 32,768 / 16 = 2,048 blocks
    # a request.
    r = run_cli("capacity", "Qwen/Qwen2.5-7B-Instruct", "--json")
    assert r.code == 0, r.err
    doc = r.json()
    assert (doc["model"], doc["max_model_len"]) == ("Qwen/Qwen2.5-7B-Instruct", 32768)
    assert doc["max_concurrency"] == doc["num_blocks"] / 2048
    r72 = run_cli("capacity", "Qwen/Qwen2.5-72B-Instruct", "-tp", "4", "--json")
    assert r72.code == 0 and r72.json()["max_model_len"] == 32768, r72.err
    assert run_cli("capacity", "Qwen/Qwen2.5-7B", "--json").json()["max_model_len"] == 131072


def test_qwen25_7b_instruct_awq_weights_hold_a_32768_row_rope_cache() -> None:
    # vLLM 0.19.0, Qwen2.5-7B-Instruct-AWQ (awq_marlin, float16), --max-model-len 4096:
    # "Model loading took 5.2 GiB memory" (public notes file, code index id 53268049166).
    # AWQ int4 + fp16 scale + 4-bit zero per 128 inputs: 5,570,747,392 B; the rope cache is
    # the config's 32,768 positions x 128 x 2 B = 8 MiB -> 5,579,136,000 B = 5.196 GiB ("5.2");
    # the base config's 131,072 rows (32 MiB) gave 5.219 GiB ("5.22").
    m = load_model("Qwen/Qwen2.5-7B-Instruct")
    weights = weight_bytes_per_gpu(m, quantization="awq") + rope_cache_bytes(m, "auto")
    assert weights == 5_570_747_392 + 32768 * 128 * 2 == 5_579_136_000
    assert f"{weights / GiB:.2f}" == "5.20"


# ------------------------------------------------ 3. cited logs: blocks, tokens, concurrency


def _given(model: str, gpu: str, blocks: int, page: int, **flags: Any) -> MemoryPlan:
    """Plan with vLLM's printed KV memory: ``blocks`` whole blocks of ``page`` bytes (all a
    stage's layers) and half a block more, a byte count inside the printed 0.01 GiB."""
    engine = EngineConfig(kv_cache_memory_bytes=blocks * page + page // 2, **flags)
    return plan_memory(load_model(model), load_gpu(gpu), engine)


def test_deepseek_v2_lite_tp2_pp2_on_l4_vllm_20665() -> None:
    # vllm-project/vllm/pull/20665 (v0.9.2 dev, 4 x L4), `vllm serve deepseek-ai/DeepSeek-V2-
    # Lite --max-model-len=1024 --enforce-eager --tensor-parallel-size=2
    # --pipeline-parallel-size=2`: ranks 0/1 "Available KV cache memory: 12.13 GiB", ranks 2/3
    # "11.33 GiB"; "GPU KV cache size: 807,792 tokens"; "Maximum concurrency for 1,024 tokens
    # per request: 788.86x". PP 2 splits 27 layers 14 / 13 (the remainder to the first stage);
    # MLA keeps the whole 576-value latent on every TP rank; on an L4 (TRITON_MLA) blocks stay
    # 16 tokens (Hopper's FlashMLA would force 64). Stage 0: 16 x 576 x 2 B x 14 layers =
    # 258,048 B a block; 12.13 GiB holds 50,487 (13,028,069,376 B = 12.1333 GiB): 807,792 tokens,
    # 50,487 / (1024 / 16) = 788.86x. Stage 1, 13 layers at 11.33 GiB, has 50,770: stage 0's
    # count is kept.
    p = _given("deepseek-ai/DeepSeek-V2-Lite", "L4", 50_487, 16 * 576 * 2 * 14,
               tensor_parallel_size=2, pipeline_parallel_size=2, max_model_len=1024)
    assert f"{p.budget.available_kv_bytes / GiB:.2f}" == "12.13"
    assert [len(g.layer_ids) for _, _, groups in p.stages for g in groups] == [14, 13]
    assert (p.block_size, p.num_blocks, p.kv_cache_tokens) == (16, 50_487, 807_792)
    assert f"{p.max_concurrency:.2f}" == "788.86"


def test_qwen3_8b_on_a100_40gb_vllm_092_log() -> None:
    # Public notes file (code index id 58028398527): vLLM 0.9.2, `vllm serve Qwen/Qwen3-8B`
    # (no other flags) on one A100-SXM4-40GB: "Model loading took 15.2683 GiB", "Available
    # KV cache memory: 18.69 GiB", "GPU KV cache size: 136,080 tokens", "Maximum concurrency
    # for 40,960 tokens per request: 3.32x", and later "num_gpu_blocks is: 8505".
    # 36 x 8 x 128 x 2 x 2 = 147,456 B a token, 2,359,296 B (2.25 MiB) a block: 8,505 blocks
    # = 18.6877 GiB ("18.69"), 136,080 tokens, 8,505 / 2,560 = 3.32x. Weights: 8,190,735,360
    # bf16 parameters + the 40,960 x 128 x 2 B rope cache = 15.2662 GiB (the log's 2.1 MiB
    # more is unexplained; vllm#17327's Qwen3-30B-A3B shows the same 0.0021 GiB).
    p = _given("Qwen/Qwen3-8B", "A100-40GB", 8_505, 16 * 147_456)
    assert f"{p.budget.available_kv_bytes / GiB:.2f}" == "18.69"
    assert (p.settings.max_model_len, p.num_blocks, p.kv_cache_tokens) == (40960, 8505, 136_080)
    assert f"{p.max_concurrency:.2f}" == "3.32"
    m = load_model("Qwen/Qwen3-8B")
    weights = weight_bytes_per_gpu(m) + rope_cache_bytes(m, "auto")
    assert weights == 2 * 8_190_735_360 + 40960 * 128 * 2
    assert abs(weights / GiB - 15.2683) < 0.0025


# ------------------------------------------------ 4. gpt-oss's float32 rotary cache


def test_gpt_oss_rope_cache_is_float32() -> None:
    # vLLM's gpt_oss.py builds its rotary embedding with get_rope(..., dtype=torch.float32)
    # (0.10 through 0.13): yarn, original 4,096 x factor 32 = 131,072 rows x 64 x 4 B =
    # 32 MiB; kvplan priced it in bf16 (16 MiB). Logs: gpt-oss-20b, vLLM 0.11.0, H100, block
    # 128, max_model_len 16000 (llm-d/llm-d-benchmark empirical-vllm-memory-results.md):
    # weights 13.47, activation 7.38, non-torch 0.13, "Available KV cache memory" 50.28 GiB:
    # kvplan 13.4777 / 7.38 / 0.13 / 50.28 (was 13.4621 / 50.30). On Marlin (A100, vLLM
    # 0.19.0, util 0.65, len 131072, myoceane.fr "ai-vllm-a100-gemma-4"): "Model loading took
    # 13.72 GiB"; kvplan 13.6867 -> 13.7023.
    m = load_model("openai/gpt-oss-20b")
    assert rope_cache_bytes(m, "auto") == 131_072 * 64 * 4
    assert rope_cache_bytes(m, "float16") == 131_072 * 64 * 4  # whatever the --dtype
    p = plan_memory(m, load_gpu("H100"), EngineConfig(block_size=128, max_model_len=16000))
    assert f"{p.budget.available_kv_bytes / GiB:.2f}" == "50.28"
    a100 = plan_memory(m, load_gpu("A100-80GB"), EngineConfig(max_model_len=131072,
                                                                gpu_memory_utilization=0.65))
    assert a100.budget.weights_bytes == 14_696_004_736 + 16 * 2**20
