"""Seventh hunt round (the web page, its API and the HTML report): each defect pinned by a
hand-checkable golden value."""

from __future__ import annotations

from typing import Any

import pytest
from fastapi.testclient import TestClient

from kvplan.web.app import create_app
from kvplan.web.settings import WebSettings
from tests.conftest import run_cli

M = "meta-llama/Llama-3.1-8B"


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(WebSettings(max_sim_requests=300, max_sim_seconds=60)))


# -------------------- D1: plan --disagg read the plan's lists as plain whole numbers
# `kvplan plan --max-num-batched-tokens 8K` is vLLM's 8,192 (human_readable_int); with
# --disagg the joint side re-read the same lists with int(), so the run planned the aggregated
# space and then died: "error: --max-num-batched-tokens: '8K' is not a valid value", exit 2.
PLAN_DISAGG = ("plan", M, "--gpu", "H100", "-tp", "1", "--num-prompts", "50",
               "--request-rate", "2", "--slo", "ttft:p99:2000", "--disagg", "--json")


def test_plan_disagg_reads_8K_as_vllm_does() -> None:
    suffixed = run_cli(*PLAN_DISAGG, "--max-num-batched-tokens", "8K")
    assert suffixed.code == 0, suffixed.err
    doc = suffixed.json()
    assert "--max-num-batched-tokens 8192" in doc["summary"]["vllm_serve"]  # 8 x 1024
    plain = run_cli(*PLAN_DISAGG, "--max-num-batched-tokens", "8192")
    assert plain.code == 0, plain.err
    assert _timeless(doc) == _timeless(plain.json())


def _timeless(doc: Any) -> Any:
    """The answer without its wall-clock timings (``wall_s``)."""
    if isinstance(doc, dict):
        return {k: _timeless(v) for k, v in doc.items() if k != "wall_s"}
    return [_timeless(v) for v in doc] if isinstance(doc, list) else doc


# -------------------- D2: the API refused the token counts the CLI reads with suffixes
# --max-model-len and --max-num-batched-tokens are vLLM's human_readable_int on the CLI
# (8k = 8,000, 16K = 16,384); the API typed them int, so max_model_len=8k was a 422
# ("Input should be a valid integer"), on capacity, latency, simulate and plan alike.
# Llama-3.1-8B on H100: 26,302 blocks x 16 = 420,832 tokens; / 8,000 = 52.604 requests.
@pytest.mark.parametrize(("params", "argv", "key", "value"), [
    ({"max_model_len": "8k"}, ("--max-model-len", "8k"), "max_model_len", 8000),
    ({"max_model_len": "8k"}, ("--max-model-len", "8k"), "max_concurrency", 52.604),
    ({"max_num_batched_tokens": "16K"}, ("--max-num-batched-tokens", "16K"),
     "max_num_batched_tokens", 16384),
])
def test_capacity_reads_token_suffixes_as_the_cli(client: TestClient, params: dict[str, str],
                                                  argv: tuple[str, ...], key: str,
                                                  value: float) -> None:
    r = client.get("/api/capacity", params={"model": M, "gpu": "H100", **params})
    assert r.status_code == 200, r.text
    assert r.json()[key] == pytest.approx(value, abs=5e-4)
    cli = run_cli("capacity", M, "--gpu", "H100", *argv, "--json")
    assert r.json() == cli.json()


def test_simulate_and_plan_read_token_suffixes(client: TestClient) -> None:
    r = client.get("/api/simulate", params={"model": M, "num_prompts": 20,
                                            "max_model_len": "2K", "max_num_batched_tokens": "1k"})
    assert r.status_code == 200, r.text
    assert (r.json()["max_model_len"], r.json()["max_num_batched_tokens"]) == (2048, 1000)
    plan = client.get("/api/plan", params={
        "model": M, "gpu": "H100-SXM-80GB", "tensor_parallel_size": "1", "num_prompts": 50,
        "request_rate": 2, "slo": "ttft:p99:2000", "max_model_len": "2k",
        "max_num_batched_tokens": "8K"})
    assert plan.status_code == 200, plan.text
    serve = plan.json()["summary"]["vllm_serve"]
    assert "--max-model-len 2000" in serve and "--max-num-batched-tokens 8192" in serve


