"""Hunt 19 (web19): the page and the report say what the CLI says for the same question.

The browser tests share one server and one page (Debian's chromium, no downloads)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any
from urllib.parse import urlencode

import pytest

from tests.webtools import settle, watched_page, web_server


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    with web_server("--max-sim-requests", "200", "--max-sim-seconds", "60") as url:
        yield url


@pytest.fixture(scope="module")
def page(base: str) -> Iterator[Any]:
    with watched_page() as pg:
        yield pg


def _settle(page: Any, *states: str) -> None:
    settle(page, *states, timeout_ms=120_000)


def _run_plan(base: str, page: Any, **form: Any) -> dict[str, Any]:
    page.goto(f"{base}/plan?{urlencode(form)}")
    page.click("#run")
    _settle(page, "done")
    return dict(json.loads(page.get_attribute("#plan", "data-json")))


def _cell(page: Any, key: str) -> str:
    return str(page.inner_text(f"td[data-key='{key}']"))


def test_the_plan_page_writes_no_figure_in_exponent_notation(base: str, page: Any) -> None:
    """Figures of 10,000 or more went through JS's toPrecision(4): the output rate's band read
    '8041 - 1.477e+4' (the CLI: 'band (10-90%) 8455 - 14410 tok/s', whole tok/s) and an
    e2el:p99:20000 limit '2.000e+4' ms (the CLI: '<= 20 s'). Now whole figures: the band as
    the CLI's {:.0f}, the ms terms with thousands separators ('20,000')."""
    d = _run_plan(base, page, gpu="H100-SXM-80GB", tensor_parallel_size="1", num_prompts=50,
                  slo="ttft:p99:300 e2el:p99:20000")
    s = d["summary"]
    lo, hi = s["output_tokens_per_s_band"]
    assert hi >= 1e4  # the case: a band edge of five figures
    assert _cell(page, "summary.output_tokens_per_s_band") == f"{lo:.0f} - {hi:.0f}"
    terms = [t["key"] for t in s["slo_at_band_edge"]]
    e2el = terms.index("p99_e2el_ms")
    assert _cell(page, f"summary.slo_at_band_edge.{e2el}.limit") == "20,000"
    text = page.inner_text("#plan")
    assert "e+" not in text


@pytest.mark.parametrize("name", ["simulate", "plan"])
def test_the_dataset_list_offers_each_dataset_once(name: str) -> None:
    """The --dataset list was ["random"] + dataset_names(), which already starts with random
    (specs/requests/workload.DATASETS): 'random' was offered twice, 10 options for 9 names."""
    from fastapi.testclient import TestClient

    from kvplan.specs.requests.workload import dataset_names
    from kvplan.web.app import create_app
    from kvplan.web.settings import WebSettings

    html = TestClient(create_app(WebSettings())).get(f"/{name}").text
    select = html.split('<select name="dataset"', 1)[1].split("</select>", 1)[0]
    offered = [o.split('"', 1)[0] for o in select.split('<option value="')[1:]]
    assert offered == list(dataset_names())
    assert 'value="random" selected' in select


def test_an_emptied_sweep_field_asks_no_sweep(base: str, page: Any) -> None:
    """`kvplan latency --data-parallel-size 2` (no --sweep) answers; on the page an emptied
    --sweep field was not sent, the API swept its default batch=1,...,512 and refused it
    ('--sweep prices TP deployments only; drop --data-parallel-size ...') beside the empty
    field, the page left in 'error'. Now an empty --sweep asks no sweep, as the CLI, and
    clears the sweep shown before."""
    page.goto(f"{base}/latency?prompt=512&output=16&batch=2")
    _settle(page, "done")
    assert page.inner_text("#sweep") != ""
    page.fill("input[name=sweep]", "")
    page.wait_for_function("document.querySelector('#sweep').innerHTML === ''", timeout=60_000)
    _settle(page, "done")
    assert page.eval_on_selector_all("#chart-sweep svg", "es => es.length") == 0
    q = {"model": "Qwen/Qwen3-30B-A3B", "data_parallel_size": 2, "enable_expert_parallel": "on",
         "prompt": 512, "output": 16, "batch": 2, "sweep": ""}
    page.goto(f"{base}/latency?{urlencode(q)}")
    _settle(page, "done", "error")
    assert page.get_attribute("body", "data-state") == "done"
    assert page.inner_text(".err[data-for=sweep]") == ""
    assert page.inner_text("#sweep") == ""
    assert page.inner_text("td[data-key='parallel.data_parallel_size']") == "2"


