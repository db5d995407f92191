"""A multimodal config's encoder: which families kvplan prices (their weights in
``costs/memory/vision.py``), and the one-line name of one it does not price.

vLLM builds a multimodal architecture's encoder whatever the prompts hold, loads its weights
beside the language model and, in the profiling run, encodes a batch of dummy items before
sizing the KV cache: a tower kvplan leaves out makes "GPU KV cache size" come out too large.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

PRICED_TOWERS = frozenset({"Gemma3ForConditionalGeneration"})
"""Architectures whose encoder kvplan prices (``hf_config._vision``)."""

_ENCODER_KEYS = ("vision_config", "audio_config", "vision_tower", "mm_vision_tower",
                 "img_processor", "visual", "vision_backbone", "audio_processor",
                 "thinker_config", "vit_config", "visual_tokenizer_config")
"""config.json keys that describe an encoder (LLaVA / Qwen-VL / Llama-4 / Pixtral / Phi-3-V
/ Molmo / Phi-4-MM / audio models; Qwen2.5-Omni's thinker holds its audio and vision; Ovis's
ViT, whose language model ``hf_config._text_config`` reads from llm_config)."""

SIGLIP_DEFAULTS = {"hidden_size": 768, "intermediate_size": 3072, "num_hidden_layers": 12,
                   "image_size": 224, "patch_size": 16, "num_channels": 3}
"""transformers' SiglipVisionConfig defaults, for the keys a vision_config leaves out."""


def architecture(raw: Mapping[str, Any]) -> str:
    """The config's first ``architectures`` entry ('unknown' without one)."""
    archs = raw.get("architectures")
    return str(archs[0]) if isinstance(archs, list) and archs else "unknown"


def unpriced_tower(raw: Mapping[str, Any]) -> str | None:
    """'ARCH (config key KEY)' for a multimodal config whose encoder kvplan does not price,
    else None (text-only configs, and the families in ``PRICED_TOWERS``)."""
    arch = architecture(raw)
    if arch in PRICED_TOWERS:
        return None
    if arch == "unknown":  # no architectures list: name the config by its model_type
        arch = f"model_type {raw.get('model_type')!r}"
    for key in _ENCODER_KEYS:
        if raw.get(key) not in (None, False):  # an empty vision_config takes the defaults
            return f"{arch} (config key '{key}')"
    return None


_TEXT_CLASS_DEFAULTS = {
    "llama": {"hidden_size": 4096, "intermediate_size": 11008, "num_hidden_layers": 32,
              "num_attention_heads": 32, "vocab_size": 32000},
    "mistral": {"hidden_size": 4096, "intermediate_size": 14336, "num_hidden_layers": 32,
                "num_attention_heads": 32, "num_key_value_heads": 8, "vocab_size": 32000,
                "sliding_window": 4096},
}
"""LlamaConfig / MistralConfig defaults: a wrapper's text_config (llava-hf files) keeps only
what differs from them, and transformers builds the text config from the class (MistralConfig's
window: 4096; an explicit null stays null, ``layer_kinds._from_sliding_fields``)."""


def text_class_defaults(raw: Mapping[str, Any], model_type: str,
                        family: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    """``family``'s defaults for ``model_type``, over the text model class's own when ``raw``
    wraps it in text_config."""
    wrapped = isinstance(raw.get("text_config"), Mapping)
    text = _TEXT_CLASS_DEFAULTS.get(model_type, {}) if wrapped else {}
    return {**text, **family.get(model_type, {})}
