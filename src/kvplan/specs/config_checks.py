"""Range and type checks on config.json values, each a ConfigError naming the field and file.

transformers reads NaN/Infinity literals and any JSON number, so a config can hold
``"num_hidden_layers": NaN``, ``"head_dim": 1e308`` or 10^30 KV heads; every integer field is
checked here: finite, whole, positive, at most 2^31 - 1 (layers at most 1,024; see
``kvplan.limits``).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from kvplan.errors import ConfigError
from kvplan.limits import (
    MAX_CONFIG_INT,
    MAX_LAYERS,
    ROPE_FACTOR,
    ROPE_VALUE,
    bounded_repr,
    real_number,
)

FLOAT16_REFUSED = ("gemma2", "gemma3", "gemma3_text", "plamo2", "glm4")
"""Model types vLLM will not serve in float16 (``_FLOAT16_NOT_SUPPORTED_MODELS``, vLLM 0.11
``config/model.py``: "Numerical instability. Please use bfloat16 or float32 instead."); under
``--dtype auto`` a float16 config of these is served in bfloat16 (``_resolve_auto_dtype``)."""
LAYER_KEYS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers")
MAX_WEIGHT_BLOCK = 2**20


def config_int(key: str, value: Any, file: str) -> int:
    """A config integer: whole, positive and within its bound."""
    number = real_number(value)
    if number is None or number != int(number):
        raise ConfigError(f"must be a whole number, got {short_repr(value)}", field=key,
                          file=file)
    if number <= 0:
        raise ConfigError(f"must be positive, got {value!r}", field=key, file=file)
    high = MAX_LAYERS if key in LAYER_KEYS else MAX_CONFIG_INT
    if number > high:
        raise ConfigError(f"must be at most {high:,} (no real model has more), got "
                          f"{short_repr(value)}", field=key, file=file)
    return int(number)


def check_kv_heads(key: str, kv_heads: int, heads: int, file: str) -> int:
    """vLLM (and every attention kernel) needs the query heads to split evenly over KV heads."""
    if kv_heads > heads or heads % kv_heads:
        raise ConfigError(
            f"{kv_heads} KV heads must divide the {heads} attention heads evenly "
            "(1 <= KV heads <= heads)", field=key, file=file)
    return kv_heads


def check_topk(key: str, topk: int, experts: int, file: str) -> int:
    """A router picks its top-k among the routed experts (vLLM's ``torch.topk`` fails on more)."""
    if topk > experts:
        raise ConfigError(f"{topk} experts per token exceed the {experts} routed experts "
                          "(the router picks its top-k among them)", field=key, file=file)
    return topk


def weight_block(block: Any, file: str) -> tuple[int, int] | None:
    """quantization_config.weight_block_size: two whole numbers in [1, 2^20], or None."""
    if not isinstance(block, list) or len(block) != 2:
        return None
    if not all(isinstance(v, int) and not isinstance(v, bool) and 0 < v <= MAX_WEIGHT_BLOCK
               for v in block):
        raise ConfigError(f"must be two whole numbers in [1, {MAX_WEIGHT_BLOCK:,}], got "
                          f"{short_repr(block)}", field="quantization_config.weight_block_size",
                          file=file)
    return int(block[0]), int(block[1])


ROPE_KEYS = ("rope_scaling", "rope_parameters")
"""Where configs keep RoPE scaling (transformers 5 renamed rope_scaling to rope_parameters)."""
BOOL_KEYS = ("tie_word_embeddings", "use_sliding_window", "attention_bias", "multi_query",
             "new_decoder_architecture")
"""Flags kvplan reads: true/false (a string "false" would read as true)."""


def check_rope_scaling(cfg: Mapping[str, Any], file: str) -> None:
    """rope_scaling's factor in ROPE_FACTOR, its original_max_position_embeddings a config
    integer, every other number in it finite and at most ROPE_VALUE in size."""
    for key in ROPE_KEYS:
        rope = cfg.get(key)
        if not isinstance(rope, Mapping):
            continue
        _check_rope_types(key, rope, file)
        for name, value in rope.items():
            where = f"{key}.{name}"
            if value is None:
                continue
            if name == "original_max_position_embeddings":
                config_int(where, value, file)
            elif name == "factor":
                _check_real(where, value, ROPE_FACTOR, file)
            else:
                for v in value if isinstance(value, list) else [value]:
                    if isinstance(v, int | float) and not isinstance(v, bool):
                        _check_real(where, v, (-ROPE_VALUE, ROPE_VALUE), file)


_ROPE_ALIASES = {("su", "longrope"), ("mrope", "default")}
"""(legacy type, rope_type) pairs vLLM reads as one RoPE (it renames su and mrope)."""


def _check_rope_types(key: str, rope: Mapping[str, Any], file: str) -> None:
    """vLLM's patch_rope_scaling_dict refuses a legacy ``type`` that names another RoPE than
    ``rope_type`` ("Found conflicts between 'rope_type=...' and 'type=...'")."""
    modern, legacy = rope.get("rope_type"), rope.get("type")
    if modern is None or legacy is None or modern == legacy or (legacy, modern) in _ROPE_ALIASES:
        return
    raise ConfigError(f"rope_type {short_repr(modern)} conflicts with the legacy type "
                      f"{short_repr(legacy)}; vLLM refuses such a config (keep one of the two)",
                      field=f"{key}.type", file=file)


def check_flags(cfg: Mapping[str, Any], file: str) -> None:
    """The true/false fields (BOOL_KEYS) are booleans when present."""
    for key in BOOL_KEYS:
        value = cfg.get(key)
        if value is not None and not isinstance(value, bool):
            raise ConfigError(f"must be true or false, got {short_repr(value)}", field=key,
                              file=file)


def _check_real(key: str, value: Any, bounds: tuple[float, float], file: str) -> None:
    number = real_number(value)
    low, high = bounds
    if number is None or not low <= number <= high:
        raise ConfigError(f"must be a number in [{low:g}, {high:g}], got {short_repr(value)}",
                          field=key, file=file)


def real_fraction(key: str, value: Any, file: str) -> float:
    """A config share in (0, 1] (partial_rotary_factor), as a float."""
    number = real_number(value)
    if number is None or not 0 < number <= 1:
        raise ConfigError(f"must be a number in (0, 1], got {short_repr(value)}", field=key,
                          file=file)
    return float(number)


def short_repr(value: Any) -> str:
    """repr() for messages, safe for 5,000-digit integers and long strings."""
    if isinstance(value, int) and not isinstance(value, bool) and value.bit_length() > 100:
        return f"an integer of about {int(value.bit_length() * 0.30103) + 1} digits"
    text = bounded_repr(value)
    return text if len(text) <= 40 else text[:37] + "..."



_UNMODELLED_LAYOUTS = (
    ("is_encoder_decoder", "marks an encoder-decoder model (T5, BART, Whisper), whose "
     "cross-attention caches the encoder's tokens; kvplan sizes decoder-only models"),
    ("cross_attention_layers", "lists cross-attention layers (Llama-3.2-Vision / mllama, which "
     "vLLM serves only up to 0.10.1), caching image tokens, not one entry per text token; "
     "kvplan does not model them"),
    ("num_kv_shared_layers", "lists layers that reuse an earlier layer's KV cache (Gemma 3n), "
     "which kvplan does not model: it would cache every layer"),
    ("use_cla", "shares one layer's KV with the next (Hunyuan cross-layer attention, which "
     "vLLM 0.11 builds as encoder-decoder attention), which kvplan does not model"),
    ("share_q_dim", "marks Step3's multi-matrix factorization attention (one KV head in every "
     "layer whatever num_attention_heads says, a low-rank query, experts on the "
     "moe_layers_enum layers only: vLLM step3_text.py), which kvplan does not model: it would "
     "cache num_attention_heads KV heads"),
    ("block_configs", "lists one block per layer (DeciLM / Nemotron-NAS: attention left out of "
     "some layers, KV heads and MLP widths set per layer), which kvplan does not model: it "
     "would price every layer as the same full-attention block"),
)
"""Config keys of cache layouts kvplan would price as plain decoder layers, wrongly."""
_MAMBA1_TYPES = frozenset({"mamba", "falcon_mamba"})
"""Model types of Mamba (v1) layers only (vLLM MambaForCausalLM / FalconMambaForCausalLM):
a conv + SSM state per request shaped by intermediate_size, no attention heads to read."""


def check_decoder_only(cfg: Mapping[str, Any], file: str) -> None:
    """Refuse, in one line, a config whose cache is not one entry per token per layer."""
    for key, what in _UNMODELLED_LAYOUTS:
        if cfg.get(key):
            raise ConfigError(what, field=key, file=file)
    model_type = cfg.get("model_type")
    if isinstance(model_type, str) and model_type in _MAMBA1_TYPES:  # ([] is not hashable)
        raise ConfigError(
            f"is {cfg['model_type']!r}: Mamba (v1) layers only, a fixed-size state per request "
            "and no attention, which kvplan does not model (it models Mamba2: model_type "
            "mamba2, nemotron_h, granitemoehybrid)", field="model_type", file=file)
    if model_type == "longcat_flash":
        raise ConfigError(
            "is 'longcat_flash': two MLA attention blocks (two latent caches) and two dense "
            "MLPs beside the experts in every layer (vLLM longcat_flash.py), which kvplan does "
            "not model: it would cache one latent per layer, half the KV cache",
            field="model_type", file=file)
