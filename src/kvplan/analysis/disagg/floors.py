"""Zero-load floors of a disaggregated fleet: latencies no load can beat, and the prefill
pool's token rate; the disaggregated search drops a fleet whose floors already miss.

    TTFT floor(r) = API delays (both hops) + prefill of U_r alone (its chunks, one step each)
                    + transfer_s(P_r) on an idle link + one decode step (1 token, P_r - 1)
    U_r = P_r less its hashed prefix blocks (at least 1) when the prefill pool caches
          prefixes (plan.bounds.uncached_prompts): a prefix hit skips their compute
    TPOT floor(r) = one decode step of r alone at its first decode context (P_r)
    E2EL floor(r) = TTFT floor + (output_r - 1) x TPOT floor
Each is at most what the simulation gives r (load adds queueing and batch-mates; step times
grow with tokens and context), so judging the floors by the SLO is a safe prune.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from kvplan.analysis.disagg.serving import PoolRun, pool_timer, transfer_cost
from kvplan.analysis.plan.judge import Latencies, judge
from kvplan.costs.step.roofline import StepCostModel
from kvplan.sim.state import FloatArray, IntArray
from kvplan.specs.disagg import DisaggDeployment
from kvplan.specs.requests.workload import Workload
from kvplan.specs.slo import Slo

_ONE = np.ones(1, dtype=np.int64)


_TIMERS: dict[int, tuple[PoolRun, StepCostModel]] = {}
"""id(pool) -> (pool, its timer): the search asks for the same pools many times."""


def cached_timer(p: PoolRun) -> StepCostModel:
    """The pool's step timer, kept while the pool is (a search asks for it many times)."""
    got = _TIMERS.get(id(p))
    if got is None or got[0] is not p:
        if len(_TIMERS) > 64:
            _TIMERS.clear()
        got = _TIMERS[id(p)] = (p, pool_timer(p))
    return got[1]


_PARTS: dict[tuple[int, int, str], tuple[PoolRun, Workload, FloatArray]] = {}
"""(id(pool), id(workload), part) -> per-request seconds: a pool's floors are the same in
every fleet it joins (a search pairs each pool with many)."""


def _part(p: PoolRun, work: Workload, name: str, make: Callable[[], FloatArray]) -> FloatArray:
    key = (id(p), id(work), name)
    got = _PARTS.get(key)
    if got is None or got[0] is not p or got[1] is not work:
        if len(_PARTS) > 256:
            _PARTS.clear()
        got = _PARTS[key] = (p, work, make())
    return got[2]


def prefill_alone_s(timer: StepCostModel, prompts: IntArray, budget: int) -> FloatArray:
    """Each prompt's prefill on an idle instance: chunks of ``budget`` tokens, one step each."""
    out = np.zeros(len(prompts))
    memo: dict[int, float] = {}
    for i, p in enumerate(np.asarray(prompts).tolist()):
        if p not in memo:
            total, done = 0.0, 0
            while done < p:
                new = min(budget, p - done)
                total += float(timer.step_time_s(np.array([new]), np.array([done])))
                done += new
            memo[p] = total
        out[i] = memo[p]
    return out


def _decode_step_s(timer: StepCostModel, ctx: IntArray) -> FloatArray:
    memo: dict[int, float] = {}
    out = np.zeros(len(ctx))
    for i, c in enumerate(np.asarray(ctx).tolist()):
        if c not in memo:
            memo[c] = float(timer.step_time_s(_ONE, np.array([c])))
        out[i] = memo[c]
    return out


def floor_latencies(dd: DisaggDeployment, pre: PoolRun, dec: PoolRun,
                    work: Workload) -> Latencies:
    """Every request's zero-load TTFT / TPOT / E2EL floors (no ITL: empty)."""
    from kvplan.analysis.plan.bounds import uncached_prompts

    tp, td = cached_timer(pre), cached_timer(dec)
    prompt = np.asarray(work.prompt_tokens, dtype=np.int64)
    computed = uncached_prompts(work, pre.limits.prefix_caching)  # what a prefix hit leaves
    out = np.asarray(work.output_tokens, dtype=np.int64)
    cost = transfer_cost(dd, dec.plan)
    moved = cost.link_bytes(prompt) / cost.link_bytes_per_s + cost.latency_s
    api = tp.api_delays_s(prompt) + td.api_delays_s(prompt)
    ttft = (api + _part(pre, work, "prefill", lambda: prefill_alone_s(
        tp, computed, pre.limits.max_num_batched_tokens)) + moved
            + _part(dec, work, "first", lambda: _decode_step_s(td, np.maximum(prompt - 1, 0))))
    tpot = np.where(out > 1, _part(dec, work, "decode", lambda: _decode_step_s(td, prompt)),
                    np.nan)
    e2el = ttft + np.maximum(out - 1, 0) * np.nan_to_num(tpot)
    return Latencies(arrival_s=np.asarray(work.arrival_s, dtype=np.float64),
                     ttft_ms=ttft * 1000, tpot_ms=tpot * 1000, e2el_ms=e2el * 1000,
                     itl_ms=np.zeros(0), itl_req=np.zeros(0, dtype=np.int64),
                     output_tokens=out, concurrency=None)


def zero_load_miss(dd: DisaggDeployment, pre: PoolRun, dec: PoolRun, work: Workload,
                   slo: Slo) -> str:
    """Why the floors already miss the SLO, or '' (ITL bounds: not judged on floors)."""
    if any(b.metric == "itl" for b in slo.bounds) or "itl" in dict(slo.goodput_ms):
        return ""
    v = judge(floor_latencies(dd, pre, dec, work), slo)
    if v.ok:
        return ""
    return f"at zero load {v.binding} is already {v.value(v.binding):,.1f} (the SLO misses)"
