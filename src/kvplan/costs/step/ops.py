"""The ops one engine step runs on the fullest GPU, as vLLM lays them out: GEMMs with their
TP-sharded shapes (q/k/v and gate/up fused as vLLM fuses them), routed-expert MLPs,
attention per layer kind, and the tensor-parallel all-reduces. Pure shapes, no prices:
``kvplan.costs.step.tables`` prices them from the measured kernel tables."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

from kvplan.memo import Memo
from kvplan.specs.model import ModelSpec
from kvplan.specs.serving import EngineConfig

if TYPE_CHECKING:
    from kvplan.costs.memory.resolved import ResolvedDeployment
    from kvplan.costs.memory.weight_formats import WeightFormat
    from kvplan.costs.step.parallel.ep_comm import DboOverlap, Link, MoeExchange

PerWhat = Literal["token", "request", "prefill_context"]


@dataclass(frozen=True, slots=True, kw_only=True)
class GemmOp:
    """``count`` GEMMs of m x k by k x n per step; m is the step's tokens (``per`` token), its
    requests (the lm_head samples one row per request) or MLA's cached prefill context."""

    name: str
    n: int
    k: int
    count: int
    per: PerWhat = "token"
    weight_bytes: int = 0
    """Bytes of one quantized weight matrix on this GPU, scales and zeros included (0: a
    16-bit weight): what a weight-only or int8 kernel reads (``kernels.quantized``)."""
    kept: bool = False
    """The checkpoint's ignore list keeps this layer in the model dtype (vLLM's
    UnquantizedLinearMethod): a 16-bit GEMM whatever the step's compute precision."""


@dataclass(frozen=True, slots=True, kw_only=True)
class MoeOp:
    """``count`` routed-expert MLPs (gate_up + down over the experts on this GPU)."""

    hidden: int
    inter: int
    """Expert intermediate size before tensor parallelism (each GPU holds inter / tp)."""
    experts: int
    topk: int
    tp: int
    count: int
    ep: int = 1
    """Expert-parallel degree: this GPU holds experts / ep of them, whole (tp is then 1)."""
    token_scale: int = 1
    """DP ranks whose tokens reach these experts (dp under data parallelism, else 1)."""
    imbalance: float = 1.0
    """Busiest GPU's expert load over the mean (above 1 under EP;
    costs/step/parallel/ep_comm.py)."""
    dispatched: bool = False
    """DeepEP: only the tokens routed here arrive, and the local experts run as their own
    MoE on them (else vLLM's default: every gathered token meets the expert map)."""
    dtype: str | None = None
    """The MoE table's dtype when the experts are stored in a format of their own (gpt-oss's
    MXFP4 experts run vLLM's w4a16 MXFP4 MoE kernels: ``w4a16_mxfp4``); None: the step's
    compute precision."""


@dataclass(frozen=True, slots=True, kw_only=True)
class AttentionOp:
    """Attention over the cache for ``count`` layers of one kind, per-GPU heads."""

    kind: Literal["full", "sliding", "mla"]
    heads: int
    kv_heads: int
    head_dim: int
    v_head_dim: int
    window: int
    count: int
    latent: int = 0
    """MLA: the cached latent's width per token (kv_lora_rank + qk_rope_head_dim), which
    every head reads; no KV heads (``kv_heads`` 1 is the latent, not a head)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GdnOp:
    """Sequence mixing of ``count`` Gated DeltaNet layers (conv + delta rule), heads as one
    GPU holds them; its projections are GEMMs (``state_in_proj``, ``state_out_proj``)."""

    key_heads: int
    value_heads: int
    key_dim: int
    value_dim: int
    count: int


@dataclass(frozen=True, slots=True, kw_only=True)
class StageOps:
    """Every op of one step on the fullest pipeline stage."""

    gemms: tuple[GemmOp, ...]
    moe: MoeOp | None
    attention: tuple[AttentionOp, ...]
    allreduces: int
    """All-reduces per step under tensor parallelism (``tp_allreduces``), else 0."""
    allreduce_bytes_per_token: int
    tp: int
    layers: int
    exchange: MoeExchange | None = None
    """Data parallelism: every MoE layer's dispatch + combine
    (``kvplan.costs.step.parallel.ep_comm``)."""
    allreduce_link: Link | None = None
    """TP wider than a node: the all-reduces priced over this link, not the tables."""
    cudagraph_max_tokens: int = 0
    """Steps of up to this many tokens replay a CUDA graph padded to a captured size
    (``kvplan.costs.step.cudagraph``); 0: no padding."""
    overlap: DboOverlap | None = None
    """--enable-dbo: the exchange runs under the other micro-batch's compute
    (``kvplan.costs.step.parallel.overlap``)."""
    gdn: GdnOp | None = None
    """The stage's Gated DeltaNet layers (Qwen3-Next), priced from measured GDN kernels."""
    lm_head_share: float = 1.0
    """The lm_head op's share in the stage's seconds: 1 / pp, as a step prices the fullest
    stage pp times and the last stage alone runs the lm_head, once a step."""


