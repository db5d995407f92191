"""A deployment's step ops priced from the measured kernel tables (``kvplan.costs.kernels``):
per-token-count tables of the GEMMs and MoE, the all-reduces, and the attention kernels'
per-pair / per-cached-token / per-request seconds, each read off the GPU's own measurements.

Nothing here is fitted on serving data. Attention kernels are linear in what a step's
aggregates carry (the simulator prices a step from sums)::

    decode attention, per layer   t(B, L) = a + g * B + d * B * L     (B requests, L cached)
    prefill attention, per layer  t(P)    = b * P                      (P attended pairs)

``a``, ``g``, ``d``: the least-squares line (relative error) through the measured grid at the
model's head shape; ``b``: the measured causal self-attention of one chunk-sized sequence;
tests hold the linear forms against the tables they are read from.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import lru_cache

import numpy as np

from kvplan.costs import kernels as kn
from kvplan.costs.kernels.gemm import served_gemm_s as gemm_times
from kvplan.costs.kernels.quantized import quantized_gemm_s, table_gemm_s
from kvplan.costs.memory.weight_formats import FP8_BLOCK
from kvplan.costs.step.batch import FloatArray, IntArray
from kvplan.costs.step.constants import routed_share
from kvplan.costs.step.cudagraph import padded_tokens
from kvplan.costs.step.gdn_rates import GdnRates, gdn_rates, gdn_sequence_s
from kvplan.costs.step.ops import AttentionOp, GemmOp, MoeOp, StageOps
from kvplan.costs.step.records import at_most

_DECODE_B = (1, 4, 16, 64, 256)
"""Decode batches the decode-attention line is read at."""
_DECODE_L = (128, 1024, 4096, 16384, 32768)
"""Cached lengths the decode-attention line is read at."""
_PREFILL_CAP = 16384
MLA_GEMM = "bfloat16"
"""GEMM family of the MLA blocks the attention core is read off, and of the projections
subtracted from them: one family, so the difference is the attention kernel. (Blocks read
at bf16 less block-fp8 projections - the standalone fp8_block table is 2-3x slower at small
m than the GEMMs inside the measured block - left B200's decode core at 10% of its block:
DeepSeek-V3 TP8, 64 x 4,096 fp8 KV read at 18 TB/s on an 8 TB/s GPU.)"""


@dataclass(frozen=True, slots=True, kw_only=True)
class AttentionRates:
    """Seconds one step's attention layers of one kind cost, summed over their layers."""

    per_pair_s: float
    per_context_s: float
    per_request_s: float
    per_step_s: float


@dataclass(frozen=True, slots=True, kw_only=True)
class MeasuredStep:
    """A deployment's measured op prices (one GPU of the fullest stage)."""

    gpu: str
    dense_s: FloatArray
    """[T] for T = 0..max_tokens: every per-token GEMM + the MoE layers at m = T."""
    allreduce_s: FloatArray | None
    """[T]: the step's tensor-parallel all-reduces of T tokens' activations."""
    lm_fixed_s: float
    """lm_head at one request (a weight read); lm(R) = lm_fixed_s + lm_per_request_s*(R-1)."""
    lm_per_request_s: float
    """Each request past the first: the head's chord from one row to 512 (``_lm_head``)."""
    full: AttentionRates | None
    sliding: AttentionRates | None
    mla_context_s: float
    """MLA: kv_b_proj up-projection seconds per cached token of a prefill request."""
    stream_bytes_per_s: float
    """Bandwidth the measured decode-attention kernel reaches: prices elementwise traffic."""
    compute_flops_per_s: float
    """FLOP/s a measured large GEMM (8,192 cubed) reaches: prices recurrent-state math."""
    sources: tuple[str, ...] = field(default=())
    notes: tuple[str, ...] = field(default=())
    gdn: GdnRates | None = None
    """Gated DeltaNet layers from their measured kernels (None: none, or not measured at
    their heads on this GPU: priced as recurrent-state FLOPs and bytes)."""
    gdn_seq_s: FloatArray | None = None
    """[L], L = 0..max_tokens: those layers for one sequence of L new tokens (0 below 2;
    None with ``gdn``), the floor of a step whose longest prompt chunk is L."""

    @property
    def max_tokens(self) -> int:
        return len(self.dense_s) - 1


