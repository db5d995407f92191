"""The shape of one engine step, and the step-timer contract the simulator relies on."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Protocol, TypeVar

import numpy as np
import numpy.typing as npt

T = TypeVar("T")
IntArray = npt.NDArray[np.int64]
FloatArray = npt.NDArray[np.float64]


def idle_timer(timer: T) -> T:
    """The timer of a step that starts on an idle engine. Under async scheduling (vLLM
    ``--async-scheduling``) a step's host work (scheduling, input preparation) runs while
    the step before it is on the GPU; after an idle spell there is no step before it, so the
    first step costs what it costs synchronously. Any other timer: itself."""
    if getattr(timer, "_async", False):
        out: T = timer.with_profile(timer.profile, overlap=False)  # type: ignore[attr-defined]
        return out
    return timer


class StepTimer(Protocol):
    """Anything that prices one engine iteration in seconds.

    ``new_tokens[i]`` is how many tokens request i computes this step (a prefill chunk, or 1
    for a decode); ``context_tokens[i]`` is how many tokens it already had in the cache before
    the step. Both arrays have one entry per scheduled request.
    """

    def step_time_s(self, new_tokens: IntArray, context_tokens: IntArray) -> float:
        """Seconds for one step with this batch."""
        ...

    def decode_run_s(self, context_tokens: IntArray, num_steps: int) -> FloatArray:
        """Seconds of each of ``num_steps`` consecutive pure-decode steps of the same requests.

        Step k (0-based) has every request decode one token with context_tokens + k cached.
        Must equal calling step_time_s step by step (tests prove it).
        """
        ...


class AggregateTimer(StepTimer, Protocol):
    """A StepTimer that can also price a step from the batch's sums (the simulator's lean
    path uses it when ``supports_aggregates`` is true; it must equal step_time_s exactly)::

        tokens = sum(new)   requests = len(new)   context = sum(ctx)
        pairs  = sum(new * ctx + new * (new + 1) / 2)   prefill = any(new > 1 or ctx == 0)

    decode_run_agg(requests, context, k) equals decode_run_s(ctx, k) when sum(ctx) = context
    and every ctx >= 1. A timer whose steps also depend on the longest prompt chunk (GDN
    layers) says so with ``needs_longest`` and takes it as ``step_time_agg(..., longest=L)``.
    """

    @property
    def supports_aggregates(self) -> bool: ...

    def step_time_agg(self, tokens: int, requests: int, context: int, pairs: int,
                      prefill: bool) -> float: ...

    def decode_run_agg(self, requests: int, context: int, num_steps: int) -> FloatArray: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class AggregateForm:
    """A step's time as tables over its tokens T (0..max_tokens) and scalars, for a
    compiled simulator loop (kvplan.sim._core) that must not hold model knowledge. With
    R requests, C context and P pairs (the sums of ``AggregateTimer``), as float64 from left
    to right, no fused multiply-add::

        dense = max(gemm[T] + lm_per_request * R, weights[T])
        mix_c = attn_per_pair * P + max(state[T], gdn_longest[L])   (gdn_longest: if given)
        mix_c = mix_c + (mla_prefill_per_pair * PP + mla_context_per_token * PC)  (if mla)
        mix_m = kv_per_context * C + (kv_write[T] + state_per_request * R)
        mix_c = mix_c + sliding_attn_per_pair * SP                            (if window)
        mix_m = mix_m + sliding_kv_per_context * SC                           (if window)
        stage = dense + max(mix_c, mix_m)
        stage = stage + allreduce[T] (if given);  stage = stage + layer_s
        stage = stage + pp_minus_1 * (stage + p2p[T])           (if p2p is given)
        step  = stage + (overhead_s[prefill] + request_s * R)
        step  = max(stage, overhead_s[0] + request_s * R)
                + (overhead_s[prefill] - overhead_s[0])               (if overlap_host)

    The optional sums, per scheduled request i computing n_i tokens over c_i cached
    (W = ``window``; ``kvplan.costs.step.sums``)::

        SC = sum_i min(c_i, W)                 SP = sum_i sum_{j=c_i+1}^{c_i+n_i} min(j, W)
        PP = sum over n_i > 1 of n_i * c_i + n_i * (n_i + 1) / 2     (MLA's prefill path)
        PC = sum over n_i > 1 of c_i
        L  = max over n_i > 1 of n_i (0 if none)     (the longest sequence a chunked kernel scans)

    max(a, b) is b if b > a else a (Python's). The timer builds its tables with the same
    operations as its step_time_s (and step_time_agg), so the value is equal to the last bit
    (tested, and spot checked when the core is picked). The fields after ``overhead_s`` are
    optional: their defaults (no window, no MLA) leave the formula as it was without them.
    """

    max_tokens: int
    gemm: FloatArray
    weights: FloatArray
    state: FloatArray
    kv_write: FloatArray
    allreduce: FloatArray | None
    p2p: FloatArray | None
    lm_per_request: float
    attn_per_pair: float
    kv_per_context: float
    state_per_request: float
    layer_s: float
    pp_minus_1: float
    request_s: float
    overhead_s: tuple[float, float]
    window: int = 0
    """The sliding window W the time is priced with (0: none; SC and SP are not used)."""
    sliding_attn_per_pair: float = 0.0
    sliding_kv_per_context: float = 0.0
    mla: bool = False
    """MLA: requests computing more than one token take the prefill path (PP and PC)."""
    mla_prefill_per_pair: float = 0.0
    mla_context_per_token: float = 0.0
    overlap_host: bool = False
    """Async scheduling (vLLM --async-scheduling): the host's per-step and per-request work
    overlaps the stage, ``step = max(stage, overhead_s[0] + request_s * R) + (overhead_s[prefill]
    - overhead_s[0])`` (``StepCostModel._finish``)."""
    gdn_longest: FloatArray | None = None
    """[L]: Gated DeltaNet layers' seconds for one sequence of L new tokens (their chunked
    scan runs along a sequence: a step is no faster than its longest prompt chunk alone)."""

    def as_tuple(self) -> tuple[object, ...]:
        """The 24-tuple kvplan.sim._core reads."""
        return (self.max_tokens, self.gemm, self.weights, self.state, self.kv_write,
                self.allreduce, self.p2p, self.lm_per_request, self.attn_per_pair,
                self.kv_per_context, self.state_per_request, self.layer_s, self.pp_minus_1,
                self.request_s, *self.overhead_s, self.window, self.sliding_attn_per_pair,
                self.sliding_kv_per_context, self.mla, self.mla_prefill_per_pair,
                self.mla_context_per_token, self.overlap_host, self.gdn_longest)
