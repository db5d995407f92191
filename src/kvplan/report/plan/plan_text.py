"""A Plan as text: the ranked table, why the winner wins, the levers, the commands."""

from __future__ import annotations

from typing import Any

from kvplan.analysis.plan.levers import load_per_replica
from kvplan.analysis.plan.records import Candidate, FleetInfo, Lever, Plan
from kvplan.analysis.plan.why.verdict import closest, closest_miss
from kvplan.report.durations import fmt_ms, fmt_ms_delta, fmt_ms_range
from kvplan.report.plan.plan_band_text import achieved_text, band_lines, edge_word, margin_line
from kvplan.units import counted, pct_text

RUNNERS_UP = 5
INFEASIBLE_SHOWN = 3


def ranked_rows(p: Plan) -> list[Candidate]:
    """Winner, runners-up (cheapest first), then the cheapest infeasible candidates."""
    from kvplan.analysis.plan.funnel import Limits
    from kvplan.analysis.plan.why.verdict import rank

    lim = Limits(rate_rps=p.target_rate_rps, replicas=None, max_gpus=None,
                 max_cost_per_hour=None, mean_output_tokens=0.0, exhaustive=False)
    ok = rank(list(p.candidates), lim)[: 1 + RUNNERS_UP]
    if not ok:  # nothing feasible: the closest misses, as the why line and JSON name them
        return [c for _, c in closest(p.candidates)[:INFEASIBLE_SHOWN]]
    bad = [c for c in p.candidates if c.stage == "infeasible"
           or (c.stage == "pruned_bound" and closest_miss(c)[1] < 0)]
    bad.sort(key=lambda c: (c.usd_per_hour or c.optimistic_usd_per_hour or 0.0, c.id))
    return ok + bad[:INFEASIBLE_SHOWN]


def _config(c: Candidate) -> str:
    e = c.deployment.engine
    parts = [c.deployment.gpu.id, f"TP{e.tensor_parallel_size}"]
    if e.pipeline_parallel_size > 1:
        parts.append(f"PP{e.pipeline_parallel_size}")
    if e.data_parallel_size > 1:
        parts.append(f"DP{e.data_parallel_size}")
    if e.enable_expert_parallel:
        parts.append("EP")
    parts.append(f"kv {e.kv_cache_dtype}")
    if e.quantization:
        parts.append(e.quantization)
    parts.append(f"seqs {e.max_num_seqs} chunk {e.max_num_batched_tokens}")
    if not e.enable_prefix_caching:
        parts.append("no prefix cache")
    return " ".join(parts)


def _row(c: Candidate, p: Plan, winner_id: str | None) -> list[str]:
    role = "winner" if c.id == winner_id else ("runner-up" if c.stage == "verified"
                                               else "infeasible")
    load = load_per_replica(c, p.target_rate_rps)
    cap = "-" if load is None else f"{load:.3g}"
    usd = f"{c.usd_per_hour:.2f}" if c.usd_per_hour is not None else "-"
    mtok = (f"{c.usd_per_million_output_tokens:.3f}"
            if c.usd_per_million_output_tokens is not None else "-")
    if c.stage == "verified":
        note = c.binding.primary if c.binding else ""
    else:
        key, m, _ = closest_miss(c)
        note = f"misses {key} by {pct_text(100 * abs(m))} %" if key != "goodput_share" else (
            f"misses goodput by {abs(m):.3f}")
        note = note if m < 0 else c.reason
    return [role, c.id, _config(c), str(c.replicas or "-"), cap, usd, mtok, edge_word(c), note]


def render_plan(p: Plan, console: Any) -> None:
    """Print the plan with rich (tables, then the commands and notes)."""
    from rich.table import Table

    w = p.winner
    rate = (f"{p.target_rate_rps:.2f} req/s" if p.target_rate_rps is not None
            else "capacity of one replica")
    t = Table(title=f"kvplan plan: {p.model}, {p.workload} ({p.requests} requests), {rate}; "
                    f"SLO {p.slo.text}; prices {p.prices.provider}")
    for col in ("", "id", "configuration", "replicas", "req/s per replica", "$/hour",
                "$/M out tok", "SLO at band edge", "binding / miss"):
        t.add_column(col)
    for c in ranked_rows(p):
        t.add_row(*_row(c, p, w.id if w else None))
    console.print(t)
    if w is None:
        console.print(f"[red]nothing feasible:[/red] {p.infeasible_why}")
    else:
        _winner(p, w, console)
    _footer(p, console)


def _winner(p: Plan, w: Candidate, console: Any) -> None:
    if w.binding is not None:
        console.print(f"Binding: {w.binding.primary} - {w.binding.why}")
    if w.fleet is not None:
        console.print(f"Fleet of {w.replicas} verified by simulation on {_served(p)}"
                      f"{judged_text(p, w.fleet)}", highlight=False, markup=False)
        for line in noise_lines(p, w):
            console.print(line, highlight=False, markup=False)
    if w.bands is not None:
        for line in band_lines(w.bands):
            console.print(line, highlight=False, markup=False)
    if margin := margin_line(p):
        console.print(margin, highlight=False, markup=False)
    if w.fleet_one_fewer is not None:
        f = w.fleet_one_fewer
        worst = min(f.margins, key=lambda kv: kv[1])
        noun = "replica" if f.replicas == 1 else "replicas"
        console.print(f"With {f.replicas} {noun}: {'meets' if f.ok else 'misses'} the SLO "
                      f"({worst[0]} margin {pct_text(100 * worst[1])} %)")
    if p.levers:
        _levers(p, console)
    console.print(f"Serve:  {p.serve_command}")
    console.print(f"Verify: {p.bench_command}")


