"""Parameter counts and weight bytes from the architecture, sharded the way vLLM shards them.

Every weight is a ``Part``: a (rows x cols) matrix or a vector (cols == 1), repeated ``count``
times (experts), with the way tensor parallelism splits it::

    col    column-parallel: output rows / tp         (q, gate_up, in_proj, expert w13)
    row    row-parallel: input cols / tp             (o_proj, down_proj, out_proj, expert w2)
    kv     k/v projections: rows = max(1, kv_heads // tp) heads (replicated when tp > kv_heads)
    vocab  vocab-parallel: vocab padded to 64, then / tp   (embedding, lm_head)
    rep    replicated whole on every GPU                    (norms, router, MLA down-projections)
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from typing import Literal, get_args

from kvplan.costs.memory.weight_formats import (
    FormatArg,
    WeightFormat,
    dtype_bytes,
    given_format,
)
from kvplan.memo import Memo
from kvplan.specs.model import ModelSpec
from kvplan.specs.quant_config import kept_linears
from kvplan.units import cdiv

WEIGHT_MEMO: Memo[int] = Memo(1024)
"""Weight bytes per (model, dtype, weight format, TP, PP, stage or experts kept): a plan
prices the same shards for every KV dtype, sequence cap and chunk size it tries."""

Shard = Literal["col", "row", "kv", "vocab", "rep"]
Role = Literal["embedding", "lm_head", "attention", "dense_mlp", "experts", "shared_experts",
               "router", "norms", "state_layers"]
VOCAB_PADDING = 64
"""vLLM's ``DEFAULT_VOCAB_PADDING_SIZE``: embedding rows are padded to a multiple of 64."""

_QK_NORM = frozenset({"qwen3", "qwen3_moe", "qwen3_next", "gemma3_text", "gemma3"})
_WIDE_QK_NORM = frozenset({"olmo2", "olmo3", "olmoe"})  # q_norm / k_norm over all q / k heads
_FOUR_NORMS = frozenset({"gemma2", "gemma3_text", "gemma3"})
_ONE_NORM = frozenset({"falcon", "phi", "cohere", "cohere2", "gptj"})  # attention || MLP
_LINEAR_BIAS = frozenset({"gpt2", "gpt_bigcode", "opt", "phi", "starcoder2", "gpt_neox", "bloom"})
"""Every linear layer and LayerNorm has a bias (StarCoder2's use_bias: ``attention_bias``)."""
_LAYERNORM_BIAS = _LINEAR_BIAS | {"falcon", "gptj", "nemotron", "stablelm"}
_NO_O_BIAS = frozenset({"qwen", "qwen2", "qwen2_moe", "stablelm"})  # q/k/v biases only


