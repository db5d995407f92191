"""Each page in headless Chromium (Debian's package): fill the form, the chart draws, the
numbers shown are the API's, errors sit beside their field; screenshots in .artifacts/web/."""

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
    with web_server("--max-sim-requests", "40000", "--max-sim-seconds", "60") as url:
        yield url


@pytest.fixture(scope="module")
def page(base: str) -> Iterator[Any]:
    with watched_page() as pg:
        yield pg


def api(base: str, path: str, **params: Any) -> Any:
    with urlopen(f"{base}{path}?{urlencode(params)}", timeout=60) as r:
        return json.loads(r.read())


def settle(page: Any, *states: str) -> str:
    wanted = ", ".join(f"body[data-state={s}]" for s in states or ("done",))
    page.wait_for_selector(wanted, state="attached", timeout=60_000)
    return str(page.evaluate("document.body.dataset.state"))


def shown(page: Any, section: str) -> dict[str, Any]:
    """data-key -> the value the page shows (kept as the API's JSON in data-value)."""
    cells = page.eval_on_selector_all(
        f"#{section} [data-key]", "els => els.map(e => [e.dataset.key, e.dataset.value])")
    return {k: json.loads(v) for k, v in cells}


def dig(answer: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        if answer is None:  # e.g. cost.usd_per_hour of a duplicate: no cost, the page shows null
            return None
        answer = answer[int(part)] if isinstance(answer, list) else answer[part]
    return answer


def assert_shown_equal(page: Any, section: str, answer: dict[str, Any]) -> None:
    values = shown(page, section)
    assert len(values) >= 5
    for key, value in values.items():
        assert value == dig(answer, key), key


def charts_drawn(page: Any, *ids: str) -> None:
    for cid in ids:
        page.wait_for_selector(f"#chart-{cid} svg", state="attached")
        marks = page.eval_on_selector(f"#chart-{cid} svg", "s => s.querySelectorAll('path').length")
        assert marks > 3, cid


def test_model_page(base: str, page: Any) -> None:
    page.goto(f"{base}/model")
    settle(page)
    page.select_option("select[name=kv_cache_dtype]", "fp8")
    page.fill("input[name=tensor_parallel_size]", "2")
    page.fill("input[name=batch]", "32")
    settle(page)
    page.wait_for_function("document.querySelector('#kv').textContent.includes('fp8_e4m3')")
    settle(page)
    want = api(base, "/api/kv", model=M, kv_cache_dtype="fp8", tensor_parallel_size=2)
    assert_shown_equal(page, "kv", want)
    assert shown(page, "kv")["bytes_per_token_per_gpu"] == 32768
    assert_shown_equal(page, "levers", api(base, "/api/levers", model=M, batch=32, context=4096))
    assert "2 (K and V) x 32 layers x 8 KV heads x 128 head_dim" in page.inner_text("#kv")
    charts_drawn(page, "levers")
    screenshot(page, "model")


def test_request_page_slider_and_long_decode(base: str, page: Any) -> None:
    page.goto(f"{base}/request")
    settle(page)
    page.fill("input[name=output]", "30000")
    page.fill("input[name=chunk]", "512")
    page.dispatch_event("input[name=output]", "change")
    page.wait_for_function("document.querySelector('#request').textContent.includes('30,000')")
    settle(page)
    want = api(base, "/api/request", model=M, prompt=2048, output=30000, chunk=512)
    assert_shown_equal(page, "request", want)
    charts_drawn(page, "request")
    assert "symlog" in page.inner_text("#chart-request") or page.locator(
        "#chart-request text", has_text="symlog").count() > 0
    ms = int(page.eval_on_selector("#chart-request", "e => e.dataset.renderMs"))
    assert ms < 5000, ms
    screenshot(page, "request")


def test_capacity_page_and_error_beside_field(base: str, page: Any) -> None:
    page.goto(f"{base}/capacity")
    settle(page)
    page.fill("input[name=max_model_len]", "16000")
    page.wait_for_function("document.querySelector('#capacity').textContent.includes('16,000')")
    settle(page)
    want = api(base, "/api/capacity", model=M, gpu="H100-SXM-80GB", max_model_len=16000)
    assert_shown_equal(page, "capacity", want)
    charts_drawn(page, "capacity")
    screenshot(page, "capacity")
    page.fill("input[name=tensor_parallel_size]", "3")
    assert settle(page, "error") == "error"
    message = page.inner_text(".err[data-for=tensor_parallel_size]")
    assert "tensor" in message.lower() and "\n" not in message.strip()
    screenshot(page, "capacity-error")


def test_capacity_page_takes_vllms_suffixes(base: str, page: Any) -> None:
    # "8K" in a number input left it empty: the answer was the model's own 131,072 tokens
    page.goto(f"{base}/capacity")
    settle(page)
    page.fill("input[name=max_model_len]", "8K")
    page.wait_for_function(
        "JSON.parse(document.querySelector('#capacity').dataset.json || '{}').max_model_len"
        " === 8192")
    settle(page)
    want = api(base, "/api/capacity", model=M, gpu="H100-SXM-80GB", max_model_len="8K")
    assert want["max_model_len"] == 8192
    assert_shown_equal(page, "capacity", want)


def test_latency_page(base: str, page: Any) -> None:
    page.goto(f"{base}/latency")
    settle(page)
    page.fill("input[name=batch]", "8")
    page.wait_for_function("document.querySelector('#latency').textContent.includes('batch 8')")
    settle(page)
    q = {"model": M, "gpu": "H100-SXM-80GB", "prompt": 2048, "output": 256, "batch": 8}
    answer = api(base, "/api/latency", **q)
    assert_shown_equal(page, "latency", answer)
    cells = shown(page, "latency")  # the error bands, as the CLI's table shows them
    assert cells["ttft_s_band"] == answer["ttft_s_band"] and "tpot_s_band" in cells
    basis = answer["band_basis"]
    assert page.inner_text("#band-basis") == f"band: calibration residuals of {basis}"
    sweep = api(base, "/api/latency/sweep", **{**q, "sweep": "batch=1,2,4,8,16,32,64,128,256,512"})
    assert_shown_equal(page, "sweep", sweep)
    charts_drawn(page, "sweep")
    screenshot(page, "latency")


def test_simulate_runs_with_progress_and_matches_api(base: str, page: Any) -> None:
    page.goto(f"{base}/simulate")
    page.fill("input[name=num_prompts]", "200")
    page.fill("input[name=request_rate]", "20")
    page.click("#run")
    settle(page, "done")
    assert "200 / 200" in page.inner_text("#progress-text")
    want = api(base, "/api/simulate", model=M, gpu="H100-SXM-80GB", num_prompts=200,
               request_rate=20, random_input_len=1024, random_output_len=128, seed=0)
    assert_shown_equal(page, "simulate", want)
    charts_drawn(page, "kv_usage", "queue", "latency_cdf")
    screenshot(page, "simulate")


def test_simulate_cancel(base: str, page: Any) -> None:
    page.goto(f"{base}/simulate")
    page.fill("input[name=num_prompts]", "40000")  # ~10M steps: still running at the click
    page.fill("input[name=random_output_len]", "2048")
    page.fill("input[name=max_concurrency]", "8")
    page.click("#run")
    settle(page, "running")
    page.click("#cancel")
    assert settle(page, "cancelled", "done") == "cancelled"
    assert "cancelled from the page" in page.inner_text("#progress-text")
    screenshot(page, "simulate-cancelled")


def test_upload_a_config(base: str, page: Any, tmp_path: Any) -> None:
    from kvplan.specs.catalog import catalog

    cfg = tmp_path / "config.json"
    cfg.write_bytes(catalog()["qwen/qwen3-8b"].path.read_bytes())
    page.goto(f"{base}/model")
    settle(page)
    page.set_input_files("input[name=config]", str(cfg))
    page.wait_for_function("document.querySelector('input[name=model]').value.startsWith('upload:')")
    page.wait_for_function("document.querySelector('#kv').textContent.includes('36 layers')")
    settle(page)
    assert shown(page, "kv")["bytes_per_token"] == 147456


def test_plan_page(base: str, page: Any) -> None:
    page.goto(f"{base}/plan")
    gpus, slo = "H100-SXM-80GB,A100-80GB-SXM", "ttft:p99:300 tpot:p99:15"
    page.fill("input[name=gpu]", gpus)
    page.fill("input[name=slo]", slo)
    page.fill("input[name=tensor_parallel_size]", "1")
    page.fill("input[name=num_prompts]", "100")
    page.click("#run")
    settle(page, "done")
    want = api(base, "/api/plan", model=M, gpu=gpus, slo=slo, tensor_parallel_size="1",
               num_prompts=100)
    assert_shown_equal(page, "plan", want)
    cells = shown(page, "plan")  # each SLO term with its error band, as the API gives it
    assert cells["summary.slo_at_band_edge.0.band"] == want["summary"]["p99_ttft_ms_band"]
    assert cells["summary.slo_at_band_edge.1.band"] == want["summary"]["p99_tpot_ms_band"]
    assert "summary.output_tokens_per_s_band" in cells and "levers.0.binding_p99_ms_band" in cells
    assert "band (10-90%)" in page.inner_text("#plan")
    assert page.inner_text("#serve").startswith("vllm serve meta-llama/Llama-3.1-8B")
    charts_drawn(page, "pareto")
    screenshot(page, "plan")


def test_simulate_overload_banner(base: str, page: Any) -> None:
    page.goto(f"{base}/simulate")
    for name, value in (("num_prompts", "300"), ("request_rate", "200"),
                        ("random_input_len", "2048"), ("random_output_len", "64")):
        page.fill(f"input[name={name}]", value)
    page.click("#run")
    settle(page, "done")
    want = api(base, "/api/simulate", model=M, gpu="H100-SXM-80GB", num_prompts=300,
               request_rate=200, random_input_len=2048, random_output_len=64, seed=0)
    assert want["overload"]["overloaded"]
    assert page.inner_text("#overload") == want["overload"]["message"]


def test_plan_page_nothing_feasible_explains_like_the_cli(base: str, page: Any) -> None:
    """An Instruct id (sized from the base config) and a TPOT no H100 reaches: the page shows
    the CLI's 'nothing feasible' sentence and the closest candidates with their misses."""
    instruct, slo = "meta-llama/Llama-3.1-8B-Instruct", "ttft:p99:2000 tpot:p99:5"
    page.goto(f"{base}/plan")
    page.fill("input[name=model]", instruct)
    page.fill("input[name=gpu]", "H100-SXM-80GB")
    page.fill("input[name=slo]", slo)
    page.fill("input[name=tensor_parallel_size]", "1")
    page.fill("input[name=num_prompts]", "100")
    page.click("#run")
    settle(page, "done")
    want = api(base, "/api/plan", model=instruct, gpu="H100-SXM-80GB", slo=slo,
               tensor_parallel_size="1", num_prompts=100)
    s = want["summary"]
    assert s["status"] == "infeasible"
    assert page.inner_text("#infeasible") == f"nothing feasible: {s['why']}"
    assert_shown_equal(page, "plan", want)
    first = s["closest"][0]
    assert f"misses {first['misses']} by {100 * abs(first['margin']):.0f} %" in page.inner_text(
        "#plan")
    charts_drawn(page, "pareto")
    screenshot(page, "plan-infeasible")


def test_the_page_behind_a_token(page: Any) -> None:
    """Beyond loopback the page opens from the URL with ?token= that `kvplan web` printed; its
    own API calls (no token in them) then pass on the cookie that URL set. (The module's
    browser: a second Playwright cannot start beside it.)"""
    token = "browser-token-" * 2
    pg = page
    with web_server(token=token) as base:
        assert pg.goto(f"{base}/model").status == 401
        pg.goto(f"{base}/model?token={token}")
        assert settle(pg, "done", "error") == "done"
        assert shown(pg, "kv")["bytes_per_token"] == 131072
        pg.goto(f"{base}/capacity")  # the cookie alone, from here on
        assert settle(pg, "done", "error") == "done"
