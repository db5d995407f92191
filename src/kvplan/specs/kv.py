"""KV cache precision and per-layer cache specs (full, sliding window, MLA, state).

Layout of one full-attention block (block_size tokens, one layer, one GPU)::

    K: [block_size][num_kv_heads][head_size]   V: [block_size][num_kv_heads][head_size_v]
    page_size_bytes = block_size * num_kv_heads * (bytes(head_size) + bytes(head_size_v))
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from kvplan.errors import InputError
from kvplan.limits import MAX_PARALLEL, check_int
from kvplan.memo import Memo
from kvplan.specs.kv_precision import (
    FP8_DS_MLA,
    FP8_DS_MLA_TOKEN_BYTES,
    KV_CACHE_DTYPES,
    PRECISIONS,
    KvPrecision,
    resolve_precision,
)
from kvplan.specs.kv_state import StateSpec, state_spec
from kvplan.specs.model import ModelSpec
from kvplan.units import cdiv

__all__ = [
    "KV_CACHE_DTYPES",
    "PRECISIONS",
    "FullAttentionSpec",
    "KvGroup",
    "KvPrecision",
    "LayerCacheSpec",
    "MLASpec",
    "ModelKv",
    "SlidingWindowSpec",
    "StateSpec",
    "check_tensor_parallel",
    "kv_spec",
    "layer_cache_spec",
    "model_precision",
    "resolve_precision",
]

# ---------------------------------------------------------------- per-layer specs

CacheKind = Literal["full", "sliding", "mla", "state"]


class _PerTokenCache(ABC):
    """Arithmetic shared by caches that grow with tokens (full, sliding window, MLA).

    Subclasses provide ``bytes_per_token``; ``tokens_held`` and ``blocks_for`` default to
    "every token is kept".
    """

    __slots__ = ()

    @property
    @abstractmethod
    def bytes_per_token(self) -> int:
        """Bytes one token adds to one layer of this kind on one GPU."""

    @property
    def state_bytes(self) -> int:
        return 0

    def page_size_bytes(self, block_size: int) -> int:
        return block_size * self.bytes_per_token

    def tokens_held(self, tokens: int) -> int:
        return tokens

    def bytes_for(self, tokens: int) -> int:
        return self.tokens_held(tokens) * self.bytes_per_token

    def blocks_for(self, tokens: int, block_size: int, before: int | None = None) -> int:
        """Blocks held by a step that brings a request from ``before`` computed tokens
        (default ``tokens - 1``, a decode step) to ``tokens``; every block for full caches."""
        return cdiv(tokens, block_size)


def _kv_head_bytes(heads: int, head_k: int, head_v: int, precision: KvPrecision) -> int:
    """One token's K and V vectors for ``heads`` KV heads."""
    return heads * (precision.vector_bytes(head_k) + precision.vector_bytes(head_v))


@dataclass(frozen=True, slots=True, kw_only=True)
class FullAttentionSpec(_PerTokenCache):
    """Full attention: every token's K and V for every KV head on this GPU."""

    num_kv_heads: int
    head_size: int
    head_size_v: int
    precision: KvPrecision
    kind: CacheKind = "full"

    @property
    def bytes_per_token(self) -> int:
        return _kv_head_bytes(self.num_kv_heads, self.head_size, self.head_size_v, self.precision)

    @property
    def label(self) -> str:
        return f"full attention, {self.num_kv_heads} KV heads x {self.head_size}"


