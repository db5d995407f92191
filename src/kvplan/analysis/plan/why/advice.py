"""Nothing feasible: which single change moves the closest candidate's missed term most.

The closest candidate (the smallest miss, plan_verdict.closest) is simulated again with one
change at a time at the load where it failed — the same replica count's router shares
(target mode) or the same rate on the unit stream (capacity mode): a smaller or larger
chunk (prefill interference with decodes moves TPOT and ITL; chunking moves TTFT), twice
the TP, the next dearer GPUs of the provider, fp8 weights, fp8 KV, and twice the replicas
(queueing). The advice names the change with the lowest value of the missed term, and says
whether it meets the limit and whether it lies outside the searched space.
"""

from __future__ import annotations

from dataclasses import replace

from kvplan.analysis.plan.executor import Executor
from kvplan.analysis.plan.funnel import Limits, Tally
from kvplan.analysis.plan.jobs import Job, JobContext, ProbeJob, ProbeOut, ShareJob
from kvplan.analysis.plan.records import Candidate
from kvplan.analysis.plan.space import SearchSpace
from kvplan.analysis.plan.why.verdict import closest, ms_text
from kvplan.errors import KvplanError
from kvplan.specs.deployment import Deployment
from kvplan.specs.hardware import HardwareSpec
from kvplan.specs.kv import check_tensor_parallel
from kvplan.specs.prices import PriceTable
from kvplan.units import counted

MIN_CHUNK = 512
MAX_GPUS_AHEAD = 2
"""Dearer GPUs tried (the next ones by $/GPU-hour)."""


def advise(cands: list[Candidate], space: SearchSpace, prices: PriceTable, ex: Executor,
           ctx: JobContext, lim: Limits, t: Tally) -> str:
    """One clause naming the change that helps most, or '' when none can be simulated."""
    found = closest(cands)
    if not found or any(c.fleet is not None and c.fleet.ok for c in cands):
        return ""  # nothing found, or the SLO is met and a budget flag rules it out
    (key, _, _), c = found[0]
    if key == "goodput_share" or c.stage not in ("infeasible", "pruned_bound"):
        return ""
    zero = c.stage == "pruned_bound"
    at = 0.0 if zero else _failing_load(c, lim)
    if at is None:
        return ""
    variants = [(label, d) for label, d in what_ifs(c.deployment, space, prices)
                if _fits(d) and not (zero and label.startswith("--replicas"))]
    whole = lim.replicas is not None or c.fleet is not None  # how its miss was judged
    values = (_zero_load(c.deployment, variants, ctx, key) if zero
              else _simulated(c.deployment, variants, at, ex, ctx, lim, t, key, whole))
    base, tried = values[0], [(v, label) for v, (label, _) in zip(values[1:], variants,
                                                                   strict=True)]
    pairs = [(v, label) for v, label in tried if v is not None]
    if base is None or not pairs:
        return ""
    value, label = min(pairs)
    limit = next(b.limit_ms for b in ctx.slo.bounds if b.key == key)
    return _text(c, key, label, base, value, limit, at, lim, space)


def _simulated(d0: Deployment, variants: list[tuple[str, Deployment]], at: float,
               ex: Executor, ctx: JobContext, lim: Limits, t: Tally, key: str,
               whole: bool) -> list[float | None]:
    """The missed term of the candidate, then of each variant, at the failing load (on the
    whole trace where the candidate's miss was judged there: the sentence quotes both)."""
    jobs = [_job(d0, at, lim, "", whole)] + [_job(d, at, lim, label, whole)
                                              for label, d in variants]
    outs = [o for o in ex.run(ctx, jobs) if isinstance(o, ProbeOut)]
    t.sim_requests += sum(o.sim_requests for o in outs)
    return [dict(o.achieved).get(key) for o in outs]


def _zero_load(d0: Deployment, variants: list[tuple[str, Deployment]], ctx: JobContext,
               key: str) -> list[float | None]:
    """The missed term at zero load (the analytic bound that pruned the candidate)."""
    from kvplan.analysis.plan.bounds import bounds
    from kvplan.analysis.plan.fleet import replica

    out: list[float | None] = []
    for d in [d0, *(d for _, d in variants)]:
        zl = bounds(replica(d, ctx.profile), ctx.bounds_work, ctx.slo_for(d)).zero_load
        out.append(dict(zl.achieved).get(key))
    return out


def _failing_load(c: Candidate, lim: Limits) -> float | None:
    """Replicas (target mode) or the rate (capacity mode) where the candidate failed."""
    if lim.rate_rps is not None:
        if c.fleet is not None:
            return float(c.fleet.replicas)
        cap = c.capacity
        return float(cap.replicas_failing) if cap and cap.replicas_failing else float(
            c.optimistic_replicas or 1)
    cap = c.capacity
    return None if cap is None or cap.bracket_rps[1] is None else cap.bracket_rps[1]


