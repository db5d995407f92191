"""Hunt 18 (web18): the page and the charts show only what the CLI's answer holds.

The browser tests share one server and one page (Debian's chromium, no downloads)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import pytest
from fastapi.testclient import TestClient

from kvplan.web.app import create_app
from kvplan.web.settings import WebSettings
from tests.webtools import settle, watched_page, web_server

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


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    with web_server("--max-sim-requests", "200", "--max-sim-seconds", "60") as url:
        yield url


@pytest.fixture(scope="module")
def page(base: str) -> Iterator[Any]:
    with watched_page() as pg:
        yield pg


def _settle(page: Any, *states: str) -> None:
    settle(page, *states, timeout_ms=60_000)


def test_the_latency_page_writes_a_missing_bound_as_the_cli_does(base: str, page: Any) -> None:
    """One output token has no decode: `kvplan latency` prints the decode bound '-', the page
    printed 'null'; a sweep row whose weights do not fit printed 'undefined' in its decode
    column and said nothing of why (the CLI's note: 'weights do not fit: no latency')."""
    q = {"model": M70, "tensor_parallel_size": 4, "output": 1, "batch": 1,
         "sweep": "tensor-parallel-size=1,4"}
    page.goto(f"{base}/latency?{urlencode(q)}")
    _settle(page, "done")
    assert page.inner_text("td[data-key='decode_bound']") == "-"
    assert page.inner_text("td[data-key='rows.0.decode_bound']") == "-"
    text = page.inner_text("#latency") + page.inner_text("#sweep")
    assert "null" not in text and "undefined" not in text
    assert "weights do not fit: no latency" in page.inner_text("#sweep")


def test_a_run_shows_nothing_of_the_run_before(base: str, page: Any) -> None:
    """A disaggregated run draws no queue chart: the one-server run's queue depth stayed
    beside the new answer. A refused run left the old answer and charts, the page 'done'."""
    page.goto(f"{base}/simulate?num_prompts=10&random_input_len=256&random_output_len=8")
    page.click("#run")
    _settle(page, "done")
    assert page.eval_on_selector("#chart-queue", "e => e.querySelectorAll('svg').length") == 1
    page.fill("input[name=disagg]", "1P1D")
    page.click("#run")
    _settle(page, "done")
    assert "1P1D" in page.inner_text("#simulate")
    assert page.eval_on_selector("#chart-queue", "e => e.innerHTML") == ""
    page.fill("input[name=num_prompts]", "999999")
    page.click("#run")
    _settle(page, "error")
    assert "at most 200" in page.inner_text(".err[data-for=num_prompts]")
    assert page.inner_text("#simulate") == ""
    assert page.eval_on_selector_all(".chart svg", "es => es.length") == 0


@pytest.mark.parametrize("name", ["model", "request", "capacity", "latency", "simulate", "plan"])
def test_every_form_control_has_a_name_a_screen_reader_reads(base: str, page: Any,
                                                              name: str) -> None:
    """The Request page's sliders: one label held the range and the number field, so the
    label named the range only; --prompt, --output and --chunk, the fields sent, had no name.
    The job pages' progress bar had none either."""
    page.goto(f"{base}/{name}")
    bare = page.eval_on_selector_all(
        "input, select, progress", "els => els.filter(e => !(e.labels && e.labels.length) && "
        "!e.getAttribute('aria-label')).map(e => e.outerHTML)")
    assert bare == []
    if name == "request":
        for field in ("prompt", "output", "chunk"):
            el = page.get_by_label(f"--{field}", exact=True)
            assert el.get_attribute("type") == "number"
            assert el.get_attribute("name") == field


def test_the_report_data_survives_a_comment_opener_in_a_name(tmp_path: Any, page: Any) -> None:
    """The answers' JSON sits in a <script> element, where '<!--<script>' (a model named so,
    a hand-edited --plan) switches the HTML tokenizer to 'double escaped': the element's own
    </script> no longer closed it, the page's script was swallowed, no chart drawn, the
    report never 'done'. Escaping only '</' is not enough; every '<' is written \\u003c."""
    import json
    import re

    from kvplan.report.html import render_report
    from kvplan.report.report_page import Section

    name = "m <!--<script> x"
    html = render_report(name, "sub", [Section(id="plan", title=name, rows=(("model", name),),
                                               charts=(), answer={"model": name})])
    raw = re.search(r'id="kvplan-data">(.*?)</script>', html, re.S)
    assert raw is not None and "<" not in raw.group(1)
    assert json.loads(raw.group(1))["sections"][0]["answer"]["model"] == name
    out = tmp_path / "r.html"
    out.write_text(html)
    page.goto(out.as_uri())  # file://: nothing fetched
    _settle(page, "done")


def test_a_sweep_without_a_tpot_draws_ttft_not_an_empty_panel() -> None:
    """--output 1: no request has a second token, so no TPOT (every row's tpot_s null); the
    chart's first panel plotted TPOT (ms) over nothing (Vega: 'Infinite extent for field
    TPOT (ms)'), an empty frame. It draws TTFT, the one latency there is; with a TPOT, TPOT."""
    client = TestClient(create_app(WebSettings()))
    q = {"model": "meta-llama/Llama-3.1-8B", "gpu": "H100", "prompt": 512, "output": 1,
         "sweep": "batch=1,8"}
    spec = client.get("/api/latency/chart", params=q).json()
    fields = {layer["encoding"]["y"]["field"] for panel in spec["hconcat"]
              for layer in panel["layer"]}
    assert fields == {"TTFT (ms)", "throughput (tok/s)"}
    spec = client.get("/api/latency/chart", params={**q, "output": 2}).json()
    fields = {layer["encoding"]["y"]["field"] for panel in spec["hconcat"]
              for layer in panel["layer"]}
    assert fields == {"TPOT (ms)", "throughput (tok/s)"}


def test_the_reports_model_section_pages_in_the_block_vllm_forces(tmp_path: Any) -> None:
    """DeepSeek-V2-Lite on an H100: vLLM 0.11 forces blocks of 64 for FlashMLA (the report's
    Capacity section logs it, its Request section claims in them); the Model section's JSON
    still paged the latent in blocks of 16: 16 x 576 x 2 B = 18,432 B a layer, a page vLLM
    never allocates there. Now 64 x 576 x 2 = 73,728 B, block 64, as `kvplan kv
    --block-size 64` says."""
    import json
    import re

    from tests.conftest import run_cli

    out = tmp_path / "r.html"
    res = run_cli("report", "deepseek-ai/DeepSeek-V2-Lite", "--gpu", "H100", "-o", str(out))
    assert res.code == 0, res.err
    raw = re.search(r'id="kvplan-data">(.*?)</script>', out.read_text(), re.S)
    assert raw is not None
    sections = {s["id"]: s["answer"] for s in json.loads(raw.group(1))["sections"]}
    kv = sections["model"]["kv"]
    assert sections["capacity"]["block_size"] == 64
    assert kv["block_size"] == 64
    assert [g["page_size_bytes"] for g in kv["groups"]] == [73_728]
    cli = run_cli("kv", "deepseek-ai/DeepSeek-V2-Lite", "--block-size", "64", "--json")
    assert json.loads(cli.out) == kv


def test_a_disaggregated_plans_last_stage_counts_nothing_of_its_own() -> None:
    """plan --disagg on the page: after the aggregated search the job's stage became
    'disaggregated' while its count stayed the aggregated stage's ('disaggregated: 4 / 9 ·
    done', 9 aggregated candidates); the side search reports no count, so none is shown."""
    import time

    client = TestClient(create_app(WebSettings(max_sim_requests=200, max_sim_seconds=60)))
    form = {"model": "meta-llama/Llama-3.1-8B", "slo": "tpot:p99:30", "gpu": "H100",
            "tensor_parallel_size": "1", "num_prompts": 40, "random_input_len": 256,
            "random_output_len": 16, "request_rate": 4, "disagg": True, "kv_link": "ib-ndr"}
    job = client.post("/api/plan/jobs", json=form, headers={"x-kvplan-client": "t18"}).json()
    view: dict[str, Any] = {}
    for _ in range(600):
        view = client.get(f"/api/plan/jobs/{job['job']}").json()
        if view["state"] not in ("queued", "running"):
            break
        time.sleep(0.1)
    assert view["state"] == "done", view.get("error")
    assert view["result"]["joint"]
    assert (view["stage"], view["done"], view["total"]) == ("disaggregated", 0, 0)