def test_bad_token_text_is_one_422_line(client: TestClient) -> None:
    r = client.get("/api/capacity", params={"model": M, "max_model_len": "8.5K"})
    assert r.status_code == 422
    assert r.json() == {"detail": "--max-model-len decimals need a decimal suffix (k, m, g, t), "
                                  "got '8.5K'", "field": "max_model_len"}


# -------------------- D3: /docs (every page's "API" link) loaded Swagger UI from a CDN
# FastAPI's /docs pulled swagger-ui-bundle.js and its CSS from cdn.jsdelivr.net and a favicon
# from fastapi.tiangolo.com (/redoc: fonts.googleapis.com too): offline it was a blank page,
# though the server fetches nothing from the internet. /docs is now drawn on the server from
# /openapi.json, with nothing to fetch.
def test_docs_page_needs_no_network(client: TestClient) -> None:
    import re

    page = client.get("/docs")
    assert page.status_code == 200
    assert re.findall(r"https?://", page.text) == []
    assert "<script" not in page.text and "<link" not in page.text
    assert "<code>GET /api/capacity</code>" in page.text
    # a field with its type and default, as /openapi.json has it (then the CLI's --help
    # line, which `kvplan web` hands the app; none here)
    assert ("<tr><td><code>kv_cache_dtype</code></td><td>query</td><td>string</td><td></td>"
            "<td>&quot;auto&quot;</td><td></td></tr>") in page.text
    assert "<code>POST /api/simulate/jobs</code>" in page.text  # its body's fields listed
    assert "<td><code>num_prompts</code></td><td>body (application/json)</td>" in page.text
    assert client.get("/redoc").status_code == 404
    assert 'href="/docs"' in client.get("/model").text


# -------------------- D4: the report showed the latency of a batch that does not fit
# `kvplan report` priced its --batch with the fit check off, so a batch `kvplan latency` (and
# the page's /api/latency) refuses got a TTFT, TPOT and throughput with nothing saying so.
# Llama-3.1-8B on H100: 131,072 B/token x 9,216 tokens x 512 = 576.00 GiB of KV cache against
# 51.37 GiB (420,832 tokens); 420,832 // 9,216 = 45 such requests fit.
def _report_data(path: Any) -> dict[str, Any]:
    import json
    import re

    html = path.read_text()
    return json.loads(re.search(r'id="kvplan-data">(.*?)</script>', html, re.S).group(1))


def test_report_says_the_batch_does_not_fit_as_the_cli(tmp_path: Any) -> None:
    shape = ("--gpu", "H100", "--prompt", "8192", "--output", "1024")
    out = tmp_path / "r.html"
    done = run_cli("report", M, *shape, "--batch", "512", "-o", str(out))
    assert done.code == 0, done.err
    latency = _report_data(out)["sections"][3]
    assert latency["title"] == "Latency at batch 512: does not fit"
    assert latency["answer"]["latency"] is None
    why = latency["answer"]["does_not_fit"]
    assert "needs 576.00 GiB of KV cache per GPU" in why and "at most 45 such" in why
    cli = run_cli("latency", M, *shape, "--batch", "512", "--json")
    assert cli.code == 2 and cli.err.strip() == f"error: {why}"
    assert [r["fits"] for r in latency["answer"]["sweep"]["rows"]][5:7] == [True, False]  # 32, 64
    fits = run_cli("report", M, *shape, "--batch", "45", "-o", str(out))
    assert fits.code == 0, fits.err
    answer = _report_data(out)["sections"][3]["answer"]["latency"]
    # priced at the budget the report's Capacity section shows (H100: 8192; hunt 13)
    assert answer["ttft_s"] == run_cli("latency", M, *shape, "--batch", "45",
                                       "--max-num-batched-tokens", "8192", "--json").json()[
        "ttft_s"]
