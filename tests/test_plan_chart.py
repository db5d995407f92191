"""The plan's Pareto chart: one SLO metric on x (named with percentile and unit), the limit as a
rule, the winner ringed, and axes fixed by the feasible points (far-off ones drawn at the edge)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from kvplan.report.plan.plan_chart import (
    OFF_X,
    OFF_Y,
    ON,
    domains,
    pareto_from_json,
    placed,
    plan_points,
)
from kvplan.report.plan.plan_report import plan_sections
from tests.conftest import run_cli


def _cand(cid: str, stage: str, usd: float, tpot: float, ttft: float = 100.0) -> dict[str, Any]:
    return {"id": cid, "stage": stage, "gpu": "H100-SXM-80GB", "kv_cache_dtype": "auto",
            "tensor_parallel_size": 1, "max_num_batched_tokens": None, "replicas": 2,
            "cost": {"usd_per_hour": usd}, "bands": None,
            "capacity": {"binding_slo": "p99_tpot_ms", "achieved_at_capacity": {},
                         "achieved_at_hi": {"p99_tpot_ms": tpot, "p99_ttft_ms": ttft}},
            "fleet": {"achieved": {"p99_tpot_ms": tpot, "p99_ttft_ms": ttft}}
            if stage == "verified" else None}


def _doc(best: str | None = "c1") -> dict[str, Any]:
    return {"schema": "kvplan.plan/v1",
            "inputs": {"model": "m", "slo": {"bounds": [
                {"metric": "ttft", "percentile": 99.0, "limit_ms": 2000.0, "key": "p99_ttft_ms"},
                {"metric": "tpot", "percentile": 99.0, "limit_ms": 100.0,
                 "key": "p99_tpot_ms"}]}},
            "summary": {"status": "feasible" if best else "infeasible", "best": best,
                        "closest": [] if best else [{"id": "c2", "misses": "p99_tpot_ms"}]},
            "candidates": [_cand("c1", "verified", 8.0, 50.0), _cand("c2", "simulated", 10.0, 80.0),
                           _cand("c3", "infeasible", 400.0, 9000.0)]}


def _layers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return spec["layer"]


def test_axes_name_metric_percentile_and_unit_and_the_limit_is_a_rule() -> None:
    spec = pareto_from_json(_doc()).to_dict()
    points = next(x for x in _layers(spec) if x["mark"].get("size") == 80)
    assert points["encoding"]["x"]["title"] == "p99 TPOT (ms), log scale; bar = band 10-90 %"
    assert points["encoding"]["y"]["title"] == "fleet cost ($ / hour)"
    rule = next(x for x in _layers(spec) if x["mark"].get("strokeDash"))
    assert rule["mark"]["type"] == "rule" and rule["encoding"]["x"]["field"] == "limit_ms"
    assert rule["data"]["values"] == [{"limit_ms": 100.0, "label": "SLO: p99 TPOT <= 100 ms",
                                       "top": 12.5}]
    assert rule["encoding"]["x"]["scale"] == {"type": "log", "domain": [31.25, 160.0]}
    assert spec["title"]["text"] == "m: fleet cost against p99 TPOT (ms)"


def test_winner_is_ringed_and_labelled() -> None:
    spec = pareto_from_json(_doc()).to_dict()
    ring = next(x for x in _layers(spec) if x["mark"].get("size") == 420)
    assert ring["mark"]["filled"] is False and {"filter": "datum.winner"} in ring["transform"]
    label = next(x for x in _layers(spec) if x["mark"].get("fontWeight") == "bold")
    assert {"calculate": "'winner ' + datum.id", "as": "label"} in label["transform"]


def test_infeasible_points_do_not_stretch_the_axes() -> None:
    """x: verified 50 and simulated 80 ms, the 100 ms limit -> [50 / 1.6, 100 x 1.6] =
    [31.25, 160]; y: top feasible $10/h x 1.25 = 12.5. The 9,000 ms / $400 point sits at
    (160, 12.5), marked as off the metric axis."""
    raw = plan_points(_doc(), "p99_tpot_ms")
    x_dom, y_dom = domains(raw, 100.0, [])
    assert x_dom == pytest.approx((31.25, 160.0)) and y_dom == (0.0, 12.5)
    pts = {p["id"]: p for p in placed(raw, x_dom, y_dom)}
    assert (pts["c1"]["x_ms"], pts["c1"]["position"]) == (50.0, ON)
    far = pts["c3"]
    assert (far["x_ms"], far["y_usd_per_hour"], far["position"]) == (160.0, 12.5, OFF_X)
    assert (far["binding_value_ms"], far["usd_per_hour"]) == (9000.0, 400.0)  # tooltip: true
    cheap_but_dear = placed([{**raw[0], "usd_per_hour": 99.0}], x_dom, y_dom)[0]
    assert cheap_but_dear["position"] == OFF_Y


def test_nothing_feasible_anchors_on_the_closest_candidates() -> None:
    doc = _doc(best=None)
    doc["candidates"] = [c for c in doc["candidates"] if c["id"] != "c1"]
    doc["candidates"][0]["stage"] = "infeasible"
    raw = plan_points(doc, "p99_tpot_ms")
    assert domains(raw, 100.0, ["c2"]) == (pytest.approx((50.0, 160.0)), (0.0, 12.5))
    assert pareto_from_json(doc).to_dict()["title"]["text"] == "m: fleet cost against p99 TPOT (ms)"


def test_report_plan_draws_the_same_pareto_chart() -> None:
    sections = plan_sections(_doc())
    assert sections[0].charts[0] == pareto_from_json(_doc()).to_dict()


def test_plot_is_written_when_nothing_is_feasible(tmp_path: Path) -> None:
    out = tmp_path / "p.svg"
    r = run_cli("plan", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "-tp", "1",
                "--num-prompts", "100", "--request-rate", "5", "--sample-requests", "60",
                "--workers", "1", "--slo", "ttft:p99:2000", "tpot:p99:5", "--plot", str(out))
    assert r.code == 1, r.err
    svg = out.read_text()
    assert "SLO: p99 TPOT &lt;= 5 ms" in svg and "p99 TPOT (ms), log scale" in svg
    assert "no candidate has both a fleet cost and a simulated p99 TPOT (ms)" in svg