def _job(d: Deployment, at: float, lim: Limits, label: str = "", whole: bool = False) -> Job:
    more = label.startswith("--replicas")
    if lim.rate_rps is None:
        return ProbeJob(deployment=d, rate_rps=at / 2 if more else at)
    return ShareJob(deployment=d, replicas=int(at) * (2 if more else 1), whole=whole)


def _fits(d: Deployment) -> bool:
    """It fits and can be priced: its memory plan and step timer build (a DP / EP step
    needs the GPU's measured kernel tables)."""
    from kvplan.analysis.plan.fleet import Replica

    try:
        Replica(d)
    except KvplanError:
        return False
    return True


def what_ifs(d: Deployment, space: SearchSpace, prices: PriceTable
             ) -> list[tuple[str, Deployment]]:
    """The single changes tried on the closest candidate (see the module docstring)."""
    e = d.engine
    out: list[tuple[str, Deployment]] = []
    chunk = e.max_num_batched_tokens or 8192
    for c in sorted({max(MIN_CHUNK, chunk // 4), max(MIN_CHUNK, chunk // 2), 2 * chunk}):
        if c != chunk:
            out.append((f"--max-num-batched-tokens {c}", _with(d, max_num_batched_tokens=c)))
    tp = 2 * e.tensor_parallel_size
    nodes = [r.gpus_per_node for r in prices.for_gpu(d.gpu.id)]
    if tp * e.pipeline_parallel_size * e.data_parallel_size <= max(nodes, default=8) \
            and _tp_ok(d, tp):
        out.append((f"--tensor-parallel-size {tp}", _with(d, tensor_parallel_size=tp)))
    for g in _dearer(d, prices)[:MAX_GPUS_AHEAD]:
        out.append((f"--gpu {g.id}", Deployment(model=d.model, gpu=g, engine=e,
                                                router=d.router)))
    if e.quantization is None and d.model.quantization is None:
        out.append(("--quantization fp8", _with(d, quantization="fp8")))
    if e.kv_cache_dtype == "auto":
        out.append(("--kv-cache-dtype fp8", _with(d, kv_cache_dtype="fp8")))
    out.append(("--replicas x2", d))
    return out


def _tp_ok(d: Deployment, tp: int) -> bool:
    try:
        check_tensor_parallel(d.model, tp)
    except KvplanError:
        return False
    return True


def _dearer(d: Deployment, prices: PriceTable) -> list[HardwareSpec]:
    from kvplan.specs.hardware import load_gpu

    def usd(gpu: str) -> float:
        return min(r.usd_per_gpu_hour for r in prices.for_gpu(gpu))

    here = usd(d.gpu.id)
    names = sorted((g for g in prices.gpus if g != d.gpu.id and usd(g) >= here), key=usd)
    return [load_gpu(g) for g in names]


def _with(d: Deployment, **change: object) -> Deployment:
    return Deployment(model=d.model, gpu=d.gpu, engine=replace(d.engine, **change),  # type: ignore[arg-type]
                      router=d.router)


def _text(c: Candidate, key: str, label: str, base: float, value: float, limit: float,
          at: float, lim: Limits, space: SearchSpace) -> str:
    where = ("at zero load" if at == 0 else f"with {counted(int(at), 'replica')}"
             if lim.rate_rps is not None else f"at {at:.3g} req/s")
    if value >= base:
        return (f"no single change to {c.id} {where} lowers {key} ({ms_text(base)} ms; tried "
                "chunk size, TP, GPU, fp8 weights and KV, twice the replicas): loosen the SLO")
    verdict = "meets" if value <= limit else "still misses"
    inside = _in_space(label, space) or (label.startswith("--replicas") and lim.replicas is None)
    if label.startswith("--replicas"):
        label = (f"twice the replicas ({2 * int(at)})" if lim.rate_rps is not None
                 else "half the rate per replica (twice the replicas)")
    tail = ("" if inside else "; it is outside the searched space: add it" if value <= limit
            else "; it is outside the searched space, and alone it is not enough")
    return (f"of single changes to {c.id} {where}, {label} lowers {key} the most, "
            f"{ms_text(base)} -> {ms_text(value)} ms ({verdict} the {limit:g} ms limit){tail}")


def _in_space(label: str, space: SearchSpace) -> bool:
    flag, _, value = label.partition(" ")
    if flag == "--max-num-batched-tokens":
        return int(value) in space.max_num_batched_tokens
    if flag == "--tensor-parallel-size":
        return int(value) in space.tensor_parallel_sizes
    if flag == "--gpu":
        return value in {g.id for g in space.gpus}
    if flag == "--quantization":
        return value in space.quantizations
    if flag == "--kv-cache-dtype":
        return value in space.kv_cache_dtypes
    return False