@dataclass(frozen=True, slots=True, kw_only=True)
class Part:
    """One weight tensor (or ``count`` identical ones): shape, role and TP split."""

    role: Role
    rows: int
    cols: int = 1
    shard: Shard = "rep"
    count: int = 1
    linear: bool = True
    """A linear-layer weight matrix (quantizable); False for biases, norms, conv, scalars."""
    kept: bool = False
    """A linear layer the checkpoint's ignore list leaves in the model dtype."""
    kv_heads: int = 0

    @property
    def params(self) -> int:
        return self.count * self.rows * self.cols

    def shape_on_gpu(self, tp: int) -> tuple[int, int]:
        """(rows, cols) of one copy on one GPU at tensor-parallel degree ``tp``."""
        if self.shard == "col":
            return cdiv(self.rows, tp), self.cols
        if self.shard == "row":
            return self.rows, cdiv(self.cols, tp)
        if self.shard == "kv":
            per_head = self.rows // self.kv_heads
            return per_head * max(1, self.kv_heads // tp), self.cols
        if self.shard == "vocab":
            return cdiv(self.rows, VOCAB_PADDING) * VOCAB_PADDING // tp, self.cols
        return self.rows, self.cols


def _vec(role: Role, n: int, shard: Shard = "rep", count: int = 1) -> Part:
    return Part(role=role, rows=n, shard=shard, count=count, linear=False)


# ---------------------------------------------------------------- parts per layer
def _attention(m: ModelSpec) -> Iterator[Part]:
    if m.mla is not None:
        yield from _mla(m)
        return
    h, q_out = m.hidden_size, m.num_attention_heads * m.head_dim
    kv_k, kv_v = m.num_kv_heads * m.head_dim, m.num_kv_heads * m.v_head_dim
    gate = 2 if m.model_type == "qwen3_next" else 1  # Qwen3-Next: output gate fused into q_proj
    yield Part(role="attention", rows=gate * q_out, cols=h, shard="col")
    yield Part(role="attention", rows=kv_k, cols=h, shard="kv", kv_heads=m.num_kv_heads)
    yield Part(role="attention", rows=kv_v, cols=h, shard="kv", kv_heads=m.num_kv_heads)
    yield Part(role="attention", rows=h, cols=m.num_attention_heads * m.v_head_dim, shard="row")
    yield from _attention_extras(m, q_out, kv_k, kv_v)


def _attention_extras(m: ModelSpec, q_out: int, kv_k: int, kv_v: int) -> Iterator[Part]:
    """Biases, q/k norms and attention sinks, where the family has them."""
    if m.attention_bias:
        yield _vec("attention", q_out, "col")
        yield Part(
            role="attention", rows=kv_k + kv_v, shard="kv", kv_heads=m.num_kv_heads, linear=False
        )
        if m.model_type not in _NO_O_BIAS:
            yield _vec("attention", m.hidden_size)
    if m.model_type in _QK_NORM:
        yield _vec("norms", m.head_dim, count=2)
    elif m.model_type in _WIDE_QK_NORM:
        yield from (_vec("norms", q_out), _vec("norms", kv_k))
    if m.model_type == "gpt_oss":
        yield _vec("attention", m.num_attention_heads, "col")  # per-head sinks


def _mla(m: ModelSpec) -> Iterator[Part]:
    """DeepSeek MLA: low-rank q and kv down-projections (replicated), up-projections split."""
    assert m.mla is not None
    a, h, heads = m.mla, m.hidden_size, m.num_attention_heads
    q_head = a.qk_nope_head_dim + a.qk_rope_head_dim
    if a.q_lora_rank is None:
        yield Part(role="attention", rows=heads * q_head, cols=h, shard="col")
    else:
        yield Part(role="attention", rows=a.q_lora_rank, cols=h)
        yield _vec("norms", a.q_lora_rank)
        yield Part(role="attention", rows=heads * q_head, cols=a.q_lora_rank, shard="col")
    yield Part(role="attention", rows=a.kv_lora_rank + a.qk_rope_head_dim, cols=h)
    yield _vec("norms", a.kv_lora_rank)
    kv_b = heads * (a.qk_nope_head_dim + a.v_head_dim)
    yield Part(role="attention", rows=kv_b, cols=a.kv_lora_rank, shard="col")
    yield Part(role="attention", rows=h, cols=heads * a.v_head_dim, shard="row")


def _mlp(m: ModelSpec, role: Role, inter: int, count: int = 1) -> Iterator[Part]:
    """Gated MLP (gate+up, down: 3 matrices) or plain (up, down: 2)."""
    up = 2 * inter if m.mlp_gated else inter
    yield Part(role=role, rows=up, cols=m.hidden_size, shard="col", count=count)
    yield Part(role=role, rows=m.hidden_size, cols=inter, shard="row", count=count)
    biased = m.model_type == "gptj" or (m.model_type in _LINEAR_BIAS and m.attention_bias)
    if biased or (m.model_type == "gpt_oss" and role == "experts"):
        yield _vec(role, up, "col", count)
        yield _vec(role, m.hidden_size, count=count)


def _moe(m: ModelSpec) -> Iterator[Part]:
    assert m.moe is not None
    e, h = m.moe, m.hidden_size
    yield Part(role="router", rows=e.num_experts, cols=h)
    if m.model_type in ("gpt_oss", "deepseek_v3", "ernie4_5_moe"):  # bias / e_score_corr..
        yield _vec("router", e.num_experts)
    yield from _mlp(m, "experts", e.moe_intermediate_size, e.num_experts)
    if e.shared_expert_intermediate_size:
        yield from _mlp(m, "shared_experts", e.shared_expert_intermediate_size)
        if m.model_type in ("qwen2_moe", "qwen3_next"):
            yield Part(role="router", rows=1, cols=h)  # shared_expert_gate


def _mamba(m: ModelSpec) -> Iterator[Part]:
    """Mamba2 mixer: in_proj (x, z, B, C, dt), conv1d (+bias), dt_bias, A_log, D, norm, out_proj."""
    assert m.mamba is not None
    s, h = m.mamba, m.hidden_size
    inner, bc = s.num_heads * s.head_dim, 2 * s.n_groups * s.state_size
    yield Part(role="state_layers", rows=2 * inner + bc + s.num_heads, cols=h, shard="col")
    yield Part(role="state_layers", rows=inner + bc, cols=s.conv_kernel, shard="col", linear=False)
    yield _vec("state_layers", inner + bc, "col")
    yield _vec("state_layers", s.num_heads, "col", count=3)
    yield _vec("state_layers", inner, "col")
    yield Part(role="state_layers", rows=h, cols=inner, shard="row")


def _gated_deltanet(m: ModelSpec) -> Iterator[Part]:
    """Qwen3-Next Gated DeltaNet: in_proj_qkvz, in_proj_ba, conv1d, dt_bias, A_log, norm, out."""
    assert m.linear_attention is not None
    la, h = m.linear_attention, m.hidden_size
    key_dim, value_dim = la.num_key_heads * la.key_head_dim, la.num_value_heads * la.value_head_dim
    yield Part(role="state_layers", rows=2 * key_dim + 2 * value_dim, cols=h, shard="col")
    yield Part(role="state_layers", rows=2 * la.num_value_heads, cols=h, shard="col")
    conv_dim = 2 * key_dim + value_dim
    yield Part(role="state_layers", rows=conv_dim, cols=la.conv_kernel, shard="col", linear=False)
    yield _vec("state_layers", la.num_value_heads, "col", count=2)
    yield _vec("state_layers", la.value_head_dim)
    yield Part(role="state_layers", rows=h, cols=value_dim, shard="row")


def _norm(m: ModelSpec, count: int) -> Part:
    width = 2 * m.hidden_size if m.model_type in _LAYERNORM_BIAS else m.hidden_size
    return _vec("norms", width, count=count)


def _mixer(m: ModelSpec, layer: int) -> Iterator[Part]:
    kind = m.layer_kinds[layer]
    if kind == "mamba":
        yield from _mamba(m)
    elif kind == "linear_attention":
        yield from _gated_deltanet(m)
    elif kind != "mlp":
        yield from _attention(m)


def _ffn(m: ModelSpec, layer: int) -> Iterator[Part]:
    if m.moe is not None and m.moe.routes(layer):
        yield from _moe(m)
    else:
        yield from _mlp(m, "dense_mlp", m.intermediate_size)


def layer_parts(m: ModelSpec, layer: int) -> tuple[Part, ...]:
    """Every weight of decoder layer ``layer`` (0-based), ``kept`` where the ignore list says."""
    if m.one_block_layers:  # one block per layer: mamba, attention or MLP, one norm
        body = _ffn(m, layer) if m.layer_kinds[layer] == "mlp" else _mixer(m, layer)
        return (*body, _norm(m, 1))
    norms = 4 if m.model_type in _FOUR_NORMS else 1 if m.model_type in _ONE_NORM else 2
    parts = (*_mixer(m, layer), *_ffn(m, layer), _norm(m, norms))
    kept = kept_linears(m, layer, tuple((p.role, p.linear) for p in parts))
    return tuple(replace(p, kept=True) if i in kept else p for i, p in enumerate(parts))


LEARNED_POSITIONS = {"gpt2": 0, "gpt_bigcode": 0, "opt": 2}
"""Learned position tables (replicated: GPT-2 / BigCode ``wpe``, OPT's with 2 offset rows)."""


def embedding_parts(m: ModelSpec) -> tuple[Part, ...]:
    """The token table (vocab-parallel), then any learned position table (replicated)."""
    table = Part(role="embedding", rows=m.vocab_size, cols=m.hidden_size, shard="vocab",
                 linear=False)
    if m.model_type == "bloom":  # word_embeddings_layernorm
        return table, _norm(m, 1)
    if m.model_type not in LEARNED_POSITIONS:
        return (table,)
    rows = m.max_position_embeddings + LEARNED_POSITIONS[m.model_type]
    return table, Part(role="embedding", rows=rows, cols=m.hidden_size, linear=False)


def head_parts(m: ModelSpec, *, separate_copy: bool = False) -> tuple[Part, ...]:
    """Final norm and lm_head (no lm_head params when tied, unless a separate stage holds it)."""
    head = Part(role="lm_head", rows=m.vocab_size, cols=m.hidden_size, shard="vocab",
                linear=m.quant_lm_head)  # a linear layer only where the checkpoint quantized it
    tied = m.tie_word_embeddings and not separate_copy
    bias = (_vec("lm_head", m.vocab_size, "vocab"),) if m.model_type in ("phi", "gptj") else ()
    return (_norm(m, 1),) if tied else (_norm(m, 1), head, *bias)


# ---------------------------------------------------------------- counts
_ROLES = get_args(Role)


@dataclass(frozen=True, slots=True, kw_only=True)
class ParamCounts:
    """Parameters by role, whole model (MTP / draft layers excluded, as vLLM loads it)."""

    embedding: int
    lm_head: int
    attention: int
    dense_mlp: int
    experts: int
    active_experts: int
    shared_experts: int
    router: int
    norms: int
    state_layers: int

    @property
    def total(self) -> int:
        return sum(getattr(self, role) for role in _ROLES)

    @property
    def active(self) -> int:
        """Parameters touched per token: everything but the routed experts not selected."""
        return self.total - self.experts + self.active_experts


def all_parts(m: ModelSpec) -> tuple[Part, ...]:
    layers = (p for i in range(m.num_layers) for p in layer_parts(m, i))
    return (*embedding_parts(m), *layers, *head_parts(m))


def param_counts(model: ModelSpec) -> ParamCounts:
    """Parameter counts by role, from the architecture alone."""
    by_role: dict[str, int] = {}
    for part in all_parts(model):
        by_role[part.role] = by_role.get(part.role, 0) + part.params
    experts = by_role.get("experts", 0)
    active = (
        0 if model.moe is None else (experts * model.moe.experts_per_token // model.moe.num_experts)
    )
    return ParamCounts(active_experts=active, **{r: by_role.get(r, 0) for r in _ROLES})


# ---------------------------------------------------------------- bytes
@dataclass(frozen=True, slots=True, kw_only=True)
class _Pricing:
    elem_bytes: int
    fmt: WeightFormat | None

    def bytes_of(self, part: Part, tp: int, active: tuple[int, int] | None = None) -> int:
        """Bytes on one GPU; ``active`` = (k, n) keeps k of n routed experts."""
        rows, cols = part.shape_on_gpu(tp)
        count = part.count
        if active is not None and part.role == "experts":
            count = part.count * active[0] // active[1]
        if self.fmt is not None and self.fmt.converts(part.role, part.linear and not part.kept,
                                                      part.shard, rows):
            return count * self.fmt.linear_bytes(rows, cols)
        return count * rows * cols * self.elem_bytes


def _pricing(m: ModelSpec, dtype: str, quantization: str | None,
             fmt: FormatArg = ...) -> _Pricing:
    fmt = given_format(fmt, quantization, m.quantization, m.weight_block_size,
                       m.quant_layout)
    return _Pricing(elem_bytes=dtype_bytes(dtype, m.dtype), fmt=fmt)


def pp_layer_ranges(num_layers: int, pp: int) -> tuple[range, ...]:
    """vLLM's ``get_pp_indices``: equal shares, the remainder to the stages before the last."""
    sizes = [num_layers // pp] * pp
    for i in range(2, num_layers % pp + 2):
        sizes[-i] += 1
    starts = [sum(sizes[:i]) for i in range(pp)]
    return tuple(range(s, s + n) for s, n in zip(starts, sizes, strict=True))


VOCAB_ON_EVERY_STAGE = frozenset({"gemma", "gemma2", "gemma3", "gemma3_text", "qwen2_moe",
                                  "qwen3_moe", "qwen3_next", "nemotron_h", "mixtral", "gpt_oss",
                                  "falcon", *LEARNED_POSITIONS})
"""Families whose vLLM 0.11 modules build embed_tokens, lm_head and the final norm on every
stage (no PPMissingLayer; Qwen3-Next's norm: the last stage only; Falcon, GPT-2, BigCode, OPT
tie lm_head to that stage's table). Llama, Qwen2/3, DeepSeek: embedding first, head last."""


def _stage_parts(m: ModelSpec, pp: int, stage: int, reads: bool = False,
                 vocab: bool = True) -> Iterator[Part]:
    """Stage ``stage``'s weights as allocated (``reads``: as a forward pass reads them;
    ``vocab`` False: without the embedding and lm_head tables)."""
    every = pp > 1 and not reads and m.model_type in VOCAB_ON_EVERY_STAGE
    if (stage == 0 or every) and vocab:
        yield from embedding_parts(m)
    for layer in pp_layer_ranges(m.num_layers, pp)[stage]:
        yield from layer_parts(m, layer)
    if stage == pp - 1 or every:
        head = head_parts(m, separate_copy=pp > 1 and not every)[:None if vocab else 1]
        yield from head[1:] if stage < pp - 1 and m.model_type == "qwen3_next" else head


def _sum_bytes(parts: Sequence[Part] | Iterator[Part], pricing: _Pricing, tp: int,
               active: tuple[int, int] | None = None) -> int:
    return sum(pricing.bytes_of(p, tp, active) for p in parts)


def weight_bytes(model: ModelSpec, *, dtype: str = "auto", quantization: str | None = None) -> int:
    """Bytes of the whole model's weights (one copy, no padding)."""
    return WEIGHT_MEMO.get(("all", model, dtype, quantization), lambda: _sum_bytes(
        all_parts(model), _pricing(model, dtype, quantization), 1))


def weight_bytes_per_gpu(model: ModelSpec, *, dtype: str = "auto",
                         quantization: str | None = None, tp: int = 1, pp: int = 1,
                         fmt: FormatArg = ..., reads: bool = False, vocab: bool = True,
                         stage: int | None = None) -> int:
    """Weight bytes on the fullest GPU: TP shards per ``Part.shard``, PP splits the layers.
    ``fmt``: the weight format the caller resolved (``...``: resolved from the flags);
    ``reads``: only the tables a stage's forward pass uses (a step's weight reads);
    ``vocab`` False: without the embedding and lm_head tables; ``stage``: that stage's."""
    return _stage_bytes(model, dtype, quantization, (tp, pp, stage), None, fmt, reads, vocab)


def stage_weight_bytes(model: ModelSpec, *, dtype: str = "auto", quantization: str | None = None,
                       tp: int = 1, pp: int = 1, stage: int = 0, fmt: FormatArg = ...) -> int:
    """Weight bytes on one GPU of pipeline stage ``stage`` (embedding first, lm_head last)."""
    return _stage_bytes(model, dtype, quantization, (tp, pp, stage), None, fmt, False, True)


def active_weight_bytes_per_gpu(model: ModelSpec, *, dtype: str = "auto",
                                quantization: str | None = None, tp: int = 1, pp: int = 1,
                                fmt: FormatArg = ..., vocab: bool = True,
                                stage: int | None = None) -> int:
    """Weight bytes one decode step reads on the fullest GPU (MoE: the active experts only;
    ``vocab`` False: without the embedding and lm_head tables; ``stage``: that stage's)."""
    moe = model.moe
    active = None if moe is None else (moe.experts_per_token, moe.num_experts)
    return _stage_bytes(model, dtype, quantization, (tp, pp, stage), active, fmt, True, vocab)


def _stage_bytes(model: ModelSpec, dtype: str, quantization: str | None,
                 where: tuple[int, int, int | None], active: tuple[int, int] | None,
                 fmt: FormatArg, reads: bool, vocab: bool) -> int:
    """The largest pipeline stage's bytes on one GPU (``where``: tp, pp, one stage or None);
    ``active``: keep k of n routed experts."""

    def compute() -> int:
        tp, pp, stage = where
        pricing = _pricing(model, dtype, quantization, fmt)
        return max(_sum_bytes(_stage_parts(model, pp, s, reads, vocab), pricing, tp, active)
                   for s in (range(pp) if stage is None else (stage,)))

    key = ("fullest", model, dtype, quantization, where, active, fmt, reads, vocab)
    return WEIGHT_MEMO.get(key, compute)
