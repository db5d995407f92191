"""Screen disaggregated fleets for the joint search: memory (exact), price, zero-load floors
and the work bounds (safe), each fleet a JointCandidate with id d0000.., dropped or kept.

Price: each pool rents its own instances on the provider's cheapest shape that holds its
instances' GPUs (``costs.pricing.fleet_cost``), $/hour summed. The KV link costs nothing on
top: the NICs (InfiniBand / RoCE / Ethernet) are taken to be part of the instance price, as
on the price table's multi-GPU nodes; a node link (NVLink, PCIe) needs both pools in one
node, priced as one rental of the whole fleet's GPUs on a shape whose node holds them all.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from kvplan.analysis.disagg.candidates import JointCandidate
from kvplan.analysis.disagg.floors import cached_timer, zero_load_miss
from kvplan.analysis.disagg.serving import (
    PoolRun,
    block_mismatch,
    plan_pool,
    pool_timer,
    transfer_cost,
)
from kvplan.analysis.disagg.work_bounds import (
    Burst,
    best_decode_tokens_per_s,
    best_tokens_per_s,
    burst_text,
    window_miss,
    worst_bursts,
)
from kvplan.costs.pricing import FleetCost, fleet_cost
from kvplan.costs.step.roofline import Profile
from kvplan.errors import DoesNotFitError, KvplanError
from kvplan.sim.state import FloatArray, IntArray
from kvplan.specs.deployment import Deployment
from kvplan.specs.disagg import DisaggDeployment, pool_label
from kvplan.specs.prices import PriceTable
from kvplan.specs.requests.workload import Workload
from kvplan.specs.serving import EngineConfig
from kvplan.specs.slo import Slo

PoolKey = tuple[str, str, EngineConfig]
"""(role, GPU, engine flags: TP, DP, EP, KV cache dtype, weight format, ...): one pool's
instance (its plan, timer and rates); the plan's space may hold fleets of several KV cache
dtypes and weight formats on one GPU and layout."""
PairKey = tuple[PoolKey, PoolKey, str]
"""(prefill pool, decode pool, link): what the floors and per-request works depend on."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Screened:
    """Fleets kept for simulation and those dropped (both as joint candidates)."""

    kept: tuple[JointCandidate, ...]
    dropped: tuple[JointCandidate, ...]


def screen_fleets(fleets: Sequence[DisaggDeployment], work: Workload, slo: Slo,
                  prices: PriceTable, *, bounds: bool = True,
                  profile: str | Profile | None = None) -> Screened:
    """Each fleet's stage before simulation (``bounds``: apply the floors and work bounds;
    ``profile``: the latency profile the pools' steps are priced with, None: bundled)."""
    kept: list[JointCandidate] = []
    dropped: list[JointCandidate] = []
    pools: dict[PoolKey, PoolRun | str] = {}
    floors: dict[PairKey, str] = {}
    bursts: dict[tuple[PairKey, str], tuple[Burst, ...]] = {}
    for i, dd in enumerate(fleets):
        costs = pool_costs(dd, prices)
        usd = None if costs is None else sum(c.usd_per_hour for c in costs)
        stage, why = _stage(dd, work, slo, pools, (floors, bursts), bounds, costs is None,
                            profile)
        c = JointCandidate(id=f"d{i:04d}", kind="disaggregated", stage=stage or "screened",
                           reason=why or "kept for simulation", gpus=dd.total_gpus,
                           usd_per_hour=usd, index=i, disagg=dd, pool_costs=costs or ())
        (dropped if stage else kept).append(c)
    return Screened(kept=tuple(kept), dropped=tuple(dropped))


