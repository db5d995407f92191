"""hunt10-web: the web page used as a person would (headless Debian chromium), and its API."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from tests.webtools import watched_page, web_server

M = "meta-llama/Llama-3.1-8B"


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    with web_server() as url:
        yield url


@pytest.fixture(scope="module")
def page(base: str) -> Iterator[Any]:
    with watched_page() as pg:
        yield pg


def settle(page: Any, *states: str) -> str:
    wanted = ", ".join(f"body[data-state={s}]" for s in states or ("done",))
    page.wait_for_selector(wanted, state="attached", timeout=30_000)
    return str(page.evaluate("document.body.dataset.state"))


def answer(page: Any, section: str) -> Any:
    return json.loads(page.eval_on_selector(f"#{section}", "e => e.dataset.json || 'null'"))


def test_the_url_holds_the_form_across_reload_and_back(base: str, page: Any) -> None:
    # the URL never held the query: a reload (or back from another page, or a shared link)
    # showed the defaults again - H100 and the model's own 131,072 tokens
    page.goto(f"{base}/capacity")
    settle(page)
    page.select_option("select[name=gpu]", "A100-80GB-SXM")
    page.fill("input[name=max_model_len]", "8k")
    page.wait_for_function("(JSON.parse(document.querySelector('#capacity').dataset.json"
                           " || '{}').max_model_len) === 8000")  # vLLM's 8k = 8,000
    settle(page)
    assert page.url.endswith("/capacity?gpu=A100-80GB-SXM&max_model_len=8k")
    for move in (page.reload, lambda: (page.goto(f"{base}/model"), settle(page),
                                       page.go_back())):
        move()
        settle(page)
        got = answer(page, "capacity")
        assert (got["gpu"], got["max_model_len"]) == ("A100-80GB-SXM", 8000)
        assert page.eval_on_selector("input[name=max_model_len]", "e => e.value") == "8k"
    # a job page: the form comes back (an emptied default included); Run is the user's
    page.goto(f"{base}/plan?gpu=&request_rate=7.5&disagg=on")
    values = page.eval_on_selector_all(
        "[name=gpu], [name=request_rate], [name=disagg], [name=slo]",
        "es => es.map(e => [e.name, e.value])")
    assert dict(values) == {"gpu": "", "request_rate": "7.5", "disagg": "on",
                            "slo": "ttft:p99:300 tpot:p99:15"}


def test_latency_api_checks_the_fit_before_pricing_ops(monkeypatch: pytest.MonkeyPatch) -> None:
    # GET /api/latency?batch=100000 priced the batch's ops (100,000 x 2,048 tokens in one
    # prefill step: ~30 GB of step tables) before the fit check: the server was OOM-killed,
    # where `kvplan latency --batch 100000` refuses at once. Here a batch of 200 stands in
    # for it (no ops may be priced before the refusal).
    from fastapi.testclient import TestClient

    import kvplan.report.ops_view as ov
    from kvplan.web.app import create_app

    priced: list[int] = []
    real = ov.ops_view
    monkeypatch.setattr(ov, "ops_view", lambda *a, **k: (priced.append(1), real(*a, **k))[1])
    client = TestClient(create_app())
    r = client.get("/api/latency", params={"model": M, "gpu": "H100", "prompt": 2048,
                                           "output": 256, "batch": 200})
    assert r.status_code == 422 and priced == []
    # 26,302 blocks of 16 tokens / 144 blocks per 2,304-token request = 182.6: 182 fit
    assert "at most 182 such requests fit" in r.json()["detail"]
    ok = client.get("/api/latency", params={"model": M, "gpu": "H100", "prompt": 2048,
                                            "output": 256, "batch": 16})
    assert ok.status_code == 200 and priced == [1] and ok.json()["step_ops"]


def test_a_job_refusal_sits_beside_its_field(base: str, page: Any) -> None:
    # a plan refused once running (an unknown cache dtype in its comma list) showed its line
    # only after the progress bar, beside no field
    page.goto(f"{base}/plan")
    page.fill("input[name=kv_cache_dtype]", "auto,fp9")
    page.click("#run")
    assert settle(page, "error") == "error"
    beside = page.inner_text(".err[data-for=kv_cache_dtype]")
    assert beside.startswith("unknown --kv-cache-dtype 'fp9'") and "\n" not in beside
    assert page.eval_on_selector(".err[data-for=kv_cache_dtype]",
                                 "e => e.closest('.field').classList.contains('bad')")


def test_plan_page_names_its_bands_and_binding_term(base: str, page: Any) -> None:
    # the levers' column was headed "binding term (ms; binding_key)", naming no term; the
    # output throughput band sat over "band basis: dense, 13 held-out points" - the SLO
    # terms' basis, not the throughput band's (dense on A100-80GB-SXM, 5 held-out points)
    page.goto(f"{base}/plan?gpu=A100-80GB-SXM&num_prompts=100")
    page.click("#run")
    settle(page)
    doc = answer(page, "plan")
    s, key = doc["summary"], doc["levers"][0]["binding_key"]
    assert key == "p99_tpot_ms"
    heads = page.eval_on_selector_all("#plan table.grid th", "es => es.map(e => e.textContent)")
    assert f"{key} (ms)" in heads and "band (10-90%, ms)" in heads
    rows = dict(page.eval_on_selector_all(
        "#plan table.kv tr", "rs => rs.map(r => [r.cells[0].textContent, r.cells[1].textContent])"))
    assert rows["output throughput band basis (calibration residuals)"] == \
        s["output_tokens_per_s_band_basis"] != s["band_basis"]
