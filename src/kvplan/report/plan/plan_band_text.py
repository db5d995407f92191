"""The plan's error bands in words: each SLO term, its band (10-90 %), and whether it still
holds at the band's pessimistic edge; what --slo-margin band changed."""

from __future__ import annotations

from kvplan.analysis.plan.bands import (
    OUTPUT_DEFINITIONS,
    PlanBands,
    SloCheck,
)
from kvplan.analysis.plan.records import Candidate, Plan
from kvplan.units import counted


def term_name(key: str) -> str:
    """``p99_ttft_ms`` -> ``p99 TTFT``; ``goodput_share`` -> ``goodput``."""
    if key == "goodput_share":
        return "goodput"
    pct, metric, _unit = key.split("_")
    return f"{pct} {metric.upper()}"


def ms_text(ms: float) -> str:
    """A latency in ms as it reads best: ``812.4 ms``, ``1.10 s``, ``2.91 min``, ``3.61 h``."""
    figures = ((f"{ms:.1f}", "ms", 1000.0), (f"{ms / 1000:.2f}", "s", 60.0),
               (f"{ms / 60_000:.2f}", "min", 60.0))
    for text, unit, top in figures:  # 999.96 ms is "1.00 s", not "1000.0 ms"
        if float(text) < top:
            return f"{text} {unit}"
    return f"{ms / 3_600_000:,.2f} h"


def _limit_text(ms: float) -> str:
    if ms >= 3_600_000:
        return f"{ms / 3_600_000:g} h"
    if ms >= 60_000:
        return f"{ms / 60_000:g} min"
    return f"{ms / 1000:g} s" if ms >= 1000 else f"{ms:g} ms"


def limit_text(key: str, limit: float) -> str:
    """An SLO term's limit as given: ``300 ms``, ``20 s``, ``90 %`` (a goodput share)."""
    return f"{100 * limit:g} %" if key == "goodput_share" else _limit_text(limit)


def achieved_text(key: str, value: float) -> str:
    """One achieved SLO term: ``p99 TTFT 812.4 ms``, ``goodput 97.0 %``; others as given."""
    if key == "goodput_share":
        return f"goodput {100 * value:.1f} %"
    if key.endswith("_ms") and key.count("_") == 2:
        return f"{term_name(key)} {ms_text(value)}"
    return f"{key} {value:.1f}"


def value_text(key: str, value: float | None) -> str:
    """One SLO term's value alone in its unit: ``812.4 ms``, ``97.9 %`` (a goodput share);
    ``open`` where there is none (an interval's missing edge)."""
    if value is None:
        return "open"
    if key == "goodput_share":
        return f"{100 * value:.1f} %"
    return ms_text(value) if key.endswith("_ms") else f"{value:,.1f}"


def term_text(key: str, value: float | None) -> str:
    """``achieved_text``, or ``{key} open`` where the term has no value."""
    return f"{key} open" if value is None else achieved_text(key, value)


def term_delta_text(key: str, delta: float) -> str:
    """A change of one SLO term in its unit: ``+3.10 ms``, ``-1.2 pp`` (goodput share)."""
    if key == "goodput_share":
        return f"{100 * delta:+.1f} pp"
    if key.endswith("_ms"):
        from kvplan.report.durations import fmt_ms_delta

        return fmt_ms_delta(delta)
    return f"{delta:+,.1f}"