def _levers(p: Plan, console: Any) -> None:
    from rich.table import Table

    key = p.levers[0].binding_key if p.levers else None
    how = ("every row searched on the router's shares and verified on the whole fleet, as "
           "the winner was; the binding column with the winner's replica count"
           if p.mode == "target" else "every row a capacity search on one replica; the "
           "binding column at the winner's capacity rate")
    t = Table(title="One lever at a time on the winner (the first row is the winner)",
              caption=how)
    for col in ("change", "req/s per replica", "replicas", "$/hour", term_label(key),
                "band (10-90%)", "note"):  # the term's cells carry their unit (ms, s, min)
        t.add_column(col)
    for x in p.levers:
        t.add_row(*_lever_cells(x))
    console.print(t)


def _lever_cells(x: Lever) -> list[str]:
    return [x.change, _both(x.capacity_rps, x.delta_capacity_pct, "%"),
            _both(x.replicas, x.delta_replicas, ""),
            _both(x.usd_per_hour, x.delta_usd_per_hour, ""),
            _p99(x.binding_p99_ms, x.delta_binding_p99_ms),
            _band(x.binding_p99_ms_band), x.note]


def term_label(key: str | None) -> str:
    """'p99_ttft_ms' -> 'p99 TTFT'; 'goodput_share' -> 'goodput share'."""
    if key is None:
        return "binding term"
    if key == "goodput_share":
        return "goodput share"
    pct, metric, *_ = key.split("_")
    return f"{pct} {metric.upper()}"


def _served(p: Plan) -> str:
    """'all 8,819 requests of the trace' or 'the first 2,000 of 12,031 requests (17 %)'."""
    if p.trace_requests <= p.requests:
        return f"all {p.requests:,} requests of the trace"
    return (f"the first {p.requests:,} of the trace's {p.trace_requests:,} requests "
            f"({100 * p.requests / p.trace_requests:.0f} %)")


def judged_text(p: Plan, f: FleetInfo) -> str:
    """What the verdict judged and its figures, then (when the warm-up was dropped) the
    figures over every request, as the Verify command's vllm bench serve prints them."""
    got = ", ".join(achieved_text(k, v) for k, v in f.achieved)
    total = sum(f.requests_per_replica)
    skipped = total - f.judged_requests
    if skipped <= 0 or not f.achieved_all_requests:
        return f", every one judged: {got}"
    every = ", ".join(achieved_text(k, v) for k, v in f.achieved_all_requests)
    return (f"; judged on the {f.judged_requests:,} after the first {skipped:,} by arrival "
            f"(warm-up, --warmup-fraction {p.slo.warmup.fraction:g}): {got}; over all "
            f"{total:,}, as vllm bench serve reports them: {every}")


def noise_lines(p: Plan, w: Candidate) -> list[str]:
    """Each percentile's 95 % sampling interval, and which verdicts sit within the noise."""
    f = w.fleet
    if f is None or not f.intervals:
        return []
    cis = "; ".join(f"{term_label(k)} {_edge(k, lo)} - {_edge(k, hi)}"
                    for k, (lo, hi) in f.intervals)
    how = ", ".join(w for w, on in (
        ("percentiles by order statistics", any(k != "goodput_share" for k, _ in f.intervals)),
        ("goodput by Wilson's score interval", any(k == "goodput_share" for k, _ in f.intervals)))
        if on)
    n = f.judged_requests
    out = [f"Sampling error (95 %, {how}, over {n:,} judged request{'' if n == 1 else 's'}): "
           f"{cis}"]
    for k in f.within_noise:
        out.append(f"  {term_label(k)}: the limit lies inside the interval - the pass is "
                   "within sampling noise; another sample of the same traffic could miss it"
                   + ("" if p.trace_requests > p.requests else
                      " (the trace holds no more requests to settle it)"))
    return out


def _edge(key: str, v: float | None) -> str:
    """One end of an interval: a share as a fraction, a latency with its unit."""
    if v is None:
        return "unbounded"
    return f"{v:.3f}" if key == "goodput_share" else fmt_ms(v)


def _band(band: tuple[float, float] | None) -> str:
    return "-" if band is None else fmt_ms_range(*band)


def _p99(ms: float | None, delta_ms: float | None) -> str:
    """The lever's binding p99 and its change against the winner's row, in readable units."""
    if ms is None:
        return "-"
    return f"{fmt_ms(ms)} ({'-' if delta_ms is None else fmt_ms_delta(delta_ms)})"


def _both(value: float | int | None, delta: float | int | None, unit: str) -> str:
    """'value (delta)': the lever's own figure and its change against the winner's row."""
    if value is None:
        return "-"
    shown = f"{value:.2f}" if isinstance(value, float) else str(value)
    return f"{shown} ({_delta(delta, unit)})"


def _delta(v: float | None, unit: str) -> str:
    if v is None:
        return "-"
    return f"{v:+.1f}{unit}" if isinstance(v, float) else f"{v:+d}{unit}"


def _footer(p: Plan, console: Any) -> None:
    r = p.report
    stages = ", ".join(f"{k} {v}" for k, v in r.stage_counts if v)
    searches = counted(r.capacity_searches, "capacity search", "capacity searches")
    console.print(f"Search ({r.search}, {r.executor} x{r.workers}): {r.enumerated} "
                  f"enumerated; {stages}; {searches} "
                  f"({counted(r.probes, 'probe')}), {counted(r.fleet_simulations, 'fleet run')}, "
                  f"{r.sim_requests:,} simulated requests, {r.wall_s:.1f} s")
    for line in p.warnings:
        console.print(f"[yellow]warning:[/yellow] {line}")