@lru_cache(maxsize=256)
def measured_step(ops: StageOps, gpu: str, gemm_dtype: str, kv_dtype: str,
                  max_tokens: int, prefill_tokens: int) -> MeasuredStep:
    """Price ``ops`` on ``gpu`` from its tables for steps of up to ``max_tokens`` tokens;
    ``prefill_tokens`` is the chunk a prefill step typically computes (the attention rate is
    read at that length)."""
    dense, ar, lm_fixed, lm_slope, mla_ctx = _dense_tables(ops, gpu, gemm_dtype, max_tokens)
    chunk = min(max(prefill_tokens, 512), _PREFILL_CAP)
    # attention does not depend on the CUDA-graph sizes (seqs 128 and 256 share its rates)
    full_r, slide_r = _attention_rates(replace(ops, cudagraph_max_tokens=0), gpu, kv_dtype,
                                       chunk)
    gdn = gdn_rates(gpu, ops.gdn, chunk) if ops.gdn is not None else None
    return MeasuredStep(
        gpu=gpu, dense_s=dense, allreduce_s=ar, lm_fixed_s=lm_fixed, lm_per_request_s=lm_slope,
        full=full_r, sliding=slide_r,
        mla_context_s=mla_ctx, stream_bytes_per_s=_stream_rate(gpu, kv_dtype),
        compute_flops_per_s=_compute_rate(gpu, gemm_dtype),
        sources=(kn.resolve_gpu(gpu),), notes=(),
        gdn=gdn, gdn_seq_s=gdn_sequence_s(gpu, ops.gdn, max_tokens)
        if gdn is not None and ops.gdn is not None else None)


@lru_cache(maxsize=128)
def _dense_tables(ops: StageOps, gpu: str, gemm_dtype: str, max_tokens: int
                  ) -> tuple[FloatArray, FloatArray | None, float, float, float]:
    """(GEMM + MoE seconds per token count, all-reduce seconds, lm_head fixed and per-request
    seconds, MLA up-projection seconds per context token): the same for every KV dtype and
    chunk size a plan tries on one model, GPU, TP and weight format."""
    real = np.arange(max_tokens + 1, dtype=np.int64)
    m = padded_tokens(real, ops.cudagraph_max_tokens)
    top = int(m.max())
    dense = np.zeros(max_tokens + 1, dtype=np.float64)
    lm_fixed = lm_slope = mla_ctx = 0.0
    for op in ops.gemms:
        if op.per == "token":
            line = _gemm_line(gpu, op.n, op.k, op_dtype(op, gemm_dtype), top, op.weight_bytes)
            dense[1:] += op.count * line[m[1:] - 1]
        elif op.per == "request":
            lm_fixed, lm_slope = (ops.lm_head_share * x for x in _lm_head(
                gpu, op.n, op.k, op_dtype(op, gemm_dtype), ops.tp))
        else:
            mla_ctx = op.count * float(table_gemm_s(gpu, np.array([4096]), op.n, op.k,
                                                    gemm_dtype, op.weight_bytes)[0]) / 4096
    if ops.moe is not None:
        # the graph's padding rows share one routing (at most top-k more experts): the
        # experts are priced at the real tokens, not the padded count
        dense[1:] += ops.moe.count * moe_times(gpu, ops.moe, real[1:], gemm_dtype)
    ar = None
    if ops.allreduces or ops.exchange is not None:
        ar = np.zeros(max_tokens + 1, dtype=np.float64)
        if ops.allreduce_link is not None:
            from kvplan.costs.step.parallel.ep_comm import cross_node_allreduce_s

            ar[1:] = ops.allreduces * cross_node_allreduce_s(
                (m[1:] * ops.allreduce_bytes_per_token).astype(np.float64), ops.tp,
                ops.allreduce_link)
        elif ops.allreduces:  # a step past the largest captured graph runs eagerly
            graph = kn.all_reduce_line(gpu, ops.allreduce_bytes_per_token, ops.tp, top)
            eager = kn.all_reduce_line(gpu, ops.allreduce_bytes_per_token, ops.tp, top, False)
            ar[1:] = ops.allreduces * np.where(m[1:] <= ops.cudagraph_max_tokens,
                                               graph[m[1:] - 1], eager[m[1:] - 1])
        if ops.exchange is not None:
            ar[1:] += ops.exchange.seconds(m[1:])
    if ops.overlap is not None and ar is not None:
        _overlap(ops, gpu, gemm_dtype, real, m, dense, ar)
    return dense, ar, lm_fixed, lm_slope, mla_ctx


