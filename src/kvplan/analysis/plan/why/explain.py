"""Why a candidate is limited (binding resource with evidence) and the one-lever variants."""

from __future__ import annotations

import math
from dataclasses import replace

from kvplan.analysis.plan.parallel.levers import dbo_variant, parallel_variants
from kvplan.analysis.plan.records import Binding, Candidate, CapacityInfo, FleetInfo
from kvplan.specs.deployment import Deployment
from kvplan.specs.hardware import HardwareSpec
from kvplan.specs.prices import PriceTable
from kvplan.units import counted

KV_FULL = 0.95
SEQS_CAPPED = 0.2
BUDGET_FULL = 0.5
E2EL_PREFILL = 0.5


def binding(cap: CapacityInfo, where: str = "") -> Binding:
    """The binding resource at the capacity point, from the simulator's counters::

        kv_memory         peak KV usage >= 95 % or preemptions at capacity
        scheduler_cap     >= 20 % of steps run max_num_seqs requests, KV not full
        chunk_budget      the prefill side binds and >= 50 % of steps fill the token budget
        prefill_compute   the prefill side binds: TTFT, or E2EL with TTFT >= half of it
        decode_bandwidth  TPOT, ITL or E2EL mostly spent decoding binds
    """
    slo, metric = _binding_term(cap, where or _probe_where(cap))
    ev = (("peak_kv_usage", cap.peak_kv_usage), ("preemptions", float(cap.preemptions)),
          ("seqs_capped_share", cap.seqs_capped_share),
          ("budget_full_share", cap.budget_full_share),
          ("prefill_token_share", cap.prefill_token_share),
          ("prefill_kv_share", cap.prefill_kv_share),
          ("e2el_ttft_share", cap.e2el_ttft_share))
    if cap.peak_kv_usage >= KV_FULL or cap.preemptions > 0:
        why = (f"the KV pool is {100 * cap.peak_kv_usage:.0f} % full {_counted_at(cap)} "
               f"({counted(cap.preemptions, 'preemption')}; prefill claims "
               f"{100 * cap.prefill_kv_share:.0f} % of the blocks taken)")
        return Binding(primary="kv_memory", evidence=ev, why=why)
    if cap.seqs_capped_share >= SEQS_CAPPED:
        why = (f"{100 * cap.seqs_capped_share:.0f} % of steps run max_num_seqs requests "
               f"with KV {100 * cap.peak_kv_usage:.0f} % full")
        return Binding(primary="scheduler_cap", evidence=ev, why=why)
    prefill = _prefill_side(metric, cap)
    slo += _e2el_part(metric, cap)
    if prefill and cap.budget_full_share >= BUDGET_FULL:
        why = (f"{slo} binds and {100 * cap.budget_full_share:.0f} % of steps fill the "
               "token budget")
        return Binding(primary="chunk_budget", evidence=ev, why=why)
    if prefill:
        return Binding(primary="prefill_compute", evidence=ev,
                       why=f"{slo} binds first: prompts wait for prefill compute")
    return Binding(primary="decode_bandwidth", evidence=ev,
                   why=f"{slo or 'the SLO'} binds first: decode steps read weights and KV")


def breaking_term(fleet: FleetInfo | None, fewer: FleetInfo | None) -> str | None:
    """The SLO term that breaks first past the verified ``fleet``: of the terms its fleet
    with one replica fewer misses, the one nearest its limit in ``fleet`` (smallest margin;
    without ``fleet``, the most missed). Not simply the most missed: one replica fewer
    raises each one's load by N / (N - 1) (2 -> 1: twice), a queue then grows, and TTFT
    misses by the most whichever bound broke first. None where ``fewer`` passes or is None."""
    if fewer is None or fewer.ok:
        return None
    missed = dict((k, m) for k, m in fewer.margins if m < 0)
    near = dict(fleet.margins) if fleet is not None else {}
    return min(missed, key=lambda k: (near.get(k, math.inf), missed[k], k))


