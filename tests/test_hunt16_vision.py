"""Hunt 16 (capacity of multimodal models): vision towers and vLLM 0.11's encoder profiling."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tests.conftest import assert_one_line_error, run_cli

# A Mistral-Small-3.1-24B-style config (Mistral3ForConditionalGeneration: a Pixtral vision
# tower of 24 layers of 1024 beside a 40-layer Mistral text model), written out for the test.
MISTRAL3_TEXT = {"head_dim": 128, "hidden_act": "silu", "hidden_size": 5120,
                 "intermediate_size": 32768, "max_position_embeddings": 131072,
                 "model_type": "mistral", "num_attention_heads": 32, "num_hidden_layers": 40,
                 "num_key_value_heads": 8, "rms_norm_eps": 1e-05, "rope_theta": 1000000000.0,
                 "sliding_window": None, "vocab_size": 131072}
MISTRAL3 = {"architectures": ["Mistral3ForConditionalGeneration"], "image_token_index": 10,
            "model_type": "mistral3", "multimodal_projector_bias": False,
            "projector_hidden_act": "gelu", "spatial_merge_size": 2,
            "text_config": MISTRAL3_TEXT, "torch_dtype": "bfloat16",
            "vision_config": {"head_dim": 64, "hidden_act": "silu", "hidden_size": 1024,
                              "image_size": 1540, "intermediate_size": 4096,
                              "model_type": "pixtral", "num_attention_heads": 16,
                              "num_hidden_layers": 24, "patch_size": 14, "rope_theta": 10000.0},
            "vision_feature_layer": -1}


def _write(tmp_path: Path, name: str, cfg: dict[str, Any]) -> str:
    path = tmp_path / name
    path.write_text(json.dumps(cfg))
    return str(path)


def test_an_unpriced_vision_tower_is_refused_not_priced_as_its_text_model(tmp_path: Path) -> None:
    """vLLM 0.11 builds Mistral3ForConditionalGeneration's Pixtral tower and projector, loads
    their weights and encodes a batch of dummy images in the profiling run before it sizes the
    KV cache. kvplan priced the config as its text model alone (no tower weights, no encoder
    pass), so "GPU KV cache size" came out too large, silently. Now a memory plan of a tower
    kvplan does not price is refused in one line; --kv-cache-memory (which skips the estimate)
    and `kv` (bytes per token: the tower caches nothing) still answer."""
    mm = _write(tmp_path, "mistral3.json", MISTRAL3)
    for command in (("capacity",), ("latency", "--prompt", "100", "--output", "10"),
                    ("simulate", "--num-prompts", "5")):
        r = run_cli(*command, mm, "--gpu", "h100-sxm-80gb")
        assert_one_line_error(r)
        assert "Mistral3ForConditionalGeneration (config key 'vision_config')" in r.err
        assert "--kv-cache-memory" in r.err
    given = run_cli("capacity", mm, "--gpu", "h100-sxm-80gb", "--kv-cache-memory", "20GiB",
                    "--json")
    assert given.code == 0, given.err
    # 40 layers x 8 KV heads x 128 x 2 (K, V) x 2 B = 163,840 B a token, 16-token blocks
    assert given.json()["num_blocks"] == 20 * 2**30 // (16 * 163_840) == 8_192
    assert run_cli("kv", mm).code == 0
    text = {**MISTRAL3_TEXT, "architectures": ["MistralForCausalLM"], "torch_dtype": "bfloat16"}
    assert run_cli("capacity", _write(tmp_path, "text.json", text), "--gpu",
                   "h100-sxm-80gb").code == 0
