"""Which cache each layer holds (full, sliding, MLA, linear attention, Mamba, none) and which
layers route to experts, read from a config.json the way each family's transformers config
class and vLLM model file read it."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from kvplan.errors import ConfigError
from kvplan.specs.config_checks import check_topk, config_int
from kvplan.specs.model import STATE_ONLY_FAMILIES, LayerKind, MoeSpec


class Fields(Protocol):
    """What is read off a config (``hf_config._Fields``)."""

    cfg: Mapping[str, Any]
    file: str
    notes: list[str]

    def has(self, key: str) -> bool: ...

    def get(self, key: str, fallback: Any = None) -> Any: ...

    def integer(self, *keys: str, required: bool = True, default: int | None = None) -> int: ...

    def count(self, *keys: str) -> int: ...


_UNREAD_STATE_KEYS = ("attn_layer_period", "attn_layer_offset", "attn_layer_indices",
                      "mamba_d_state", "mamba_n_heads", "mamba_d_ssm")
"""Keys of hybrid layouts kvplan does not read (Jamba, Falcon-H1, Zamba2; Bamba's
attn_layer_indices is read by ``_from_attn_indices``): parsed as
plain attention they would cache every layer as full attention (MiniMax's ``attn_type_list``
is checked by ``_check_attn_types``).
Granite-4.0-H shares Bamba's ``mamba_*`` names but lists ``layer_types`` ("mamba" /
"attention"), which kvplan reads (``hf_config._mamba`` takes its names); granite-4.0-micro
keeps the ``mamba_*`` keys with every layer "attention" (vLLM ``is_hybrid``: not hybrid)."""


def layer_kinds(f: Fields, layers: int, model_type: str, is_mla: bool) -> tuple[LayerKind, ...]:
    """Per-layer attention kind; a hybrid layout kvplan cannot read is refused."""
    _check_attn_types(f)
    kinds = _read_layer_kinds(f, layers, model_type, is_mla)
    if "linear_attention" in kinds and not f.has("linear_num_key_heads"):
        raise ConfigError(
            "marks linear_attention layers but the config has no Gated DeltaNet sizes "
            "(linear_num_key_heads, ...): kvplan models Qwen3-Next's Gated DeltaNet state only "
            "(not MiniMax's lightning attention)", field="layer_types", file=f.file)
    if f.has("attention_chunk_size"):  # Llama 4: see _from_layer_types
        f.notes.append("chunked local attention layers cached as full attention (vLLM 0.11 "
                       "turns the hybrid KV cache manager off for them by default)")
    unread = [k for k in _UNREAD_STATE_KEYS if f.has(k) and not f.has("layer_types")]
    if unread and not any(k in ("mamba", "linear_attention") for k in kinds):
        raise ConfigError(
            f"has Mamba / linear-attention layers laid out by {', '.join(unread)} "
            f"(model_type {model_type!r}), which kvplan does not read: it would price every "
            "layer as full attention; kvplan models hybrids that list layer_types, "
            "hybrid_override_pattern or full_attention_interval",
            field=unread[0], file=f.file)
    return kinds


def _check_attn_types(f: Fields) -> None:
    """MiniMax's ``attn_type_list``: 1 = softmax attention, 0 = lightning (linear) attention.
    MiniMax-M2 lists 1 for every layer and vLLM's minimax_m2.py builds every layer as plain
    attention (the list is not read); MiniMax-Text-01 / M1 layers marked 0 hold a lightning
    state (vLLM ``MiniMaxText01LinearAttention``), which kvplan does not model: refused."""
    types = f.get("attn_type_list")
    if types is None:
        return
    if not isinstance(types, list) or any(t not in (0, 1) or isinstance(t, bool) for t in types):
        raise ConfigError("must list 0 (lightning attention) or 1 (softmax attention) per layer",
                          field="attn_type_list", file=f.file)
    if 0 in types:
        raise ConfigError(
            f"marks {types.count(0)} layers 0 (MiniMax lightning attention, a fixed-size state "
            "per request), which kvplan does not model: it would price them as full attention; "
            "kvplan models hybrids that list layer_types, hybrid_override_pattern or "
            "full_attention_interval", field="attn_type_list", file=f.file)


def _read_layer_kinds(f: Fields, layers: int, model_type: str,
                      is_mla: bool) -> tuple[LayerKind, ...]:
    """Per-layer attention kind, from the family's own way of saying it."""
    if is_mla:
        return _uniform("mla", layers)
    if model_type in STATE_ONLY_FAMILIES:
        return _uniform("mamba", layers)
    if f.has("layer_types"):
        return _from_layer_types(f, layers)
    if f.has("hybrid_override_pattern"):
        return _from_hybrid_pattern(f, layers)
    if model_type == "bamba" and f.has("attn_layer_indices"):
        return _from_attn_indices(f, layers)
    if f.has("full_attention_interval"):
        every = f.integer("full_attention_interval")
        kinds: list[LayerKind] = [
            "full" if (i + 1) % every == 0 else "linear_attention" for i in range(layers)
        ]
        return tuple(kinds)
    return _from_sliding_fields(f, layers, model_type)