def test_the_plan_reports_slo_rows_write_each_term_in_its_unit() -> None:
    """`kvplan report --plan` wrote the SLO rows with Python's {:,.4g} and no unit: an
    e2el:p99:20000 limit read 'p99_e2el_ms (limit 2e+04)', a 12,345.6 ms p99 '1.235e+04'.
    `kvplan plan` prints the same term 'p99 E2EL 12.35 s <= 20 s' (plan_band_text.ms_text:
    12,345.6 ms / 1000 = 12.35 s; the limit 20,000 ms / 1000 = 20 s); a goodput share reads
    as the CLI's percent (0.97: 97.0 %, limit 0.9: 90 %)."""
    from kvplan.report.plan.plan_report import plan_sections

    terms = [{"key": "p99_e2el_ms", "limit": 20000.0, "value": 12345.6,
              "band": [9876.5, 15432.1], "met_at_edge": True, "band_basis": "dense"},
             {"key": "p99_ttft_ms", "limit": 300.0, "value": 129.74,
              "band": [81.62, 218.3], "met_at_edge": True, "band_basis": "dense"},
             {"key": "goodput_share", "limit": 0.9, "value": 0.97,
              "band": [0.95, 0.99], "met_at_edge": True, "band_basis": "dense"}]
    plan = {"inputs": {"model": "m", "workload": "random"},
            "summary": {"status": "feasible", "best": "c1", "replicas": 1, "gpus": 1,
                        "slo_at_band_edge": terms}}
    rows = dict(next(s for s in plan_sections(plan) if s.id == "plan").rows)
    assert rows["p99_e2el_ms (limit 20 s)"].startswith(
        "12.35 s, band (10-90%) 9.88 s - 15.43 s: still met")
    assert rows["p99_ttft_ms (limit 300 ms)"].startswith(
        "129.7 ms, band (10-90%) 81.6 ms - 218.3 ms: still met")
    assert rows["goodput_share (limit 90 %)"].startswith(
        "97.0 %, band (10-90%) 95.0 % - 99.0 %: still met")


def test_the_model_pages_layer_groups_read_as_the_cli(base: str, page: Any) -> None:
    """`kvplan kv deepseek-ai/DeepSeek-V3 -tp 8` gives the latent's bytes per layer exactly,
    576 x 2 bytes = '1,152 B', and '-' for no state; the page wrote '1.12 KiB' (1.125 KiB
    rounded, 1,146.88 B: not the byte count) and '0 B'."""
    page.goto(f"{base}/model?model=deepseek-ai/DeepSeek-V3&tensor_parallel_size=8")
    _settle(page, "done")
    assert _cell(page, "groups.0.bytes_per_token_per_layer") == "1,152 B"
    assert _cell(page, "groups.0.bytes_per_token") == "68.62 KiB"  # 61 x 1,152 B = 70,272 B
    assert _cell(page, "groups.0.state_bytes_per_request") == "-"


@pytest.mark.parametrize(("sweep", "words"), [
    ("batch=0,1", "--batch must be a positive whole number, got 0"),
    ("tensor-parallel-size=1,3", "--tensor-parallel-size 3 must divide num_attention_heads 32")])
