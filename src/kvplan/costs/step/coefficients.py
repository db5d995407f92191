"""Per-second coefficients of the roofline step cost: ``StepConstants`` over the achievable
FLOP/s, bytes/s and link bandwidth, folded once per model so a step costs a few float
operations (``kvplan.costs.step.roofline.StepCostModel``)."""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

import numpy as np

from kvplan.costs.step.batch import FloatArray
from kvplan.costs.step.constants import StepConstants
from kvplan.costs.step.profile import Profile

if TYPE_CHECKING:
    from kvplan.costs.step.tables import MeasuredStep


@dataclass(frozen=True, slots=True, kw_only=True)
class _Coefficients:
    """Seconds per unit of each step aggregate: StepConstants over the achievable rates."""

    gemm_s: float
    lm_s: float
    weights_s: float
    experts_s: float
    expert_miss: float
    act_s: float
    attn_s: float
    mla: bool
    """The model has MLA layers: prefill requests run a narrower attention (see
    ``StepConstants.mla_prefill_pair_delta``)."""
    mla_prefill_s: float
    mla_context_s: float
    sliding_attn_s: float
    state_flops_s: float
    kv_read_s: float
    sliding_kv_read_s: float
    kv_write_s: float
    state_bytes_s: float
    window: int
    allreduces: int
    ring_s: float
    p2p_s: float
    allreduce_latency_s: float
    pp: int
    overhead_s: tuple[float, float]
    """Fixed seconds of a step without, and with, prefill work."""
    layer_s: float
    """Per-stage fixed seconds: layers x layer overhead + MoE layers x MoE overhead."""
    request_s: float
    """CPU seconds per scheduled request per step."""
    gemm_t: FloatArray
    """[T], T = 0..len-1: the dense side's token-dependent seconds (roofline: GEMM FLOPs;
    measured: every per-token GEMM and MoE kernel + elementwise traffic)."""
    weights_t: FloatArray
    """[T]: the dense side's floor (roofline: weight + activation bytes; measured: the
    per-token kernels + the lm_head's weight read): dense = max(gemm_t + lm_s*R, weights_t).
    Measured: gemm_t holds the head's chord at R = 0 (``MeasuredStep.lm_fixed_s``), so the
    first term is the chord and the second its value at one request."""
    allreduce_t: FloatArray | None
    """[T]: the step's all-reduces (None without tensor parallelism)."""
    measured: MeasuredStep | None = None
    """The kernel measurements the tables stand on (None: the roofline prices the GPU)."""
    gdn_seq_t: FloatArray | None = None
    """[L]: the stage's Gated DeltaNet layers for one sequence of L new tokens (measured;
    None elsewhere): their prefill term is max(state_flops_s * T, gdn_seq_t[L])."""


PP_TENSORS = 2
"""Per-token tensors one pipeline stage sends the next: vLLM's IntermediateTensors carry
``hidden_states`` and ``residual`` (Llama, Qwen, Mixtral, DeepSeek, Gemma ... models), each
hidden x the served dtype's bytes."""
TABLE_CAP = 1 << 17
"""Longest step (tokens) the token tables are built for; past it ``at`` extends them along
their last step, where every kernel table is on its roofline extrapolation (linear in
tokens: GEMM and MoE rows compute-bound, an all-reduce bandwidth-bound). A static batch's
one-step prefill of 16,384 x 2,048 tokens held ~5 GB of tables per token count."""


def at(table: FloatArray, i: Any) -> Any:
    """``table[i]``, and past its end the line through its last two entries (``i`` an int
    or an int array; the same float operations either way)."""
    last = len(table) - 1
    if np.ndim(i) == 0:
        if i <= last:
            return table[i]
        return table[last] + (int(i) - last) * (table[last] - table[last - 1])
    i = np.asarray(i)
    inside = table[np.minimum(i, last)]
    if not i.size or int(i.max()) <= last:
        return inside
    return np.where(i <= last, inside, table[last] + (i - last) * (table[last] - table[last - 1]))


