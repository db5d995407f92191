"""Request latency for a static batch (TTFT, TPOT, end-to-end, throughput) from step costs.

A static batch of B identical requests (prompt P, output O), as vLLM runs it::

    prefill  B*P prompt tokens as one token stream, cut into steps of max_num_batched_tokens
             (one step when unset); every request's first token is sampled in the last step
    decode   O-1 steps; step k has every request decode one token with P+k tokens cached

    TTFT = sum(prefill steps)   TPOT = mean(decode steps) = (E2E - TTFT) / (O - 1)
    E2E  = TTFT + sum(decode steps)   throughput = B * O / E2E (whole deployment)
With pp stages vLLM's batch queue runs it (pp_queue: prefill steps in flight together;
after several, the groups they completed decode in flight; TTFT, E2E: the last request's).
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from operator import attrgetter
from typing import TYPE_CHECKING, Any

import numpy as np

from kvplan.api_check import named_fields, plain_numbers
from kvplan.costs.step.batch import IntArray, idle_timer
from kvplan.costs.step.latency_checks import (
    check_priced_steps,
    check_shape_bounds,
    check_sweep_size,
    check_sweep_steps,
)
from kvplan.costs.step.parallel.pp_queue import prefill_back_s, queued_batch_s
from kvplan.costs.step.roofline import (
    Bound,
    BytesMoved,
    Flops,
    Profile,
    Seconds,
    StepCost,
    StepCostModel,
)
from kvplan.errors import DoesNotFitError, InputError, KvTooSmallError
from kvplan.specs.hardware import HardwareSpec
from kvplan.specs.model import ModelSpec
from kvplan.specs.serving import EngineConfig
from kvplan.units import cdiv, fmt_bytes

if TYPE_CHECKING:
    from kvplan.costs.memory.resolved import ResolvedDeployment


@named_fields
@dataclass(frozen=True, slots=True, kw_only=True)
class RequestShape:
    """B identical requests started together: prompt tokens in, output tokens out."""

    batch: int = 1
    prompt_tokens: int
    output_tokens: int

    def __post_init__(self) -> None:
        plain_numbers(self)  # a numpy integer is a whole number too
        for flag, value in (("--batch", self.batch), ("--prompt", self.prompt_tokens),
                            ("--output", self.output_tokens)):
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise InputError(f"{flag} must be a positive whole number, got {value!r}")
        check_shape_bounds(self.batch, self.prompt_tokens, self.output_tokens)

    @property
    def total_tokens(self) -> int:
        """Tokens one request holds at the end: prompt + output."""
        return self.prompt_tokens + self.output_tokens


@dataclass(frozen=True, slots=True, kw_only=True)
class LatencyResult:
    """Latency of one static batch, with the summed cost of each phase."""

    shape: RequestShape
    ttft_s: float
    tpot_s: float | None
    """Mean decode step; None when each request produces a single token (no decode)."""
    e2e_s: float
    output_throughput_tok_s: float
    prefill: StepCost
    decode: StepCost | None

    def __post_init__(self) -> None:
        plain_numbers(self)  # np.float64 from the kernel tables' interpolation -> float

    @property
    def prefill_bound(self) -> Bound:
        return self.prefill.bound

    @property
    def decode_bound(self) -> Bound | None:
        return None if self.decode is None else self.decode.bound


# ---------------------------------------------------------------- steps


def prefill_steps(shape: RequestShape,
                  max_num_batched_tokens: int | None) -> list[tuple[IntArray, IntArray]]:
    """(new_tokens, context_tokens) per prefill step, as vLLM's token budget cuts them.

    The batch's prompts form one stream of B*P tokens, filled in request order::

        budget 8, B=3, P=5:  step 0 |r0 r0 r0 r0 r0 r1 r1 r1|  step 1 |r1 r1 r2 r2 r2 r2 r2|
    """
    b, p = shape.batch, shape.prompt_tokens
    budget = max_num_batched_tokens or b * p
    steps = []
    for start in range(0, b * p, budget):
        end = min(start + budget, b * p)
        reqs = np.arange(start // p, (end - 1) // p + 1, dtype=np.int64)
        first, last = np.maximum(reqs * p, start), np.minimum((reqs + 1) * p, end)
        steps.append((last - first, first - reqs * p))
    return steps


def add_costs(costs: list[StepCost]) -> StepCost:
    """The sum of several step costs (one phase); the ridge point is shared."""
    def total(get: str) -> float:
        return sum(float(attrgetter(get)(c)) for c in costs)

    return StepCost(
        steps=sum(c.steps for c in costs), tokens=sum(c.tokens for c in costs),
        flops=Flops(**{k: total(f"flops.{k}") for k in ("dense_gemm", "attention", "lm_head",
                                                         "state")}),
        bytes=BytesMoved(**{k: round(total(f"bytes.{k}")) for k in (
            "weights", "kv_read", "kv_write", "state", "activations")}),
        seconds=Seconds(**{k: total(f"seconds.{k}") for k in (
            "compute_s", "memory_s", "roofline_s", "communication_s", "pipeline_s",
            "overhead_s")}),
        ridge_point=costs[0].ridge_point,
    )


# ---------------------------------------------------------------- latency


def static_batch_latency(timer: StepCostModel, shape: RequestShape, *,
                         max_num_batched_tokens: int | None = None) -> LatencyResult:
    """TTFT, TPOT, E2E and throughput of a static batch, priced step by step by ``timer``.
    The batch starts on an idle engine: under async scheduling its first step has no earlier
    step to hide its host work under, so it costs what it costs synchronously."""
    check_priced_steps(shape.batch, shape.prompt_tokens, max_num_batched_tokens)
    steps = prefill_steps(shape, max_num_batched_tokens)
    idle = idle_timer(timer)
    ttft = prefill_back_s(timer, steps) + (  # pp > 1: the steps in flight together (pp_queue)
        idle.step_time_s(*steps[0]) - timer.step_time_s(*steps[0]) if idle is not timer else 0.0)
    prefill = add_costs([(idle if i == 0 else timer).cost(new, ctx)
                         for i, (new, ctx) in enumerate(steps)])
    n_decode = shape.output_tokens - 1
    if n_decode == 0:
        return LatencyResult(shape=shape, ttft_s=ttft, tpot_s=None, e2e_s=ttft,
                             output_throughput_tok_s=shape.batch / ttft, prefill=prefill,
                             decode=None)
    context = np.full(shape.batch, shape.prompt_tokens, dtype=np.int64)
    ttft, e2e = queued_batch_s(timer, shape, steps, max_num_batched_tokens) or (
        ttft, ttft + float(timer.decode_run_s(context, n_decode).sum()))
    decode_s = e2e - ttft
    return LatencyResult(
        shape=shape, ttft_s=ttft, tpot_s=decode_s / n_decode, e2e_s=e2e,
        output_throughput_tok_s=shape.batch * shape.output_tokens / e2e, prefill=prefill,
        decode=timer.decode_run_cost(context, n_decode),
    )


def request_latency(
    model: ModelSpec, hardware: HardwareSpec, engine: EngineConfig, shape: RequestShape,
    profile: Profile | None = None, *, check_fit: bool = True,
    resolved: ResolvedDeployment | None = None,
) -> LatencyResult:
    """Latency of ``shape`` on ``hardware``; raises DoesNotFitError when the batch's KV cache
    does not fit beside the weights (skip with ``check_fit=False``).

    ``profile=None``: the bundled profile for this GPU and precision; ``resolved``: the flags
    resolved once (None: here). Under DP the fullest rank's ceil(B / dp) requests set TTFT,
    TPOT and E2E; throughput is the fleet's B x O / E2E (``costs.step.parallel.dp_latency``).
    """
    from kvplan.costs.step.profiles import profile_for

    rank = rank_shape(shape, engine.data_parallel_size)
    if check_fit:
        check_batch_fits(model, hardware, engine, rank, resolved)
    profile = profile or profile_for(model, hardware, engine, precision=(
        None if resolved is None else resolved.compute_precision))
    timer = StepCostModel(model, hardware, engine, profile, resolved=resolved)
    r = static_batch_latency(timer, rank, max_num_batched_tokens=engine.max_num_batched_tokens)
    if rank == shape:
        return r
    return replace(r, shape=shape,
                   output_throughput_tok_s=shape.batch * shape.output_tokens / r.e2e_s)


def rank_shape(shape: RequestShape, dp: int) -> RequestShape:
    """The fullest DP rank's share of the batch: ceil(B / dp) requests."""
    return replace(shape, batch=cdiv(shape.batch, dp))