@dataclass(frozen=True, slots=True, kw_only=True)
class SlidingWindowSpec(_PerTokenCache):
    """Sliding-window attention: only the last ``window`` tokens are kept."""

    num_kv_heads: int
    head_size: int
    head_size_v: int
    precision: KvPrecision
    window: int
    kind: CacheKind = "sliding"

    @property
    def bytes_per_token(self) -> int:
        return _kv_head_bytes(self.num_kv_heads, self.head_size, self.head_size_v, self.precision)

    def tokens_held(self, tokens: int) -> int:
        return min(tokens, self.window)

    def blocks_for(self, tokens: int, block_size: int, before: int | None = None) -> int:
        """Blocks held by a step from ``before`` computed tokens (default ``tokens - 1``: a
        decode step) to ``tokens``. vLLM's allocate_slots frees the blocks wholly before
        ``before - window + 1`` (remove_skipped_blocks on the tokens computed *before* the
        step), then allocates up to ``tokens``: a prefill chunk holds every block it writes."""
        computed = tokens - 1 if before is None else before
        return cdiv(tokens, block_size) - max(0, computed - self.window + 1) // block_size

    @property
    def label(self) -> str:
        return f"sliding window {self.window}, {self.num_kv_heads} KV heads x {self.head_size}"


@dataclass(frozen=True, slots=True, kw_only=True)
class MLASpec(_PerTokenCache):
    """Multi-head latent attention: one latent vector per token, shared by all heads.

    No K/V factor of 2, and not divided by tensor parallelism (every GPU keeps the latent).
    DeepSeek-V3.2 adds its indexer's key cache (vLLM ``DeepseekV32IndexerCache``, a second
    ``MLAAttentionSpec`` per layer: ``indexer_dim`` fp8 values + an fp32 scale per 128). vLLM
    puts both in one group (``UniformTypeKVCacheSpecs``: same block, same tokens, one page the
    sum of both), which one spec of their summed bytes reproduces.
    """

    latent_dim: int
    precision: KvPrecision
    indexer_dim: int = 0
    kind: CacheKind = "mla"

    @property
    def latent_bytes(self) -> int:
        if self.precision.name == FP8_DS_MLA.name:
            return FP8_DS_MLA_TOKEN_BYTES
        return self.precision.vector_bytes(self.latent_dim)

    @property
    def indexer_bytes(self) -> int:
        """vLLM: head_dim + head_dim // 128 x 4 bytes (uint8); 132 for V3.2's 128."""
        return self.indexer_dim + self.indexer_dim // 128 * 4

    @property
    def bytes_per_token(self) -> int:
        return self.latent_bytes + self.indexer_bytes

    @property
    def label(self) -> str:
        if not self.indexer_dim:
            return f"MLA latent {self.latent_dim}"
        return (f"MLA latent {self.latent_dim} ({self.latent_bytes} B) + indexer key "
                f"{self.indexer_dim} ({self.indexer_bytes} B)")


LayerCacheSpec = FullAttentionSpec | SlidingWindowSpec | MLASpec | StateSpec


@dataclass(frozen=True, slots=True, kw_only=True)
class KvGroup:
    """Layers that share one cache spec."""

    spec: LayerCacheSpec
    layer_ids: tuple[int, ...]

    @property
    def num_layers(self) -> int:
        return len(self.layer_ids)

    @property
    def bytes_per_token(self) -> int:
        return self.num_layers * self.spec.bytes_per_token

    @property
    def state_bytes(self) -> int:
        return self.num_layers * self.spec.state_bytes

    def bytes_for(self, tokens: int) -> int:
        return self.num_layers * self.spec.bytes_for(tokens)

    def blocks_for(self, tokens: int, block_size: int, before: int | None = None) -> int:
        """Blocks per layer (every layer of the group holds the same number)."""
        return self.spec.blocks_for(tokens, block_size, before)

    def allocated_bytes_for(self, tokens: int, block_size: int, before: int | None = None) -> int:
        blocks = self.spec.blocks_for(tokens, block_size, before)
        return self.num_layers * blocks * self.spec.page_size_bytes(block_size)


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelKv:
    """A model's KV cache on one GPU (or the whole model when tp == 1): groups of layer specs."""

    model: str
    precision: KvPrecision
    tensor_parallel_size: int
    groups: tuple[KvGroup, ...]

    @property
    def bytes_per_token(self) -> int:
        """Per-token KV bytes over all layers (sliding layers counted before their window)."""
        return sum(g.bytes_per_token for g in self.groups)

    @property
    def state_bytes_per_request(self) -> int:
        return sum(g.state_bytes for g in self.groups)

    def bytes_for(self, tokens: int) -> int:
        """Logical bytes for one request holding ``tokens`` tokens (windows and state applied)."""
        return sum(g.bytes_for(tokens) for g in self.groups)

    def allocated_bytes_for(self, tokens: int, block_size: int, before: int | None = None) -> int:
        """Bytes of whole pages allocated for one request holding ``tokens`` tokens, during the
        step from ``before`` computed tokens (default ``tokens - 1``, a decode step): each of
        vLLM's blocks spans ``size`` layers' pages, padding layers included."""
        size = vllm_group_size([g.num_layers for g in self.groups])
        return sum(cdiv(g.num_layers, size) * size * g.blocks_for(tokens, block_size, before)
                   * g.spec.page_size_bytes(block_size) for g in self.groups)

    def blocks_for(self, tokens: int, block_size: int, before: int | None = None) -> int:
        """vLLM's blocks, summed over its KV cache groups (a spec's layers form
        cdiv(layers, size) of them, ``vllm_group_size``); one block spans every layer of its
        group."""
        size = vllm_group_size([g.num_layers for g in self.groups])
        return sum(cdiv(g.num_layers, size) * g.blocks_for(tokens, block_size, before)
                   for g in self.groups)