def _binding_term(cap: CapacityInfo, where: str) -> tuple[str, str]:
    """The binding SLO term in words, and the metric it judges: a goodput binding names the
    goodput bound the most judged requests miss (``ttft`` only: a TTFT binding) and
    ``where`` they miss it (not the answer, which meets it)."""
    slo = cap.binding_slo or ""
    if slo != "goodput_share" or not cap.goodput_misses:
        return slo, slo
    worst, share = max(cap.goodput_misses, key=lambda kv: kv[1])
    return (f"goodput_share (its {worst} bound, missed by {100 * share:.0f} % of judged "
            f"requests{' ' + where if where else ''})"), worst


def _counted_at(cap: CapacityInfo) -> str:
    """Where the counters were read: a replica search's come from its largest failing
    fleet (what explains the fleet size, not the answer's own run); a rate search's from
    its highest passing probe, at capacity."""
    n = cap.replicas_failing
    if cap.method == "router-share" and n is not None:
        return f"with {n} replica{'' if n == 1 else 's'}"
    return "at capacity"


def _probe_where(cap: CapacityInfo) -> str:
    """Where the capacity search's misses were counted: its first failing rate."""
    hi = cap.bracket_rps[1]
    return "" if hi is None else f"on one replica at {hi:.3g} req/s"


def _e2el_part(metric: str, cap: CapacityInfo) -> str:
    """' (TTFT 97 % of it)' after an E2EL term: which side its time goes to."""
    return f" (TTFT {100 * cap.e2el_ttft_share:.0f} % of it)" if "e2el" in metric else ""


def _prefill_side(metric: str, cap: CapacityInfo) -> bool:
    """TTFT binds, or E2EL of which the TTFT is at least half (long prompts, short
    outputs: the time goes to prefill, not to decode steps)."""
    return "ttft" in metric or ("e2el" in metric and cap.e2el_ttft_share >= E2EL_PREFILL)


def lever_variants(w: Candidate, gpus: tuple[HardwareSpec, ...], prices: PriceTable,
                   binding_key: str | None = None) -> list[tuple[str, Deployment]]:
    """The winner with one knob changed: KV precision, next TP, next GPU, chunk, prefix,
    and for an MoE model its DP / EP layout and dual batch overlap (parallel/levers.py;
    ``binding_key``, the winner's binding SLO term, picks DBO's exchange)."""
    d, e = w.deployment.with_replicas(1), w.deployment.engine
    out = [(f"--kv-cache-dtype {'auto' if e.kv_cache_dtype != 'auto' else 'fp8'}",
            _with(d, kv_cache_dtype="auto" if e.kv_cache_dtype != "auto" else "fp8"))]
    # a degree the model's heads refuse stays a row: plan_levers notes vLLM's refusal
    tp = e.tensor_parallel_size * 2
    out.append((f"--tensor-parallel-size {tp}", _with(d, tensor_parallel_size=tp)))
    nxt = _next_gpu(d.gpu, gpus, prices)
    if nxt is not None:
        out.append((f"--gpu {nxt.id}", Deployment(model=d.model, gpu=nxt, engine=e,
                                                   router=d.router)))
    chunk = e.max_num_batched_tokens or 8192
    out.append((f"--max-num-batched-tokens {chunk * 2}",
                _with(d, max_num_batched_tokens=chunk * 2)))
    if chunk // 2 >= 256:
        out.append(_halved_chunk(d, chunk // 2))
    if not d.model.state_layers:  # vLLM 0.11 runs a state model without it, either flag
        flag = ("--no-enable-prefix-caching" if e.enable_prefix_caching
                else "--enable-prefix-caching")
        out.append((flag, _with(d, enable_prefix_caching=not e.enable_prefix_caching)))
    return out + parallel_variants(d) + dbo_variant(d, binding_key)


def _halved_chunk(d: Deployment, half: int) -> tuple[str, Deployment]:
    """Half the token budget; vLLM needs max_num_seqs <= max_num_batched_tokens, so a
    max_num_seqs above the new budget comes down with it, and the label says so."""
    seqs = d.engine.max_num_seqs
    if seqs is not None and seqs > half:
        return (f"--max-num-batched-tokens {half} --max-num-seqs {half}",
                _with(d, max_num_batched_tokens=half, max_num_seqs=half))
    return f"--max-num-batched-tokens {half}", _with(d, max_num_batched_tokens=half)


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
