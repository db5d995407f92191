"""Chart of KV usage over a simulation, with arrivals and preemptions marked (PNG/SVG/HTML)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from kvplan.analysis.metrics import itl_pairs, per_request
from kvplan.analysis.weighted import counted_percentiles
from kvplan.report.charts import save_chart as _save_chart
from kvplan.report.downsample import downsample, even_sample
from kvplan.sim.result import SimulationResult

_MAX_MARKS = 400
"""Event ticks drawn per kind at most (evenly by rank: the first and the last kept)."""
_EVENT_COLORS = {"arrival": "#888888", "preemption": "#d62728"}


def kv_usage_chart(r: SimulationResult, title: str) -> Any:
    """An altair layer: used KV blocks (% of pool) over time, arrival ticks, preemption ticks."""
    import altair as alt

    time_s, used = _usage(r)
    usage = [{"time_s": float(t), "used_pct": float(u)} for t, u in zip(time_s, used, strict=True)]
    data = alt.Data(values=usage)  # type: ignore[no-untyped-call]
    line = (
        alt.Chart(data)
        .mark_line(interpolate="step-after")
        .encode(
            x=alt.X("time_s:Q", title="time (s)"),
            y=alt.Y(
                "used_pct:Q", title="KV blocks used (% of pool)", scale=alt.Scale(domain=[0, 100])
            ),
        )
    )
    events = _ticks(
        {"arrival": (r.sent_s[~np.isnan(r.sent_s)], 0.0), "preemption": (r.preemption_s, 100.0)}
    )
    return alt.layer(line, events).properties(
        title=alt.TitleParams(title, subtitle=_pool_subtitle(r)), width=720, height=300
    )


def _pool_subtitle(r: SimulationResult) -> str:
    """The pool, its peak (as --json's peak_kv_blocks), and what the ticks mean. A decode
    instance's peak may be held between two steps (a transferred prompt's whole blocks,
    admitted while its KV crosses the link), where no step sample, so no line, reaches it."""
    nulls = ("its null block" if r.null_blocks == 1
             else f"{r.null_blocks} null blocks, one per DP rank")
    peak = r.peak_kv_blocks
    sampled = int(r.steps.used_blocks.max()) if r.num_steps else 0
    between = (f", held between steps during a KV transfer (the line's steps reach "
               f"{sampled:,})" if peak > sampled else "")
    return (f"pool {r.usable_blocks:,} usable blocks (vLLM's {r.num_blocks:,} less {nulls}); "
            f"peak {peak:,} ({100 * peak / max(r.usable_blocks, 1):.1f} %){between}; "
            "ticks: arrivals (bottom), preemptions (top)")


def _usage(r: SimulationResult) -> tuple[np.ndarray, np.ndarray]:
    """Used blocks (% of the pool) per step start, cut to what is drawn (peaks and steps kept)."""
    st = r.steps
    t = np.asarray(st.start_s, dtype=np.float64)
    pct = 100.0 * np.asarray(st.used_blocks, dtype=np.float64) / max(r.usable_blocks, 1)
    if len(t) == 0:
        return t, pct
    return downsample(t, {"used": pct})["used"]


def _ticks(events: dict[str, tuple[np.ndarray, float]]) -> Any:
    import altair as alt

    values = []
    for label, (times, y) in events.items():
        times = even_sample(np.asarray(times, dtype=np.float64), _MAX_MARKS)
        values += [{"time_s": float(t), "y": y, "event": label} for t in times]
    data = alt.Data(values=values)  # type: ignore[no-untyped-call]
    colors = alt.Scale(domain=list(_EVENT_COLORS), range=list(_EVENT_COLORS.values()))
    return (
        alt.Chart(data)
        .mark_tick(thickness=1)
        .encode(
            x="time_s:Q",
            y=alt.Y("y:Q"),
            color=alt.Color("event:N", scale=colors, title="event"),
            tooltip=["event:N", "time_s:Q"],
        )
    )


def queue_chart(r: SimulationResult) -> Any:
    """Running and waiting requests over time (per engine step, peaks kept)."""
    import altair as alt

    st = r.steps
    t = np.asarray(st.start_s, dtype=np.float64)
    series = {"running": np.asarray(st.running, dtype=np.float64),
              "waiting": np.asarray(st.waiting, dtype=np.float64)}
    rows = [{"time_s": float(a), "requests": float(b), "queue": k}
            for k, (x, y) in (downsample(t, series).items() if len(t) else ())
            for a, b in zip(x, y, strict=True)]
    return alt.Chart(alt.Data(values=rows)).mark_line(  # type: ignore[no-untyped-call]
        interpolate="step-after").encode(
        x=alt.X("time_s:Q", title="time (s)"), y=alt.Y("requests:Q", title="requests"),
        color=alt.Color("queue:N", legend=alt.Legend(orient="bottom")),
    ).properties(title="queue depth: running and waiting requests", width=720, height=200)


_CDF_POINTS = 400
_CDF_MARKS = (50.0, 90.0, 99.0)
"""Percentiles always drawn, exactly as the tables print them (numpy's linear percentile)."""


def latency_cdf_chart(r: SimulationResult) -> Any:
    """CDFs of TTFT, TPOT, ITL and E2EL (ms), one panel each: about 400 percentiles of each
    (0 and 100 included, so every curve ends at 1) plus the median, p90 and p99 exactly,
    joined linearly: numpy's percentile is linear between order statistics, so up to 400
    values (each one a point) the line passes through every percentile the table prints
    (a step-after line read the next point: P25 76.33 ms for a printed 71.78 ms)."""
    import altair as alt

    req = per_request(r)
    samples = {"TTFT": _each_once(req["ttft"]), "TPOT": _each_once(req["tpot"]),
               "ITL": itl_pairs(r), "E2EL": _each_once(req["e2el"])}
    rows = [row for name, (v, c) in samples.items() for row in _cdf_rows(name, v, c)]
    return alt.Chart(alt.Data(values=rows)).mark_line(  # type: ignore[no-untyped-call]
        interpolate="linear").encode(
        x=alt.X("ms:Q", title="ms"),
        y=alt.Y("fraction:Q", title="fraction of requests (ITL: of token gaps)"),
        color=alt.Color("metric:N", legend=None),
    ).properties(width=170, height=160).facet(
        facet=alt.Facet("metric:N", sort=list(samples), title=None), columns=4,
    ).resolve_scale(x="independent").properties(title="latency distributions (CDF)")


def _each_once(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-request values (NaN: no such value) as (value, count) pairs of count 1."""
    v = np.asarray(v, dtype=np.float64)
    v = v[~np.isnan(v)]
    return v, np.ones(len(v), dtype=np.int64)


def _cdf_rows(name: str, values_s: np.ndarray, counts: np.ndarray) -> list[dict[str, Any]]:
    """One panel's points: percentiles of the sample (seconds, never expanded) in ms."""
    n = int(counts.sum())
    if n == 0:
        return []
    ps = np.union1d(np.linspace(0.0, 100.0, max(min(n, _CDF_POINTS), 2)), _CDF_MARKS)
    xs = counted_percentiles(values_s, counts, ps.tolist())
    return [{"metric": name, "ms": x * 1000, "fraction": float(p) / 100}
            for x, p in zip(xs, ps, strict=True)]


def save_chart(chart: Any, path: Path) -> None:
    """Write PNG, SVG or offline HTML by the file's extension (vl-convert, no browser)."""
    _save_chart(chart, path)
