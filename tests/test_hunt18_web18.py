"""Hunt 18 (web18): the page and the charts show only what the CLI's answer holds.

The browser tests share one server and one page (Debian's chromium, no downloads)."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from kvplan.web.app import create_app
from kvplan.web.settings import WebSettings

M70 = "meta-llama/Llama-3.1-70B"


def _chart_points(spec: Any) -> list[dict[str, Any]]:
    """The data values of a Vega-Lite spec (wherever altair put them)."""
    if isinstance(spec, dict):
        values = spec.get("values")
        if isinstance(values, list):
            return values
        return next((v for x in spec.values() if (v := _chart_points(x))), [])
    if isinstance(spec, list):
        return next((v for x in spec if (v := _chart_points(x))), [])
    return []


def test_a_sweep_chart_draws_no_latency_where_the_weights_do_not_fit() -> None:
    """Llama-3.1-70B at TP 1 on an H100: bf16 weights of 70.6e9 parameters x 2 bytes = 131.45
    GiB, more than the 0.9 x 79.18 = 71.26 GiB vLLM may take, so `latency --sweep` says
    'weights do not fit: no latency' and its JSON row has no ttft_s. The chart (the page's,
    `--plot`'s and the report's) drew TPOT 49.54 ms and 19.7 tok/s there all the same: a
    latency of a model the GPU cannot load. Now no point; TP 2 and 4 are the JSON's values."""
    client = TestClient(create_app(WebSettings()))
    q = {"model": M70, "gpu": "H100", "prompt": 1000, "output": 100,
         "sweep": "tensor-parallel-size=1,2,4"}
    rows = client.get("/api/latency/sweep", params=q).json()["rows"]
    assert [r["weights_fit"] for r in rows] == [False, True, True]
    assert "ttft_s" not in rows[0]
    points = {p["value"]: p for p in _chart_points(client.get("/api/latency/chart",
                                                               params=q).json())}
    assert points["1"]["TPOT (ms)"] is None
    assert points["1"]["TTFT (ms)"] is None
    assert points["1"]["throughput (tok/s)"] is None
    for r in rows[1:]:
        assert points[r["value"]]["TPOT (ms)"] == pytest.approx(r["tpot_s"] * 1e3)
        assert points[r["value"]]["throughput (tok/s)"] == pytest.approx(
            r["output_throughput_tok_s"])
