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

from kvplan.errors import InputError, UnknownNameError
from kvplan.specs.model import ModelSpec
from kvplan.units import cdiv, fmt_bytes

# ---------------------------------------------------------------- precision


@dataclass(frozen=True, slots=True, kw_only=True)
class KvPrecision:
    """How one cached value is stored: value bits plus optional per-group scales."""

    name: str
    value_bits: int
    scale_bytes: int = 0
    scale_group: int | None = None
    """Values sharing one scale; None with scale_bytes > 0 means one scale per head vector."""
    risk: str

    def vector_bytes(self, n: int) -> int:
        """Bytes to store one head vector of n values, scales included (integer)."""
        values = cdiv(n * self.value_bits, 8)
        if self.scale_bytes == 0:
            return values
        scales = 1 if self.scale_group is None else cdiv(n, self.scale_group)
        return values + scales * self.scale_bytes

    @property
    def bytes_per_value(self) -> float:
        """Average bytes per value for a 128-wide head (for display only)."""
        return self.vector_bytes(128) / 128


_RISKS = {
    "float32": "Lossless reference; twice the memory of fp16/bf16 for no serving benefit.",
    "float16": "Lossless for serving; 5 exponent bits, so very large activations can overflow.",
    "bfloat16": "Lossless for serving; fp32's range with 8 bits of mantissa.",
    "fp8_e4m3": (
        "Halves the cache. 3 mantissa bits: good precision, range only +-448, so per-tensor "
        "scales (calibrated k/v scales, or 1.0 by default) matter; small accuracy loss on most "
        "benchmarks when scaled, more on long-context retrieval."
    ),
    "fp8_e5m2": (
        "Halves the cache. Wide range (+-57344) without scales but only 2 mantissa bits: "
        "coarser values, usually a larger accuracy hit than e4m3."
    ),
    "int8_per_token_head": (
        "1 byte per value plus one fp32 scale per token per head (K and V): dynamic scales "
        "track outliers, accuracy close to fp16; scales cost 4 bytes per head per token."
    ),
    "fp8_per_token_head": (
        "fp8 e4m3 values with one fp32 scale per token per head: no calibration needed, "
        "accuracy close to fp16; scales cost 4 bytes per head per token."
    ),
    "nvfp4": (
        "4-bit values with an fp8 scale per 16 values (~0.5625 bytes/value): about 3.6x smaller "
        "than fp16, the largest accuracy risk here; needs Blackwell-class FP4 support."
    ),
}

PRECISIONS: dict[str, KvPrecision] = {
    "float32": KvPrecision(name="float32", value_bits=32, risk=_RISKS["float32"]),
    "float16": KvPrecision(name="float16", value_bits=16, risk=_RISKS["float16"]),
    "bfloat16": KvPrecision(name="bfloat16", value_bits=16, risk=_RISKS["bfloat16"]),
    "fp8_e4m3": KvPrecision(name="fp8_e4m3", value_bits=8, risk=_RISKS["fp8_e4m3"]),
    "fp8_e5m2": KvPrecision(name="fp8_e5m2", value_bits=8, risk=_RISKS["fp8_e5m2"]),
    "int8_per_token_head": KvPrecision(
        name="int8_per_token_head", value_bits=8, scale_bytes=4, risk=_RISKS["int8_per_token_head"]
    ),
    "fp8_per_token_head": KvPrecision(
        name="fp8_per_token_head", value_bits=8, scale_bytes=4, risk=_RISKS["fp8_per_token_head"]
    ),
    "nvfp4": KvPrecision(
        name="nvfp4", value_bits=4, scale_bytes=1, scale_group=16, risk=_RISKS["nvfp4"]
    ),
}

_ALIASES = {
    "fp16": "float16",
    "half": "float16",
    "bf16": "bfloat16",
    "fp32": "float32",
    "float": "float32",
    "fp8": "fp8_e4m3",
    "fp8_e4m3fn": "fp8_e4m3",
    "fp8_inc": "fp8_e4m3",
}

KV_CACHE_DTYPES: tuple[str, ...] = (
    "auto",
    "bfloat16",
    "float16",
    "fp16",
    "bf16",
    "fp8",
    "fp8_e4m3",
    "fp8_e5m2",
    "int8_per_token_head",
    "fp8_per_token_head",
    "nvfp4",
)