def test_a_refused_swept_value_is_put_beside_the_sweep(sweep: str, words: str) -> None:
    """A value typed in --sweep that vLLM refuses was answered as if the --batch (or
    --tensor-parallel-size) field were wrong: field 'batch', so the page put '--batch must be
    a positive whole number, got 0' beside a --batch field holding 16. Now the refusal names
    the sweep and sits beside it; an error of a field the sweep does not vary keeps its own."""
    from fastapi.testclient import TestClient

    from kvplan.web.app import create_app
    from kvplan.web.settings import WebSettings

    client = TestClient(create_app(WebSettings()))
    q = {"model": "meta-llama/Llama-3.1-8B", "gpu": "H100", "prompt": 1000, "output": 100,
         "batch": 16, "sweep": sweep}
    for path in ("/api/latency/sweep", "/api/latency/chart"):
        r = client.get(path, params=q)
        assert r.status_code == 422
        assert r.json()["field"] == "sweep"
        assert r.json()["detail"].startswith(f"--sweep {sweep}: {words}")
    r = client.get("/api/latency/sweep", params={**q, "prompt": 200_000, "sweep": "batch=1,2"})
    assert r.status_code == 422 and r.json()["field"] == "prompt"


def test_the_capacity_page_gives_the_later_vllm_token_count_as_the_cli(base: str,
                                                                      page: Any) -> None:
    """`kvplan capacity Qwen/Qwen3-Next-80B-A3B-Thinking -tp 4` prints 'GPU KV cache size:
    610,096 tokens' and '(later vLLM, v0.24+, prints 2,433,032 tokens: max concurrency x
    max_model_len)' (9.2813x x 262,144 = 2,433,032): what a user of a newer vLLM reads in
    its log. The page showed 610,096 alone, though its answer holds both."""
    page.goto(f"{base}/capacity?model=Qwen/Qwen3-Next-80B-A3B-Thinking&tensor_parallel_size=4")
    _settle(page, "done")
    d = json.loads(page.get_attribute("#capacity", "data-json"))
    assert d["kv_cache_tokens_newer_vllm"] == int(d["max_concurrency"] * d["max_model_len"])
    assert d["kv_cache_tokens_newer_vllm"] != d["kv_cache_tokens"]
    assert page.inner_text("#kv-tokens-newer") == (
        f"later vLLM, v0.24+, prints GPU KV cache size: {d['kv_cache_tokens_newer_vllm']:,} "
        "tokens (max concurrency x max_model_len)")
    page.goto(f"{base}/capacity?model=meta-llama/Llama-3.1-8B")  # one group: the same count
    _settle(page, "done")
    assert page.query_selector("#kv-tokens-newer") is None


def test_the_request_page_offers_no_output_length_it_refuses() -> None:
    """The Request page's --output slider and field went down to 0, a value the same page
    refuses ('--output must be at least 1 token (vLLM refuses max_tokens below 1), got 0'):
    dragging the slider to its left end gave an error. Both now start at 1."""
    from fastapi.testclient import TestClient

    from kvplan.web.app import create_app
    from kvplan.web.settings import WebSettings

    client = TestClient(create_app(WebSettings()))
    html = client.get("/request").text
    label = html.split("<code>--output</code>", 1)[1].split("</label>", 1)[0]
    assert label.count('min="1"') == 2 and 'min="0"' not in label
    r = client.get("/api/request", params={"model": "meta-llama/Llama-3.1-8B", "prompt": 10,
                                           "output": 0})
    assert r.status_code == 422 and r.json()["field"] == "output"


def test_the_plan_report_draws_no_empty_cost_chart() -> None:
    """An infeasible saved plan whose candidates were all pruned before pricing (no cost):
    `kvplan report --plan` drew 'fleet cost per candidate' as an empty frame (Vega: 'Infinite
    extent for field usd_per_hour'). Now the chart is drawn only when a candidate has a cost;
    each row still says '- $/h'."""
    from kvplan.report.plan.plan_report import plan_sections

    cand = {"id": "c0000", "gpu": "H100-SXM-80GB", "tensor_parallel_size": 1,
            "kv_cache_dtype": "auto", "stage": "pruned_bound", "cost": None,
            "reason": "at zero load p99_ttft_ms is already 68.4 ms, over the SLO"}
    plan = {"inputs": {"model": "m", "workload": "random"},
            "summary": {"status": "infeasible", "why": "nothing in the space meets the SLO"},
            "candidates": [cand]}
    section = next(s for s in plan_sections(plan) if s.id == "candidates")
    assert section.charts == ()
    assert section.rows[0][1].startswith("pruned_bound: - $/h")
    priced = {**cand, "id": "c0001", "stage": "verified", "cost": {"usd_per_hour": 3.99}}
    section = next(s for s in plan_sections({**plan, "candidates": [cand, priced]})
                   if s.id == "candidates")
    assert len(section.charts) == 1