def _overlap(ops: StageOps, gpu: str, gemm_dtype: str, real: IntArray, m: IntArray,
             dense: FloatArray, ar: FloatArray) -> None:
    """DBO: steps above the threshold (and of two tokens at least: two micro-batches) price
    their GEMMs, experts and exchange together (``kvplan.costs.step.parallel.overlap``),
    in ``dense``; the exchange leaves ``ar``. In place."""
    from kvplan.costs.step.parallel.overlap import overlapped_s

    assert ops.overlap is not None and ops.exchange is not None and ops.moe is not None
    sel = np.flatnonzero(real > max(ops.overlap.threshold, 1))
    if not len(sel):
        return
    moe, top = ops.moe, int(m.max())
    stored = {(g.name, g.n, g.k): g for g in ops.gemms}

    def line(n: int, k: int, name: str, rows: IntArray) -> FloatArray:
        op = stored.get((name, n, k)) or GemmOp(name=name, n=n, k=k, count=1)
        return _gemm_line(gpu, n, k, op_dtype(op, gemm_dtype), top, op.weight_bytes)[rows - 1]

    def experts(tokens: IntArray) -> FloatArray:
        return moe_times(gpu, moe, tokens, gemm_dtype)

    ar[sel] -= ops.exchange.seconds(m[sel])
    dense[sel] = overlapped_s(ops, m[sel], real[sel], line, experts)


@lru_cache(maxsize=256)
def _gemm_line(gpu: str, n: int, k: int, dtype: str, top: int, wbytes: int = 0) -> FloatArray:
    """``quantized_gemm_s`` at m = 1..top (index m - 1): one line for every CUDA-graph size a
    plan tries (elementwise: a call at the padded counts gives these values). Not written."""
    return quantized_gemm_s(gpu, np.arange(1, top + 1, dtype=np.int64), n, k, dtype, wbytes)


@lru_cache(maxsize=128)
def _attention_rates(ops: StageOps, gpu: str, kv_dtype: str, chunk: int
                     ) -> tuple[AttentionRates | None, AttentionRates | None]:
    """(full or MLA, sliding) attention rates. MLA's measured blocks include projections:
    the core is the block less them, both read at the block's GEMM family (``MLA_GEMM``)."""
    by_kind = {a.kind: a for a in ops.attention}
    full = by_kind.get("full") or by_kind.get("mla")
    proj = _MlaProjections(ops, gpu, MLA_GEMM) if "mla" in by_kind else None
    full_r = _rates(gpu, full, kv_dtype, chunk, proj) if full else None
    slide = by_kind.get("sliding")
    slide_r = _rates(gpu, slide, kv_dtype, chunk) if slide else None
    if (ref := kn.capped_at(gpu)) is None:
        return full_r, slide_r
    # the same die as ref (H200: H100's): its fitted lines never above ref's (docs/silicon.md)
    theirs = _attention_rates(ops, ref, kv_dtype, chunk)
    return at_most(full_r, theirs[0]), at_most(slide_r, theirs[1])


