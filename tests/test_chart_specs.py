"""Every chart spec kvplan serves is valid Vega-Lite (run time skips altair's check:
report.charts.chart_spec), and GET /api/simulate builds no chart at all."""

from __future__ import annotations

import time
from typing import Any

import pytest
from fastapi.testclient import TestClient

from kvplan.web.app import create_app
from kvplan.web.settings import WebSettings

M = "meta-llama/Llama-3.1-8B"
SIM = {"model": M, "gpu": "H100", "num_prompts": 40, "random_input_len": 512,
       "random_output_len": 32, "request_rate": 20}
PLAN = {"model": M, "gpu": "H100", "tensor_parallel_size": "1", "num_prompts": 60,
        "request_rate": 2, "slo": "ttft:p99:2000 tpot:p99:100"}
CHART_URLS = [
    ("/api/request/chart", {"model": M, "prompt": 300, "output": 40}),
    ("/api/capacity/chart", {"model": M}),
    ("/api/latency/chart", {"model": M, "prompt": 64, "output": 8}),
    ("/api/levers/chart", {"model": M}),
]


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(WebSettings(max_sim_requests=300, max_sim_seconds=30)))


def validate(spec: dict[str, Any]) -> None:
    """Raise jsonschema's ValidationError unless ``spec`` is valid under altair's Vega-Lite."""
    from altair.utils.schemapi import validate_jsonschema
    from altair.vegalite.v6.schema.core import load_schema

    validate_jsonschema(spec, load_schema())


def _job_charts(client: TestClient, family: str, body: dict[str, Any]) -> dict[str, Any]:
    job = client.post(f"/api/{family}/jobs", json=body).json()["job"]
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        view = client.get(f"/api/{family}/jobs/{job}").json()
        if view["state"] not in ("queued", "running"):
            assert view["state"] == "done", view
            charts: dict[str, Any] = client.get(f"/api/{family}/jobs/{job}/charts").json()
            return charts
        time.sleep(0.05)
    raise AssertionError(f"{family} job {job} never finished")


def test_the_check_rejects_a_broken_spec() -> None:
    import altair as alt

    spec = alt.Chart(alt.Data(values=[{"a": 1}])).mark_bar().encode(x="a:Q").to_dict()
    validate(spec)
    spec["mark"] = {"type": "no-such-mark"}
    with pytest.raises(Exception, match="no-such-mark"):
        validate(spec)


@pytest.mark.parametrize(("url", "params"), CHART_URLS, ids=[u for u, _ in CHART_URLS])
def test_chart_endpoints_serve_valid_specs(client: TestClient, url: str,
                                           params: dict[str, Any]) -> None:
    r = client.get(url, params=params)
    assert r.status_code == 200, r.text
    validate(r.json())


def test_job_charts_are_valid(client: TestClient) -> None:
    sim = _job_charts(client, "simulate", SIM)
    assert sorted(sim) == ["kv_usage", "latency_cdf", "queue"]
    plan = _job_charts(client, "plan", PLAN)
    assert sorted(plan) == ["pareto"]
    for spec in (*sim.values(), *plan.values()):
        validate(spec)


def test_chart_spec_is_altairs_validated_dict() -> None:
    from kvplan.analysis.serving import simulate_serving
    from kvplan.report import sim_charts
    from kvplan.report.charts import chart_spec
    from kvplan.specs.catalog import load_model
    from kvplan.specs.hardware import load_gpu
    from kvplan.specs.requests.workload import WorkloadArgs, build_workload
    from kvplan.specs.serving import EngineConfig

    work = build_workload(WorkloadArgs(num_prompts=30, random_input_len=256,
                                       random_output_len=16, request_rate=10.0, seed=1))
    r = simulate_serving(load_model(M), load_gpu("H100"), EngineConfig(), work).result
    for chart in (sim_charts.kv_usage_chart(r, "t"), sim_charts.queue_chart(r),
                  sim_charts.latency_cdf_chart(r)):
        assert chart_spec(chart) == chart.to_dict()  # to_dict() validates
        validate(chart_spec(chart))


def test_sync_simulate_builds_no_chart(client: TestClient,
                                       monkeypatch: pytest.MonkeyPatch) -> None:
    from kvplan.report import sim_charts

    def refuse(*_: Any, **__: Any) -> Any:
        raise AssertionError("GET /api/simulate built a chart it does not return")

    for name in ("kv_usage_chart", "queue_chart", "latency_cdf_chart"):
        monkeypatch.setattr(sim_charts, name, refuse)
    r = client.get("/api/simulate", params=SIM)
    assert r.status_code == 200, r.text
    assert r.json()["completed"] == 40
