"""ModelSpec: the architecture facts kvplan needs, parsed once from a config.json."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

LayerKind = Literal["full", "sliding", "mla", "linear_attention", "mamba", "mlp"]
"""Per-layer kind: full/sliding/MLA attention hold per-token KV; linear_attention and mamba
hold a fixed-size state per request; mlp layers (Nemotron-H '-') hold no cache at all."""

KV_KINDS: frozenset[str] = frozenset({"full", "sliding", "mla"})
STATE_KINDS: frozenset[str] = frozenset({"linear_attention", "mamba"})
STATE_ONLY_FAMILIES: frozenset[str] = frozenset({"mamba2"})
"""Model types whose every layer is a Mamba2 mixer (transformers ``Mamba2Config``, vLLM
``Mamba2ForCausalLM``: Mamba-Codestral): no attention, one state per request."""


MLA_FAMILIES: frozenset[str] = frozenset({
    "deepseek_v2", "deepseek_v3", "deepseek_v32", "deepseek_mtp", "kimi_k2", "longcat_flash",
    "pangu_ultra_moe", "pangu_ultra_moe_mtp"})
"""Model types vLLM 0.11 runs as MLA when kv_lora_rank is set (``is_deepseek_mla``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MlaSpec:
    """Multi-head latent attention (DeepSeek V2/V3, Kimi): one compressed latent per token."""

    kv_lora_rank: int
    qk_rope_head_dim: int
    qk_nope_head_dim: int
    v_head_dim: int
    q_lora_rank: int | None
    index_head_dim: int = 0
    """DeepSeek-V3.2's sparse-attention indexer key width (``index_head_dim``, read when the
    config has ``index_topk``, as vLLM's ``is_v32``); 0 for every other MLA model."""

    @property
    def latent_dim(self) -> int:
        """Elements cached per token per layer: kv_lora_rank + qk_rope_head_dim (576 for V3)."""
        return self.kv_lora_rank + self.qk_rope_head_dim


@dataclass(frozen=True, slots=True, kw_only=True)
class MoeSpec:
    """Mixture-of-experts MLP: routed experts, active experts per token, shared experts."""

    num_experts: int
    experts_per_token: int
    moe_intermediate_size: int
    shared_expert_intermediate_size: int = 0
    first_dense_layers: int = 0
    """Leading layers that keep a dense MLP (DeepSeek ``first_k_dense_replace``)."""
    interleave: int = 1
    """Experts on every ``interleave``-th layer only, the others dense (Llama 4 Maverick's
    ``interleave_moe_layer_step`` 2: vLLM llama4.py ``(i + 1) % step == 0``)."""

    def routes(self, layer: int) -> bool:
        """Whether decoder layer ``layer`` (0-based) holds the routed experts."""
        return layer >= self.first_dense_layers and (layer + 1) % self.interleave == 0


def _shard(n: int, tp: int) -> int:
    """vLLM's ``divide(n, tp)``: an exact split (it asserts divisibility); kvplan floors
    instead so the arithmetic stays explorable at degrees vLLM would reject."""
    return n // tp


@dataclass(frozen=True, slots=True, kw_only=True)
class LinearAttentionSpec:
    """Gated DeltaNet linear attention (Qwen3-Next): conv state + recurrent state per request.

    Shapes on one GPU (vLLM ``MambaStateShapeCalculator.gated_delta_net_state_shape``)::

        conv      (conv_kernel - 1, (2 x key_heads x key_dim + value_heads x value_dim) / tp)
        recurrent (value_heads / tp, key_dim, value_dim)
    """

    num_key_heads: int
    num_value_heads: int
    key_head_dim: int
    value_head_dim: int
    conv_kernel: int

    def conv_elements(self, tp: int = 1) -> int:
        """Conv state values per request per layer on one GPU (q, k and v channels)."""
        conv_dim = 2 * self.num_key_heads * self.key_head_dim
        conv_dim += self.num_value_heads * self.value_head_dim
        return _shard(conv_dim, tp) * (self.conv_kernel - 1)

    def temporal_elements(self, tp: int = 1) -> int:
        """Recurrent (delta-rule) state values per request per layer on one GPU."""
        return _shard(self.num_value_heads, tp) * self.key_head_dim * self.value_head_dim

    def state_elements(self, tp: int = 1) -> int:
        """Elements of state per request per layer on one GPU (heads are split by TP)."""
        return self.conv_elements(tp) + self.temporal_elements(tp)


@dataclass(frozen=True, slots=True, kw_only=True)
class MambaSpec:
    """Mamba2 layer (Nemotron-H): conv state + SSM state per request.

    Shapes on one GPU (vLLM ``MambaStateShapeCalculator.mamba2_state_shape``)::

        conv (conv_kernel - 1, (heads x head_dim + 2 x groups' x state_size) / tp)
        ssm  (heads / tp, head_dim, state_size)

    groups' = n_groups, or tp when tp does not divide n_groups (``extra_groups_for_head_shards``
    replicates groups so every head shard carries the groups it reads).
    """

    num_heads: int
    head_dim: int
    state_size: int
    n_groups: int
    conv_kernel: int

    def sharded_groups(self, tp: int = 1) -> int:
        """n_groups plus vLLM's extra groups for head shards (n_groups when tp divides it)."""
        return self.n_groups if self.n_groups % tp == 0 else tp

    def conv_elements(self, tp: int = 1) -> int:
        """Conv state values per request per layer on one GPU (x, B and C channels)."""
        conv_dim = self.num_heads * self.head_dim
        conv_dim += 2 * self.sharded_groups(tp) * self.state_size
        return _shard(conv_dim, tp) * (self.conv_kernel - 1)

    def temporal_elements(self, tp: int = 1) -> int:
        """SSM state values per request per layer on one GPU."""
        return _shard(self.num_heads, tp) * self.head_dim * self.state_size

    def state_elements(self, tp: int = 1) -> int:
        """Elements of state per request per layer on one GPU (heads and groups split by TP)."""
        return self.conv_elements(tp) + self.temporal_elements(tp)


@dataclass(frozen=True, slots=True, kw_only=True)
class VisionSpec:
    """A SigLIP vision tower and its projector (Gemma 3's ``vision_config``), which vLLM loads
    beside the language model (weights only: it holds no KV cache)."""

    hidden_size: int
    intermediate_size: int
    num_layers: int
    image_size: int
    patch_size: int
    num_channels: int
    use_head: bool
    """SigLIP's attention-pooling head (vision_use_head; Gemma 3: false)."""
    projector_out: int
    """The multimodal projector's output width (the text model's hidden size)."""
    image_tokens: int = 256
    """Embeddings one image gives the language model (Gemma 3's mm_tokens_per_image)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelSpec:
    """A decoder-only model as kvplan sees it. Built by ``hf_config.parse_config``."""

    name: str
    source: str
    model_type: str
    architecture: str
    dtype: str
    """Serving dtype ('bfloat16', 'float16', 'float32'); float32 configs serve as bfloat16
    (vLLM's dtype=auto downcast)."""
    config_dtype: str | None
    hidden_size: int
    num_layers: int
    num_attention_heads: int
    num_kv_heads: int
    head_dim: int
    v_head_dim: int
    vocab_size: int
    intermediate_size: int
    max_position_embeddings: int
    """The longest max_model_len vLLM derives: the config's max_position_embeddings, scaled
    by rope_scaling's factor where vLLM scales it (linear, dynamic, yarn)."""
    max_len_assumed: bool = False
    """The config has no length key: vLLM assumes 2,048 tokens but serves any
    --max-model-len as given (``_get_and_verify_max_len``: "If max_model_len is specified, we
    use it")."""
    tie_word_embeddings: bool
    layer_kinds: tuple[LayerKind, ...]
    sliding_window: int | None = None
    mla: MlaSpec | None = None
    moe: MoeSpec | None = None
    linear_attention: LinearAttentionSpec | None = None
    mamba: MambaSpec | None = None
    quantization: str | None = None
    weight_block_size: tuple[int, int] | None = None
    """quantization_config.weight_block_size (fp8 block scales, e.g. DeepSeek-V3's 128x128)."""
    quant_layout: tuple[str, int, int, int] | None = None
    """GPTQ / AWQ / compressed-tensors checkpoints: (the method kvplan prices it as, bits,
    group_size, zero-point bits) from quantization_config (``specs.quant_config``)."""
    quant_ignore: tuple[str, ...] = ()
    """quantization_config's ignore / modules_to_not_convert / exclude_modules entries."""
    quant_lm_head: bool = False
    """A GPTQ / AWQ checkpoint's ``lm_head: true``: lm_head is stored quantized too."""
    quant_desc_act: bool = False
    """A GPTQ checkpoint's ``desc_act`` (act order, with a group size): vLLM's kernels then
    keep the int32 ``g_idx`` and its sort order per input row (``gptq_kernels``)."""
    hidden_act: str = "silu"
    mlp_gated: bool = True
    parallel_block: bool = False
    """Attention and MLP read the same input and their outputs are summed before one
    all-reduce (vLLM falcon.py: ``parallel_attn`` or ``new_decoder_architecture``, whose
    row-parallel outputs are not reduced apart): one TP all-reduce per layer, not two."""
    attention_bias: bool = False
    num_mtp_layers: int = 0
    rope_cache_positions: int = 0
    """Rows of vLLM's rotary cos/sin caches (0: ``max_position_embeddings``). Gemma 3 builds
    two: its sliding layers' unscaled one and its global layers' (linear-scaled) one,
    max_position_embeddings x (1 + factor) rows (131,072 x 9 for gemma-3-27b-it, 32,768 x 2
    for the unscaled gemma-3-1b-it)."""
    rotary_dim: int | None = None
    """Per-position width of the rotary cache (None: the head dim, MLA's rope dim; 0: the
    family has no rotary embedding): int(head_dim x partial_rotary_factor) below 1."""
    vision: VisionSpec | None = None
    """The vision tower vLLM loads too (Gemma 3 multimodal checkpoints), else None."""
    unpriced_tower: str | None = None
    """A multimodal config's encoder kvplan does not price ('ARCH (config key KEY)'): memory
    plans refuse it (``costs/memory/settings.py``), else None."""
    attention_chunk_size: int = 0
    """Llama 4's chunked local attention span in tokens (0: none); vLLM 0.11 caches those
    layers as full attention, but its NixlConnector reads only their last
    cdiv(attention_chunk_size, block_size) blocks (``chunked_local_layers``)."""
    chunked_local_layers: tuple[int, ...] = ()
    """Layers NixlConnector clips to the chunk (``no_rope_layers[i] != 0`` of a model_type
    "llama4" config, the rule of its ``register_kv_caches``); () for every other model."""
    notes: tuple[str, ...] = field(default_factory=tuple)

    @property
    def context_limit(self) -> int | None:
        """The longest request the config allows; None when it has no length key (vLLM then
        serves any --max-model-len, ``max_len_assumed``)."""
        return None if self.max_len_assumed else self.max_position_embeddings

    @property
    def kv_layers(self) -> int:
        """Layers that hold per-token KV (full, sliding or MLA attention)."""
        return sum(1 for k in self.layer_kinds if k in KV_KINDS)

    @property
    def state_layers(self) -> int:
        """Layers that hold a fixed-size per-request state (linear attention, Mamba)."""
        return sum(1 for k in self.layer_kinds if k in STATE_KINDS)

    @property
    def one_block_layers(self) -> bool:
        """Each decoder layer is one block, a mixer or an MLP, with one norm (vLLM
        nemotron_h.py, mamba2.py), not a mixer followed by an MLP."""
        return self.model_type in STATE_ONLY_FAMILIES or self.model_type == "nemotron_h"

    @property
    def has_dense_mlp(self) -> bool:
        """Some layer runs a dense (not routed) MLP: vLLM's MergedColumnParallelLinear /
        RowParallelLinear then split ``intermediate_size`` over TP."""
        moe = self.moe
        dense = [i for i in range(self.num_layers) if moe is None or not moe.routes(i)]
        if self.one_block_layers:
            return any(self.layer_kinds[i] == "mlp" for i in dense)
        return bool(dense)

    def tp_split_problem(self, tp: int) -> str | None:
        """What vLLM 0.11 cannot split ``tp`` ways among the dense shards, else None: the
        vocabulary padded to 64 (``VocabParallelEmbedding``: divide(padded vocab, tp)), the
        dense and shared-expert MLP widths (``MergedColumnParallelLinear`` asserts
        ``output_size % tp_size == 0``; ``RowParallelLinear`` divides them too)."""
        padded = -(-self.vocab_size // 64) * 64
        if padded % tp:
            return (f"the {padded:,} embedding rows (vocab_size {self.vocab_size:,} padded to "
                    "a multiple of 64; vLLM's VocabParallelEmbedding asserts it)")
        if self.has_dense_mlp and self.intermediate_size % tp:
            return (f"the MLP's intermediate_size {self.intermediate_size:,} (vLLM's "
                    "MergedColumnParallelLinear asserts it)")
        shared = 0 if self.moe is None else self.moe.shared_expert_intermediate_size
        if shared % tp:
            return (f"the shared experts' intermediate size {shared:,} (vLLM's "
                    "MergedColumnParallelLinear asserts it)")
        return None

    @property
    def attention_kind(self) -> str:
        """Short description: MHA, GQA, MQA or MLA, plus sliding/hybrid qualifiers."""
        if not self.kv_layers:
            return "state layers only (no attention)"
        if self.mla is not None:
            base = "MLA"
        elif self.num_kv_heads == self.num_attention_heads:
            base = "MHA"
        elif self.num_kv_heads == 1:
            base = "MQA"
        else:
            base = "GQA"
        kinds = set(self.layer_kinds)
        if "sliding" in kinds and "full" in kinds:
            base += " + sliding-window (mixed local/global)"
        elif "sliding" in kinds:
            base += " + sliding-window"
        if kinds & STATE_KINDS:
            base += " + state layers (hybrid)"
        return base
