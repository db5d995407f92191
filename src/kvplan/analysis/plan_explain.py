"""Why a candidate is limited (binding resource with evidence) and one-lever what-ifs."""

from __future__ import annotations

import math
from dataclasses import replace

from kvplan.analysis.executor import Executor
from kvplan.analysis.funnel import Limits, Tally, tally
from kvplan.analysis.plan_jobs import CapacityJob, CapacityOut, JobContext
from kvplan.analysis.plan_margin import lever_with_band
from kvplan.analysis.plan_types import Binding, Candidate, CapacityInfo, Lever
from kvplan.costs.memory import plan_memory
from kvplan.costs.pricing import fleet_cost
from kvplan.errors import KvplanError
from kvplan.specs.deployment import Deployment
from kvplan.specs.hardware import HardwareSpec
from kvplan.specs.kv import check_tensor_parallel
from kvplan.specs.prices import PriceTable

KV_FULL = 0.95
SEQS_CAPPED = 0.2
BUDGET_FULL = 0.5


def binding(cap: CapacityInfo) -> Binding:
    """The binding resource at the capacity point, from the simulator's counters::

        kv_memory         peak KV usage >= 95 % or preemptions at capacity
        scheduler_cap     >= 20 % of steps run max_num_seqs requests, KV not full
        chunk_budget      TTFT binds and >= 50 % of steps fill max_num_batched_tokens
        prefill_compute   TTFT binds
        decode_bandwidth  TPOT, ITL or E2EL binds
    """
    slo = cap.binding_slo or ""
    ev = (("peak_kv_usage", cap.peak_kv_usage), ("preemptions", float(cap.preemptions)),
          ("seqs_capped_share", cap.seqs_capped_share),
          ("budget_full_share", cap.budget_full_share),
          ("prefill_token_share", cap.prefill_token_share),
          ("prefill_kv_share", cap.prefill_kv_share))
    if cap.peak_kv_usage >= KV_FULL or cap.preemptions > 0:
        why = (f"the KV pool is {100 * cap.peak_kv_usage:.0f} % full at capacity "
               f"({cap.preemptions} preemptions; prefill claims "
               f"{100 * cap.prefill_kv_share:.0f} % of the blocks taken)")
        return Binding(primary="kv_memory", evidence=ev, why=why)
    if cap.seqs_capped_share >= SEQS_CAPPED:
        why = (f"{100 * cap.seqs_capped_share:.0f} % of steps run max_num_seqs requests "
               f"with KV {100 * cap.peak_kv_usage:.0f} % full")
        return Binding(primary="scheduler_cap", evidence=ev, why=why)
    if "ttft" in slo and cap.budget_full_share >= BUDGET_FULL:
        why = (f"{slo} binds and {100 * cap.budget_full_share:.0f} % of steps fill the "
               "token budget")
        return Binding(primary="chunk_budget", evidence=ev, why=why)
    if "ttft" in slo:
        return Binding(primary="prefill_compute", evidence=ev,
                       why=f"{slo} binds first: prompts wait for prefill compute")
    return Binding(primary="decode_bandwidth", evidence=ev,
                   why=f"{slo or 'the SLO'} binds first: decode steps read weights and KV")


