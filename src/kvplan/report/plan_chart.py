"""Pareto chart of a plan: $/hour against the achieved binding-metric value, per candidate."""

from __future__ import annotations

from typing import Any

from kvplan.analysis.plan.records import Candidate, Plan


def chart_points(p: Plan) -> list[dict[str, Any]]:
    """One point per candidate with a cost and a simulated binding value (feasible or not)."""
    out = []
    for c in p.candidates:
        point = _point(c, p)
        if point is not None:
            out.append(point)
    return out


def _point(c: Candidate, p: Plan) -> dict[str, Any] | None:
    if c.usd_per_hour is None or c.capacity is None:
        return None
    key = c.capacity.binding_slo
    achieved = dict(c.fleet.achieved) if c.fleet else dict(c.capacity.achieved_at_hi)
    if key is None or key not in achieved or key == "goodput_share":
        return None
    e = c.deployment.engine
    band = next((x.band for x in c.bands.checks if x.key == key), None) if c.bands else None
    return {"id": c.id, "usd_per_hour": c.usd_per_hour, "binding": key,
            "binding_value_ms": min(achieved[key], 1e7),
            "band_low_ms": None if band is None else min(band[0], 1e7),
            "band_high_ms": None if band is None else min(band[1], 1e7),
            "gpu": c.deployment.gpu.id,
            "kv_cache_dtype": e.kv_cache_dtype, "tensor_parallel_size": e.tensor_parallel_size,
            "feasible": c.stage == "verified",
            "winner": p.winner is not None and c.id == p.winner.id}


def pareto_chart(p: Plan) -> Any:
    """An altair scatter: x = binding metric (ms, log), y = $/hour; grey = infeasible; a
    horizontal bar = the value's error band (10-90 %) where the candidate has one."""
    import altair as alt

    data = alt.Data(values=chart_points(p))  # type: ignore[no-untyped-call]
    base = alt.Chart(data, title=f"{p.model}: cost against the binding SLO metric")
    x = alt.X("binding_value_ms:Q", title="binding metric (ms; bar = band 10-90%)",
              scale=alt.Scale(type="log"))
    bars = base.transform_filter("datum.band_low_ms != null").mark_rule(
        color="#888888").encode(x=alt.X("band_low_ms:Q", scale=alt.Scale(type="log")),
                                x2="band_high_ms:Q", y="usd_per_hour:Q")
    return bars + _points(base, x)


def _points(base: Any, x: Any) -> Any:
    import altair as alt

    return (
        base.mark_point(filled=True, size=80)
        .encode(
            x=x,
            y=alt.Y("usd_per_hour:Q", title="$ / hour"),
            color=alt.condition("datum.feasible", alt.Color("gpu:N"), alt.value("#bbbbbb")),
            shape=alt.Shape("kv_cache_dtype:N"),
            tooltip=["id:N", "gpu:N", "tensor_parallel_size:Q", "kv_cache_dtype:N",
                     "usd_per_hour:Q", "binding:N", "binding_value_ms:Q", "band_low_ms:Q",
                     "band_high_ms:Q", "feasible:N"],
        )
    )
