"""Roofline step-cost model: one engine iteration's FLOPs, bytes and seconds on one GPU.

One step (any mix of prefill chunks and decodes) on the fullest GPU of the deployment, priced
as two kernel families each on its own roofline (dense GEMMs over the weights; attention and
state over the cache)::

    roofline_s = max(gemm_flops / F, weight_bytes / B) + max(attn_flops / F, kv_bytes / B)
                 F = peak_flops[compute precision] * compute_eff, B = hbm_bandwidth * bandwidth_eff
    stage_s    = roofline_s + tp_allreduce_s
    total_s    = stage_s + (pp - 1) * (stage_s + p2p_s)
                 + step_overhead_s + prefill_overhead_s * has_prefill(step)

Per-model constants fold once into per-second coefficients (``_Coefficients``): a step is a few
integer sums and float operations (the simulator calls it often); ``cost`` is the same, by term.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from operator import mul
from typing import Any, TypeVar

import numpy as np

from kvplan.costs import kernels as kn
from kvplan.costs.memory.resolved import ResolvedDeployment, step_token_budget
from kvplan.costs.step.batch import AggregateForm, FloatArray, IntArray
from kvplan.costs.step.coefficients import (
    TABLE_CAP,
    _Coefficients,
    _coefficients,
    at,
    floored,
    measured_coefficients,
    roofline_tables,
)
from kvplan.costs.step.constants import (
    FALLBACK_LINK_BYTES_PER_S,
    StepConstants,
    compute_precision,
    gemm_dtype,
    step_constants,
)
from kvplan.costs.step.ops import StageOps
from kvplan.costs.step.profile import Profile
from kvplan.costs.step.records import Bound, BytesMoved, Flops, Seconds, StepAggregates, StepCost
from kvplan.costs.step.sums import (
    _clipped_sum,
    _prefill_sums,
    decode_aggregates,
    has_prefill,
    longest_chunk,
    step_aggregates,
)
from kvplan.costs.step.tables import MeasuredStep, measured_step
from kvplan.errors import InputError
from kvplan.specs.hardware import HardwareSpec
from kvplan.specs.kv import model_precision
from kvplan.specs.model import ModelSpec
from kvplan.specs.serving import EngineConfig

__all__ = ["FALLBACK_LINK_BYTES_PER_S", "Bound", "BytesMoved", "Flops", "Profile", "Seconds",
           "StepAggregates", "StepConstants", "StepCost", "StepCostModel", "compute_precision",
           "has_prefill", "step_constants"]

X = TypeVar("X", float, FloatArray)
_TABLE_TOKENS = 8192
"""Token tables start this long and double when a step is longer (an unchunked prompt)."""
_SMALL = 48  # batches up to this many requests are summed in plain Python (faster there)


class StepCostModel:
    """Prices engine steps on one GPU; implements ``kvplan.costs.step.batch.StepTimer``."""

    __slots__ = ("_async", "_bw", "_chunk", "_co", "_floor", "_flops_rate", "_gemm_dtype",
                 "_kv_dtype", "_link", "_ops", "constants", "donor", "hardware", "profile")

    def __init__(self, model: ModelSpec, hardware: HardwareSpec, engine: EngineConfig,
                 profile: Profile | None = None, *, silicon: bool | None = None,
                 resolved: ResolvedDeployment | None = None) -> None:
        """``silicon``: price from the GPU's measured kernel tables (None: where it has
        them; False: the roofline under ``profile``'s efficiencies, for any GPU);
        ``resolved``: the deployment's flags resolved once (None: resolved here)."""
        constants = step_constants(model, engine, resolved)
        self._ops: StageOps | None = None
        self._async = engine.async_scheduling
        kv = (model_precision(model, engine.kv_cache_dtype) if resolved is None
              else resolved.kv.precision)
        self._kv_dtype = kv.name  # the tables read: costs.kernels.slices.kv_table
        self._chunk = step_token_budget(engine, hardware)  # the prefill chunk vLLM runs
        self._gemm_dtype = (gemm_dtype(model, engine, constants.compute_precision)
                            if resolved is None else resolved.gemm_dtype)
        profile = profile or Profile()
        self.donor: str | None = None
        self._floor: tuple[tuple[str, ...], StageOps] | None = None
        fp32 = constants.compute_precision == "float32"  # no table measures fp32 GEMMs
        if silicon is None or (silicon and fp32):
            silicon = kn.has_tables(hardware.id) and not fp32
            if not silicon:  # the roofline at the nearest measured generation's rates
                rates = kn.nearest_measured_gpu(hardware, constants.compute_precision)
                self.donor = rates.donor
                profile = replace(profile, compute_eff=min(1.0, rates.compute),
                                  bandwidth_eff=min(1.0, rates.memory))
                # never faster than a GPU beating it on every figure, nor (fp32) its own 16-bit step
                own = (hardware.id,) if fp32 and kn.has_tables(hardware.id) else ()
                if above := (*own, *kn.dominating(hardware)):
                    from kvplan.costs.step.ops import stage_ops

                    self._floor = (above, stage_ops(model, engine, resolved))
        from kvplan.costs.step.parallel.ep_step import engine_ops  # DP / EP / multi-node TP

        self._ops = engine_ops(model, engine, hardware, profile, silicon, resolved)
        self._setup(constants, hardware, profile,
                    self._silicon(_TABLE_TOKENS, hardware.id) if silicon else None)

    def with_profile(self, profile: Profile, overlap: bool | None = None) -> StepCostModel:
        """The same model, GPU and engine under other overheads (no recount, no re-lookup);
        ``overlap``: async scheduling on or off (None: as here)."""
        other = object.__new__(StepCostModel)
        other._ops, other._kv_dtype, other._chunk = self._ops, self._kv_dtype, self._chunk
        other._gemm_dtype, other.donor, other._floor = self._gemm_dtype, self.donor, self._floor
        other._async = self._async if overlap is None else overlap
        if self.donor is not None:  # rates stay the donor's: a profile moves overheads only
            profile = replace(profile, compute_eff=self.profile.compute_eff,
                              bandwidth_eff=self.profile.bandwidth_eff)
        other._setup(self.constants, self.hardware, profile, self._co.measured)
        return other

    def _silicon(self, max_tokens: int, gpu: str | None = None) -> MeasuredStep:
        assert self._ops is not None
        return measured_step(self._ops, gpu or self.hardware.id, self._gemm_dtype,
                             self._kv_dtype, max_tokens, self._chunk)

    def _setup(self, constants: StepConstants, hardware: HardwareSpec, profile: Profile,
               measured: MeasuredStep | None = None) -> None:
        self.constants = constants
        self.hardware = hardware
        self.profile = profile
        peak = hardware.peak_flops_for(precision := self.constants.compute_precision)
        if peak <= 0 or hardware.mem_bw_bytes_per_s <= 0:
            field = "fp32" if precision == "float32" else "bf16"
            raise InputError(f"GPU {hardware.id} has no peak {precision} FLOP/s: give "
                             f"{field}_tflops_dense in its --gpu file")
        self._flops_rate = peak * self.profile.compute_eff
        self._bw = hardware.mem_bw_bytes_per_s * self.profile.bandwidth_eff
        link = hardware.tp_link_bytes_per_s(constants.tp) / 2 or FALLBACK_LINK_BYTES_PER_S
        self._link = link * self.profile.comm_eff
        if measured is not None:
            self._flops_rate = measured.compute_flops_per_s
            self._bw = measured.stream_bytes_per_s
            self._co = measured_coefficients(constants, profile, measured, self._link)
        else:
            self._co = self._floored(_coefficients(
                constants, profile, self._flops_rate, self._bw, self._link, _TABLE_TOKENS))

    def _floored(self, co: _Coefficients) -> _Coefficients:
        """``co`` never below the measured step of each GPU in the floor (fp32: 16-bit GEMMs)."""
        if self._floor is None:
            return co
        gemm = "bfloat16" if self._gemm_dtype == "float32" else self._gemm_dtype
        for gpu in self._floor[0]:
            ms = measured_step(self._floor[1], gpu, gemm, self._kv_dtype,
                               len(co.gemm_t) - 1, self._chunk)
            co = floored(co, measured_coefficients(self.constants, self.profile, ms, self._link))
        return co

    @property
    def gemm_dtype(self) -> str:
        """The measured GEMM family the step's linear layers run (fp8_block apart from fp8)."""
        return self._gemm_dtype

    @property
    def ops(self) -> StageOps | None:
        """The step's ops on the fullest stage (None on the roofline path)."""
        return self._ops

    @property
    def measured(self) -> MeasuredStep | None:
        """The kernel measurements this model prices from (None: the roofline)."""
        return self._co.measured

    def _grow(self, tokens: int) -> _Coefficients:
        """Token tables for a step of ``tokens`` tokens, up to TABLE_CAP (``at`` goes on)."""
        if len(self._co.gemm_t) > TABLE_CAP:
            return self._co
        size = min(TABLE_CAP, max(tokens, 2 * (len(self._co.gemm_t) - 1)))
        self._co = (self._floored(roofline_tables(self._co, size)) if self._co.measured is None else
                    measured_coefficients(self.constants, self.profile, self._silicon(size),
                                          self._link))
        return self._co

    @property
    def table_tokens(self) -> int:
        """The longest step the current token tables price without growing them."""
        return len(self._co.gemm_t) - 1

    @property
    def ridge_point(self) -> float:
        """Arithmetic intensity (FLOP/byte) where compute time equals memory time."""
        return self._flops_rate / self._bw

    # -- StepTimer

    def step_time_s(self, new_tokens: IntArray, context_tokens: IntArray) -> float:
        """Seconds for one step: request i computes new_tokens[i] with context_tokens[i] cached."""
        n, c = new_tokens, context_tokens
        co = self._co
        p_pairs = p_ctx = longest = 0
        if co.window or len(n) > _SMALL:
            a = self._aggregates(n, c)
            tokens, ctx, pairs, prefill = a.tokens, a.full_context, a.full_pairs, a.prefill
            s_ctx, s_pairs = a.sliding_context, a.sliding_pairs
            p_pairs, p_ctx, longest = a.prefill_pairs, a.prefill_context, a.prefill_longest
        else:  # a small batch: plain Python on lists beats numpy's per-call overhead
            nl, cl = n.tolist(), c.tolist()
            tokens, ctx, s_ctx = sum(nl), sum(cl), 0
            pairs = sum(map(mul, nl, cl)) + sum(x * (x + 1) for x in nl) // 2
            s_pairs = 0
            prefill = int(bool(nl) and (max(nl) > 1 or min(cl) == 0))
            if co.mla and prefill:
                p_pairs, p_ctx = _prefill_sums(nl, cl)
            if co.gdn_seq_t is not None and prefill:
                longest = longest_chunk(nl)
        t, r = float(tokens), float(len(n))
        if tokens >= len(co.gemm_t):
            self._grow(tokens)
        stage = self._stage(tokens, t, r, float(ctx), float(pairs), float(s_ctx),
                            float(s_pairs), max, float(p_pairs), float(p_ctx), longest)
        return self._finish(stage, t, r, co.overhead_s[prefill])

    def api_delays_s(self, prompt_tokens: IntArray) -> FloatArray:
        """Seconds each served request spends on the API server's path before the engine
        sees it (``Profile.api_delay_s``); the simulator delivers it that much later."""
        p = self.profile
        return p.api_request_s + p.api_prompt_token_s * np.asarray(prompt_tokens, np.float64)

    def api_admissions_s(self, prompt_tokens: IntArray) -> FloatArray:
        """Seconds of the API server's single process each request holds, one request at a
        time in send order (``Profile.api_admission_s``; sim.frontend queues them)."""
        return np.full(len(prompt_tokens), self.profile.api_admission_s, dtype=np.float64)

    @property
    def supports_aggregates(self) -> bool:
        """step_time_agg is exact unless a sliding window or MLA's prefill needs sums."""
        return not self._co.window and not self._co.mla

    @property
    def needs_longest(self) -> bool:
        """GDN layers: a step also depends on its longest prompt chunk (``longest`` below)."""
        return self._co.gdn_seq_t is not None

    def step_time_agg(self, tokens: int, requests: int, context: int, pairs: int,
                      prefill: bool, longest: int = 0) -> float:
        """step_time_s from the batch's sums (no sliding window): tokens = sum(new),
        requests = len(new), context = sum(ctx), pairs = sum(new*ctx + new*(new+1)/2),
        prefill = has_prefill(new, ctx), longest = longest_chunk(new) (read only where
        ``needs_longest``). The same float operations: equal to the last bit."""
        t, r = float(tokens), float(requests)
        if tokens >= len(self._co.gemm_t):
            self._grow(tokens)
        stage = self._stage(tokens, t, r, float(context), float(pairs), 0.0, 0.0, max,
                            longest=longest)
        return self._finish(stage, t, r, self._co.overhead_s[int(prefill)])

    def aggregate_form(self, max_tokens: int) -> AggregateForm | None:
        """step_time_s as tables and scalars for steps of up to max_tokens tokens, sliding
        window and MLA sums included (so it also equals step_time_agg where that is exact);
        kvplan.costs.step.agg_form, kept in step with _stage and _finish (async scheduling's
        overlap included)."""
        from kvplan.costs.step.agg_form import roofline_form

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
        if r >= len(self._co.gemm_t):
            self._grow(r)
        stage = self._stage(r, t, t, ctx, ctx + r, s_ctx, s_pairs, np.maximum)
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
        if requests >= len(self._co.gemm_t):
            self._grow(requests)
        stage = self._stage(requests, t, t, ctx, ctx + requests, zero, zero, np.maximum)
        return np.asarray(self._finish(stage, t, t, self._co.overhead_s[0]), dtype=np.float64)

    def _stage(self, ti: Any, t: Any, r: Any, ctx: X, pairs: X, s_ctx: X, s_pairs: X,
               mx: Callable[[Any, Any], Any], p_pairs: Any = 0.0, p_ctx: Any = 0.0,
               longest: Any = 0) -> X:
        """One pipeline stage's seconds: both kernel families on their rooflines + all-reduces.

        t, r: tokens and requests of the step; ctx, pairs, s_ctx, s_pairs: full and sliding
        context sums and attended pairs (floats for one step, arrays over a decode run);
        p_pairs, p_ctx: MLA prefill requests' pairs and context (0 in a decode run);
        longest: the most new tokens of one request computing > 1 (GDN's sequence floor).
        """
        co = self._co
        dense = mx(at(co.gemm_t, ti) + co.lm_s * r, at(co.weights_t, ti))
        state = co.state_flops_s * t
        if co.gdn_seq_t is not None:
            state = mx(state, at(co.gdn_seq_t, longest))
        mix_c = co.attn_s * pairs + state
        if co.mla:
            mix_c = mix_c + (co.mla_prefill_s * p_pairs + co.mla_context_s * p_ctx)
        mix_m = co.kv_read_s * ctx + (co.kv_write_s * t + co.state_bytes_s * r)
        if co.window:
            mix_c = mix_c + co.sliding_attn_s * s_pairs
            mix_m = mix_m + co.sliding_kv_read_s * s_ctx
        stage: X = dense + mx(mix_c, mix_m)
        if co.allreduce_t is not None:
            stage = stage + at(co.allreduce_t, ti)
        return stage + co.layer_s

    def _finish(self, stage: X, t: Any, r: Any, overhead_s: Any) -> X:
        """A stage's seconds -> the step's: pipeline bubble, fixed and per-request overheads.
        Under async scheduling (vLLM ``--async-scheduling``) the engine schedules and prepares
        step n + 1 while the GPU runs step n, so the host's per-step and per-request work
        overlaps the stage: ``max(stage, step_overhead + request_s x R)`` plus what a prefill
        step adds (its launches and metadata stay on the step's own path)."""
        co = self._co
        if co.pp > 1:
            stage = stage + (co.pp - 1) * (stage + (co.p2p_s * t + co.allreduce_latency_s))
        if self._async:
            host = co.overhead_s[0] + co.request_s * r
            hidden: X = np.maximum(stage, host) + (overhead_s - co.overhead_s[0])
            return hidden
        out: X = stage + (overhead_s + co.request_s * r)
        return out

    # -- recorded steps

    def aggregates(self, new_tokens: IntArray, context_tokens: IntArray) -> StepAggregates:
        """The sums one step's cost depends on (record them to re-price the step later)."""
        return self._aggregates(new_tokens, context_tokens)

    def times_s(self, a: StepAggregates) -> FloatArray:
        """Seconds of every step in ``a`` (arrays over steps), the same formula as
        ``step_time_s``: re-prices a recorded schedule under this model's profile."""
        tok = np.asarray(a.tokens, dtype=np.int64)
        if tok.size and int(tok.max()) >= len(self._co.gemm_t):
            self._grow(int(tok.max()))
        t, r = tok * 1.0, np.asarray(a.requests) * 1.0
        stage = self._stage(tok, t, r, np.asarray(a.full_context) * 1.0,
                            np.asarray(a.full_pairs) * 1.0, np.asarray(a.sliding_context) * 1.0,
                            np.asarray(a.sliding_pairs) * 1.0, np.maximum,
                            np.asarray(a.prefill_pairs) * 1.0, np.asarray(a.prefill_context) * 1.0,
                            np.asarray(a.prefill_longest, dtype=np.int64))
        over = np.where(np.asarray(a.prefill) > 0, self._co.overhead_s[1], self._co.overhead_s[0])
        return np.asarray(self._finish(stage, t, r, over), dtype=np.float64)

    # -- breakdowns

    def cost(self, new_tokens: IntArray, context_tokens: IntArray) -> StepCost:
        """The typed breakdown of one step."""
        from kvplan.costs.step.breakdown import parts, to_cost

        return to_cost(self, parts(self, self._aggregates(new_tokens, context_tokens)), 1)

    def decode_run_cost(self, context_tokens: IntArray, num_steps: int) -> StepCost:
        """The summed breakdown of ``num_steps`` pure-decode steps (as ``decode_run_s``)."""
        from kvplan.costs.step.breakdown import parts, to_cost

        p = parts(self, self._decode_aggregates(context_tokens, num_steps))
        return to_cost(self, {k: float(np.sum(v)) for k, v in p.items()}, num_steps)

    # -- internals

    def _aggregates(self, new: IntArray, ctx: IntArray) -> StepAggregates:
        return step_aggregates(self.constants.window, self.constants.sliding_flops_per_pair,
                               self._co.mla, new, ctx)

    def _decode_aggregates(self, ctx: IntArray, num_steps: int) -> StepAggregates:
        return decode_aggregates(self.constants.window, self.constants.sliding_flops_per_pair,
                                 ctx, num_steps)
