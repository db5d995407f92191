"""Hunt 17 follow-ups (fu17): small defects other helpers found."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from kvplan.specs.hf_config import parse_config
from tests.conftest import run_cli


def _write(tmp_path: Path, name: str, cfg: dict[str, Any]) -> str:
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(cfg))
    return str(path)


def _llava_next_mistral(**text: Any) -> dict[str, Any]:
    """llava-hf/llava-v1.6-mistral-7b-hf-style wrapper whose text_config keeps only what differs
    from MistralConfig."""
    return {"architectures": ["LlavaNextForConditionalGeneration"], "model_type": "llava_next",
            "text_config": {"architectures": ["MistralForCausalLM"], "model_type": "mistral",
                            "intermediate_size": 14336, "max_position_embeddings": 32768,
                            "rope_theta": 1000000.0, "torch_dtype": "bfloat16",
                            "vocab_size": 32064, **text},
            "vision_config": {"hidden_size": 1024, "model_type": "clip_vision_model"}}


def test_compact_mistral_text_config_takes_mistralconfigs_4096_window(tmp_path: Path) -> None:
    # transformers MistralConfig.__init__: ``sliding_window: int | None = 4096``; a text_config
    # without the key is built with a 4,096-token window, and vLLM 0.11 reads
    # hf_text_config.sliding_window (ModelConfig.get_sliding_window) and gives every layer of
    # the (not interleaved) model that window. kvplan priced it as full attention.
    spec = parse_config(_llava_next_mistral(), name="m", file="m.json")
    assert spec.sliding_window == 4096
    assert set(spec.layer_kinds) == {"sliding"}
    out = run_cli("kv", _write(tmp_path, "m", _llava_next_mistral()), "--json").json()
    assert [g["kind"] for g in out["groups"]] == ["sliding"]
    # an explicit null stays full attention (MistralConfig keeps None: no window)
    spec = parse_config(_llava_next_mistral(sliding_window=None), name="m", file="m.json")
    assert spec.sliding_window is None and set(spec.layer_kinds) == {"full"}