def _from_layer_types(f: Fields, layers: int) -> tuple[LayerKind, ...]:
    """transformers' names per layer. Llama 4's "chunked_attention" layers are cached as full
    attention: vLLM 0.11 turns the hybrid KV cache manager off for chunked local attention
    unless VLLM_ALLOW_CHUNKED_LOCAL_ATTN_WITH_HYBRID_KV_CACHE=1 ("There is a latency
    regression ..."), and ``unify_hybrid_kv_cache_specs`` then makes every
    ChunkedLocalAttentionSpec a FullAttentionSpec, as for a config without layer_types."""
    mapping: dict[str, LayerKind] = {
        "full_attention": "full",
        "chunked_attention": "full",
        "sliding_attention": "sliding",
        "linear_attention": "linear_attention",
        "attention": "full",
        "mamba": "mamba",
    }
    types = f.get("layer_types")
    if isinstance(types, list) and all(isinstance(t, str) for t in types):
        unknown = sorted({t for t in types if t not in mapping})
        if unknown:  # LFM2's "conv", ...: a real layout kvplan does not model
            raise ConfigError(
                f"lists {', '.join(map(repr, unknown))} layers, which kvplan does not model "
                f"(it reads {', '.join(sorted(mapping))})", field="layer_types", file=f.file)
    if not isinstance(types, list) or len(types) != layers or any(
        not isinstance(t, str) or t not in mapping for t in types
    ):
        raise ConfigError(
            f"must list one of {sorted(mapping)} per layer ({layers} layers)",
            field="layer_types",
            file=f.file,
        )
    if "sliding_window" in f.cfg and f.cfg["sliding_window"] is None:  # null, not absent (a
        mapping["sliding_attention"] = "full"  # class default): vLLM's window None is full
    return tuple(mapping[t] for t in types)


def _from_attn_indices(f: Fields, layers: int) -> tuple[LayerKind, ...]:
    """Bamba: attention at ``attn_layer_indices``, a Mamba2 mixer elsewhere (BambaConfig's
    ``layers_block_type``, which vLLM bamba.py builds its layers from)."""
    at = f.get("attn_layer_indices")
    if not isinstance(at, list) or any(
            isinstance(i, bool) or not isinstance(i, int) or not 0 <= i < layers for i in at):
        raise ConfigError(f"must list layer indices in 0..{layers - 1}",
                          field="attn_layer_indices", file=f.file)
    return tuple("full" if i in at else "mamba" for i in range(layers))


def _from_hybrid_pattern(f: Fields, layers: int) -> tuple[LayerKind, ...]:
    mapping: dict[str, LayerKind] = {"M": "mamba", "*": "full", "-": "mlp", "E": "mlp"}
    pattern = str(f.get("hybrid_override_pattern"))
    if len(pattern) != layers or any(c not in mapping for c in pattern):
        raise ConfigError(
            f"must have one of M, *, -, E per layer ({layers} layers), "
            f"got {len(pattern)} characters",
            field="hybrid_override_pattern",
            file=f.file,
        )
    return tuple(mapping[c] for c in pattern)


_INTERLEAVED: dict[str, tuple[int, bool]] = {
    "gemma2": (2, False), "gpt_oss": (2, False), "olmo3": (4, False),
    "gemma3": (6, True), "gemma3_text": (6, True), "cohere2": (4, True), "exaone4": (4, True),
}
"""Families whose transformers config class builds ``layer_types`` when config.json lists none:
every Nth layer global, the others sliding (``(i + 1) % N``), N read from
``sliding_window_pattern`` where the class reads it (True) else fixed. vLLM's model files
(gemma2/gemma3/gpt_oss/commandr/exaone4/olmo2.py) give each layer the window its type says."""


def _from_sliding_fields(f: Fields, layers: int, model_type: str) -> tuple[LayerKind, ...]:
    if model_type in _INTERLEAVED:
        every, reads_pattern = _INTERLEAVED[model_type]
        if reads_pattern:
            every = f.integer("sliding_window_pattern", default=every)
        if f.get("sliding_window") is None:  # vLLM: per-layer window None = full attention
            return _uniform("full", layers)
        return tuple("full" if (i + 1) % every == 0 else "sliding" for i in range(layers))
    window = f.cfg["sliding_window"] if "sliding_window" in f.cfg else f.get("sliding_window")
    if window and _uses_window(f, layers, model_type):  # absent: the class default (Mistral)
        f.integer("sliding_window")  # checked: a whole positive number
        return _uniform("sliding", layers)
    return _uniform("full", layers)


