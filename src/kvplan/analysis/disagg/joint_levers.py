"""A verified disaggregated fleet explained: which phase or the link binds, its what-ifs
(one more prefill instance, one more decode instance, the next faster link) and error bands.

Binding (from the simulated requests at or above the binding term's value):

    tpot, itl             decode       the decode instances' steps alone set them
    ttft, e2el            the largest mean share of the tail requests' time to first token:
        prefill           sent -> prefill sampled (queue + compute on the prefill pool)
        decode_admission  prefill end -> decode blocks allocated (decode KV / max_num_seqs)
        link              allocated -> last byte landed (NIC queue + wire + latency)
        decode            landed -> first token (the decode step)
    goodput_share         as its binding bound (goodput_bound): tpot -> decode, ttft / e2el
                          the phases above
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import numpy.typing as npt

from kvplan.analysis.disagg.candidates import DisaggLever, JointCandidate
from kvplan.analysis.disagg.rounds import disagg_ratios, simulate_round
from kvplan.analysis.disagg.screen import pool_costs
from kvplan.analysis.metrics import benchmark_duration
from kvplan.analysis.plan.bands import PlanBands, plan_bands
from kvplan.analysis.plan.judge import Latencies, Verdict, judged_mask, latencies
from kvplan.costs.step.roofline import Profile
from kvplan.errors import InputError
from kvplan.specs.disagg import DisaggDeployment, link_usable
from kvplan.specs.links import LinkSpec, link_catalog
from kvplan.specs.prices import PriceTable
from kvplan.specs.requests.workload import Workload
from kvplan.specs.slo import Slo

PHASES = ("prefill", "decode_admission", "link", "decode")


def binding_phase(c: JointCandidate, slo: Slo) -> tuple[str, str]:
    """(phase, why) for a simulated disaggregated candidate (module docstring); a goodput
    binding is read as its binding bound's (``goodput_bound``)."""
    assert c.run is not None and c.verdict is not None
    key = c.verdict.binding
    r, t = c.run.result.client, c.run.result.transfers
    lat = latencies(r, itl=False)
    if key == "goodput_share":
        key = f"goodput_share (its {goodput_bound(lat, judged_mask(lat, slo), slo)} bound)"
    if not key.endswith(("ttft_ms", "e2el_ms", "ttft bound)", "e2el bound)")):
        return "decode", f"{key} binds: decode steps alone set it"
    keep = judged_mask(lat, slo) & ~np.isnan(t.end_s)
    ttft = lat.ttft_ms
    tail = keep & (ttft >= np.percentile(ttft[keep], 99)) if keep.any() else keep
    parts = {"prefill": t.prefill_end_s - r.sent_s, "decode_admission": t.admitted_s
             - t.prefill_end_s, "link": t.end_s - t.admitted_s,
             "decode": r.first_token_s - t.end_s}
    means = {k: float(np.mean(v[tail])) * 1000 if tail.any() else 0.0
             for k, v in parts.items()}
    top = max(PHASES, key=lambda k: means[k])
    split = ", ".join(f"{k} {means[k]:,.1f} ms" for k in PHASES)
    return top, f"{key} binds; its slowest 1 % spend, on average: {split}"


def goodput_bound(lat: Latencies, keep: npt.NDArray[np.bool_], slo: Slo) -> str:
    """The goodput bound that binds: the one the most judged requests miss, then (none, or
    as many, missed) the one whose value at the target share is nearest its limit (1P1D
    H100 under ttft:3000 tpot:9 at 90 %, every request good: p90 TPOT 7.73 ms is 86 % of
    its limit, p90 TTFT 696 ms 23 %: tpot)."""
    def pressure(bound: tuple[str, float]) -> tuple[float, float]:
        metric, ms = bound
        v = np.nan_to_num(getattr(lat, f"{metric}_ms")[keep], nan=0.0)
        if v.size == 0:
            return 0.0, 0.0
        return float(np.mean(v > ms)), float(np.percentile(v, 100 * slo.goodput_target)) / ms

    return max(slo.goodput_ms, key=pressure)[0]