def _stage(dd: DisaggDeployment, work: Workload, slo: Slo,
           pools: dict[PoolKey, PoolRun | str],
           kept: tuple[dict[PairKey, str], dict[tuple[PairKey, str], tuple[Burst, ...]]],
           bounds: bool, unpriced: bool, profile: str | Profile | None = None
           ) -> tuple[str, str]:
    """``kept``: each pool pair's zero-load floors and worst bursts, across the fleets."""
    floors, bursts = kept
    pre = _pool("prefill", dd.prefill, pools, profile)
    dec = _pool("decode", dd.decode, pools, profile)
    for role, p, d in (("prefill", pre, dd.prefill), ("decode", dec, dd.decode)):
        if p == _MEMORY:
            return "pruned_memory", (f"the {role} pool ({d.gpu.id} {pool_label(d)}) cannot "
                                     "hold one max_model_len request")
        if isinstance(p, str):
            return "invalid", p
    assert isinstance(pre, PoolRun) and isinstance(dec, PoolRun)
    if block_mismatch(pre, dec):  # e.g. FlashMLA's 64 on H100 beside Triton MLA's 16 on L40S
        return "invalid", block_mismatch(pre, dec)
    if unpriced:
        return "pruned_cost", "no price row holds a pool's instance"
    if not bounds:
        return "", ""
    key = _pair(dd)
    if key not in floors:
        floors[key] = zero_load_miss(dd, pre, dec, work, slo)
    if floors[key]:
        return "pruned_bound", floors[key]
    why = work_miss(dd, pre, dec, work, slo, bursts)
    return ("pruned_bound", why) if why else ("", "")


def work_miss(dd: DisaggDeployment, pre: PoolRun, dec: PoolRun, work: Workload,
              slo: Slo, bursts: dict[tuple[PairKey, str], tuple[Burst, ...]] | None = None
              ) -> str:
    """The first work bound (prefill compute, link, decode) the fleet already misses, or ''
    (``bursts``: each pool pair's worst bursts, kept across the fleets of one screen).
    A DP instance counts as its ranks: each its own NICs, scheduler and KV pool."""
    prompt = np.asarray(work.prompt_tokens, dtype=np.int64)
    out = np.asarray(work.output_tokens, dtype=np.int64)
    cost = transfer_cost(dd, dec.plan)
    wire = cost.link_bytes(prompt) / cost.link_bytes_per_s
    lanes = min(_engines(dd.prefill), _engines(dd.decode))
    checks = [("ttft", wire.astype(np.float64), float(lanes), "link-seconds")]
    if work.prefix_hashes is None:  # shared prefixes: the prefill side computes less
        rate = _rate(pre, "prefill") * _engines(dd.prefill)
        checks.insert(0, ("ttft", prompt.astype(np.float64), rate, "prefill tokens"))
    if any(b.metric == "e2el" for b in slo.bounds):
        rate = _rate(dec, "decode") * _engines(dd.decode)
        checks.append(("e2el", np.maximum(out - 1, 0).astype(np.float64), rate,
                       "decode tokens"))
    kv = _kv_check(dd, dec, work, prompt, wire)
    every = [(*c, 0.0) for c in checks] + ([] if kv is None else [kv])
    for metric, per, cap, what, extra in every:  # the whole trace first
        why = window_miss(work, slo, metric, per, cap, what, extra_s=extra)
        if why:
            return why
    bursts = {} if bursts is None else bursts
    for metric, per, cap, what, extra in every:  # then its bursts
        key = (_pair(dd), what)  # the works depend on the pools' GPUs and engines, not counts
        if key not in bursts:
            bursts[key] = worst_bursts(work, slo, metric, per, extra)
        why = burst_text(bursts[key], cap, what)
        if why:
            return why
    return ""


def _engines(d: Deployment) -> int:
    """Engines of a pool (instances x DP ranks): each its own scheduler, KV pool, NICs."""
    return d.replicas * d.engine.data_parallel_size


def _key(role: str, d: Deployment) -> PoolKey:
    return (role, d.gpu.id, d.engine)


def _pair(dd: DisaggDeployment) -> PairKey:
    return (_key("prefill", dd.prefill), _key("decode", dd.decode), dd.link.id)