def _coefficients(k: StepConstants, prof: Profile, flops_rate: float, bw: float,
                  link: float, max_tokens: int) -> _Coefficients:
    window = k.window if k.window and k.sliding_flops_per_pair else 0
    empty = np.zeros(0, dtype=np.float64)
    co = _Coefficients(
        gemm_s=k.gemm_flops_per_token / flops_rate,
        lm_s=k.lm_head_flops_per_request / flops_rate,
        weights_s=k.weight_bytes / bw, experts_s=k.routed_expert_bytes / bw,
        expert_miss=k.expert_miss_per_token, act_s=k.activation_bytes_per_token / bw,
        attn_s=k.attn_flops_per_pair / flops_rate,
        mla=bool(k.mla_prefill_pair_delta or k.mla_context_flops_per_token),
        mla_prefill_s=k.mla_prefill_pair_delta / flops_rate,
        mla_context_s=k.mla_context_flops_per_token / flops_rate,
        sliding_attn_s=k.sliding_flops_per_pair / flops_rate,
        state_flops_s=k.state_flops_per_token / flops_rate,
        kv_read_s=k.kv_bytes_per_token / bw, sliding_kv_read_s=k.sliding_kv_bytes_per_token / bw,
        kv_write_s=(k.kv_bytes_per_token + k.sliding_kv_bytes_per_token) / bw,
        state_bytes_s=2.0 * k.state_bytes_per_request / bw, window=window,
        allreduces=k.allreduces,
        ring_s=2.0 * (k.tp - 1) / k.tp * k.allreduce_bytes_per_token / link,
        p2p_s=PP_TENSORS * k.allreduce_bytes_per_token / link,
        allreduce_latency_s=prof.allreduce_latency_s, pp=k.pp,
        overhead_s=(prof.step_overhead_s + prof.prefill_overhead_s * 0.0,
                    prof.step_overhead_s + prof.prefill_overhead_s * 1.0),
        layer_s=layer_overhead_s(k, prof), request_s=prof.request_overhead_s,
        gemm_t=empty, weights_t=empty, allreduce_t=None,
    )
    return roofline_tables(co, max_tokens)


def roofline_tables(co: _Coefficients, max_tokens: int) -> _Coefficients:
    """``co`` with its token tables for T = 0..max_tokens, each entry the same float
    operations as the scalar roofline (``gemm_s * T``, ``weights_s + experts(T) + act_s * T``,
    ``allreduces * (ring_s * T + latency)``) so tables and formula agree to the last bit."""
    t = np.arange(max_tokens + 1, dtype=np.float64)
    if co.experts_s:  # Python's float ** (libm pow), not numpy's power: the same bits
        weights = np.array([co.weights_s + co.experts_s * (1.0 - co.expert_miss ** x)
                            + co.act_s * x for x in t.tolist()], dtype=np.float64)
    else:
        weights = (co.weights_s + 0.0) + co.act_s * t
    ar = co.allreduces * (co.ring_s * t + co.allreduce_latency_s) if co.allreduces else None
    # gdn_seq_t is never the roofline's own (only a measured floor's, ``floored``): drop the
    # old length's, or re-flooring the grown tables would broadcast it against the new one
    return replace(co, gemm_t=co.gemm_s * t, weights_t=weights, allreduce_t=ar, gdn_seq_t=None)


