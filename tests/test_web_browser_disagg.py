"""The Simulate page's disaggregated form in headless Chromium: fill xPyD, link and decode
TP, submit, and the page shows the API's transfer metrics (screenshot in .artifacts/web/)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode
from urllib.request import urlopen

import pytest

from tests.webtools import screenshot, watched_page, web_server

M = "meta-llama/Llama-3.1-8B"


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    with web_server("--max-sim-requests", "2000", "--max-sim-seconds", "60") as url:
        yield url


@pytest.fixture(scope="module")
def page(base: str) -> Iterator[Any]:
    with watched_page() as pg:
        yield pg


def test_disagg_form_submits_and_shows_the_transfer_metrics(base: str, page: Any) -> None:
    page.goto(f"{base}/simulate")
    page.fill("input[name=num_prompts]", "100")
    page.fill("input[name=request_rate]", "10")
    page.fill("input[name=disagg]", "1P2D")
    page.select_option("select[name=kv_link]", "eth-100g")
    page.fill("input[name=decode_tp]", "2")
    page.click("#run")
    page.wait_for_selector("body[data-state=done]", state="attached", timeout=60_000)
    q = {"model": M, "gpu": "H100-SXM-80GB", "num_prompts": 100, "request_rate": 10,
         "random_input_len": 1024, "random_output_len": 128, "seed": 0, "disagg": "1P2D",
         "kv_link": "eth-100g", "decode_tp": 2}
    with urlopen(f"{base}/api/simulate?{urlencode(q)}", timeout=60) as r:
        want = json.loads(r.read())
    cells = page.eval_on_selector_all(
        "#simulate [data-key]", "els => els.map(e => [e.dataset.key, e.dataset.value])")
    got = {k: json.loads(v) for k, v in cells}
    for key in ("kv_transfers", "kv_link_bytes", "mean_kv_transfer_ms", "p99_kv_transfer_ms",
                "mean_decode_admission_wait_ms", "decode_peak_kv_usage", "completed"):
        assert got[key] == want[key], key
    assert want["kv_transfers"] == 100 and want["kv_link"] == "eth-100g"
    assert "1P2D over eth-100g" in page.inner_text("#simulate")
    assert "peak KV blocks" not in page.inner_text("#simulate")  # one server's rows left out
    page.wait_for_selector("#chart-latency_cdf svg", state="attached")
    screenshot(page, "simulate-disagg")


def test_plan_page_disagg_shows_the_joint_answer(base: str, page: Any) -> None:
    page.goto(f"{base}/plan")
    slo = "ttft:p99:2000 tpot:p99:100"
    page.fill("input[name=gpu]", "H100-SXM-80GB")
    page.fill("input[name=slo]", slo)
    page.fill("input[name=tensor_parallel_size]", "1")
    page.fill("input[name=num_prompts]", "60")
    page.fill("input[name=random_input_len]", "512")
    page.fill("input[name=random_output_len]", "32")
    page.fill("input[name=request_rate]", "5")  # --disagg needs one offered load (the CLI's)
    page.select_option("select[name=disagg]", "on")
    page.click("#run")
    page.wait_for_selector("body[data-state=done]", state="attached", timeout=120_000)
    q = {"model": M, "gpu": "H100-SXM-80GB", "slo": slo, "tensor_parallel_size": "1",
         "num_prompts": 60, "random_input_len": 512, "random_output_len": 32,
         "request_rate": 5, "disagg": "on"}
    with urlopen(f"{base}/api/plan?{urlencode(q)}", timeout=120) as r:
        want = json.loads(r.read())
    assert page.inner_text("#joint-versus") == want["joint"]["versus"]
    cells = page.eval_on_selector_all(
        "#plan [data-key^='joint.']", "els => els.map(e => [e.dataset.key, e.dataset.value])")
    got = {k: json.loads(v) for k, v in cells}
    assert got["joint.winner_kind"] == want["joint"]["winner_kind"]
    assert got["joint.winner.usd_per_hour"] == want["joint"]["winner"]["usd_per_hour"]
    screenshot(page, "plan-disagg")