def lever_variants(w: Candidate, gpus: tuple[HardwareSpec, ...], prices: PriceTable
                   ) -> list[tuple[str, Deployment]]:
    """The winner with one knob changed: KV precision, next TP, next GPU, chunk, prefix."""
    d, e = w.deployment.with_replicas(1), w.deployment.engine
    out = [(f"--kv-cache-dtype {'auto' if e.kv_cache_dtype != 'auto' else 'fp8'}",
            _with(d, kv_cache_dtype="auto" if e.kv_cache_dtype != "auto" else "fp8"))]
    tp = e.tensor_parallel_size * 2
    try:
        check_tensor_parallel(d.model, tp)
        out.append((f"--tensor-parallel-size {tp}", _with(d, tensor_parallel_size=tp)))
    except KvplanError:
        pass
    nxt = _next_gpu(d.gpu, gpus, prices)
    if nxt is not None:
        out.append((f"--gpu {nxt.id}", Deployment(model=d.model, gpu=nxt, engine=e,
                                                   router=d.router)))
    chunk = e.max_num_batched_tokens or 8192
    out.append((f"--max-num-batched-tokens {chunk * 2}",
                _with(d, max_num_batched_tokens=chunk * 2)))
    if chunk // 2 >= 256:
        out.append((f"--max-num-batched-tokens {chunk // 2}",
                    _with(d, max_num_batched_tokens=chunk // 2)))
    flag = "--no-enable-prefix-caching" if e.enable_prefix_caching else "--enable-prefix-caching"
    out.append((flag, _with(d, enable_prefix_caching=not e.enable_prefix_caching)))
    return out


def _with(d: Deployment, **change: object) -> Deployment:
    return Deployment(model=d.model, gpu=d.gpu, engine=replace(d.engine, **change),  # type: ignore[arg-type]
                      router=d.router)


def _next_gpu(gpu: HardwareSpec, gpus: tuple[HardwareSpec, ...], prices: PriceTable
              ) -> HardwareSpec | None:
    """The next GPU of the space by $/GPU-hour (the next dearer one, else the next cheaper)."""
    def price(g: HardwareSpec) -> float:
        rows = prices.for_gpu(g.id)
        return min(r.usd_per_gpu_hour for r in rows) if rows else math.inf

    others = sorted((g for g in gpus if g.id != gpu.id), key=lambda g: (price(g), g.id))
    dearer = [g for g in others if price(g) >= price(gpu)]
    pick = dearer or others[::-1]
    return pick[0] if pick else None


def levers(w: Candidate, gpus: tuple[HardwareSpec, ...], prices: PriceTable, ex: Executor,
           ctx: JobContext, lim: Limits, t: Tally) -> tuple[Lever, ...]:
    """Capacity, replicas, $/hour and binding p99 with each single change, as deltas."""
    assert w.capacity is not None and w.replicas is not None
    variants, notes, jobs = [], [], []
    per_replica = (lim.rate_rps / w.replicas) if lim.rate_rps else w.capacity.rate_rps
    for label, d in lever_variants(w, gpus, prices):
        try:
            plan_memory(d.model, d.gpu, d.engine)
        except KvplanError as exc:
            notes.append(Lever(change=label, capacity_rps=None, delta_capacity_pct=None,
                               replicas=None, delta_replicas=None, usd_per_hour=None,
                               delta_usd_per_hour=None, binding_p99_ms=None,
                               delta_binding_p99_ms=None, note=str(exc).split(";")[0]))
            continue
        variants.append((label, d))
        ceiling = _ceiling(d, ctx)
        jobs.append(CapacityJob(deployment=d, guess_rps=min(w.capacity.rate_rps, ceiling),
                                ceiling_rps=ceiling, probe_rps=per_replica))
    ceiling = _ceiling(w.deployment.with_replicas(1), ctx)
    base_job = CapacityJob(deployment=w.deployment.with_replicas(1),
                           guess_rps=min(w.capacity.rate_rps, ceiling),
                           ceiling_rps=ceiling, probe_rps=per_replica)
    outs = [o for o in ex.run(ctx, [*jobs, base_job]) if isinstance(o, CapacityOut)]
    tally(t, outs)
    base = _estimate(w.deployment, outs[-1], prices, lim)
    key = w.capacity.binding_slo if w.capacity.binding_slo != "goodput_share" else None
    done = [lever_with_band(_lever(label, _estimate(d, o, prices, lim), base, key), d, key,
                            ctx.slo) for (label, d), o in zip(variants, outs[:-1], strict=True)]
    # The first row is the winner estimated the same way, so the deltas read against numbers
    # on the table (its replicas may differ from the fleet verified by simulation).
    first = lever_with_band(_lever(BASELINE, base, base, key), w.deployment, key, ctx.slo)
    return (first, *done, *notes)


BASELINE = "none (the winner, estimated the same way)"


def _ceiling(d: Deployment, ctx: JobContext) -> float:
    """The optimistic capacity bound the funnel's own search stops at (bounds.py): a lever
    must not be credited with a rate above it that only a short sample's burst survives."""
    from kvplan.analysis.bounds import bounds
    from kvplan.analysis.fleet import Replica

    return max(bounds(Replica(d, ctx.profile), ctx.unit, ctx.slo_for(d)).optimistic_rps,
               1e-3)


def _estimate(d: Deployment, o: CapacityOut, prices: PriceTable, lim: Limits
              ) -> tuple[float, int | None, float | None, dict[str, float]]:
    """(capacity, replicas from it, their $/hour, SLO terms at the common load)."""
    cap = o.info.rate_rps
    n = (math.ceil(lim.rate_rps / cap) if cap > 0 else None) if lim.rate_rps else 1
    cost = fleet_cost(prices.for_gpu(d.gpu.id), n, d.gpus_per_replica) if n else None
    return cap, n, None if cost is None else cost.usd_per_hour, dict(o.at_probe)


Estimate = tuple[float, int | None, float | None, dict[str, float]]


def _lever(label: str, new: Estimate, base: Estimate, key: str | None) -> Lever:
    """Deltas of one variant against the winner, both estimated the same way (capacity search
    at full precision, replicas = ceil(target / capacity), one probe at the winner's load)."""
    cap, n, usd, at = new
    cap0, n0, usd0, at0 = base
    p99, p99_0 = (at.get(key), at0.get(key)) if key else (None, None)
    return Lever(
        change=label, capacity_rps=cap,
        delta_capacity_pct=100 * (cap / cap0 - 1) if cap0 > 0 else None,
        replicas=n, delta_replicas=None if n is None or n0 is None else n - n0,
        usd_per_hour=usd,
        delta_usd_per_hour=None if usd is None or usd0 is None else usd - usd0,
        binding_p99_ms=p99, delta_binding_p99_ms=None if p99 is None or p99_0 is None
        else p99 - p99_0, note="" if usd is not None else "no fleet meets the SLO")