def vllm_group_size(layers_per_spec: Sequence[int]) -> int:
    """Layers in each of vLLM 0.11's KV cache groups (``_get_kv_cache_groups_uniform_page_size``):
    one spec is one group; several specs are cut into groups of the smallest spec's count, the
    last group of a spec padded: Gemma-3-27B's 52 sliding + 10 full layers make 6 + 1 groups of
    10 layers (8 padding), and 14 sliding + 13 full make 2 + 1 groups of 13 (12 padding). (The
    largest count when all are within 1.25x of the smallest is vllm#29303, vLLM 0.12.)"""
    return min(layers_per_spec)


def layer_cache_spec(
    model: ModelSpec,
    layer_id: int,
    precision: KvPrecision,
    tp: int,
    *,
    mamba_cache_dtype: str = "auto",
    mamba_ssm_cache_dtype: str = "auto",
) -> LayerCacheSpec | None:
    """The cache spec of one layer on one GPU at tensor-parallel degree ``tp``; None if no cache.

    ``--kv-cache-dtype`` applies to attention only; state layers follow vLLM's
    ``--mamba-cache-dtype`` / ``--mamba-ssm-cache-dtype`` ('auto' = the model's dtype).
    """
    kind = model.layer_kinds[layer_id]
    heads = max(1, model.num_kv_heads // tp)
    if kind == "full":
        return FullAttentionSpec(
            num_kv_heads=heads,
            head_size=model.head_dim,
            head_size_v=model.v_head_dim,
            precision=precision,
        )
    if kind == "sliding":
        assert model.sliding_window is not None
        return SlidingWindowSpec(
            num_kv_heads=heads,
            head_size=model.head_dim,
            head_size_v=model.v_head_dim,
            precision=precision,
            window=model.sliding_window,
        )
    if kind == "mla":
        assert model.mla is not None
        return MLASpec(latent_dim=model.mla.latent_dim, precision=precision,
                       indexer_dim=model.mla.index_head_dim)
    return state_spec(model, kind, tp, mamba_cache_dtype, mamba_ssm_cache_dtype)


def model_precision(model: ModelSpec, kv_cache_dtype: str) -> KvPrecision:
    """``--kv-cache-dtype`` for this model (DeepSeek-V3.2: fp8_ds_mla for 'auto' and fp8)."""
    sparse = model.mla is not None and model.mla.index_head_dim > 0
    return resolve_precision(kv_cache_dtype, model.dtype, sparse_mla=sparse)


def group_layers(specs: Sequence[tuple[int, LayerCacheSpec]]) -> tuple[KvGroup, ...]:
    """Group layers with equal specs, in order of first appearance."""
    order: dict[LayerCacheSpec, list[int]] = {}
    for layer_id, spec in specs:
        order.setdefault(spec, []).append(layer_id)
    return tuple(KvGroup(spec=s, layer_ids=tuple(ids)) for s, ids in order.items())


def check_tensor_parallel(model: ModelSpec, tp: int) -> None:
    """Reject a TP degree vLLM rejects: it must divide the attention heads, and either divide
    the KV heads or be a multiple of them (then each KV head is replicated tp // kv times).

    Every layout kvplan answers for passes it, ``kv_spec`` included: for a degree vLLM
    refuses there is no per-GPU cache to give (Llama-3.1-8B's 8 KV heads over TP 3 would
    have read 2 heads per GPU, though one GPU would hold 3).
    """
    check_int("--tensor-parallel-size", tp, 1, MAX_PARALLEL)
    if model.num_attention_heads % tp:
        raise InputError(
            f"--tensor-parallel-size {tp} must divide num_attention_heads "
            f"{model.num_attention_heads} (vLLM requires it)"
        )
    kv = model.num_kv_heads
    if model.mla is None and kv % tp and tp % kv:
        raise InputError(
            f"--tensor-parallel-size {tp} must divide the {kv} KV heads or be a "
            "multiple of them (vLLM requires it)"
        )
    _check_state_tensor_parallel(model, tp)
    problem = model.tp_split_problem(tp)
    if problem is not None:
        raise InputError(f"--tensor-parallel-size {tp} must divide {problem}")


def _check_state_tensor_parallel(model: ModelSpec, tp: int) -> None:
    """vLLM 0.11's state mixers split their heads over TP: ``MambaMixer2`` asserts that tp
    divides the Mamba2 heads and n_groups (it replicates groups only when n_groups is 1);
    Gated DeltaNet splits its key and value heads (``divide``)."""
    m, la = model.mamba, model.linear_attention
    if m is not None and (m.num_heads % tp or (m.n_groups % tp and m.n_groups != 1)):
        raise InputError(
            f"--tensor-parallel-size {tp} must divide the {m.num_heads} Mamba2 heads and "
            f"n_groups {m.n_groups} (vLLM's MambaMixer2 asserts it unless n_groups is 1)"
        )
    if la is not None and (la.num_key_heads % tp or la.num_value_heads % tp):
        raise InputError(
            f"--tensor-parallel-size {tp} must divide the linear-attention layers' "
            f"{la.num_key_heads} key and {la.num_value_heads} value heads (vLLM requires it)"
        )


def kv_spec(
    model: ModelSpec,
    kv_cache_dtype: str = "auto",
    tensor_parallel_size: int = 1,
    *,
    mamba_cache_dtype: str = "auto",
    mamba_ssm_cache_dtype: str = "auto",
) -> ModelKv:
    """Per-GPU KV cache layout of ``model`` at the given cache precision and TP degree (kept
    per those arguments, all it reads: a planner asks for the same few layouts per candidate)."""
    key = (model, kv_cache_dtype, tensor_parallel_size, mamba_cache_dtype,
           mamba_ssm_cache_dtype)
    return _KV_MEMO.get(key, lambda: _kv_spec(model, kv_cache_dtype, tensor_parallel_size,
                                              mamba_cache_dtype, mamba_ssm_cache_dtype))


_KV_MEMO: Memo[ModelKv] = Memo(256)


def _kv_spec(model: ModelSpec, kv_cache_dtype: str, tensor_parallel_size: int,
             mamba_cache_dtype: str, mamba_ssm_cache_dtype: str) -> ModelKv:
    check_tensor_parallel(model, tensor_parallel_size)  # the CLI's refusal, word for word
    tp = int(tensor_parallel_size)
    precision = model_precision(model, kv_cache_dtype)
    specs = [
        (i, spec)
        for i in range(model.num_layers)
        if (
            spec := layer_cache_spec(
                model,
                i,
                precision,
                tp,
                mamba_cache_dtype=mamba_cache_dtype,
                mamba_ssm_cache_dtype=mamba_ssm_cache_dtype,
            )
        )
        is not None
    ]
    return ModelKv(
        model=model.name, precision=precision, tensor_parallel_size=tp, groups=group_layers(specs)
    )