# ---------------------------------------------------------------- does it fit


@dataclass(frozen=True, slots=True, kw_only=True)
class KvFit:
    """KV blocks the batch needs on one GPU vs the blocks vLLM's memory plan has."""

    needed_bytes: int
    available_bytes: int
    blocks_per_request: int
    num_blocks: int
    batch: int
    weights_bytes: int = 0
    activation_bytes: int = 0
    memory_error: str | None = None
    """vLLM's plan's failure (no room beside weights + activations, or < 1 max_model_len)."""
    kv_too_small: bool = False
    """The plan failed on the KV cache alone (the weights fit)."""
    prefill_extra: tuple[int, int] = (0, 0)
    """(k, x): at most k requests share a prefill step, each holding x blocks more than at
    its end there (a sliding window frees its blocks only from the next step)."""

    @property
    def weights_fit(self) -> bool:
        return self.memory_error is None or self.kv_too_small

    def _blocks(self, batch: int) -> int:
        k, extra = self.prefill_extra
        return batch * self.blocks_per_request + min(batch, k) * extra

    @property
    def usable_blocks(self) -> int:
        """Blocks requests can hold: ``num_blocks`` less vLLM's null block (block_pool.py)."""
        return max(0, self.num_blocks - 1)

    @property
    def fits(self) -> bool:
        return self._blocks(self.batch) <= self.usable_blocks

    @property
    def max_batch(self) -> int:
        """The largest batch of this shape whose cache fits."""
        k, extra = self.prefill_extra
        per, pool = max(1, self.blocks_per_request), self.usable_blocks
        if min(k, 1) * (per + extra) > pool:
            return 0
        whole = pool // (per + extra)  # every request in the prefill step
        return whole if whole < k else max(k, (pool - k * extra) // per)


def kv_fit(
    model: ModelSpec, hardware: HardwareSpec, engine: EngineConfig, shape: RequestShape,
    resolved: ResolvedDeployment | None = None,
) -> KvFit:
    """B requests of P+O tokens against ``costs.memory.plan``'s block pool; max_model_len
    defaults to P+O here (not the model's limit), as one would serve this shape."""
    from kvplan.costs.memory.plan import plan_memory, plan_resolved
    from kvplan.costs.memory.resolved import with_engine

    eng = engine if engine.max_model_len else replace(engine, max_model_len=shape.total_tokens)
    try:
        plan = (plan_memory(model, hardware, eng) if resolved is None
                else plan_resolved(with_engine(resolved, eng)))
    except DoesNotFitError as exc:
        return KvFit(needed_bytes=exc.needed_bytes, available_bytes=exc.available_bytes,
                     blocks_per_request=1, num_blocks=0, batch=shape.batch,
                     memory_error=str(exc), kv_too_small=isinstance(exc, KvTooSmallError))
    end = shape.total_tokens - 1  # vLLM never caches the last output token
    blocks = sum(g.spec.blocks_for(end, g.block_size) for g in plan.groups)
    chunk = eng.max_num_batched_tokens  # None: the batch's prompts in one step (as priced)
    extra = sum(_peak_blocks(g.spec, shape, g.block_size, chunk or shape.prompt_tokens)
                for g in plan.groups) - blocks
    k = ALL_IN_ONE_STEP if chunk is None else chunk // shape.prompt_tokens + 2
    fit = KvFit(needed_bytes=0, available_bytes=plan.budget.available_kv_bytes,
                blocks_per_request=blocks, num_blocks=plan.num_blocks, batch=shape.batch,
                weights_bytes=plan.budget.weights_bytes,
                activation_bytes=plan.budget.activation_bytes, prefill_extra=(k, extra))
    block_bytes = plan.page_size_bytes * plan.layers_per_group
    return replace(fit, needed_bytes=fit._blocks(shape.batch) * block_bytes)


ALL_IN_ONE_STEP = 1 << 62  # KvFit.prefill_extra's k when the prompts share one prefill step


def _peak_blocks(spec: Any, shape: RequestShape, block: int, chunk: int) -> int:
    """A request's most blocks in a layer of ``spec``: at the end, or in a prefill step of
    ``chunk`` tokens, which holds every block it writes (a window frees them next step)."""
    peak, done = spec.blocks_for(shape.total_tokens - 1, block), 0
    while done < shape.prompt_tokens and hasattr(spec, "window"):
        step = min(shape.prompt_tokens, done + chunk)
        peak, done = max(peak, spec.blocks_for(step, block, before=done)), step
    return int(peak)


def check_batch_fits(model: ModelSpec, hardware: HardwareSpec, engine: EngineConfig,
                     shape: RequestShape, resolved: ResolvedDeployment | None = None) -> None:
    """Raise InputError past the context limit, DoesNotFitError when the KV cache does not fit."""
    check_context(model, engine, shape)
    fit = kv_fit(model, hardware, engine, shape, resolved)
    if fit.memory_error is not None:
        what = "cannot hold one request" if fit.kv_too_small else "does not fit before any KV cache"
        raise DoesNotFitError(
            f"{model.name} {what}: {fit.memory_error}",
            needed_bytes=fit.needed_bytes, available_bytes=fit.available_bytes,
        )
    if not fit.fits:
        dp = engine.data_parallel_size  # ``shape``: the fullest DP rank's ceil(B / dp)
        rank = ("a DP rank's batch", f" per rank (--batch {dp * fit.max_batch} over {dp} ranks)")
        raise DoesNotFitError(
            f"the KV cache does not fit: {rank[0] if dp > 1 else 'a batch'} of {shape.batch} "
            f"requests x {shape.total_tokens} tokens needs {fmt_bytes(fit.needed_bytes)} of KV "
            f"cache per GPU, but {hardware.id} has {fmt_bytes(max(0, fit.available_bytes))} "
            f"left for it ({fit.num_blocks} blocks) after weights {fmt_bytes(fit.weights_bytes)} "
            f"and activations {fmt_bytes(fit.activation_bytes)}; at most {fit.max_batch} such "
            f"requests fit{rank[1] if dp > 1 else ''} (lower --batch, use --kv-cache-dtype fp8 "
            "or raise --tensor-parallel-size)",
            needed_bytes=fit.needed_bytes, available_bytes=fit.available_bytes,
        )


def check_context(model: ModelSpec, engine: EngineConfig, shape: RequestShape) -> None:
    """InputError when one request is longer than max_model_len (default: the model's)."""
    limit = engine.max_model_len or model.max_position_embeddings
    if shape.total_tokens > limit:
        raise InputError(
            f"--prompt + --output = {shape.total_tokens} tokens exceeds the model's context "
            f"limit of {limit} tokens (max_model_len); shorten the request"
        )


# ---------------------------------------------------------------- lever sweep

SWEEP_LEVERS = ("batch", "prompt", "output", "kv-cache-dtype", "tensor-parallel-size",
                "max-num-batched-tokens")


@dataclass(frozen=True, slots=True, kw_only=True)
class SweepRow:
    """One lever value: the latency and whether the batch's KV cache fits."""

    value: str
    result: LatencyResult
    fits: bool
    max_batch: int
    weights_fit: bool = True
    does_not_fit: str | None = None
    """Why the model itself does not fit at this value (its latencies mean nothing then)."""


def parse_sweep(text: str) -> tuple[str, list[str]]:
    """'batch=1,8,64' -> ('batch', ['1', '8', '64']); InputError names the accepted levers."""
    lever, sep, values = text.partition("=")
    lever = lever.strip().lower().lstrip("-").replace("_", "-")
    items = [v.strip() for v in values.split(",") if v.strip()]
    if not sep or lever not in SWEEP_LEVERS or not items:
        raise InputError(
            f"cannot read --sweep {text!r}: use LEVER=V1,V2,... with LEVER one of "
            f"{', '.join(SWEEP_LEVERS)}"
        )
    return lever, items


def sweep(
    model: ModelSpec, hardware: HardwareSpec, engine: EngineConfig, shape: RequestShape,
    lever: str, values: list[str], profile: Profile | None = None,
) -> list[SweepRow]:
    """Latency for each value of one lever, every other setting held fixed; each row gets the
    plain command's checks (sizes, context limit) except the KV fit, which it reports."""
    check_sweep_size(values)
    cases = [_apply(engine, shape, lever, value) for value in values]
    for eng, shp in cases:
        check_context(model, eng, shp)
    check_sweep_steps([(s.batch, s.prompt_tokens, e.max_num_batched_tokens) for e, s in cases])
    rows = []
    for value, (eng, shp) in zip(values, cases, strict=True):
        fit = kv_fit(model, hardware, eng, shp)
        result = request_latency(model, hardware, eng, shp, profile, check_fit=False)
        rows.append(SweepRow(value=value, result=result, fits=fit.fits, max_batch=fit.max_batch,
                             weights_fit=fit.weights_fit, does_not_fit=fit.memory_error))
    return rows


def _apply(engine: EngineConfig, shape: RequestShape, lever: str,
           value: str) -> tuple[EngineConfig, RequestShape]:
    if lever == "kv-cache-dtype":
        return replace(engine, kv_cache_dtype=value), shape
    from kvplan.units import human_readable_int

    try:  # the budget as its flag reads it (vLLM's human_readable_int: 8k, 8K)
        number = (human_readable_int(value) if lever == "max-num-batched-tokens"
                  else int(value))
    except ValueError:
        raise InputError(f"--sweep {lever} values must be whole numbers, got {value!r}") from None
    if lever == "tensor-parallel-size":
        return replace(engine, tensor_parallel_size=number), shape
    if lever == "max-num-batched-tokens":
        return replace(engine, max_num_batched_tokens=number), shape
    field = {"batch": "batch", "prompt": "prompt_tokens", "output": "output_tokens"}[lever]
    return engine, replace(shape, **{field: number})
