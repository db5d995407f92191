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
from kvplan.specs.hf_config import parse_config
from kvplan.specs.model import ModelSpec
from kvplan.units import GiB

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
