"""Per-second coefficients of the roofline step cost: ``StepConstants`` over the achievable
FLOP/s, bytes/s and link bandwidth, folded once per model so a step costs a few float
operations (``kvplan.costs.roofline.StepCostModel``)."""

from __future__ import annotations

from dataclasses import dataclass

from kvplan.costs.profile import Profile
from kvplan.costs.step_constants import StepConstants


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


def _coefficients(k: StepConstants, prof: Profile, flops_rate: float, bw: float,
                  link: float) -> _Coefficients:
    window = k.window if k.window and k.sliding_flops_per_pair else 0
    return _Coefficients(
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
        p2p_s=k.allreduce_bytes_per_token / link,
        allreduce_latency_s=prof.allreduce_latency_s, pp=k.pp,
        overhead_s=(prof.step_overhead_s + prof.prefill_overhead_s * 0.0,
                    prof.step_overhead_s + prof.prefill_overhead_s * 1.0),
        layer_s=layer_overhead_s(k, prof), request_s=prof.request_overhead_s,
    )


def layer_overhead_s(k: StepConstants, prof: Profile) -> float:
    """Fixed seconds one pipeline stage's layers add to a step (kernel gaps, MoE routing)."""
    return k.layers * prof.layer_overhead_s + k.moe_layers * prof.moe_layer_overhead_s


def _prefill_sums(new: list[int], ctx: list[int]) -> tuple[int, int]:
    """(attended pairs, cached context) summed over the requests computing > 1 token: the
    ones vLLM's MLA backends send down the prefill path (decode threshold: query length 1)."""
    pairs = context = 0
    for n, c in zip(new, ctx, strict=True):
        if n > 1:
            pairs += n * c + n * (n + 1) // 2
            context += c
    return pairs, context