def test_an_unknown_dataset_is_refused_without_a_flag_that_is_not_there(tmp_path: Any) -> None:
    """`kvplan report M --dataset nope` and the page's API answered 'unknown dataset 'nope':
    choose one of random, ..., or pass --trace FILE', though neither takes --trace (kvplan
    report: 'No such option'). They now list the datasets alone; `kvplan simulate`, which
    takes --trace, still names it."""
    from fastapi.testclient import TestClient

    from kvplan.web.app import create_app
    from kvplan.web.settings import WebSettings
    from tests.conftest import run_cli

    r = run_cli("report", "meta-llama/Llama-3.1-8B", "--dataset", "nope", "-o",
                str(tmp_path / "r.html"))
    assert r.code == 2 and "unknown dataset 'nope'" in r.err and "--trace" not in r.err
    client = TestClient(create_app(WebSettings()))
    body = {"model": "meta-llama/Llama-3.1-8B", "dataset": "nope"}
    for path, extra in (("/api/simulate/jobs", {}), ("/api/plan/jobs", {"slo": "ttft:p99:300"})):
        got = client.post(path, json={**body, **extra}, headers={"x-kvplan-client": path})
        assert got.status_code == 422, got.text
        assert got.json()["field"] == "dataset" and "--trace" not in got.json()["detail"]
    sim = run_cli("simulate", "meta-llama/Llama-3.1-8B", "--dataset", "nope")
    assert sim.code == 2 and sim.err.rstrip().endswith("or pass --trace FILE")


def test_the_plan_page_offers_the_goodput_its_refusal_names(base: str, page: Any) -> None:
    """An emptied --slo was refused with 'give an SLO: --slo ttft:p99:2000 ... and/or
    --goodput ttft:MS ...', but the Plan page had no --goodput field (the API and `kvplan
    plan` take it): a goodput-only plan could not be asked. Now the field is there and the
    page plans on it."""
    d = _run_plan(base, page, gpu="H100-SXM-80GB", tensor_parallel_size="1", num_prompts=30,
                  slo="", goodput="ttft:300 tpot:15")
    assert d["inputs"]["slo"]["goodput_ms"] == {"ttft": 300.0, "tpot": 15.0}
    assert d["summary"]["status"] in ("feasible", "infeasible")


def test_an_upload_says_what_it_read_after_the_page_answers(base: str, page: Any) -> None:
    """After a config.json upload the page wrote what it read ('NAME: GQA, 16 layers') and
    then asked for the answer, whose refresh cleared every field message: the line was gone
    at once, so an upload said nothing of the model it read. Now it stays until the model
    field is changed by hand."""
    from kvplan.specs.catalog import catalog

    config = catalog()["meta-llama/llama-3.2-1b"].path
    page.goto(f"{base}/request")
    _settle(page, "done")
    page.set_input_files("input[name=config]", str(config))
    page.wait_for_function("document.querySelector('input[name=model]').value"
                           ".startsWith('upload:')")
    page.wait_for_function("document.querySelector('#request').innerText"
                           ".startsWith('meta-llama--Llama-3.2-1B')")
    _settle(page, "done")
    assert page.inner_text(".err[data-for=config]") == "meta-llama--Llama-3.2-1B: GQA, 16 layers"
    page.fill("input[name=model]", "meta-llama/Llama-3.1-8B")
    page.wait_for_function("document.querySelector('#request').innerText"
                           ".startsWith('meta-llama/Llama-3.1-8B')")
    assert page.inner_text(".err[data-for=config]") == ""
