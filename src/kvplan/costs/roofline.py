"""Roofline step-cost model: one engine iteration's FLOPs, bytes and seconds on one GPU.

One step (any mix of prefill chunks and decodes) on the fullest GPU of the deployment, priced
as two kernel families each on its own roofline (dense GEMMs over the weights; attention and
state over the cache)::

    roofline_s = max(gemm_flops / F, weight_bytes / B) + max(attn_flops / F, kv_bytes / B)
                 F = peak_flops[compute precision] * compute_eff, B = hbm_bandwidth * bandwidth_eff
    stage_s    = roofline_s + tp_allreduce_s
    total_s    = stage_s + (pp - 1) * (stage_s + p2p_s)
                 + step_overhead_s + prefill_overhead_s * has_prefill(step)

Every per-model constant is computed once in ``StepCostModel.__init__`` and folded into
per-second coefficients (``_Coefficients``); a step is then a handful of integer sums over the
per-request arrays and a few float operations, so the simulator can call it often. The
detailed breakdown (``cost``) evaluates the same formula term by term.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from operator import mul
from typing import Any, TypeVar

import numpy as np

from kvplan.costs.batch import AggregateForm, FloatArray, IntArray
from kvplan.costs.profile import Profile
from kvplan.costs.step_coefficients import (
    _coefficients,
    _prefill_sums,
    layer_overhead_s,
)
from kvplan.costs.step_constants import StepConstants, compute_precision, step_constants
from kvplan.costs.step_sums import _clipped_pairs, _clipped_sum, has_prefill
from kvplan.costs.step_types import Bound, BytesMoved, Flops, Seconds, StepCost
from kvplan.errors import InputError
from kvplan.specs.hardware import HardwareSpec
from kvplan.specs.model import ModelSpec
from kvplan.specs.serving import EngineConfig

__all__ = ["FALLBACK_LINK_BYTES_PER_S", "Bound", "BytesMoved", "Flops", "Profile", "Seconds",
           "StepAggregates", "StepConstants", "StepCost", "StepCostModel", "compute_precision",
           "has_prefill", "step_constants"]

X = TypeVar("X", float, FloatArray)
FALLBACK_LINK_BYTES_PER_S = 32e9
"""One direction of PCIe Gen4 x16, used when a GPU description gives no interconnect."""


# ---------------------------------------------------------------- the model


@dataclass(frozen=True, slots=True)
class StepAggregates:
    """The integer sums a step's cost depends on: Python ints for one step, arrays for a run
    (or for any list of recorded steps: ``StepCostModel.times_s`` prices them at once)."""

    tokens: Any
    requests: Any
    full_context: Any
    full_pairs: Any
    sliding_context: Any
    sliding_pairs: Any
    prefill: Any
    """1 where the step holds prefill work (see ``has_prefill``), else 0."""
    prefill_pairs: Any = 0
    """MLA: attended pairs of the requests computing more than one token (vLLM's prefill
    path); 0 for other models."""
    prefill_context: Any = 0
    """MLA: cached context tokens of those requests (up-projected by kv_b_proj)."""


_SMALL = 48
"""Batches up to this many requests are summed in plain Python (faster than numpy there)."""


class StepCostModel:
    """Prices engine steps on one GPU; implements ``kvplan.costs.batch.StepTimer``."""

    __slots__ = ("_bw", "_co", "_flops_rate", "_link", "constants", "hardware", "profile")

    def __init__(self, model: ModelSpec, hardware: HardwareSpec, engine: EngineConfig,
                 profile: Profile | None = None) -> None:
        self._setup(step_constants(model, engine), hardware, profile or Profile())

    def with_profile(self, profile: Profile) -> StepCostModel:
        """The same model, GPU and engine under other efficiency factors (no recount)."""
        other = object.__new__(StepCostModel)
        other._setup(self.constants, self.hardware, profile)
        return other

    def _setup(self, constants: StepConstants, hardware: HardwareSpec, profile: Profile) -> None:
        self.constants = constants
        self.hardware = hardware
        self.profile = profile
        peak = hardware.peak_flops_for(self.constants.compute_precision)
        if peak <= 0 or hardware.mem_bw_bytes_per_s <= 0:
            raise InputError(f"GPU {hardware.id} has no peak FLOP/s or bandwidth figure")
        self._flops_rate = peak * self.profile.compute_eff
        self._bw = hardware.mem_bw_bytes_per_s * self.profile.bandwidth_eff
        link = hardware.interconnect_bytes_per_s / 2 or FALLBACK_LINK_BYTES_PER_S
        self._link = link * self.profile.comm_eff
        self._co = _coefficients(constants, profile, self._flops_rate, self._bw, self._link)

    @property
    def ridge_point(self) -> float:
        """Arithmetic intensity (FLOP/byte) where compute time equals memory time."""
        return self._flops_rate / self._bw

    # -- StepTimer

    def step_time_s(self, new_tokens: IntArray, context_tokens: IntArray) -> float:
        """Seconds for one step: request i computes new_tokens[i] with context_tokens[i] cached."""
        n, c = new_tokens, context_tokens
        co = self._co
        p_pairs = p_ctx = 0
        if co.window or len(n) > _SMALL:
            a = self._aggregates(n, c)
            tokens, ctx, pairs, prefill = a.tokens, a.full_context, a.full_pairs, a.prefill
            s_ctx, s_pairs = a.sliding_context, a.sliding_pairs
            p_pairs, p_ctx = a.prefill_pairs, a.prefill_context
        else:  # a small batch: plain Python on lists beats numpy's per-call overhead
            nl, cl = n.tolist(), c.tolist()
            tokens, ctx, s_ctx = sum(nl), sum(cl), 0
            pairs = sum(map(mul, nl, cl)) + sum(x * (x + 1) for x in nl) // 2
            s_pairs = 0
            prefill = int(bool(nl) and (max(nl) > 1 or min(cl) == 0))
            if co.mla and prefill:
                p_pairs, p_ctx = _prefill_sums(nl, cl)
        t, r = float(tokens), float(len(n))
        stage = self._stage(t, r, float(ctx), float(pairs), float(s_ctx), float(s_pairs), max,
                            float(p_pairs), float(p_ctx))
        return self._finish(stage, t, r, co.overhead_s[prefill])

    def api_delays_s(self, prompt_tokens: IntArray) -> FloatArray:
        """Seconds each served request spends on the API server's path before the engine
        sees it (``Profile.api_delay_s``); the simulator delivers it that much later."""
        p = self.profile
        return p.api_request_s + p.api_prompt_token_s * np.asarray(prompt_tokens, np.float64)

    @property
    def supports_aggregates(self) -> bool:
        """step_time_agg is exact unless sliding-window attention or MLA's prefill path needs
        per-request sums."""
        return not self._co.window and not self._co.mla

    def step_time_agg(self, tokens: int, requests: int, context: int, pairs: int,
                      prefill: bool) -> float:
        """step_time_s from the batch's sums (no sliding window): tokens = sum(new),
        requests = len(new), context = sum(ctx), pairs = sum(new*ctx + new*(new+1)/2),
        prefill = has_prefill(new, ctx). The same float operations: equal to the last bit."""
        t, r = float(tokens), float(requests)
        stage = self._stage(t, r, float(context), float(pairs), 0.0, 0.0, max)
        return self._finish(stage, t, r, self._co.overhead_s[int(prefill)])

    def aggregate_form(self, max_tokens: int) -> AggregateForm | None:
        """step_time_s as tables and scalars for steps of up to max_tokens tokens, sliding
        window and MLA sums included (so it also equals step_time_agg where that is exact);
        kvplan.costs.agg_form, kept in step with _stage."""
        from kvplan.costs.agg_form import roofline_form

        return roofline_form(self, self._co, max_tokens)

    def decode_run_s(self, context_tokens: IntArray, num_steps: int) -> FloatArray:
        """Per-step seconds of ``num_steps`` pure-decode steps (context grows by 1 each step).

        Evaluates the formula of ``step_time_s`` on arrays over the steps: the same float
        operations in the same order, so each entry equals that step's ``step_time_s``.
        """
        c = np.asarray(context_tokens, dtype=np.int64)
        r = len(c)
        k = np.arange(num_steps, dtype=np.int64)
        ctx = int(np.add.reduce(c)) + r * k
        s_ctx: Any = 0.0
        s_pairs: Any = 0.0
        if self._co.window:
            cs = np.sort(c)
            w = self._co.window
            s_ctx, s_pairs = _clipped_sum(cs, k, w), _clipped_sum(cs, k + 1, w)
        t = float(r)
        stage = self._stage(t, t, ctx, ctx + r, s_ctx, s_pairs, np.maximum)
        out = np.asarray(self._finish(stage, t, t, self._co.overhead_s[0]), dtype=np.float64)
        if r and num_steps and int(np.minimum.reduce(c)) == 0:
            # only step 0 can hold a prefill: a request with nothing cached (a 1-token prompt)
            out[0] = self._finish(stage[0], t, t, self._co.overhead_s[1])
        return out

    def decode_run_agg(self, requests: int, context: int, num_steps: int) -> FloatArray:
        """decode_run_s from the run's sums: ``requests`` decodes over ``context`` cached
        tokens at step 0 (each >= 1, so no step is a prefill); the same operations."""
        k = np.arange(num_steps, dtype=np.int64)
        ctx: Any = context + requests * k
        zero: Any = 0.0
        t = float(requests)
        stage = self._stage(t, t, ctx, ctx + requests, zero, zero, np.maximum)
        return np.asarray(self._finish(stage, t, t, self._co.overhead_s[0]), dtype=np.float64)

    def _stage(self, t: float, r: float, ctx: X, pairs: X, s_ctx: X, s_pairs: X,
               mx: Callable[[Any, Any], Any], p_pairs: float = 0.0, p_ctx: float = 0.0) -> X:
        """One pipeline stage's seconds: both kernel families on their rooflines + all-reduces.

        t, r: tokens and requests of the step; ctx, pairs, s_ctx, s_pairs: full and sliding
        context sums and attended pairs (floats for one step, arrays over a decode run);
        p_pairs, p_ctx: MLA prefill requests' pairs and context (0 in a decode run).
        """
        co = self._co
        dense = max(co.gemm_s * t + co.lm_s * r, co.weights_s + self._expert_s(t) + co.act_s * t)
        mix_c = co.attn_s * pairs + co.state_flops_s * t
        if co.mla:
            mix_c = mix_c + (co.mla_prefill_s * p_pairs + co.mla_context_s * p_ctx)
        mix_m = co.kv_read_s * ctx + (co.kv_write_s * t + co.state_bytes_s * r)
        if co.window:
            mix_c = mix_c + co.sliding_attn_s * s_pairs
            mix_m = mix_m + co.sliding_kv_read_s * s_ctx
        stage: X = dense + mx(mix_c, mix_m)
        if co.allreduces:
            stage = stage + co.allreduces * (co.ring_s * t + co.allreduce_latency_s)
        return stage + co.layer_s

    def _expert_s(self, t: float) -> float:
        """Seconds to read the routed experts t tokens touch: E * (1 - (1 - k/E)^t) of them."""
        co = self._co
        return co.experts_s * (1.0 - co.expert_miss ** t) if co.experts_s else 0.0

    def _finish(self, stage: X, t: float, r: float, overhead_s: float) -> X:
        """A stage's seconds -> the step's: pipeline bubble, fixed and per-request overheads."""
        co = self._co
        if co.pp > 1:
            stage = stage + (co.pp - 1) * (stage + (co.p2p_s * t + co.allreduce_latency_s))
        return stage + (overhead_s + co.request_s * r)

    # -- recorded steps

    def aggregates(self, new_tokens: IntArray, context_tokens: IntArray) -> StepAggregates:
        """The sums one step's cost depends on (record them to re-price the step later)."""
        return self._aggregates(new_tokens, context_tokens)

    def times_s(self, a: StepAggregates) -> FloatArray:
        """Seconds of every step in ``a`` (arrays over steps), the same formula as
        ``step_time_s``: re-prices a recorded schedule under this model's profile."""
        return np.asarray(self._parts(a)["total_s"], dtype=np.float64)

    # -- breakdowns

    def cost(self, new_tokens: IntArray, context_tokens: IntArray) -> StepCost:
        """The typed breakdown of one step."""
        return self._to_cost(self._parts(self._aggregates(new_tokens, context_tokens)), 1)

    def decode_run_cost(self, context_tokens: IntArray, num_steps: int) -> StepCost:
        """The summed breakdown of ``num_steps`` pure-decode steps (as ``decode_run_s``)."""
        parts = self._parts(self._decode_aggregates(context_tokens, num_steps))
        return self._to_cost({k: float(np.sum(v)) for k, v in parts.items()}, num_steps)

    # -- internals

    def _aggregates(self, new: IntArray, ctx: IntArray) -> StepAggregates:
        n = np.asarray(new, dtype=np.int64)
        c = np.asarray(ctx, dtype=np.int64)
        full_pairs = int(np.dot(n, c)) + int(np.dot(n, n + 1)) // 2
        w = self.constants.window
        s_ctx = s_pairs = p_pairs = p_ctx = 0
        if w and self.constants.sliding_flops_per_pair:
            s_ctx, s_pairs = int(np.minimum(c, w).sum()), _clipped_pairs(n, c, w)
        if self._co.mla:
            p_pairs, p_ctx = _prefill_sums(n.tolist(), c.tolist())
        return StepAggregates(int(n.sum()), len(n), int(c.sum()), full_pairs, s_ctx, s_pairs,
                              int(has_prefill(n, c)), p_pairs, p_ctx)

    def _decode_aggregates(self, ctx: IntArray, num_steps: int) -> StepAggregates:
        c = np.sort(np.asarray(ctx, dtype=np.int64))
        r = len(c)
        k = np.arange(num_steps, dtype=np.int64)
        full_ctx = int(c.sum()) + r * k
        w = self.constants.window
        s_ctx = s_pairs = np.zeros(num_steps, dtype=np.int64)
        if w and self.constants.sliding_flops_per_pair:
            s_ctx, s_pairs = _clipped_sum(c, k, w), _clipped_sum(c, k + 1, w)
        tokens = np.full(num_steps, r, dtype=np.int64)
        # only step 0 can hold a prefill: a request with nothing cached (a 1-token prompt)
        prefill = np.zeros(num_steps, dtype=np.int64)
        if r and num_steps and c[0] == 0:
            prefill[0] = 1
        return StepAggregates(tokens, tokens, full_ctx, full_ctx + r, s_ctx, s_pairs, prefill)

    def _parts(self, a: StepAggregates) -> dict[str, Any]:
        """Every component of the cost from the aggregates (Python numbers or arrays alike).

        The same operations run in the same order for one step and for a run of steps, so
        ``decode_run_s`` equals repeated ``step_time_s`` to the last bit.
        """
        k = self.constants
        tokens, requests = a.tokens * 1.0, a.requests * 1.0
        weights = k.weight_bytes + 0.0 * tokens  # an array over a run's steps, like the rest
        if k.routed_expert_bytes:
            # distinct experts a step's tokens touch: E * (1 - (1 - k/E)^T)
            weights = weights + k.routed_expert_bytes * (
                1.0 - np.power(k.expert_miss_per_token, tokens))
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
        return self._seconds(p)

    def _seconds(self, p: dict[str, Any]) -> dict[str, Any]:
        k, prof = self.constants, self.profile
        # two kernel families, each on its own roofline: the dense GEMMs (weights) and the
        # sequence mixers (attention over the KV cache, recurrent state)
        dense_c = (p["f_gemm"] + p["f_lm"]) / self._flops_rate
        dense_m = (p["b_weights"] + p["b_act"]) / self._bw
        mix_c = (p["f_attn"] + p["f_state"]) / self._flops_rate
        mix_m = (p["b_kv_read"] + p["b_kv_write"] + p["b_state"]) / self._bw
        roof_s = np.maximum(dense_c, dense_m) + np.maximum(mix_c, mix_m)
        act = k.allreduce_bytes_per_token * p["tokens"]
        ring = 2.0 * (k.tp - 1) / k.tp * act / self._link + prof.allreduce_latency_s
        comm_s = k.allreduces * ring
        layer_s = layer_overhead_s(k, prof)
        stage_s = roof_s + comm_s + layer_s
        pipe_s = (k.pp - 1) * (stage_s + act / self._link + prof.allreduce_latency_s)
        fixed_s = (prof.step_overhead_s + prof.prefill_overhead_s * p["prefill"]
                   + prof.request_overhead_s * p["requests"])
        overhead_s = layer_s + fixed_s
        total = stage_s + pipe_s + fixed_s
        return {**p, "compute_s": dense_c + mix_c, "memory_s": dense_m + mix_m,
                "roofline_s": roof_s, "comm_s": comm_s, "pipe_s": pipe_s,
                "overhead_s": overhead_s, "total_s": total}

    def _to_cost(self, p: dict[str, Any], steps: int) -> StepCost:
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
            ridge_point=self.ridge_point,
        )