def moe_times(gpu: str, e: MoeOp, m: IntArray, gemm_dtype: str) -> FloatArray:
    """One MoE layer's expert GEMMs for steps of ``m`` tokens per DP rank: the experts see
    every DP rank's tokens (``token_scale``), and the busiest GPU ``imbalance`` x the mean;
    the running maximum over 1..T (the routing share scales a row's fixed cost too, so alone
    it priced gpt-oss-20b TP8 on H100 at 34.4 us for 8 tokens, 39.2 us for 1)."""
    m = np.asarray(m, dtype=np.int64)
    out: FloatArray = _moe_line(gpu, e, int(m.max(initial=1)), gemm_dtype)[np.maximum(m, 1) - 1]
    return out


@lru_cache(maxsize=64)
def _moe_line(gpu: str, e: MoeOp, top: int, gemm_dtype: str) -> FloatArray:
    line = np.maximum.accumulate(_moe_raw(gpu, e, np.arange(1, top + 1), gemm_dtype))
    line.setflags(write=False)  # cached: not to be written
    return line


def _moe_raw(gpu: str, e: MoeOp, m: IntArray, gemm_dtype: str) -> FloatArray:
    """One MoE layer at ``m`` tokens as the tables and the routing share price it.

    The tables time vLLM's fused_experts on ``tokens`` tokens routed over all E experts with
    an expert map keeping the E / ep local ones (aiconfigurator's collector), which is what
    vLLM's default exchange runs. Under DeepEP (``dispatched``) only the dp x T x k / ep
    routed rows arrive, each expert the same rows as when one GPU holds all E: priced as
    the all-experts kernel (ep 1) at dp x T tokens x ceil(E / ep) / E of its time."""
    m = m if e.token_scale == 1 else m * e.token_scale
    ep, share = e.ep, 1.0
    if e.dispatched:
        ep, share = 1, -(-e.experts // e.ep) / e.experts
    t = kn.served_moe_s(gpu, m, hidden=e.hidden, inter=e.inter, num_experts=e.experts,
                        topk=e.topk, dtype=e.dtype or moe_dtype(gemm_dtype), tp=e.tp, ep=ep)
    if kn.moe_routing(gpu) == "balanced":
        t = t * routed_share(m, e.experts, e.topk)
    if e.dispatched:
        t = t * share
    return t if e.imbalance == 1.0 else t * e.imbalance


def op_dtype(op: GemmOp, gemm_dtype: str) -> str:
    """vLLM keeps the MoE router, Qwen's shared-expert gate and the lm_head 16-bit in fp8/fp4
    models; a block-fp8 checkpoint keeps 16-bit any layer under one 128-row block per GPU (no
    partial block shards: ``validate_fp8_block_shape``; Qwen3-Next's in_proj_ba, 2 x 32 value
    heads, 32 rows per GPU at TP2, is bf16; ``costs.memory.params`` sizes it so too); ``kept``."""
    if op.kept or op.name in ("router", "shared_expert_gate", "lm_head") or (
            gemm_dtype == "fp8_block" and op.n < FP8_BLOCK):
        return "bfloat16"
    return gemm_dtype


def _lm_head(gpu: str, n: int, k: int, dtype: str, tp: int = 1) -> tuple[float, float]:
    """(seconds at 1 row, seconds per further row): the chord through two measured points,
    1 and 512 rows, each + the TP logits gather. The gather grows with every row from the
    first while the GEMM stays a weight read: max(t(1), R t(512) / 512) left L40S TP2's
    Gemma-2-9B head + gather at 64 requests at 1.30 ms where the tables give 2.28 ms."""
    rows = np.array([1, 512])
    t = gemm_times(gpu, rows, n, k, dtype) + kn.logits_gather_s(gpu, rows, n, tp)
    return float(t[0]), max(0.0, float(t[1] - t[0])) / 511


class _MlaProjections:
    """The per-token GEMMs of one MLA layer (fused q_a + kv_a, q_b, o_proj): the measured MLA blocks
    include them, and the step prices them from the GEMM tables, so the attention core is
    the block less them (at least a tenth of the block).

    kv_b_proj stays in the core: the step prices it only on a prefill's cached context
    (``mla_context_s``), while the measured prefill block also up-projects its new tokens
    (vLLM's ``_forward_prefill``: ``kv_b_proj(kv_c_normed)``), and the decode block runs its
    absorbed form (the W_UK_T / W_UV BMMs). Subtracted from the prefill block, the new
    tokens' up-projection was priced nowhere."""

    def __init__(self, ops: StageOps, gpu: str, dtype: str) -> None:
        self.ops = [g for g in ops.gemms if g.per == "token" and g.name in (
            "mla_fused_qkv_a_proj", "mla_kv_a_proj", "mla_q_proj", "mla_q_b_proj", "o_proj")]
        self.gpu, self.dtype = gpu, dtype
        self.layers = max((g.count for g in self.ops), default=1)
        self._proj: dict[int, float] = {}
        """m -> the projections' seconds: the decode line asks each batch size at five
        context lengths (the same sum: looked up once, not five times)."""

    def core(self, block_s: float, m: int) -> float:
        proj = self._proj.get(m)
        if proj is None:
            proj = sum(g.count / self.layers * float(gemm_times(self.gpu, np.array([m]), g.n,
                                                                  g.k, self.dtype)[0])
                       for g in self.ops)
            self._proj[m] = proj
        return max(block_s - proj, 0.1 * block_s)


def _rates(gpu: str, a: AttentionOp, kv_dtype: str, chunk: int,
           proj: _MlaProjections | None = None) -> AttentionRates:
    """Per-pair, per-context, per-request and per-step seconds of ``a.count`` layers; a cache
    precision the tables lack reads its table's per-token line at its own bytes."""
    kv_dtype, kv_scale = kn.kv_table(kv_dtype, a.latent if a.kind == "mla" else a.head_dim, gpu)
    floor, per_req, per_ctx = _decode_line(gpu, a, kv_dtype, proj)
    pairs = chunk * (chunk + 1) // 2
    if a.window:
        pairs = sum(min(j, a.window) for j in range(1, chunk + 1))
    prefill = _prefill_s(gpu, a, kv_dtype, chunk)
    if proj is not None:
        prefill = proj.core(prefill, chunk)
    n = a.count
    return AttentionRates(per_pair_s=n * prefill / pairs, per_context_s=n * per_ctx * kv_scale,
                          per_request_s=n * per_req, per_step_s=n * floor)


def _decode_line(gpu: str, a: AttentionOp, kv_dtype: str,
                 proj: _MlaProjections | None) -> tuple[float, float, float]:
    """(floor, per request, per cached token) of one layer's decode attention: the line
    t = floor + g B + d B L through the measured grid (B 1..256, L 128..32,768), least
    squares in relative error, each coefficient at least 0, the slope at least the cached
    bytes per token over the datasheet bandwidth (fitted freely, L40S's fp8 line for
    Llama-3.1-70B at TP8 read at 1.11x its 864 GB/s). A sliding layer reads at most
    its window, so its line is fitted on L clipped to the window, the context the step
    prices it at (fitted on the raw L, the flat part past the window made the slope about
    6x too shallow: Gemma-2-9B's 4,096-token window read at ~20 TB/s on H100)."""
    rows, want = [], []
    grid = _decode_grid(gpu, a, kv_dtype)
    for i, b in enumerate(_DECODE_B):
        for j, ln in enumerate(_DECODE_L):
            t = grid[i * len(_DECODE_L) + j] if grid is not None else _decode_s(
                gpu, a, kv_dtype, b, ln)
            if proj is not None:
                t = proj.core(t, b)
            seen = min(ln, a.window) if a.window else ln
            rows.append([1.0 / t, b / t, b * seen / t])
            want.append(1.0)
    x, y = np.array(rows), np.array(want)
    coef = np.linalg.lstsq(x, y, rcond=None)[0]
    width = (a.latent if a.kind == "mla" else a.kv_heads * (a.head_dim + a.v_head_dim))
    least = width * (1 if kv_dtype == "fp8" else 2) / float(kn.tables.peaks(gpu)["mem_bw"])
    if coef[2] < least:  # never faster than the datasheet's bandwidth: the rest refitted at it
        coef = [*np.linalg.lstsq(x[:, :2], y - least * x[:, 2], rcond=None)[0], least]
    floor, per_req, per_ctx = (max(0.0, float(c)) for c in coef)
    return floor, per_req, per_ctx


def _decode_grid(gpu: str, a: AttentionOp, kv_dtype: str) -> list[float] | None:
    """``_decode_s`` at every (B, L) of the decode grid in one lookup (B-major, contiguous
    arrays: elementwise, the same floats as 25 scalar calls; a test checks it); None for MLA,
    looked up point by point."""
    if a.kind == "mla":
        return None
    b = np.repeat(np.array(_DECODE_B, dtype=np.int64), len(_DECODE_L))
    ln = np.tile(np.array(_DECODE_L, dtype=np.int64), len(_DECODE_B))
    t = kn.decode_attention_s(gpu, b, ln, num_heads=a.heads, num_kv_heads=a.kv_heads,
                              head_dim=a.head_dim, kv_dtype=kv_dtype, window=a.window)
    return [float(x) for x in t]


def _decode_s(gpu: str, a: AttentionOp, kv_dtype: str, batch: int, kv_len: int) -> float:
    """One layer's measured decode attention (MLA: vLLM's MLA decode module)."""
    if a.kind == "mla":
        return float(kn.mla_decode_s(gpu, batch, kv_len, num_heads=a.heads,
                                     kv_dtype=kv_dtype, gemm_dtype=MLA_GEMM)[()].sum())
    return float(kn.decode_attention_s(gpu, batch, kv_len, num_heads=a.heads,
                                       num_kv_heads=a.kv_heads, head_dim=a.head_dim,
                                       kv_dtype=kv_dtype, window=a.window)[()])


def _prefill_s(gpu: str, a: AttentionOp, kv_dtype: str, isl: int) -> float:
    """One layer's measured causal prefill attention of one ``isl``-token sequence."""
    if a.kind == "mla":
        return float(kn.mla_context_s(gpu, 1, isl, num_heads=a.heads,
                                      kv_dtype=kv_dtype, gemm_dtype=MLA_GEMM)[()].sum())
    return float(kn.context_attention_s(gpu, 1, isl, num_heads=a.heads,
                                        num_kv_heads=a.kv_heads, head_dim=a.head_dim,
                                        kv_dtype=kv_dtype, window=a.window)[()])


@lru_cache(maxsize=64)
def _stream_rate(gpu: str, kv_dtype: str) -> float:
    """Bytes per second of the measured decode-attention kernel at a large, memory-bound
    shape (64 requests x 8,192 cached tokens, 8 KV heads of 128): elementwise ops stream
    activations at about that rate."""
    b, ln, kv_heads, d = 64, 8192, 8, 128
    t = float(kn.decode_attention_s(gpu, b, ln, num_heads=32, num_kv_heads=kv_heads,
                                    head_dim=d, kv_dtype="bfloat16")[()])
    return b * ln * kv_heads * d * 2 * 2 / t


@lru_cache(maxsize=64)
def _compute_rate(gpu: str, dtype: str) -> float:
    """FLOP/s of the measured 8,192 x 8,192 x 8,192 GEMM at ``dtype``."""
    n = 8192
    return 2.0 * n ** 3 / float(kn.gemm_s(gpu, np.array([n]), n, n, dtype)[0])


def moe_dtype(gemm_dtype: str) -> str:
    """The MoE table's word for a compute precision (16-bit types share the bf16 kernels)."""
    return {"float16": "bfloat16", "fp4": "nvfp4"}.get(gemm_dtype, gemm_dtype)