def check_line(c: SloCheck) -> str:
    """``p95 TTFT 1.10 s <= 2 s, band (10-90%) 0.52 - 1.62 s: still met at the band's upper
    edge 1.62 s`` (or ``... it would be missed``)."""
    share = c.key == "goodput_share"
    val = (lambda x: f"{100 * x:.1f} %") if share else ms_text
    limit = limit_text(c.key, c.limit)
    rel = (">=" if c.met else "<") if share else ("<=" if c.met else ">")
    if not c.sampled:
        return (f"{term_name(c.key)}: no sample, nothing to judge against {limit} (vLLM takes "
                "a TPOT / ITL only from requests with 2 or more output tokens)")
    head = f"{term_name(c.key)} {val(c.value)} {rel} {limit}"
    if c.band is None or c.edge is None:
        return f"{head}; no calibration residuals bound it"
    side = "lower" if share else "upper"
    tail = (f"still met at the band's {side} edge {val(c.edge)}" if c.met_at_edge
            else f"at the band's {side} edge {val(c.edge)} it would be missed")
    return f"{head}, band (10-90%) {val(c.band[0])} - {val(c.band[1])}: {tail} [{c.basis}]"


def band_lines(b: PlanBands) -> list[str]:
    """The winner's bands: one line per SLO term (with its group), the output rate, the
    notes."""
    out = ["Error band: held-out calibration residuals of the nearest fitted group [named "
           "per term]"]
    out += [f"  {check_line(c)}" for c in b.checks]
    if b.output_tokens_per_s is not None:
        band = b.output_tokens_per_s_band
        tail = "" if band is None else (f", band (10-90%) {band[0]:.0f} - {band[1]:.0f} "
                                        f"tok/s [{b.output_basis}]")
        what = ("output throughput" if b.output_definition == "run"
                else "sustained output rate of one replica")
        out.append(f"  {what} {b.output_tokens_per_s:.0f} tok/s{tail}")
        out.append(f"    = {OUTPUT_DEFINITIONS[b.output_definition]}; {priced_text(b)}")
    out += [f"  note: {n}" for n in b.notes]
    return out


def priced_text(b: PlanBands) -> str:
    """Which output rate $/M out tok is priced at."""
    if b.priced_output_tokens_per_s is None:
        return "$/M out tok is priced at this rate"
    return (f"$/M out tok is priced at {b.priced_output_tokens_per_s:.0f} tok/s, "
            f"{b.priced_definition}")


def margin_line(p: Plan) -> str:
    """What the margin rule did (band), or what it would ask for (none)."""
    w = p.winner
    if w is None:
        return ""
    if p.slo_margin == "none":
        missed = [c for c in (w.bands.checks if w.bands else ()) if c.met_at_edge is False]
        if not missed:
            return ""
        return (f"SLO margin: none - {counted(len(missed), 'SLO term')} would be missed at "
                "the band's edge; --slo-margin band plans for the edge instead")
    head = "SLO margin: band - every SLO term is required at the band's pessimistic edge"
    base = p.without_margin
    if base is None:
        return f"{head}; without it the search finds nothing either"
    if base.id == w.id and base.replicas == w.replicas:
        return f"{head}; without it the winner is the same: the margin costs nothing here"
    return f"{head}; without it the winner would be {_brief(base)}: {_extra(p, w, base)}"


def _brief(c: Candidate) -> str:
    e = c.deployment.engine
    usd = "-" if c.usd_per_hour is None else f"${c.usd_per_hour:.2f}/h"
    return (f"{c.id} ({c.deployment.gpu.id} TP{e.tensor_parallel_size} kv {e.kv_cache_dtype}),"
            f" {counted(c.replicas, 'replica')}, {usd}")


def _extra(p: Plan, w: Candidate, base: Candidate) -> str:
    if p.mode == "capacity":
        a, b = w.usd_per_million_output_tokens, base.usd_per_million_output_tokens
        unit = " per million output tokens"
    else:
        a, b, unit = w.usd_per_hour, base.usd_per_hour, "/h"
    if a is None or b is None:
        return "the margin changes the winner"
    sign = "+" if a >= b else "-"
    return f"the margin costs {sign}${abs(a - b):.2f}{unit}"


def edge_word(c: Candidate) -> str:
    """The ranked table's 'at band edge' cell."""
    robust = None if c.bands is None else c.bands.robust
    return "-" if robust is None else ("met" if robust else "missed")
