"""Chart of KV usage over a simulation, with arrivals and preemptions marked (PNG or SVG)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from kvplan.analysis.metrics import kv_usage_series
from kvplan.errors import InputError
from kvplan.sim.result import SimulationResult

_MAX_MARKS = 5000


def kv_usage_chart(r: SimulationResult, title: str) -> Any:
    """An altair layer: used KV blocks (% of pool) over time, arrival ticks, preemption rules."""
    import altair as alt

    s = kv_usage_series(r)
    usage = [{"time_s": t, "used_pct": 100 * u / r.num_blocks, "waiting": w}
             for t, u, w in zip(s["time_s"], s["used_blocks"], s["waiting"], strict=True)]
    data = alt.Data(values=usage)  # type: ignore[no-untyped-call]
    line = alt.Chart(data).mark_line().encode(
        x=alt.X("time_s:Q", title="time (s)"),
        y=alt.Y("used_pct:Q", title="KV blocks used (% of pool)", scale=alt.Scale(domain=[0, 100])),
    )
    layers = [line,
              _ticks(r.sent_s[~np.isnan(r.sent_s)], 0, "#888", "arrival"),
              _ticks(r.preemption_s, 100, "#d62728", "preemption")]
    return alt.layer(*layers).properties(title=title, width=720, height=300)


def _ticks(times: np.ndarray, y: float, color: str, label: str) -> Any:
    import altair as alt

    if len(times) > _MAX_MARKS:
        times = np.quantile(times, np.linspace(0, 1, _MAX_MARKS))
    values = [{"time_s": float(t), "y": y, "event": label} for t in times]
    data = alt.Data(values=values)  # type: ignore[no-untyped-call]
    return alt.Chart(data).mark_tick(color=color, thickness=1).encode(
        x="time_s:Q", y=alt.Y("y:Q"), tooltip=["event:N", "time_s:Q"],
    )


def save_chart(chart: Any, path: Path) -> None:
    """Write PNG or SVG by the file's extension (vl-convert, no browser)."""
    import vl_convert as vlc

    spec = chart.to_json()
    suffix = path.suffix.lower()
    if suffix == ".png":
        path.write_bytes(vlc.vegalite_to_png(spec, scale=2))
    elif suffix == ".svg":
        path.write_text(vlc.vegalite_to_svg(spec))
    else:
        raise InputError(f"--plot {path}: use a .png or .svg file name")