_MEMO: Memo[StageOps] = Memo(512)
"""stage_ops per (model, TP, PP, expert kernel family, largest captured size): all it reads."""


def stage_ops(model: ModelSpec, engine: EngineConfig,
              resolved: ResolvedDeployment | None = None) -> StageOps:
    """The ops of one step on the fullest stage (layers grouped: equal shapes add counts);
    ``resolved``: the deployment's weight format resolved once (None: resolved here)."""
    from kvplan.costs.step.cudagraph import max_capture_tokens

    key = (model, engine.tensor_parallel_size, engine.pipeline_parallel_size,
           engine.quantization, engine.mxfp4_moe_backend, max_capture_tokens(engine, model))
    return _MEMO.get(key, lambda: _stage_ops(model, engine, resolved))


def _stage_ops(model: ModelSpec, engine: EngineConfig,
               resolved: ResolvedDeployment | None = None) -> StageOps:
    from kvplan.costs.memory.params import pp_layer_ranges
    from kvplan.costs.step.cudagraph import max_capture_tokens

    tp, pp = engine.tensor_parallel_size, engine.pipeline_parallel_size
    stage = pp_layer_ranges(model.num_layers, pp)[priced_stage(model, pp)]
    fmt = _weight_format(model, engine, resolved)
    gemms: dict[tuple[str, int, int, str, int, bool], int] = {}
    for layer in stage:
        for op in _layer_gemms(model, layer, tp, fmt):
            key = (op.name, op.n, op.k, op.per, op.weight_bytes, op.kept)
            gemms[key] = gemms.get(key, 0) + op.count
    vocab = -(-model.vocab_size // 64) * 64 // tp
    gemms[("lm_head", vocab, model.hidden_size, "request", 0, False)] = 1
    return StageOps(
        gemms=tuple(GemmOp(name=n, n=a, k=b, count=c, per=p,  # type: ignore[arg-type]
                           weight_bytes=w, kept=kept)
                    for (n, a, b, p, w, kept), c in gemms.items()),
        moe=_moe_op(model, engine, stage, resolved), attention=_attention_ops(model, stage, tp),
        allreduces=tp_allreduces(model, stage, tp),
        allreduce_bytes_per_token=2 * model.hidden_size, tp=tp, layers=len(stage),
        cudagraph_max_tokens=max_capture_tokens(engine, model), gdn=_gdn_op(model, stage, tp),
        lm_head_share=1.0 / pp)


def priced_stage(model: ModelSpec, pp: int) -> int:
    """The pipeline stage a step prices (the other pp - 1 are taken to be like it): the one
    whose layers hold the most weights, then the longer, then the first (it runs the TP
    embedding's all-reduce); its ops, FLOPs and weight bytes all come from it. By layer count
    alone DeepSeek-V3 at pp 2 priced stage 0 (3 dense + 28 MoE layers) with the weight bytes
    of stage 1 (30 MoE layers, the slower stage), the fullest GPU's."""
    from kvplan.costs.memory.params import layer_parts, pp_layer_ranges

    ranges = pp_layer_ranges(model.num_layers, pp)

    def weight(i: int) -> tuple[int, int, int]:
        layers = ranges[i]
        return sum(p.params for n in layers for p in layer_parts(model, n)), len(layers), -i

    return max(range(pp), key=weight) if pp > 1 else 0


def tp_allreduces(model: ModelSpec, stage: range, tp: int) -> int:
    """All-reduces one step runs on ``stage`` under TP: one per row-parallel block output.
    A decoder layer is two blocks (mixer, then MLP / MoE); a Nemotron-H layer is one (a
    mamba, attention or MLP block: vLLM nemotron_h.py), and so is a parallel Falcon layer
    (attention + MLP summed, then reduced once: vLLM falcon.py), so one all-reduce per
    layer. The first stage adds one: vLLM's VocabParallelEmbedding all-reduces its output,
    T x hidden like the others (vocab_parallel_embedding.py): Llama-3.1-70B at TP8 runs
    2 x 80 + 1."""
    if tp <= 1:
        return 0
    embedding = 1 if stage.start == 0 else 0
    one = model.one_block_layers or model.parallel_block
    return (1 if one else 2) * len(stage) + embedding


def _layer_gemms(model: ModelSpec, layer: int, tp: int,
                 fmt: WeightFormat | None = None) -> list[GemmOp]:
    """One layer's GEMMs from its weight parts (``kvplan.costs.memory.params``), fused as vLLM
    does: q/k/v into one QKV projection, gate/up into one merged column-parallel layer; each
    with its quantized bytes where ``fmt`` stores it (``GemmOp.weight_bytes``)."""
    from kvplan.costs.memory.params import layer_parts

    ops: list[GemmOp] = []
    fused = {"qkv_proj": [0, 0, 0], "mla_fused_qkv_a_proj": [0, 0, 0]}  # name: n, k, bytes
    kept = {"qkv_proj": True, "mla_fused_qkv_a_proj": True}  # every shard kept 16-bit
    for part in layer_parts(model, layer):
        if not part.linear or part.role == "experts":
            continue
        rows, cols = part.shape_on_gpu(tp)
        wb = (fmt.linear_bytes(rows, cols)
              if fmt is not None and fmt.converts(part.role, not part.kept, part.shard, rows)
              else 0)
        into = _fused_into(model, part.role, part.shard)
        if into is not None:
            fused[into] = [fused[into][0] + rows, cols, fused[into][2] + wb]
            kept[into] = kept[into] and part.kept
            continue
        ops.append(GemmOp(name=_gemm_name(model, part.role, part.shard, part.rows, cols),
                          n=rows, k=cols, count=part.count,
                          per=_per(model, part.role, rows, cols), weight_bytes=wb,
                          kept=part.kept))
    for name, (n, k, wb) in fused.items():
        if n:
            ops.insert(0, GemmOp(name=name, n=n, k=k, count=1, weight_bytes=wb,
                                 kept=kept[name]))
    return ops


def _fused_into(model: ModelSpec, role: str, shard: str) -> str | None:
    """The one GEMM vLLM runs a weight part in with others: q, k, v as ``qkv_proj``; MLA with
    a q LoRA runs q_a_proj and kv_a_proj_with_mqa as one replicated ``fused_qkv_a_proj``
    (n = q_lora_rank + kv_lora_rank + qk_rope_head_dim: DeepSeek-V3's 2,112; vLLM
    deepseek_v2.py, MergedColumnParallelLinear with disable_tp); None: its own GEMM."""
    if role != "attention":
        return None
    if model.mla is None:
        return "qkv_proj" if shard in ("col", "kv") else None
    return "mla_fused_qkv_a_proj" if shard == "rep" and model.mla.q_lora_rank else None


def _weight_format(model: ModelSpec, engine: EngineConfig,
                   resolved: ResolvedDeployment | None) -> WeightFormat | None:
    """The deployment's weight format (None: 16-bit weights)."""
    from kvplan.costs.memory.weight_formats import resolve_format

    if resolved is not None:
        return resolved.weight_format
    return resolve_format(engine.quantization, model.quantization, model.weight_block_size,
                          model.quant_layout)


def _gemm_name(model: ModelSpec, role: str, shard: str, rows: int, cols: int) -> str:
    """vLLM's layer name of one weight part (``rows`` before TP), each named apart: MLA's
    kv_a down-projection (without a q LoRA), Qwen's one-output shared-expert gate and the router,
    Gated DeltaNet's in_proj_qkvz and in_proj_ba."""
    if role == "attention":
        return _mla_name(model, shard, rows, cols) if model.mla is not None else "o_proj"
    if role == "router" and rows == 1:
        return "shared_expert_gate"
    if role in ("dense_mlp", "shared_experts"):  # a plain MLP (Falcon, GPT-2): no gate
        prefix = "shared_" if role == "shared_experts" else ""
        up = "gate_up_proj" if model.mlp_gated else "up_proj"
        return f"{prefix}{'down_proj' if shard == 'row' else up}"
    if role == "state_layers":
        la = model.linear_attention
        if shard == "col" and la is not None and rows == 2 * la.num_value_heads:
            return "state_in_proj_ba"  # Gated DeltaNet's in_proj_ba beside in_proj_qkvz
        return "state_out_proj" if shard == "row" else "state_in_proj"
    return role


def _mla_name(model: ModelSpec, shard: str, rows: int, cols: int) -> str:
    a = model.mla
    assert a is not None
    if cols == a.kv_lora_rank:
        return "mla_kv_b_proj"
    if shard == "row":
        return "o_proj"
    if shard == "col":
        return "mla_q_proj" if cols == model.hidden_size else "mla_q_b_proj"
    return "mla_kv_a_proj"  # kv_a_proj_with_mqa alone: no q LoRA to fuse it with


def _per(model: ModelSpec, role: str, rows: int, cols: int) -> PerWhat:
    """MLA's kv_b_proj runs on the cached context of prefill requests (vLLM's prefill path
    up-projects the latent); decode absorbs it into the attention kernel's width."""
    if role == "attention" and model.mla is not None and cols == model.mla.kv_lora_rank:
        return "prefill_context"
    return "token"


def _moe_op(model: ModelSpec, engine: EngineConfig, stage: range,
            resolved: ResolvedDeployment | None) -> MoeOp | None:
    e = model.moe
    if e is None:
        return None
    layers = sum(1 for i in stage if e.routes(i))
    if not layers:
        return None
    return MoeOp(hidden=model.hidden_size, inter=e.moe_intermediate_size,
                 experts=e.num_experts, topk=e.experts_per_token,
                 tp=engine.tensor_parallel_size, count=layers,
                 dtype=expert_dtype(model, engine, resolved))


def expert_dtype(model: ModelSpec, engine: EngineConfig,
                 resolved: ResolvedDeployment | None = None) -> str | None:
    """The MoE kernel family of experts stored apart from the rest: MXFP4 experts (gpt-oss)
    run vLLM's weight-only MXFP4 MoE kernels (16-bit activations; Triton, or Marlin under
    ``mxfp4_moe_backend='marlin'``); 4-bit AWQ / GPTQ / compressed-tensors wNa16 experts run
    Marlin MoE (``int4_wo``: GPTQMarlinMoEMethod, AWQMoEMethod, the wNa16 Marlin MoE); None
    otherwise (the step's compute precision)."""
    from kvplan.costs.kernels.moe import MARLIN

    fmt = _weight_format(model, engine, resolved)
    if fmt is not None and fmt.name in ("awq", "gptq") and fmt.bits == 4:
        return "int4_wo"
    if fmt is None or fmt.name != "mxfp4":
        return None
    return MARLIN if engine.mxfp4_moe_backend == "marlin" else "w4a16_mxfp4"


def _gdn_op(model: ModelSpec, stage: range, tp: int) -> GdnOp | None:
    """The stage's GDN layers with their heads split by TP as vLLM splits them."""
    la = model.linear_attention
    count = sum(1 for i in stage if model.layer_kinds[i] == "linear_attention")
    if la is None or not count:
        return None
    return GdnOp(key_heads=max(1, la.num_key_heads // tp),
                 value_heads=max(1, la.num_value_heads // tp), key_dim=la.key_head_dim,
                 value_dim=la.value_head_dim, count=count)


def _attention_ops(model: ModelSpec, stage: range, tp: int) -> tuple[AttentionOp, ...]:
    heads = max(1, model.num_attention_heads // tp)
    kv_heads = max(1, model.num_kv_heads // tp)
    ops = []
    for kind in ("full", "sliding", "mla"):
        count = sum(1 for i in stage if model.layer_kinds[i] == kind)
        if not count:
            continue
        if kind == "mla" and model.mla is not None:
            a = model.mla
            ops.append(AttentionOp(kind="mla", heads=heads, kv_heads=1,
                                   head_dim=a.qk_nope_head_dim + a.qk_rope_head_dim,
                                   v_head_dim=a.v_head_dim, window=0, count=count,
                                   latent=a.kv_lora_rank + a.qk_rope_head_dim))
            continue
        ops.append(AttentionOp(kind=kind, heads=heads, kv_heads=kv_heads,
                               head_dim=model.head_dim, v_head_dim=model.v_head_dim,
                               window=(model.sliding_window or 0) if kind == "sliding" else 0,
                               count=count))
    return tuple(ops)
