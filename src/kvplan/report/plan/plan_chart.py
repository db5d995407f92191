"""Pareto chart of a plan: fleet $/hour against one SLO metric, with the limit and the winner.

Built from the plan's JSON answer (``kvplan plan --json``), so ``plan --plot``, the web Plan
page and ``kvplan report --plan`` draw the same chart. The axes are scaled to the feasible
candidates (and the SLO limit); an infeasible point beyond them is drawn at the edge as a
triangle pointing off the chart, its true values in the tooltip.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from kvplan.analysis.plan.records import Plan

CAP_MS = 1e7
"""Values above this (a replica that never finishes) are shown as this."""
PAD = 1.6
"""Log-axis headroom either side of the anchored range (x), and 25 % above the top cost (y)."""
SUBTITLE = ("coloured: fleet verified by simulation; grey: not verified (dearer, or missing "
            "the SLO); ring: the winner; dashed: the SLO limit")
ANCHORED = ("verified", "simulated")
"""Stages whose points fix the axes: verified fleets, and those that met the SLO per replica
but were not verified (they could not be cheaper)."""
ON, OFF_X, OFF_Y = "on scale", "beyond the axis (metric)", "beyond the axis (cost)"


def chart_metric(doc: dict[str, Any]) -> dict[str, Any] | None:
    """The SLO bound the chart plots: the winner's binding term, else the closest
    candidate's missed term, else the first percentile bound (None without one)."""
    bounds = {b["key"]: b for b in doc["inputs"]["slo"]["bounds"]}
    s = doc["summary"]
    by_id = {c["id"]: c for c in doc["candidates"]}
    winner = by_id.get(s.get("best") or "")
    picks = [((winner or {}).get("capacity") or {}).get("binding_slo"),
             *[x.get("misses") for x in s.get("closest") or []]]
    key = next((k for k in picks if k in bounds), next(iter(bounds), None))
    return None if key is None else bounds[key]


def metric_title(bound: dict[str, Any]) -> str:
    """'p99 TTFT (ms)': metric, percentile and unit, as the SLO names them."""
    pct = f"{bound['percentile']:g}"
    return f"p{pct} {bound['metric'].upper()} (ms)"


def plan_points(doc: dict[str, Any], key: str) -> list[dict[str, Any]]:
    """One point per candidate with a fleet cost and a simulated ``key`` (feasible or not)."""
    best = doc["summary"].get("best")
    out = []
    for c in doc["candidates"]:
        cost = (c.get("cost") or {}).get("usd_per_hour")
        cap = c.get("capacity") or {}
        achieved = ((c.get("fleet") or {}).get("achieved") or cap.get("achieved_at_capacity")
                    or cap.get("achieved_at_hi") or {})
        if not isinstance(cost, int | float) or not isinstance(achieved.get(key), int | float):
            continue
        band = (c.get("bands") or {}).get(f"{key}_band")
        out.append({"id": c["id"], "usd_per_hour": cost, "binding": key,
                    "binding_value_ms": min(achieved[key], CAP_MS),
                    "band_low_ms": None if not band else min(band[0], CAP_MS),
                    "band_high_ms": None if not band else min(band[1], CAP_MS),
                    "gpu": c["gpu"], "kv_cache_dtype": c["kv_cache_dtype"],
                    "tensor_parallel_size": c["tensor_parallel_size"],
                    "max_num_batched_tokens": c.get("max_num_batched_tokens"),
                    "replicas": c.get("replicas"), "stage": c["stage"],
                    "feasible": c["stage"] == "verified",
                    "winner": c["id"] == best})
    return out


def domains(points: list[dict[str, Any]], limit_ms: float, closest: list[str]
            ) -> tuple[tuple[float, float], tuple[float, float]]:
    """(x, y) axis ranges anchored on the feasible points (else the closest candidates, else
    all) and the SLO limit, so far-off infeasible points do not squash them."""
    anchor = ([p for p in points if p["stage"] in ANCHORED]
              or [p for p in points if p["id"] in closest] or points)
    xs = [p["binding_value_ms"] for p in anchor if p["binding_value_ms"] > 0] + [limit_ms]
    ys = [p["usd_per_hour"] for p in anchor] or [1.0]
    return (min(xs) / PAD, max(xs) * PAD), (0.0, max(ys) * 1.25 or 1.0)


def placed(points: list[dict[str, Any]], x_dom: tuple[float, float],
           y_dom: tuple[float, float]) -> list[dict[str, Any]]:
    """Each point with plotting coordinates inside the axes and where it really lies."""
    out = []
    for p in points:
        x = min(max(p["binding_value_ms"], x_dom[0]), x_dom[1])
        y = min(p["usd_per_hour"], y_dom[1])
        where = OFF_X if x != p["binding_value_ms"] else (OFF_Y if y != p["usd_per_hour"] else ON)
        low, high = p["band_low_ms"], p["band_high_ms"]
        out.append({**p, "x_ms": x, "y_usd_per_hour": y, "position": where,
                    "x_low_ms": None if low is None else min(max(low, x_dom[0]), x_dom[1]),
                    "x_high_ms": None if high is None else min(max(high, x_dom[0]), x_dom[1])})
    return out