def resolve_precision(kv_cache_dtype: str, model_dtype: str) -> KvPrecision:
    """vLLM ``--kv-cache-dtype`` name -> KvPrecision; 'auto' means the model's dtype."""
    name = kv_cache_dtype.strip().lower()
    name = model_dtype if name == "auto" else _ALIASES.get(name, name)
    if name not in PRECISIONS:
        raise UnknownNameError(
            f"unknown --kv-cache-dtype {kv_cache_dtype!r}: "
            f"choose one of {', '.join(KV_CACHE_DTYPES)}"
        )
    return PRECISIONS[name]


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

    def blocks_for(self, tokens: int, block_size: int) -> int:
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

    def blocks_for(self, tokens: int, block_size: int) -> int:
        """Blocks covering the last ``window`` tokens; earlier blocks are freed."""
        first_needed = max(0, tokens - self.window)
        return cdiv(tokens, block_size) - first_needed // block_size

    @property
    def label(self) -> str:
        return f"sliding window {self.window}, {self.num_kv_heads} KV heads x {self.head_size}"


@dataclass(frozen=True, slots=True, kw_only=True)
class MLASpec(_PerTokenCache):
    """Multi-head latent attention: one latent vector per token, shared by all heads.

    No K/V factor of 2, and not divided by tensor parallelism (every GPU keeps the latent).
    """

    latent_dim: int
    precision: KvPrecision
    kind: CacheKind = "mla"

    @property
    def bytes_per_token(self) -> int:
        return self.precision.vector_bytes(self.latent_dim)

    @property
    def label(self) -> str:
        return f"MLA latent {self.latent_dim}"


@dataclass(frozen=True, slots=True, kw_only=True)
class StateSpec:
    """Mamba2 / Gated DeltaNet layer: a fixed-size state per request (vLLM ``MambaSpec``).

    The state is two tensors, each in its own dtype (vLLM ``MambaStateDtypeCalculator``):
    a short convolution window and the temporal (SSM / recurrent) state. One page holds one
    request's whole state, whatever the block size; in a hybrid model the page is padded up
    to the attention page (``page_size_padded``) so every layer's page has the same size::

        state_bytes     = conv_elements x conv_dtype + temporal_elements x temporal_dtype
        page_size_bytes = page_size_padded if set, else state_bytes
    """

    layer_type: str
    conv_elements: int
    conv_dtype_bytes: int
    temporal_elements: int
    temporal_dtype_bytes: int
    page_size_padded: int | None = None
    """vLLM ``cache_config.mamba_page_size_padded``: the attention page it is padded to."""
    kind: CacheKind = "state"

    def __post_init__(self) -> None:
        assert self.page_size_padded is None or self.page_size_padded >= self.state_bytes

    @property
    def bytes_per_token(self) -> int:
        return 0

    @property
    def state_elements(self) -> int:
        return self.conv_elements + self.temporal_elements

    @property
    def conv_bytes(self) -> int:
        return self.conv_elements * self.conv_dtype_bytes

    @property
    def temporal_bytes(self) -> int:
        return self.temporal_elements * self.temporal_dtype_bytes

    @property
    def state_bytes(self) -> int:
        """The state itself (vLLM's unpadded ``MambaSpec`` page): conv + temporal bytes."""
        return self.conv_bytes + self.temporal_bytes

    @property
    def dtype_bytes(self) -> int:
        """Bytes per value when conv and temporal states share a dtype (the vLLM default);
        otherwise the temporal state's, the larger tensor (see ``formula`` for both)."""
        return self.temporal_dtype_bytes

    def page_size_bytes(self, block_size: int) -> int:
        return self.page_size_padded if self.page_size_padded is not None else self.state_bytes

    def tokens_held(self, tokens: int) -> int:
        return 0

    def bytes_for(self, tokens: int) -> int:
        return self.state_bytes if tokens > 0 else 0

    def blocks_for(self, tokens: int, block_size: int) -> int:
        return 1 if tokens > 0 else 0

    @property
    def formula(self) -> str:
        """The state's bytes written out: conv + temporal, each with its dtype width."""
        return (
            f"{self.conv_elements:,} conv x {self.conv_dtype_bytes} B + "
            f"{self.temporal_elements:,} temporal x {self.temporal_dtype_bytes} B = "
            f"{self.state_bytes:,} bytes"
        )

    @property
    def label(self) -> str:
        padded = (
            f", page padded to {fmt_bytes(self.page_size_padded)}" if self.page_size_padded else ""
        )
        return (
            f"{self.layer_type} state (conv {fmt_bytes(self.conv_bytes)} + temporal "
            f"{fmt_bytes(self.temporal_bytes)}{padded})"
        )


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

    def blocks_for(self, tokens: int, block_size: int) -> int:
        """Blocks per layer (every layer of the group holds the same number)."""
        return self.spec.blocks_for(tokens, block_size)

    def allocated_bytes_for(self, tokens: int, block_size: int) -> int:
        blocks = self.spec.blocks_for(tokens, block_size)
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

    def allocated_bytes_for(self, tokens: int, block_size: int) -> int:
        """Bytes of whole pages allocated for one request holding ``tokens`` tokens."""
        return sum(g.allocated_bytes_for(tokens, block_size) for g in self.groups)

    def blocks_for(self, tokens: int, block_size: int) -> int:
        """Blocks summed over layer groups; one block spans every layer of its group."""
        return sum(g.blocks_for(tokens, block_size) for g in self.groups)


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
        return MLASpec(latent_dim=model.mla.latent_dim, precision=precision)
    return _state_spec(model, kind, tp, mamba_cache_dtype, mamba_ssm_cache_dtype)