def _uses_window(f: Fields, layers: int, model_type: str) -> bool:
    """Whether a model-wide sliding_window is in force. vLLM gives every layer of a model that
    is not interleaved the config's window, one longer than the context included (still a
    SlidingWindowSpec: one page more per request than full attention). The Qwen config classes
    drop it unless use_sliding_window (default false) is true, and vLLM's qwen2.py refuses the
    mixed layout max_window_layers makes when 0 < it < layers."""
    if not model_type.startswith(("qwen2", "qwen3")):
        return True
    if not f.cfg.get("use_sliding_window", False):
        return False
    full = 0 if f.cfg.get("max_window_layers") == 0 else f.integer(
        "max_window_layers", default=28)  # Qwen2Config's default
    if 0 < full < layers:
        raise ConfigError(
            f"use_sliding_window with max_window_layers {full} < {layers} layers makes only "
            "some layers sliding, which vLLM refuses ('Sliding window for some but all layers "
            "is not supported'); set max_window_layers to 0 or to num_hidden_layers",
            field="max_window_layers", file=f.file)
    return True


def _uniform(kind: LayerKind, layers: int) -> tuple[LayerKind, ...]:
    return tuple(kind for _ in range(layers))



def chunked_local(raw: Mapping[str, Any], f: Fields, layers: int) -> dict[str, Any]:
    """Llama 4's chunked local layers as vLLM 0.11's NixlConnector finds them
    (``register_kv_caches``): only for a top-level model_type "llama4", the text config's
    ``no_rope_layers`` (1 = RoPE = chunked local, 0 = NoPE = global), which transformers'
    Llama4TextConfig fills, when empty, with every ``no_rope_layer_interval``-th (4th) layer
    global. ModelSpec's ``attention_chunk_size`` and ``chunked_local_layers``."""
    if raw.get("model_type") != "llama4" or not f.get("attention_chunk_size"):
        return {}
    given = f.get("no_rope_layers")
    every = f.integer("no_rope_layer_interval", required=False, default=4)
    flags = given if isinstance(given, list) and given else [
        int((i + 1) % every != 0) for i in range(layers)]
    return {"attention_chunk_size": f.integer("attention_chunk_size"),
            "chunked_local_layers": tuple(i for i, x in enumerate(flags[:layers]) if x)}


_EXPERT_KEYS = ("num_local_experts", "num_experts", "n_routed_experts", "moe_num_experts",
                "ffn_config.moe_num_experts")
_TOPK_KEYS = ("num_experts_per_tok", "experts_per_token", "moe_topk", "moe_k",
              "ffn_config.moe_top_k")
_WIDTH_KEYS = ("moe_intermediate_size", "ffn_config.ffn_hidden_size", "intermediate_size")
"""Routed experts, top-k and expert width under each family's name (ERNIE-4.5:
``moe_num_experts`` / ``moe_k``; Hunyuan: ``num_experts`` / ``moe_topk``; DBRX's ffn_config,
flattened by ``hf_config._text_config``; Mixtral's experts are intermediate_size wide)."""


def read_moe(f: Fields, layers: int, model_type: str) -> MoeSpec | None:
    """The routed-expert MLP, or None for a dense model. Granite-4.0(-H) dense models say 0
    experts; vLLM hunyuan_v1.py ``_is_moe`` builds experts only for more than 1, ernie45_moe.py
    only with ``use_moe`` (default: experts > 0)."""
    if any(f.get(k) == 0 for k in _EXPERT_KEYS) or f.get("use_moe") is False:
        return None
    experts = f.integer(*_EXPERT_KEYS, required=False)
    every = moe_step(f, model_type)
    if experts == 0 or every == 0 or (experts == 1 and model_type.startswith("hunyuan")):
        return None  # (Llama 4's step 0: every layer dense, vLLM llama4.py)
    key = next((k for k in _TOPK_KEYS if f.has(k)), _TOPK_KEYS[0])
    topk = _per_layer(f, key, layers, model_type) if f.has(key) else f.integer(key)
    width_key = next((k for k in _WIDTH_KEYS if f.has(k)), _WIDTH_KEYS[-1])
    return MoeSpec(
        num_experts=experts,
        experts_per_token=check_topk(key, topk, experts, f.file),
        moe_intermediate_size=_per_layer(f, width_key, layers, model_type),
        shared_expert_intermediate_size=_shared_width(f, layers, model_type),
        first_dense_layers=_first_moe_layer(f, layers, model_type),
        interleave=every,
    )