def measured_coefficients(k: StepConstants, prof: Profile, ms: MeasuredStep,
                          link: float) -> _Coefficients:
    """Coefficients whose kernel terms are read off the GPU's measured tables (``ms``); only
    the engine overheads come from ``prof``. Elementwise traffic (activations, KV writes,
    recurrent state) streams at the measured decode-attention bandwidth."""
    bw = ms.stream_bytes_per_s
    act = k.activation_bytes_per_token / bw * np.arange(ms.max_tokens + 1, dtype=np.float64)
    full, slide = ms.full, ms.sliding
    zero = 0.0
    gemm = ms.dense_s + act
    mla = bool(k.mla_prefill_pair_delta or k.mla_context_flops_per_token)
    per_step = (full.per_step_s if full else zero) + (slide.per_step_s if slide else zero)
    per_req = (full.per_request_s if full else zero) + (slide.per_request_s if slide else zero)
    state_tok = k.state_flops_per_token / ms.compute_flops_per_s
    state_req = 2.0 * k.state_bytes_per_request / bw
    if ms.gdn is not None:  # the state layers are GDN, priced from their measured kernels
        state_tok = ms.gdn.per_token_s
        state_req = ms.gdn.per_request_s * ms.gdn.state_ratio(k.state_bytes_per_request)
        per_step = per_step + ms.gdn.per_step_s
    return _Coefficients(
        gemm_s=0.0, lm_s=ms.lm_per_request_s, weights_s=0.0, experts_s=0.0, expert_miss=1.0,
        act_s=0.0, attn_s=zero if mla or full is None else full.per_pair_s, mla=mla,
        mla_prefill_s=full.per_pair_s if mla and full else zero,
        mla_context_s=ms.mla_context_s,
        sliding_attn_s=slide.per_pair_s if slide else zero,
        state_flops_s=state_tok,
        kv_read_s=full.per_context_s if full else zero,
        sliding_kv_read_s=slide.per_context_s if slide else zero,
        kv_write_s=(k.kv_bytes_per_token + k.sliding_kv_bytes_per_token) / bw,
        state_bytes_s=state_req + per_req,
        window=k.window if slide else 0, allreduces=k.allreduces, ring_s=0.0,
        p2p_s=PP_TENSORS * k.allreduce_bytes_per_token / link,
        allreduce_latency_s=prof.allreduce_latency_s, pp=k.pp,
        overhead_s=(prof.step_overhead_s + prof.prefill_overhead_s * 0.0,
                    prof.step_overhead_s + prof.prefill_overhead_s * 1.0),
        layer_s=layer_overhead_s(k, prof) + per_step, request_s=prof.request_overhead_s,
        gemm_t=gemm + (ms.lm_fixed_s - ms.lm_per_request_s), weights_t=gemm + ms.lm_fixed_s,
        allreduce_t=ms.allreduce_s,
        measured=ms, gdn_seq_t=ms.gdn_seq_s)


def layer_overhead_s(k: StepConstants, prof: Profile) -> float:
    """Fixed seconds one pipeline stage's layers add to a step (kernel gaps, MoE routing)."""
    return k.layers * prof.layer_overhead_s + k.moe_layers * prof.moe_layer_overhead_s


_FLOORED = ("lm_s", "attn_s", "mla_prefill_s", "mla_context_s", "sliding_attn_s",
            "state_flops_s", "kv_read_s", "sliding_kv_read_s", "kv_write_s", "state_bytes_s",
            "layer_s")


def floored(co: _Coefficients, floor: _Coefficients) -> _Coefficients:
    """A roofline's ``co`` never below ``floor``, a measured GPU's that beats this one on
    every datasheet figure (``kernels.dominated_by``): each coefficient and each token
    table the larger of the two (same length). A step is monotone in every one of them
    (``StepCostModel._stage``: max and sums of non-negative terms), so no step is priced
    faster than on that GPU; the roofline keeps what its own rates make slower."""
    n = len(co.gemm_t)
    assert len(floor.gemm_t) == n
    ar = co.allreduce_t
    if ar is not None and floor.allreduce_t is not None:
        ar = np.maximum(ar, floor.allreduce_t)
    gdn = floor.gdn_seq_t if co.gdn_seq_t is None else co.gdn_seq_t
    if co.gdn_seq_t is not None and floor.gdn_seq_t is not None:
        gdn = np.maximum(co.gdn_seq_t, floor.gdn_seq_t)
    scalars = {name: max(getattr(co, name), getattr(floor, name)) for name in _FLOORED}
    return replace(co, **scalars, mla=co.mla or floor.mla,
                   gemm_t=np.maximum(co.gemm_t, floor.gemm_t),
                   weights_t=np.maximum(co.weights_t, floor.weights_t), allreduce_t=ar,
                   gdn_seq_t=gdn)