def faster_link(link: LinkSpec, total_gpus: int,
                gpu_ids: tuple[str, ...] = ()) -> LinkSpec | None:
    """The slowest catalog link faster than ``link`` that the fleet (``total_gpus`` GPUs of
    ``gpu_ids``) can use, of the same scope when one is (ib-ndr -> ib-xdr, not a node's
    PCIe), else of any."""
    ok = [x for x in link_catalog() if x.bytes_per_s_per_gpu > link.bytes_per_s_per_gpu
          and link_usable(x, gpu_ids, total_gpus)]
    same = [x for x in ok if x.scope == link.scope] or ok
    return min(same, key=lambda x: (x.bytes_per_s_per_gpu, x.id)) if same else None


def variants(dd: DisaggDeployment) -> list[tuple[str, DisaggDeployment]]:
    """The winner itself, then one more prefill instance, one more decode, a faster link
    (a variant the fleet's rules refuse, e.g. a node link past 8 GPUs, is left out)."""
    link = faster_link(dd.link, dd.total_gpus, (dd.prefill.gpu.id, dd.decode.gpu.id))
    changes: list[tuple[str, dict[str, object]]] = [
        ("+1 prefill instance", {"prefill": dd.prefill.with_replicas(dd.prefill.replicas + 1)}),
        ("+1 decode instance", {"decode": dd.decode.with_replicas(dd.decode.replicas + 1)})]
    # a faster link that PCIe caps to the same rate is no lever
    if link is not None and dd.transfer_bytes_per_s(link) > dd.transfer_bytes_per_s():
        changes.append((f"--kv-link {link.id}", {"link": link}))
    out = [("none (the winner)", dd)]
    for change, fields in changes:
        try:
            out.append((change, replace(dd, **fields)))  # type: ignore[arg-type]
        except InputError:
            continue
    return out


def disagg_levers(c: JointCandidate, work: Workload, slo: Slo, prices: PriceTable,
                  workers: int | None = None, profile: str | Profile | None = None,
                  margin: str = "none") -> tuple[DisaggLever, ...]:
    """Every variant simulated (one round, in parallel, steps priced by ``profile``) and
    judged; deltas against the first row, the winner itself."""
    assert c.disagg is not None and c.verdict is not None
    key = c.verdict.binding
    rows: list[DisaggLever] = []
    todo = variants(c.disagg)
    judged = simulate_round([dd for _, dd in todo], work, slo, workers, profile, margin)
    for (change, dd), (v, _) in zip(todo, judged, strict=True):
        rows.append(_row(change, dd, v, key, rows, prices))
    return tuple(rows)


def _row(change: str, dd: DisaggDeployment, v: Verdict | None, key: str,
         rows: list[DisaggLever], prices: PriceTable, note: str = "") -> DisaggLever:
    costs = pool_costs(dd, prices)
    usd = None if costs is None else sum(x.usd_per_hour for x in costs)
    value = float("nan") if v is None else v.value(key)
    base = rows[0] if rows else None
    if base is None:
        delta_usd: float | None = 0.0
    elif usd is None or base.usd_per_hour is None:
        delta_usd = None
    else:
        delta_usd = usd - base.usd_per_hour
    return DisaggLever(
        change=change, label=dd.label, usd_per_hour=usd, delta_usd_per_hour=delta_usd,
        binding_key=key, binding_ms=value,
        delta_binding_ms=0.0 if base is None else value - base.binding_ms,
        meets_slo=v is not None and v.ok, note=note)


def disagg_bands(c: JointCandidate, slo: Slo) -> PlanBands:
    """The candidate's SLO terms and output rate with error bands (goodput: none yet)."""
    assert c.disagg is not None and c.verdict is not None and c.run is not None
    r = c.run.result.client
    # vLLM's output_throughput: the finished requests' tokens (a failed one counts 0) over
    # benchmark_duration, from the start (t = 0) until every request answered, a refusal
    # included (one the decode side refuses fails only after its prefill ran), as
    # simulate's output_throughput
    span = benchmark_duration(r)
    tput = float(r.output_tokens[r.finished].sum()) / span if span > 0 else None
    return plan_bands(slo, disagg_ratios(c.disagg), dict(c.verdict.achieved), None, tput,
                      unsampled=c.verdict.unsampled)