_STEP_KEYS = (("llama4", "interleave_moe_layer_step"), ("arctic", "moe_layer_frequency"),
              ("ernie4_5", "moe_layer_interval"), ("qwen", "decoder_sparse_step"))


def moe_step(f: Fields, model_type: str) -> int:
    """Experts on layers with (i + 1) % step == 0, as vLLM builds them: Llama 4's
    ``interleave_moe_layer_step`` (0: no MoE layer, llama4.py), Arctic's
    ``moe_layer_frequency`` (arctic.py), ERNIE-4.5's ``moe_layer_interval`` (ernie45_moe.py),
    Qwen MoE's ``decoder_sparse_step`` (qwen2_moe.py, qwen3_moe.py); 1 when absent."""
    key = next((k for prefix, k in _STEP_KEYS if model_type.startswith(prefix)), None)
    if key is None or not f.has(key):
        return 1
    return f.count(key) if key == "interleave_moe_layer_step" else f.integer(key)


def _shared_width(f: Fields, layers: int, model_type: str) -> int:
    """The shared experts' MLP width: given (Qwen2-MoE, Granite), a count x
    moe_intermediate_size (DeepSeek's n_shared_experts, ERNIE-4.5's moe_num_shared_experts:
    vLLM ernie45_moe.py, Ling's num_shared_experts: bailing_moe.py), Llama 4's shared expert
    (as wide as its experts), Arctic's residual MLP (``use_residual``: hidden_size wide), or
    Hunyuan's intermediate_size x num_shared_expert when ``use_mixed_mlp_moe``
    (vLLM hunyuan_v1.py)."""
    shared = f.count("shared_expert_intermediate_size", "shared_intermediate_size")
    if shared:
        return shared
    if model_type.startswith("llama4"):  # vLLM llama4.py: shared_expert, intermediate_size
        return f.integer("intermediate_size")
    if model_type == "arctic" and f.get("use_residual"):  # vLLM arctic.py residual_mlp:
        return f.integer("hidden_size")  # ArcticMLP(is_residual_mlp) ffn_dim = hidden_size
    if model_type.startswith("hunyuan"):
        if not f.get("use_mixed_mlp_moe") or not f.has("num_shared_expert"):
            return 0
        shared_count = _per_layer(f, "num_shared_expert", layers, model_type)
        return f.integer("intermediate_size") * shared_count
    count = f.count("n_shared_experts", "moe_num_shared_experts", "num_shared_experts")
    return count * f.integer("moe_intermediate_size") if count else 0


def _first_moe_layer(f: Fields, layers: int, model_type: str) -> int:
    """Leading dense layers: DeepSeek's first_k_dense_replace; ERNIE-4.5's
    moe_layer_start_index, whose experts vLLM builds on layers start..moe_layer_end_index
    (where (i + 1) % moe_layer_interval == 0: ``moe_step``): a range that ends before the
    last layer cannot be priced as one MoE shape and is refused."""
    only = f.get("mlp_only_layers")  # Qwen MoE: dense layers listed (vLLM qwen3_moe.py)
    if only is not None and only != []:
        raise ConfigError("lists dense layers among the MoE layers, which kvplan does not model "
                          "(it prices every layer as MoE)", field="mlp_only_layers", file=f.file)
    if not model_type.startswith("ernie4_5"):
        return f.count("first_k_dense_replace")
    end = f.count("moe_layer_end_index") if f.has("moe_layer_end_index") else layers - 1
    if end < layers - 1:
        raise ConfigError(f"{end} ends the MoE layers before the last layer ({layers - 1}), "
                          "which kvplan does not model", field="moe_layer_end_index",
                          file=f.file)
    return f.count("moe_layer_start_index")


def _per_layer(f: Fields, key: str, layers: int, model_type: str) -> int:
    """A count a config may give once or per layer (Hunyuan's moe_topk, moe_intermediate_size,
    num_shared_expert: vLLM hunyuan_v1.py takes element ``layer_id``; other model files read
    an int); kvplan prices one MoE shape, so a list must hold one value for every layer."""
    value = f.get(key)
    if not isinstance(value, list) or not model_type.startswith("hunyuan"):
        return f.integer(key)
    if len(value) < layers:
        raise ConfigError(f"lists {len(value)} values, fewer than the {layers} layers",
                          field=key, file=f.file)
    numbers = {config_int(key, v, f.file) for v in value[:layers]}
    if len(numbers) > 1:
        raise ConfigError(f"lists different values per layer ({sorted(numbers)}), which kvplan "
                          "does not model: it prices one MoE shape for every layer",
                          field=key, file=f.file)
    return numbers.pop()
