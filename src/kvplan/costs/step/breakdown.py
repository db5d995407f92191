"""The typed breakdown of a step or a decode run (FLOPs, bytes, seconds by component) for
``StepCostModel.cost``: the roofline's terms, or the measured kernels' seconds beside the
FLOPs and bytes they move."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

import numpy as np

from kvplan.costs.step.coefficients import PP_TENSORS, at, layer_overhead_s
from kvplan.costs.step.constants import StepConstants, experts_touched
from kvplan.costs.step.profile import Profile
from kvplan.costs.step.records import BytesMoved, Flops, Seconds, StepAggregates, StepCost


class _Model(Protocol):
    """What a breakdown reads of ``roofline.StepCostModel`` (a protocol: no import circle)."""

    constants: StepConstants
    profile: Profile
    _co: Any
    _bw: float
    _flops_rate: float
    _link: float

    def _grow(self, tokens: int) -> Any: ...

    def _stage(self, ti: Any, t: Any, r: Any, ctx: Any, pairs: Any, s_ctx: Any, s_pairs: Any,
               mx: Callable[[Any, Any], Any], p_pairs: Any = 0.0, p_ctx: Any = 0.0,
               longest: Any = 0) -> Any: ...

    @property
    def ridge_point(self) -> float: ...


def parts(m: _Model, a: StepAggregates) -> dict[str, Any]:
    """Every component of the cost from the aggregates (Python numbers or arrays alike).

    The same operations run in the same order for one step and for a run of steps, so
    ``decode_run_s`` equals repeated ``step_time_s`` to the last bit.
    """
    k = m.constants
    tokens, requests = a.tokens * 1.0, a.requests * 1.0
    weights = k.weight_bytes + 0.0 * tokens  # an array over a run's steps, like the rest
    if k.routed_expert_bytes:
        # distinct experts a step's tokens touch: E * (1 - (1 - k/E)^T)
        weights = weights + k.routed_expert_bytes * experts_touched(
            k.expert_miss_per_token, tokens)
    p: dict[str, Any] = {
        "tokens": tokens, "requests": requests,
        "f_gemm": k.gemm_flops_per_token * tokens,
        "f_attn": k.attn_flops_per_pair * (a.full_pairs * 1.0)
        + k.sliding_flops_per_pair * (a.sliding_pairs * 1.0)
        + k.mla_prefill_pair_delta * (a.prefill_pairs * 1.0)
        + k.mla_context_flops_per_token * (a.prefill_context * 1.0),
        "f_lm": k.lm_head_flops_per_request * requests,
        "f_state": k.state_flops_per_token * tokens,
        "b_weights": weights,
        "b_kv_read": k.kv_bytes_per_token * (a.full_context * 1.0)
        + k.sliding_kv_bytes_per_token * (a.sliding_context * 1.0),
        "b_kv_write": (k.kv_bytes_per_token + k.sliding_kv_bytes_per_token) * tokens,
        "b_state": 2.0 * k.state_bytes_per_request * requests,
        "b_act": k.activation_bytes_per_token * tokens,
        "prefill": a.prefill * 1.0,
    }
    if m._co.measured is not None:
        return _measured_seconds(m, p, a)
    return _seconds(m, p)

def _measured_seconds(m: _Model, p: dict[str, Any], a: StepAggregates) -> dict[str, Any]:
    """The breakdown when kernels are priced from measurements: the kernels' seconds
    (``roofline_s``), the all-reduces, pipeline and overheads; ``compute_s`` and
    ``memory_s`` are the FLOPs and bytes over the measured GEMM and streaming rates."""
    co, prof = m._co, m.profile
    tok = np.asarray(a.tokens, dtype=np.int64)
    if tok.size and int(tok.max()) >= len(co.gemm_t):
        co = m._grow(int(tok.max()))
    stage_s = m._stage(tok, p["tokens"], p["requests"], a.full_context * 1.0,
                          a.full_pairs * 1.0, a.sliding_context * 1.0,
                          a.sliding_pairs * 1.0, np.maximum, a.prefill_pairs * 1.0,
                          a.prefill_context * 1.0, np.asarray(a.prefill_longest, np.int64))
    comm_s = at(co.allreduce_t, tok) if co.allreduce_t is not None else 0.0 * stage_s
    roof_s = stage_s - comm_s - co.layer_s
    pipe_s = (co.pp - 1) * (stage_s + (co.p2p_s * p["tokens"] + co.allreduce_latency_s))
    fixed_s = (prof.step_overhead_s + prof.prefill_overhead_s * p["prefill"]
               + prof.request_overhead_s * p["requests"])
    flops = p["f_gemm"] + p["f_lm"] + p["f_attn"] + p["f_state"]
    moved = p["b_weights"] + p["b_act"] + p["b_kv_read"] + p["b_kv_write"] + p["b_state"]
    return {**p, "compute_s": flops / m._flops_rate, "memory_s": moved / m._bw,
            "roofline_s": roof_s, "comm_s": comm_s, "pipe_s": pipe_s,
            "overhead_s": co.layer_s + fixed_s, "total_s": stage_s + pipe_s + fixed_s}

def _seconds(m: _Model, p: dict[str, Any]) -> dict[str, Any]:
    k, prof = m.constants, m.profile
    # two kernel families, each on its own roofline: the dense GEMMs (weights) and the
    # sequence mixers (attention over the KV cache, recurrent state)
    dense_c = (p["f_gemm"] + p["f_lm"]) / m._flops_rate
    dense_m = (p["b_weights"] + p["b_act"]) / m._bw
    mix_c = (p["f_attn"] + p["f_state"]) / m._flops_rate
    mix_m = (p["b_kv_read"] + p["b_kv_write"] + p["b_state"]) / m._bw
    roof_s = np.maximum(dense_c, dense_m) + np.maximum(mix_c, mix_m)
    act = k.allreduce_bytes_per_token * p["tokens"]
    ring = 2.0 * (k.tp - 1) / k.tp * act / m._link + prof.allreduce_latency_s
    comm_s = k.allreduces * ring
    layer_s = layer_overhead_s(k, prof)
    stage_s = roof_s + comm_s + layer_s
    pipe_s = (k.pp - 1) * (stage_s + PP_TENSORS * act / m._link + prof.allreduce_latency_s)
    fixed_s = (prof.step_overhead_s + prof.prefill_overhead_s * p["prefill"]
               + prof.request_overhead_s * p["requests"])
    overhead_s = layer_s + fixed_s
    total = stage_s + pipe_s + fixed_s
    return {**p, "compute_s": dense_c + mix_c, "memory_s": dense_m + mix_m,
            "roofline_s": roof_s, "comm_s": comm_s, "pipe_s": pipe_s,
            "overhead_s": overhead_s, "total_s": total}

def to_cost(m: _Model, p: dict[str, Any], steps: int) -> StepCost:
    def f(key: str) -> float:
        return float(p[key])

    def b(key: str) -> int:
        return round(float(p[key]))

    return StepCost(
        steps=steps, tokens=round(f("tokens")),
        flops=Flops(dense_gemm=f("f_gemm"), attention=f("f_attn"), lm_head=f("f_lm"),
                    state=f("f_state")),
        bytes=BytesMoved(weights=b("b_weights"), kv_read=b("b_kv_read"),
                         kv_write=b("b_kv_write"), state=b("b_state"), activations=b("b_act")),
        seconds=Seconds(compute_s=f("compute_s"), memory_s=f("memory_s"),
                        roofline_s=f("roofline_s"), communication_s=f("comm_s"),
                        pipeline_s=f("pipe_s"), overhead_s=f("overhead_s")),
        ridge_point=m.ridge_point,
    )
