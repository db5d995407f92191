"""Chart of KV usage over a simulation, with arrivals and preemptions marked (PNG/SVG/HTML)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from kvplan.analysis.metrics import per_request
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
    subtitle = (
        f"pool {r.usable_blocks:,} usable blocks (vLLM's {r.num_blocks:,} less "
        f"{'its null block' if r.null_blocks == 1 else f'{r.null_blocks} null blocks'}); "
        "ticks: arrivals (bottom), preemptions (top)"
    )
    return alt.layer(line, events).properties(
        title=alt.TitleParams(title, subtitle=subtitle), width=720, height=300
    )


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


def latency_cdf_chart(r: SimulationResult) -> Any:
    """CDFs of TTFT, TPOT, ITL and E2EL (ms), one panel each, 400 quantiles at most."""
    import altair as alt

    req = per_request(r)
    values = {"TTFT": req["ttft"], "TPOT": req["tpot"], "ITL": r.itl_s(), "E2EL": req["e2el"]}
    rows = []
    for name, v in values.items():
        v = np.sort(np.asarray(v, dtype=np.float64)[~np.isnan(v)]) * 1e3
        if len(v) == 0:
            continue
        q = np.linspace(0.0, 1.0, min(len(v), _CDF_POINTS))
        rows += [{"metric": name, "ms": float(x), "fraction": float(p)}
                 for x, p in zip(np.quantile(v, q), q, strict=True)]
    return alt.Chart(alt.Data(values=rows)).mark_line(  # type: ignore[no-untyped-call]
        interpolate="step-after").encode(
        x=alt.X("ms:Q", title="ms"), y=alt.Y("fraction:Q", title="fraction of requests"),
        color=alt.Color("metric:N", legend=None),
    ).properties(width=170, height=160).facet(
        facet=alt.Facet("metric:N", sort=list(values), title=None), columns=4,
    ).resolve_scale(x="independent").properties(title="latency distributions (CDF)")


def save_chart(chart: Any, path: Path) -> None:
    """Write PNG, SVG or offline HTML by the file's extension (vl-convert, no browser)."""
    _save_chart(chart, path)
