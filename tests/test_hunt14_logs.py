"""Hunt 14 (logs): kvplan capacity against real vLLM startup logs from public issues.

Each test names the log (https://github.com/ + the path), the vLLM version, GPU and flags,
and the lines it printed; the golden values are worked by hand in the comments.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kvplan.costs.memory.params import weight_bytes_per_gpu
from kvplan.costs.memory.plan import rope_cache_bytes
from kvplan.specs.catalog import load_model
from kvplan.specs.hf_config import parse_config
from kvplan.specs.model import ModelSpec
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