def chart_points(p: Plan) -> list[dict[str, Any]]:
    """The chart's points for a Plan (its JSON answer's candidates on the chart's metric)."""
    from kvplan.report.plan.plan_json import plan_json

    doc = plan_json(p)
    bound = chart_metric(doc)
    return [] if bound is None else plan_points(doc, bound["key"])


def pareto_chart(p: Plan) -> Any:
    """The Pareto chart of a Plan (see ``pareto_from_json``)."""
    from kvplan.report.plan.plan_json import plan_json

    return pareto_from_json(plan_json(p))


def pareto_from_json(doc: dict[str, Any]) -> Any:
    """An altair layer chart: x = the SLO metric (log), y = fleet $/hour; a dashed rule at
    the SLO limit, a ring on the winner, grey = infeasible, bars = error bands (10-90 %)."""
    import altair as alt

    bound = chart_metric(doc)
    model = doc["inputs"]["model"]
    if bound is None:  # goodput-only SLO: nothing in ms to plot against
        empty = alt.Data(values=[])  # type: ignore[no-untyped-call]
        return alt.Chart(empty, title=f"{model}: no percentile SLO to plot").mark_point()
    closest = [x["id"] for x in doc["summary"].get("closest") or []]
    raw = plan_points(doc, bound["key"])
    x_dom, y_dom = domains(raw, bound["limit_ms"], closest)
    title = metric_title(bound)
    ax = _Axes(x_title=f"{title}, log scale; bar = band 10-90 %", y_title="fleet cost ($ / hour)",
               x_scale=alt.Scale(type="log", domain=list(x_dom)),
               y_scale=alt.Scale(domain=list(y_dom)), top=y_dom[1])
    base = alt.Chart(alt.Data(values=placed(raw, x_dom, y_dom)))  # type: ignore[no-untyped-call]
    layers = [_bands(base, ax), _points(base, ax), *_limit(bound, title, ax), *_winner(base, ax)]
    sub = SUBTITLE if raw else (f"no candidate has both a fleet cost and a simulated {title}"
                                " (each stopped earlier): see the closest candidates")
    head = alt.TitleParams(f"{model}: fleet cost against {title}", subtitle=sub)
    return alt.layer(*layers, title=head).properties(width=560, height=340)


@dataclass(frozen=True, slots=True, kw_only=True)
class _Axes:
    """The two axes every layer shares (one domain each, so no layer rescales them)."""

    x_title: str
    y_title: str
    x_scale: Any
    y_scale: Any
    top: float

    def x(self, field: str) -> Any:
        import altair as alt

        return alt.X(f"{field}:Q", scale=self.x_scale, title=self.x_title)

    def y(self, field: str) -> Any:
        import altair as alt

        return alt.Y(f"{field}:Q", scale=self.y_scale, title=self.y_title)


def _bands(base: Any, ax: _Axes) -> Any:
    import altair as alt

    return base.transform_filter("datum.x_low_ms != null").mark_rule(color="#888888").encode(
        x=ax.x("x_low_ms"), x2=alt.X2("x_high_ms:Q"), y=ax.y("y_usd_per_hour"))


def _points(base: Any, ax: _Axes) -> Any:
    import altair as alt

    shapes = alt.Scale(domain=[ON, OFF_X, OFF_Y],
                       range=["circle", "triangle-right", "triangle-up"])
    return base.mark_point(filled=True, size=80).encode(
        x=ax.x("x_ms"), y=ax.y("y_usd_per_hour"),
        color=alt.condition("datum.feasible", alt.Color("gpu:N", title="GPU"),
                            alt.value("#bbbbbb")),
        shape=alt.Shape("position:N", scale=shapes, title="point"),
        tooltip=["id:N", "gpu:N", "tensor_parallel_size:Q", "kv_cache_dtype:N",
                 "max_num_batched_tokens:Q", "replicas:Q", "usd_per_hour:Q", "binding:N",
                 "binding_value_ms:Q", "band_low_ms:Q", "band_high_ms:Q", "stage:N",
                 "position:N"])


def _limit(bound: dict[str, Any], title: str, ax: _Axes) -> list[Any]:
    """The SLO limit: a dashed vertical rule and its label at the top of the chart."""
    import altair as alt

    label = f"SLO: {title.removesuffix(' (ms)')} <= {bound['limit_ms']:g} ms"
    row = {"limit_ms": bound["limit_ms"], "label": label, "top": ax.top}
    data = alt.Data(values=[row])  # type: ignore[no-untyped-call]
    rule = alt.Chart(data).mark_rule(color="#d62728", strokeDash=[6, 4], size=2).encode(
        x=ax.x("limit_ms"))
    text = alt.Chart(data).mark_text(align="right", dx=-4, dy=8, color="#d62728").encode(
        x=ax.x("limit_ms"), y=ax.y("top"), text="label:N")
    return [rule, text]


def _winner(base: Any, ax: _Axes) -> list[Any]:
    """The winner: a black ring around its point and its id."""
    chosen = base.transform_filter("datum.winner")
    ring = chosen.mark_point(shape="circle", size=420, filled=False, color="black",
                             strokeWidth=2).encode(x=ax.x("x_ms"), y=ax.y("y_usd_per_hour"))
    text = chosen.transform_calculate(label="'winner ' + datum.id").mark_text(
        align="left", dx=14, dy=-10, fontWeight="bold").encode(
        x=ax.x("x_ms"), y=ax.y("y_usd_per_hour"), text="label:N")
    return [ring, text]
