"""Hugging Face config.json (dict or file) -> ModelSpec, absorbing family quirks; no network."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from kvplan import input_file, jsonread
from kvplan.errors import ConfigError
from kvplan.specs import quant_config
from kvplan.specs.config_checks import (
    FLOAT16_REFUSED,
    LAYER_KEYS,
    check_decoder_only,
    check_flags,
    check_kv_heads,
    check_rope_scaling,
    config_int,
)
from kvplan.specs.layer_kinds import chunked_local, layer_kinds, moe_step, read_moe
from kvplan.specs.max_len import derived_max_len, has_max_len_key, rope_cache_positions, rotary_dim
from kvplan.specs.model import (
    MLA_FAMILIES,
    STATE_ONLY_FAMILIES,
    LinearAttentionSpec,
    MambaSpec,
    MlaSpec,
    ModelSpec,
    VisionSpec,
)
from kvplan.specs.quant_config import checkpoint_block, gptq_desc_act, quant_layout, quant_method
from kvplan.specs.towers.vision_config import (
    SIGLIP_DEFAULTS,
    architecture,
    text_class_defaults,
    unpriced_tower,
)

# transformers config-class defaults for fields compact files omit (see catalog/SOURCES.md;
# GPT-2, BigCode, OPT, BLOOM, MPT, StarCoder2 keep PretrainedConfig's tie True; Cohere sets it).
_GEMMA_HEADS = {"num_attention_heads": 8, "num_key_value_heads": 4, "head_dim": 256}
"""Gemma2Config's and Gemma3TextConfig's heads, which a wrapper's text_config leaves out when
they match (google/gemma-3-4b-it, PaliGemma 2)."""
_FAMILY_DEFAULTS: dict[str, dict[str, Any]] = {
    "gemma3_text": {
        "vocab_size": 262208, "max_position_embeddings": 131072, "sliding_window_pattern": 6,
        "sliding_window": 4096, "tie_word_embeddings": True, **_GEMMA_HEADS,
        "hidden_activation": "gelu_pytorch_tanh",
    },
    "gemma2": {"tie_word_embeddings": True, "sliding_window": 4096, **_GEMMA_HEADS},
    "gemma": {"tie_word_embeddings": True},
    "deepseek_v2": {"vocab_size": 102400, "v_head_dim": 128, "max_position_embeddings": 2048},
    "deepseek_v3": {"vocab_size": 129280, "v_head_dim": 128},
    "falcon": {"vocab_size": 65024, "max_position_embeddings": 2048, "tie_word_embeddings": True},
    "gpt_oss": {"tie_word_embeddings": False, "sliding_window": 128},
    **{t: {"tie_word_embeddings": True}
       for t in ("gpt2", "gpt_bigcode", "opt", "cohere", "cohere2", "bloom", "mpt",
                 "starcoder2")},
    "llama": {"max_position_embeddings": 2048},
    "chatglm": {"multi_query_group_num": 1},  # ChatGLMConfig's (read with multi_query_attention)
}
_DEFAULT_TIE = False
_DTYPES = {"float16": "float16", "bfloat16": "bfloat16", "float32": "float32", "half": "float16",
           "fp16": "float16", "bf16": "bfloat16", "float": "float32"}
_KV_HEAD_KEYS = ("num_key_value_heads", "num_kv_heads", "n_head_kv", "multi_query_group_num",
                 "attn_config.kv_n_heads")


class _Fields:
    """Field access over a config dict with family defaults, recording which defaults were used."""

    def __init__(self, cfg: Mapping[str, Any], file: str, defaults: Mapping[str, Any]):
        self.cfg, self.file, self.defaults = cfg, file, defaults
        self.notes: list[str] = []

    def has(self, key: str) -> bool:
        return self.cfg.get(key) is not None

    def get(self, key: str, fallback: Any = None) -> Any:
        if self.cfg.get(key) is not None:
            return self.cfg[key]
        if key in self.defaults:
            self.notes.append(f"{key} absent: transformers default {self.defaults[key]!r}")
            return self.defaults[key]
        return fallback

    def integer(self, *keys: str, required: bool = True, default: int | None = None) -> int:
        for key in keys:
            value = self.get(key)
            if value is not None:
                return self._as_int(key, value)
        if default is not None or not required:
            return default if default is not None else 0
        raise ConfigError(
            "is missing; it is required to size the KV cache", field=keys[0], file=self.file
        )

    def count(self, *keys: str) -> int:
        """A count a config may set to 0 (Kimi-K2's num_nextn_predict_layers); 0 if absent."""
        for key in keys:
            value = self.get(key)
            if value is not None:
                return 0 if value == 0 else self._as_int(key, value)
        return 0

    def _as_int(self, key: str, value: Any) -> int:
        return config_int(key, value, self.file)


def load_config_file(path: str | Path) -> dict[str, Any]:
    """Read a config.json (Python-json literals like Infinity allowed, as transformers does)."""
    p = Path(path)
    try:
        text = input_file.read_text(p)
    except OSError as exc:
        raise ConfigError(f"cannot read the file ({input_file.reason(exc)})", file=str(p)) \
            from None
    try:
        data = jsonread.loads(text)
    except json.JSONDecodeError as exc:
        raise ConfigError(
            f"is not valid JSON (line {exc.lineno}, column {exc.colno}: {exc.msg}); "
            "pass a Hugging Face config.json",
            file=str(p),
        ) from None
    if not isinstance(data, dict):
        raise ConfigError("must hold a JSON object (a Hugging Face config.json)", file=str(p))
    return data


def parse_config(raw: Mapping[str, Any], *, name: str, file: str) -> ModelSpec:
    """Turn a config.json dict into a ModelSpec; ConfigError names the field and the file."""
    cfg = _text_config(raw)
    model_type = str(cfg.get("model_type") or raw.get("model_type") or "unknown")
    f = _Fields(cfg, file, text_class_defaults(raw, model_type, _FAMILY_DEFAULTS))
    check_rope_scaling(cfg, file)
    check_flags(cfg, file)
    check_decoder_only(cfg, file)
    hidden = f.integer("hidden_size", "n_embd", "d_model")
    layers = f.integer(*LAYER_KEYS)
    heads = f.integer("num_attention_heads", "n_head", "num_heads", "n_heads")
    kv_heads = _kv_heads(f, heads, model_type)
    head_dim = _head_dim(f, hidden, heads, model_type)
    mla = _mla(f, model_type)
    kinds = layer_kinds(f, layers, model_type, mla is not None)
    sliding = f.integer("sliding_window") if "sliding" in kinds else None
    dtype, config_dtype = _dtype(raw, cfg, f, model_type)
    return ModelSpec(
        name=name,
        source=file,
        model_type=model_type,
        architecture=architecture(raw),
        dtype=dtype,
        config_dtype=config_dtype,
        hidden_size=hidden,
        num_layers=layers,
        num_attention_heads=heads,
        num_kv_heads=kv_heads,
        head_dim=head_dim,
        v_head_dim=_v_head_dim(f, head_dim, mla),
        vocab_size=f.integer("vocab_size", "padded_vocab_size"),
        intermediate_size=_dense_width(f, model_type, hidden),
        **_lengths(f, model_type),
        rotary_dim=rotary_dim(f, model_type, head_dim),
        tie_word_embeddings=bool(f.get("tie_word_embeddings", _DEFAULT_TIE)),
        layer_kinds=kinds,
        sliding_window=sliding,
        mla=mla,
        moe=read_moe(f, layers, model_type),
        linear_attention=_linear_attention(f) if "linear_attention" in kinds else None,
        mamba=_mamba(f, hidden, model_type) if "mamba" in kinds else None,
        **_quant_fields(raw, cfg, file),
        hidden_act=str(f.get("hidden_act") or f.get("hidden_activation")
                       or f.get("mlp_hidden_act") or "silu"),
        mlp_gated=_mlp_gated(model_type, f), parallel_block=_parallel_block(model_type, f),
        attention_bias=_attention_bias(f, model_type),
        num_mtp_layers=f.count("num_nextn_predict_layers"),
        vision=_vision(raw, hidden, file), unpriced_tower=unpriced_tower(raw),
        **chunked_local(raw, f, layers), notes=tuple(dict.fromkeys(f.notes)),
    )


def _lengths(f: _Fields, model_type: str) -> dict[str, Any]:
    """max_model_len as vLLM derives it, whether it was assumed, and the rotary cache rows."""
    return {"max_position_embeddings": derived_max_len(f, model_type),
            "max_len_assumed": not has_max_len_key(f),
            "rope_cache_positions": rope_cache_positions(f, model_type)}


def _dense_width(f: _Fields, model_type: str, hidden: int) -> int:
    """The dense MLP's width: ChatGLM's ffn_hidden_size; Llama 4's dense layers (where
    ``interleave_moe_layer_step`` is not 1) are intermediate_size_mlp wide, its
    intermediate_size the experts' (vLLM llama4.py); Qwen (v1)'s half its
    intermediate_size (vLLM qwen.py: ``QWenMLP(hidden_size, intermediate_size // 2)``)."""
    plain = ("intermediate_size", "ffn_hidden_size", "ffn_config.ffn_hidden_size")
    llama4_dense = model_type.startswith("llama4") and moe_step(f, model_type) != 1
    keys = ("intermediate_size_mlp", *plain) if llama4_dense else plain
    width = f.integer(*keys, default=4 * hidden)
    return max(1, width // 2) if model_type == "qwen" else width


def _v_head_dim(f: _Fields, head_dim: int, mla: Any) -> int:
    """MLA's value width comes from its latent spec; otherwise head_dim: vLLM 0.11's Attention
    caches V at its one head_size (a MiniCPM3 V padded to it; DeepSeek-OCR's 0 unread)."""
    return int(mla.v_head_dim) if mla is not None else head_dim


def _attention_bias(f: _Fields, model_type: str) -> bool:
    """Qwen2 has q/k/v biases, GPT-2 / BigCode / OPT / Phi every linear's, unsaid."""
    if model_type in ("starcoder2", "gpt_neox"):  # use_bias / attention_bias default True
        return f.get("use_bias" if model_type == "starcoder2" else "attention_bias") is not False
    return bool(f.get("attention_bias") or f.get("bias") or f.get("use_qkv_bias") or model_type in (
        "qwen", "qwen2", "qwen2_moe", "gpt2", "gpt_bigcode", "opt", "phi", "bloom"))


def _vision(raw: Mapping[str, Any], text_hidden: int, file: str) -> VisionSpec | None:
    """Gemma 3's SigLIP tower (vLLM ``Gemma3ForConditionalGeneration`` builds it whatever the
    prompts hold); None for text-only configs (other towers are not priced)."""
    vc = raw.get("vision_config")
    if architecture(raw) != "Gemma3ForConditionalGeneration" or not isinstance(vc, Mapping):
        return None
    f = _Fields(vc, file, SIGLIP_DEFAULTS)
    return VisionSpec(
        hidden_size=f.integer("hidden_size"), intermediate_size=f.integer("intermediate_size"),
        num_layers=f.integer("num_hidden_layers"), image_size=f.integer("image_size"),
        patch_size=f.integer("patch_size"), num_channels=f.integer("num_channels"),
        use_head=bool(vc.get("vision_use_head", True)), projector_out=text_hidden,
        image_tokens=config_int("mm_tokens_per_image", raw.get("mm_tokens_per_image", 256),
                                file))


def _text_config(raw: Mapping[str, Any]) -> Mapping[str, Any]:
    """The language model's config: text_config (Gemma 3, Llava; Qwen2.5-Omni's thinker's: vLLM
    get_hf_text_config), llm_config (InternVL: vLLM _CONFIG_ATTRS_MAPPING), language_config
    (DeepSeek-VL2); DBRX / MPT's attn_config, ffn_config read as "attn_config.X"."""
    thinker = raw.get("thinker_config")
    if isinstance(thinker, Mapping) and isinstance(thinker.get("text_config"), Mapping):
        raw = thinker
    text = next((raw[k] for k in ("text_config", "llm_config", "language_config")
                 if isinstance(raw.get(k), Mapping)), None)
    if text is not None:
        return {**{k: v for k, v in raw.items() if k in ("torch_dtype", "dtype")}, **text}
    if raw.get("model_type") in ("dbrx", "mpt"):
        parts = [(p, raw.get(p)) for p in ("attn_config", "ffn_config")]
        return {**raw, **{f"{p}.{k}": v for p, d in parts if isinstance(d, Mapping)
                          for k, v in d.items()}}
    return raw


def _kv_heads(f: _Fields, heads: int, model_type: str) -> int:
    """GQA/MQA/MHA KV heads; Falcon's old multi_query layout has one KV head; ChatGLM reads
    multi_query_group_num only with multi_query_attention (vLLM chatglm.py; default false)."""
    if f.get("multi_query") and not f.get("new_decoder_architecture"):
        return 1
    if model_type == "chatglm" and not f.get("multi_query_attention"):
        return heads
    for key in _KV_HEAD_KEYS:
        if f.get(key) is not None:
            return check_kv_heads(key, f.integer(key), heads, f.file)
    return heads


def _head_dim(f: _Fields, hidden: int, heads: int, model_type: str) -> int:
    if model_type == "minicpm3":  # per-head K of qk_nope + qk_rope (V padded to it): _mla
        return f.integer("qk_nope_head_dim") + f.integer("qk_rope_head_dim")
    for key in ("head_dim", "attention_head_dim", "kv_channels"):
        if f.has(key):
            return f.integer(key)
    if f.get("head_dim") is not None:  # a class default (Gemma 2 / 3: 256), not hidden / heads
        return f.integer("head_dim")
    if hidden % heads:
        raise ConfigError(
            f"hidden_size {hidden} is not divisible by num_attention_heads {heads} "
            "and there is no head_dim; add head_dim",
            field="head_dim",
            file=f.file,
        )
    return hidden // heads


def _mla(f: _Fields, model_type: str) -> MlaSpec | None:
    """vLLM 0.11 caches one latent per token only for the model types ``is_deepseek_mla``
    lists; MiniCPM3 has a kv_lora_rank too, but minicpm3.py caches every head's K (qk_nope +
    qk_rope) and V padded to it (plain ``Attention``); another family is refused."""
    if not f.has("kv_lora_rank") or model_type == "minicpm3":
        return None
    if model_type not in MLA_FAMILIES:
        raise ConfigError(f"is set but vLLM 0.11 runs MLA only for {sorted(MLA_FAMILIES)}, not "
                          f"{model_type!r}", field="kv_lora_rank", file=f.file)
    return MlaSpec(
        kv_lora_rank=f.integer("kv_lora_rank"),
        qk_rope_head_dim=f.integer("qk_rope_head_dim"),
        qk_nope_head_dim=f.integer("qk_nope_head_dim"),
        v_head_dim=f.integer("v_head_dim"),
        q_lora_rank=f.integer("q_lora_rank") if f.has("q_lora_rank") else None,
        index_head_dim=f.integer("index_head_dim") if f.has("index_topk") else 0,
    )


def _dtype(raw: Mapping[str, Any], cfg: Mapping[str, Any], f: _Fields,
           model_type: str) -> tuple[str, str | None]:
    """Serving dtype as vLLM's dtype=auto picks it: the config's, float32 downcast to bfloat16,
    float16 of a model type vLLM refuses in float16 served in bfloat16 (_resolve_auto_dtype)."""
    declared = _declared_dtype(raw, cfg)
    if declared is None:
        f.notes.append("torch_dtype absent: bfloat16 assumed")
        return "bfloat16", None
    name = _DTYPES.get(str(declared).replace("torch.", ""))
    if name is None:
        raise ConfigError(f"unknown dtype {declared!r}", field="torch_dtype", file=f.file)
    if name == "float16" and model_type in FLOAT16_REFUSED:
        f.notes.append(f"torch_dtype float16: served as bfloat16 (vLLM dtype=auto skips float16 "
                       f"for {model_type})")
        return "bfloat16", "float16"
    if name == "float32":
        f.notes.append("torch_dtype float32: served as bfloat16 (vLLM dtype=auto downcast)")
        return "bfloat16", "float32"
    return name, name


def _declared_dtype(raw: Mapping[str, Any], cfg: Mapping[str, Any]) -> Any:
    """The config's dtype as vLLM's ``_find_dtype`` reads it: the root config's, else the text
    config's, else the vision config's; in each, ``dtype`` before the older ``torch_dtype``
    (transformers keeps ``dtype`` when a file holds both)."""
    vision = raw.get("vision_config")
    for part in (raw, cfg, vision if isinstance(vision, Mapping) else {}):
        for key in ("dtype", "torch_dtype"):
            if part.get(key) is not None:
                return part[key]
    return None


def _linear_attention(f: _Fields) -> LinearAttentionSpec:
    return LinearAttentionSpec(
        num_key_heads=f.integer("linear_num_key_heads"),
        num_value_heads=f.integer("linear_num_value_heads"),
        key_head_dim=f.integer("linear_key_head_dim"),
        value_head_dim=f.integer("linear_value_head_dim"),
        conv_kernel=f.integer("linear_conv_kernel_dim"),
    )


def _mamba(f: _Fields, hidden: int, model_type: str) -> MambaSpec:
    """Mamba2 mixer sizes under Nemotron-H's names, Granite-4.0-H's (``mamba_n_heads``,
    ``mamba_d_head``, ... as vLLM's granitemoehybrid.py reads them) or, in a model of Mamba2
    layers only, Mamba2Config's ``num_heads`` and ``head_dim`` (vLLM mamba2.py)."""
    plain = model_type in STATE_ONLY_FAMILIES  # no attention: head names are the mixer's
    heads = f.integer(*(("num_heads",) if plain else ("mamba_num_heads", "mamba_n_heads")))
    head_dim = f.integer(*(("head_dim",) if plain else ("mamba_head_dim", "mamba_d_head")),
                         required=False)
    return MambaSpec(
        num_heads=heads,
        head_dim=head_dim or f.integer("expand", "mamba_expand") * hidden // heads,
        state_size=f.integer("ssm_state_size", "state_size", "mamba_d_state"),
        n_groups=f.integer("n_groups", "mamba_n_groups"),
        conv_kernel=f.integer("conv_kernel", "d_conv", "mamba_d_conv"),
    )


def _quant_fields(raw: Mapping[str, Any], cfg: Mapping[str, Any], file: str) -> dict[str, Any]:
    """ModelSpec's quantization, weight_block_size and quant_layout from quantization_config."""
    q = _quant_config(raw, cfg)
    return {"quantization": _quantization(raw, cfg), "weight_block_size": checkpoint_block(q, file),
            "quant_layout": quant_layout(q, file), "quant_desc_act": gptq_desc_act(q),
            "quant_ignore": quant_config.quant_ignore(q, file),
            "quant_lm_head": quant_config.quant_lm_head(q)}


def _quantization(raw: Mapping[str, Any], cfg: Mapping[str, Any]) -> str | None:
    return quant_method(_quant_config(raw, cfg))


def _quant_config(raw: Mapping[str, Any], cfg: Mapping[str, Any]) -> Any:
    """vLLM's ``_parse_quant_hf_config``: the root config's quantization_config, else its
    compression_config (the key older compressed-tensors exports use); then the same two in
    the text config of a multimodal wrapper."""
    for part in (raw, cfg):
        for key in ("quantization_config", "compression_config"):
            if part.get(key):
                return part[key]
    return None


def _parallel_block(model_type: str, f: _Fields) -> bool:
    """Falcon with ``parallel_attn`` (FalconConfig's default: true) or the new decoder
    architecture (Falcon-40B/180B): vLLM sums attention and MLP before one all-reduce."""
    return model_type == "falcon" and bool(f.get("new_decoder_architecture")
                                           or f.get("parallel_attn", True))


def _mlp_gated(model_type: str, f: _Fields) -> bool:
    """Gated (SwiGLU/GeGLU: 3 matrices) vs plain (2 matrices) MLP (relu2: Nemotron's)."""
    act = str(f.get("mlp_hidden_act") or f.get("hidden_act") or "")
    plain = ("falcon", "gpt2", "gpt_bigcode", "opt", "phi", "starcoder2", "gpt_neox", "gptj",
             "bloom", "mpt")
    return not (model_type in plain or act == "relu2")
