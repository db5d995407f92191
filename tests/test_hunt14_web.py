"""hunt14-web: the web API answers as the CLI does (same inputs, same numbers), bad input is
one 422 line, and the pages keep the user's inputs."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from kvplan.cli.app import _register, app
from kvplan.web.app import create_app
from kvplan.web.settings import WebSettings

MOE = "Qwen/Qwen3-30B-A3B"


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(WebSettings(max_sim_requests=300, max_sim_seconds=60)))


def cli_json(*args: str, code: int = 0) -> Any:
    _register()
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == code, result.output
    return json.loads(result.stdout)


def test_capacity_takes_dp_and_ep_as_the_cli(client: TestClient) -> None:
    # the page had no --data-parallel-size / --enable-expert-parallel: the API refused them (422)
    q = {"model": MOE, "gpu": "H100", "data_parallel_size": 2, "enable_expert_parallel": "on"}
    r = client.get("/api/capacity", params=q)
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc == cli_json("capacity", MOE, "--gpu", "H100", "-dp", "2",
                           "--enable-expert-parallel")
    par = doc["parallel"]
    assert par["local_experts_per_gpu"] == 64  # 128 routed experts over EP = dp x tp = 2
    # two DP ranks, each its own KV cache: the fleet holds twice one rank's tokens
    assert par["kv_cache_tokens_fleet"] == 2 * doc["kv_cache_tokens"]


def test_latency_takes_dp_ep_and_the_exchange_flags_as_the_cli(client: TestClient) -> None:
    q = {"model": MOE, "gpu": "H100", "prompt": 1024, "output": 128, "batch": 8,
         "data_parallel_size": 2, "enable_expert_parallel": "on",
         "all2all_backend": "deepep_low_latency", "expert_imbalance": 1.5}
    r = client.get("/api/latency", params=q)
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc == cli_json("latency", MOE, "--gpu", "H100", "--prompt", "1024", "--output",
                           "128", "--batch", "8", "-dp", "2", "--enable-expert-parallel",
                           "--all2all-backend", "deepep_low_latency",
                           "--expert-imbalance", "1.5")
    assert doc["parallel"]["batch_per_rank"] == 4  # batch 8 over 2 DP ranks
    assert doc["parallel"]["expert_imbalance"] == 1.5


def test_latency_sweep_refuses_dp_as_the_cli_does(client: TestClient) -> None:
    q = {"model": MOE, "gpu": "H100", "prompt": 1024, "output": 128,
         "data_parallel_size": 2, "sweep": "batch=1,2"}
    r = client.get("/api/latency/sweep", params=q)
    assert r.status_code == 422, r.text
    assert r.json()["field"] == "sweep"
    assert r.json()["detail"].startswith("--sweep prices TP deployments only")


def test_api_docs_list_the_model_first_for_latency_and_simulate(client: TestClient) -> None:
    # with the MoE flags mixed in, /docs listed all2all_backend and expert_imbalance before
    # the model (pydantic takes a mixin's fields in reverse MRO order)
    paths = client.get("/openapi.json").json()["paths"]
    for path in ("/api/latency", "/api/simulate"):
        assert paths[path]["get"]["parameters"][0]["name"] == "model", path

def test_simulate_takes_dp_and_ep_as_the_cli(client: TestClient) -> None:
    q = {"model": MOE, "gpu": "H100", "num_prompts": 40, "request_rate": 10,
         "data_parallel_size": 2, "enable_expert_parallel": "on"}
    r = client.get("/api/simulate", params=q)
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc == cli_json("simulate", MOE, "--gpu", "H100", "--num-prompts", "40",
                           "--request-rate", "10", "-dp", "2", "--enable-expert-parallel")
    assert doc["completed"] == 40 and doc["data_parallel_size"] == 2
    assert len(doc["dp_ranks"]) == 2


PLAN = {"model": "meta-llama/Llama-3.1-8B", "gpu": "H100", "tensor_parallel_size": "1",
        "dataset": "azure-code", "num_prompts": 100, "max_num_batched_tokens": "default",
        "slo": "ttft:p99:2000"}
PLAN_ARGV = ["plan", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "-tp", "1", "--dataset",
             "azure-code", "--num-prompts", "100", "--max-num-batched-tokens", "default",
             "--slo", "ttft:p99:2000", "--workers", "1"]


def _no_wall(doc: dict[str, Any]) -> dict[str, Any]:
    doc["search_report"].pop("wall_s")
    return doc


def test_plan_replays_a_timed_traces_arrivals_unless_a_rate_is_given(client: TestClient) -> None:
    # the API (and the page) defaulted to --request-rate 5, which drew Poisson arrivals at
    # 5 req/s over azure-code instead of replaying its own (`kvplan plan --dataset azure-code`)
    r = client.get("/api/plan", params=PLAN)
    assert r.status_code == 200, r.text
    mine = _no_wall(r.json())
    assert mine == _no_wall(cli_json(*PLAN_ARGV))
    # the trace's own rate: its first 100 requests, 99 gaps over their span (about 0.515 req/s)
    assert mine["inputs"]["target_rate_rps"] == pytest.approx(0.5152, abs=1e-4)
    # a rate the user sets still wins: Poisson arrivals drawn at 5 req/s (realised 4.98)
    given = _no_wall(client.get("/api/plan", params={**PLAN, "request_rate": 5}).json())
    assert given == _no_wall(cli_json(*PLAN_ARGV, "--request-rate", "5"))
    assert given["inputs"]["target_rate_rps"] == pytest.approx(5, rel=0.01)


L8B = "meta-llama/Llama-3.1-8B"
SIM = {"model": L8B, "gpu": "H100", "num_prompts": 20, "request_rate": 5, "disagg": "1P1D"}


@pytest.mark.parametrize("role", ["prefill", "decode"])
def test_simulate_refuses_a_pool_tp_of_0_as_the_cli(client: TestClient, role: str) -> None:
    # `--decode-tp 0` was read as "not given" (0 or -tp): a 1P1D fleet at TP 1 answered 200,
    # where `kvplan simulate --disagg 1P1D --decode-tp 0` says the line below and exits 2
    r = client.get("/api/simulate", params={**SIM, f"{role}_tp": 0})
    assert r.status_code == 422, r.text
    assert r.json() == {"detail": f"--{role}-tp must be a whole number in [1, 4,096], got 0",
                        "field": f"{role}_tp"}



@pytest.mark.parametrize(("body", "want"), [
    (b'{"model": "x",', "request body is not valid JSON (Expecting property name enclosed in "
                        "double quotes, at character 14)"),
    (b"[]", "request body is not a JSON object"),
    (b"", "request body is empty"),
])
def test_a_job_body_that_is_no_json_object_is_one_clear_line(client: TestClient, body: bytes,
                                                             want: str) -> None:
    # was '--14: JSON decode error' with field '14' (the error's character position read as
    # a form field), or 'request: Input should be a valid dictionary or object ...'
    r = client.post("/api/plan/jobs", content=body, headers={"content-type": "application/json"})
    assert r.status_code == 422, r.text
    assert r.json() == {"detail": f"{want}: send one JSON object of the form's fields "
                                  '({"model": ..., ...})', "field": None}


def test_plan_without_an_slo_is_refused_as_the_cli(client: TestClient) -> None:
    # the API planned against 'ttft:p99:2000 tpot:p99:100' when no SLO came: an emptied SLO
    # field on the Plan page (not sent) was judged by an SLO nobody saw; the CLI refuses
    q = {"model": L8B, "gpu": "H100", "tensor_parallel_size": "1", "num_prompts": 20}
    r = client.get("/api/plan", params=q)
    assert r.status_code == 422, r.text
    assert r.json() == {"detail": "give an SLO: --slo ttft:p99:2000 ... and/or --goodput "
                                  "ttft:MS ...", "field": "slo"}
    argv = ["plan", L8B, "--gpu", "H100", "-tp", "1", "--num-prompts", "20",
            "--max-num-batched-tokens", "default", "--workers", "1", "--goodput", "ttft:2000"]
    # --goodput alone is an SLO, on the page as on the CLI (the line above names it)
    mine = client.get("/api/plan", params={**q, "max_num_batched_tokens": "default",
                                           "goodput": "ttft:2000"})
    assert mine.status_code == 200, mine.text
    assert _no_wall(mine.json()) == _no_wall(cli_json(*argv))


# ---------------------------------------------------------------- the pages, in one browser


def _shown(page: Any, section: str) -> dict[str, Any]:
    cells = page.eval_on_selector_all(
        f"#{section} [data-key]", "els => els.map(e => [e.dataset.key, e.dataset.value])")
    return {k: json.loads(v) for k, v in cells}


def _settle(page: Any, *states: str) -> str:
    wanted = ", ".join(f"body[data-state={s}]" for s in states)
    page.wait_for_selector(wanted, state="attached", timeout=60_000)
    return str(page.evaluate("document.body.dataset.state"))


def test_pages_ask_and_show_dp_ep_and_plan_replays_a_trace() -> None:
    from urllib.parse import urlencode

    from tests.webtools import watched_page, web_server

    dp = {"model": MOE, "data_parallel_size": 2, "enable_expert_parallel": "on"}
    with web_server() as base, watched_page() as page:
        # a link's GPU alias and a cache dtype the list lacks were dropped for the defaults
        # (H100, auto): the page answered another question than the URL's (H200: vLLM runs
        # no e4m3 cache on an A100, hunt 19)
        page.goto(f"{base}/capacity?gpu=H200&kv_cache_dtype=fp8_e4m3")
        _settle(page, "done")
        assert page.input_value("select[name=gpu]") == "H200"
        want = cli_json("capacity", L8B, "--gpu", "H200", "--kv-cache-dtype", "fp8_e4m3")
        assert _shown(page, "capacity")["kv_cache_tokens"] == want["kv_cache_tokens"]
        assert page.url.endswith("/capacity?gpu=H200&kv_cache_dtype=fp8_e4m3")
        page.goto(f"{base}/capacity?{urlencode(dp)}")  # the fields exist: the URL fills them
        _settle(page, "done")
        cells = _shown(page, "capacity")
        # per DP rank 385,280 tokens (H100, Qwen3-30B-A3B); the fleet of 2 ranks twice that
        assert cells["parallel.kv_cache_tokens_fleet"] == 2 * cells["kv_cache_tokens"] == 770560
        assert cells["parallel.local_experts_per_gpu"] == 64
        # the sweep was asked without the form's batch (batch 1): TPOT 7.16 ms at prompt 512
        sweep = {"model": L8B, "batch": 16, "sweep": "prompt=512,4096"}
        page.goto(f"{base}/latency?{urlencode(sweep)}")
        _settle(page, "done")
        cli = cli_json("latency", L8B, "--gpu", "H100", "--prompt", "2048", "--output", "256",
                       "--batch", "16", "--sweep", "prompt=512,4096")
        assert _shown(page, "sweep")["rows.0.tpot_s"] == cli["rows"][0]["tpot_s"]
        page.goto(f"{base}/latency?{urlencode({**dp, 'batch': 8})}")
        assert _settle(page, "done", "error") == "error"  # the sweep: TP only, as the CLI
        assert _shown(page, "latency")["parallel.batch_per_rank"] == 4
        assert page.inner_text(".err[data-for=sweep]").startswith("--sweep prices TP")
        assert page.input_value("input[name=data_parallel_size]") == "2"  # kept
        page.goto(f"{base}/plan")
        assert page.input_value("input[name=request_rate]") == ""  # no 5 req/s imposed
        for name, value in (("gpu", "H100"), ("tensor_parallel_size", "1"),
                            ("slo", "ttft:p99:2000"), ("num_prompts", "100")):
            page.fill(f"input[name={name}]", value)
        page.select_option("select[name=dataset]", "azure-code")
        page.fill("input[name=num_prompts]", "1")
        page.reload()  # before Run: the inputs were lost (the URL was written only at Run)
        assert page.input_value("input[name=slo]") == "ttft:p99:2000"
        assert page.input_value("select[name=dataset]") == "azure-code"
        page.click("#run")
        _settle(page, "error")  # was '... in the workload (after 0 / 0 requests)', no field
        line = ("plan needs at least 2 requests in the workload: give --num-prompts 2 or more "
                "(or a trace with more rows)")
        assert page.inner_text("#progress-text") == line
        assert page.inner_text(".err[data-for=num_prompts]") == line
        page.fill("input[name=num_prompts]", "100")
        page.click("#run")
        _settle(page, "done")
        doc = json.loads(page.eval_on_selector("#plan", "e => e.dataset.json"))
        assert doc["inputs"]["target_rate_rps"] == pytest.approx(0.5152, abs=1e-4)


def test_simulate_pages_rate_hint_says_what_empty_does(client: TestClient) -> None:
    # the hint said 'empty = all at once'; an azure-code run with no rate replays the trace
    # (request_rate 'trace', 50 requests over 36.8 s), as the CLI does
    html = client.get("/simulate").text
    assert "empty: a timed trace&#39;s own arrivals, else all at once" in html
    doc = client.get("/api/simulate", params={"model": L8B, "dataset": "azure-code",
                                              "num_prompts": 50}).json()
    assert doc["request_rate"] == "trace" and doc["duration"] > 30


def test_plan_takes_async_scheduling_as_the_cli(client: TestClient) -> None:
    # `kvplan plan --async-scheduling` had no field on the page: the API refused it (422)
    q = {"model": L8B, "gpu": "H100", "tensor_parallel_size": "1", "num_prompts": 60,
         "request_rate": 5, "max_num_batched_tokens": "default", "slo": "ttft:p99:2000",
         "async_scheduling": "on"}
    r = client.get("/api/plan", params=q)
    assert r.status_code == 200, r.text
    mine = _no_wall(r.json())
    argv = ["plan", L8B, "--gpu", "H100", "-tp", "1", "--num-prompts", "60", "--request-rate",
            "5", "--max-num-batched-tokens", "default", "--slo", "ttft:p99:2000", "--workers",
            "1", "--async-scheduling"]
    assert mine == _no_wall(cli_json(*argv))
    assert "--async-scheduling" in mine["summary"]["vllm_serve"]


def test_upload_without_a_file_part_says_what_to_send(client: TestClient) -> None:
    # was '--file: Field required' (there is no --file flag), field 'file' (no such field)
    r = client.post("/api/upload", files={"wrong": ("config.json", b"{}")})
    assert r.status_code == 422, r.text
    assert r.json() == {"detail": "upload a config.json as the multipart form field 'file' "
                                  "(curl -F file=@config.json)", "field": "config"}


def test_an_unknown_plan_job_is_named_a_plan_job(client: TestClient) -> None:
    # was "no simulation 'nope' (finished ones are kept a while)" on the plan endpoints too
    r = client.get("/api/plan/jobs/nope")
    assert r.status_code == 422, r.text
    assert r.json()["detail"] == ("no plan job 'nope': start one with POST /api/plan/jobs "
                                  "(the last 32 finished are kept)")
