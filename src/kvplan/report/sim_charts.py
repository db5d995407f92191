"""Chart of KV usage over a simulation, with arrivals and preemptions marked (PNG/SVG/HTML)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from kvplan.analysis.metrics import kv_usage_series
from kvplan.report.charts import save_chart as _save_chart
from kvplan.sim.result import SimulationResult

_MAX_MARKS = 5000
_MAX_POINTS = 4000
"""Usage points drawn at most; longer series keep each bucket's peak (so peaks stay visible)."""
_EVENT_COLORS = {"arrival": "#888888", "preemption": "#d62728"}


def kv_usage_chart(r: SimulationResult, title: str) -> Any:
    """An altair layer: used KV blocks (% of pool) over time, arrival ticks, preemption ticks."""
    import altair as alt

    s = kv_usage_series(r)
    time_s, used = _peaks(
        np.asarray(s["time_s"]), 100.0 * np.asarray(s["used_blocks"]) / r.usable_blocks
    )
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
        f"pool {r.usable_blocks:,} usable blocks (vLLM's {r.num_blocks:,} less its null "
        "block); ticks: arrivals (bottom), preemptions (top)"
    )
    return alt.layer(line, events).properties(
        title=alt.TitleParams(title, subtitle=subtitle), width=720, height=300
    )


def _peaks(t: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """At most _MAX_POINTS points: the first time and the highest value of each bucket."""
    if len(t) <= _MAX_POINTS:
        return t, y
    edges = np.linspace(0, len(t), _MAX_POINTS + 1).astype(np.int64)
    return t[edges[:-1]], np.maximum.reduceat(y, edges[:-1])


def _ticks(events: dict[str, tuple[np.ndarray, float]]) -> Any:
    import altair as alt

    values = []
    for label, (times, y) in events.items():
        if len(times) > _MAX_MARKS:
            times = np.quantile(times, np.linspace(0, 1, _MAX_MARKS))
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


def save_chart(chart: Any, path: Path) -> None:
    """Write PNG, SVG or offline HTML by the file's extension (vl-convert, no browser)."""
    _save_chart(chart, path)