MAMBA_CACHE_DTYPES: dict[str, int | None] = {
    "auto": None,
    "float32": 4,
    "bfloat16": 2,
    "float16": 2,
}
"""vLLM ``MambaDType`` names -> bytes per value (None: the model's dtype)."""


def _mamba_dtype_bytes(name: str, model_dtype: str) -> int:
    """vLLM ``get_kv_cache_torch_dtype(mamba_cache_dtype, model_dtype)`` as a width."""
    key = _ALIASES.get(name.strip().lower(), name.strip().lower())
    if key not in MAMBA_CACHE_DTYPES:
        raise UnknownNameError(
            f"unknown mamba cache dtype {name!r}: choose one of {', '.join(MAMBA_CACHE_DTYPES)}"
        )
    width = MAMBA_CACHE_DTYPES[key]
    return width if width is not None else PRECISIONS[model_dtype].value_bits // 8


def _state_spec(
    model: ModelSpec, kind: str, tp: int, cache_dtype: str, ssm_cache_dtype: str
) -> StateSpec | None:
    """vLLM 0.11 ``MambaStateDtypeCalculator``: the conv state is in ``mamba_cache_dtype``;
    Mamba2's SSM state in ``mamba_ssm_cache_dtype`` ('auto' = the conv dtype); Gated
    DeltaNet keeps both in ``mamba_cache_dtype`` (``gated_delta_net_state_dtype``)."""
    conv = _mamba_dtype_bytes(cache_dtype, model.dtype)
    if kind == "linear_attention" and model.linear_attention is not None:
        la = model.linear_attention
        return StateSpec(
            layer_type="linear attention",
            conv_elements=la.conv_elements(tp),
            conv_dtype_bytes=conv,
            temporal_elements=la.temporal_elements(tp),
            temporal_dtype_bytes=conv,
        )
    if kind == "mamba" and model.mamba is not None:
        ssm = (
            conv if ssm_cache_dtype == "auto" else _mamba_dtype_bytes(ssm_cache_dtype, model.dtype)
        )
        return StateSpec(
            layer_type="mamba2",
            conv_elements=model.mamba.conv_elements(tp),
            conv_dtype_bytes=conv,
            temporal_elements=model.mamba.temporal_elements(tp),
            temporal_dtype_bytes=ssm,
        )
    return None


def group_layers(specs: Sequence[tuple[int, LayerCacheSpec]]) -> tuple[KvGroup, ...]:
    """Group layers with equal specs, in order of first appearance."""
    order: dict[LayerCacheSpec, list[int]] = {}
    for layer_id, spec in specs:
        order.setdefault(spec, []).append(layer_id)
    return tuple(KvGroup(spec=s, layer_ids=tuple(ids)) for s, ids in order.items())


def check_tensor_parallel(model: ModelSpec, tp: int) -> None:
    """Reject a TP degree vLLM rejects: it must divide the attention heads, and either divide
    the KV heads or be a multiple of them (then each KV head is replicated tp // kv times).

    Used where kvplan models a real deployment (capacity, latency, simulation); ``kv_spec``
    itself stays lenient so the cache arithmetic can be explored for any degree.
    """
    if tp < 1:
        raise InputError(f"--tensor-parallel-size must be a positive whole number, got {tp}")
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


def kv_spec(
    model: ModelSpec,
    kv_cache_dtype: str = "auto",
    tensor_parallel_size: int = 1,
    *,
    mamba_cache_dtype: str = "auto",
    mamba_ssm_cache_dtype: str = "auto",
) -> ModelKv:
    """Per-GPU KV cache layout of ``model`` at the given cache precision and TP degree."""
    precision = resolve_precision(kv_cache_dtype, model.dtype)
    tp = tensor_parallel_size
    if tp < 1:
        raise InputError(f"--tensor-parallel-size must be a positive whole number, got {tp}")
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