def _kv_check(dd: DisaggDeployment, dec: PoolRun, work: Workload, prompt: IntArray,
              wire: FloatArray) -> tuple[str, FloatArray, float, str, float] | None:
    """The decode pool's KV bound (work_bounds' docstring) as (metric, work, capacity, what,
    extra_s); full-attention caches only (a window or state group frees or holds blocks
    otherwise: None)."""
    kinds = {g.spec.kind for g in dec.plan.groups}
    if not kinds or not kinds <= {"full", "mla"}:
        return None
    blocks = len(dec.plan.groups) * -(-prompt // dec.plan.block_size)
    t_min = _step_min(dec)
    hold = wire + np.asarray(work.output_tokens, dtype=np.float64) * t_min
    return ("ttft", (blocks * hold).astype(np.float64),
            float(_engines(dd.decode) * dec.plan.num_blocks), "decode block-seconds",
            float(hold.max()))


def _step_min(p: PoolRun) -> float:
    d = p.deployment
    key = (_key("decode-step", d), d.model.name, p.limits.max_num_batched_tokens,
           p.limits.max_num_seqs, _profile_key(p))
    if key not in _RATES:
        one = np.ones(1, dtype=np.int64)
        _RATES[key] = float(pool_timer(p).step_time_s(one, np.zeros(1, dtype=np.int64)))
    return _RATES[key]


_RATES: dict[tuple[PoolKey, str, int, int, object], float] = {}
"""Best tokens/s of one engine per ((role, GPU, engine flags), model, budget, max_num_seqs,
profile), and the decode pool's one-sequence step ('decode-step'): fleets share pools."""


def _profile_key(p: PoolRun) -> object:
    """The pool's latency profile as a cache key: its path (None: bundled), or the object."""
    return p.profile if p.profile is None or isinstance(p.profile, str) else id(p.profile)


def _rate(p: PoolRun, role: str) -> float:
    d = p.deployment
    key = (_key(role, d), d.model.name, p.limits.max_num_batched_tokens,
           p.limits.max_num_seqs, _profile_key(p))
    if key not in _RATES:
        timer = pool_timer(p)
        _RATES[key] = (best_tokens_per_s(timer, p.limits.max_num_batched_tokens,
                                         p.limits.max_num_seqs)
                       if role == "prefill" else
                       best_decode_tokens_per_s(timer, p.limits.max_num_seqs))
    return _RATES[key]


_MEMORY = "memory"
"""A pool's mark when it cannot hold one max_model_len request (``pruned_memory``)."""


def _pool(role: str, d: Deployment, pools: dict[PoolKey, PoolRun | str],
          profile: str | Profile | None = None) -> PoolRun | str:
    """The pool's run, _MEMORY, or why vLLM or kvplan cannot run it (``invalid``, as the
    aggregated funnel: a KV layout vLLM does not start under a KV connector, DP / EP steps
    on a GPU without kernel tables)."""
    key = _key(role, d)
    if key not in pools:
        try:
            run = plan_pool(role, d, profile)
        except DoesNotFitError:
            pools[key] = _MEMORY
            return _MEMORY
        except KvplanError as exc:
            pools[key] = str(exc)  # plan_pool names the pool
            return pools[key]
        try:
            cached_timer(run)  # its steps can be priced (the floors use the same timer)
            pools[key] = run
        except KvplanError as exc:
            pools[key] = str(exc)  # pool_timer names the pool
    return pools[key]


def pool_costs(dd: DisaggDeployment, prices: PriceTable) -> tuple[FleetCost, ...] | None:
    """Each pool on its cheapest instance shape (None: a pool no price row holds).

    A node link (NVLink, PCIe) joins GPUs of one node only, so its fleet is one rental of
    ``total_gpus`` GPUs on a shape whose node holds them all (one cost): Lambda's 1x H100
    (a 1-GPU node) cannot hold a 1P1D over nvlink4, its 8x node ($31.92/h) can; two rentals
    ($8.58/h) had no NVLink between the pools, and two 8x nodes ($63.84/h) one node too many.
    No price row is a node of two GPU models, so a node fleet mixing them is unpriced."""
    if dd.link.scope == "node":
        if dd.prefill.gpu.id != dd.decode.gpu.id:
            return None
        one = fleet_cost(prices.for_gpu(dd.prefill.gpu.id), 1, dd.total_gpus)
        return None if one is None else (one,)
    out = []
    for d in (dd.prefill, dd.decode):
        c = fleet_cost(prices.for_gpu(d.gpu.id), d.replicas, d.gpus_per_replica)
        if c is None:
            return None
        out.append(c)
    return tuple(out)
