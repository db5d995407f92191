"""Hunt 15 (web15): the web API and page against the CLI answering the same question.

Each answer's keys are the CLI's ``--json``; the lines the CLI prints on stderr beside it
(``note: ...``, ``warning: ...``) were dropped by the page: they now come as the key
``stderr``, present only when the CLI prints a line, and equal to the CLI's lines."""

from __future__ import annotations

import time
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


def both(client: TestClient, url: str, params: dict[str, Any], *argv: str
         ) -> tuple[dict[str, Any], dict[str, Any], list[str]]:
    """(the page's answer, the CLI's --json, the CLI's stderr lines)."""
    r = client.get(url, params=params)
    assert r.status_code == 200, r.text
    got = run_cli(*argv, "--json")
    assert got.code == 0, got.err
    return r.json(), got.json(), got.err.strip().splitlines()


def test_capacity_says_a_kv_cache_memory_that_does_not_fit_beside_the_weights(
        client: TestClient) -> None:
    # Llama-3.1-8B on H100: CUDA total 79.18 GiB - weights 14.99 GiB - non-torch 133 MiB
    # = 64.06 GiB of room; 70 GiB does not fit, and vLLM runs out of memory starting
    page, cli, err = both(client, "/api/capacity", {"model": M, "kv_cache_memory": "70GiB"},
                          "capacity", M, "--kv-cache-memory", "70GiB")
    assert page.pop("stderr") == err
    assert len(err) == 1 and err[0].startswith("warning: --kv-cache-memory 70.00 GiB does not "
                                               "fit on H100-SXM-80GB")
    assert err[0].endswith("at most 64.06 GiB of KV cache fits beside them")
    assert page == cli


def test_capacity_says_expert_parallel_does_nothing_on_a_dense_model(
        client: TestClient) -> None:
    page, cli, err = both(client, "/api/capacity", {"model": M, "data_parallel_size": 2,
                                                    "enable_expert_parallel": True},
                          "capacity", M, "--data-parallel-size", "2", "--enable-expert-parallel")
    assert page.pop("stderr") == err == [
        "warning: --enable-expert-parallel has no effect on meta-llama/Llama-3.1-8B, a dense "
        "model (vLLM applies it to MoE layers only)"]
    assert page == cli


def test_a_capacity_that_fits_has_no_stderr_key(client: TestClient) -> None:
    page, cli, err = both(client, "/api/capacity", {"model": M, "kv_cache_memory": "24GiB"},
                          "capacity", M, "--kv-cache-memory", "24GiB")
    assert err == [] and "stderr" not in page
    assert page == cli


def test_latency_carries_the_clis_warning_and_the_variants_note(client: TestClient) -> None:
    q = {"prompt": 1024, "output": 16, "batch": 4}
    argv = ["--gpu", "H100", "--prompt", "1024", "--output", "16", "--batch", "4"]
    page, cli, err = both(client, "/api/latency", {"model": M, **q,
                                                   "enable_expert_parallel": True},
                          "latency", M, *argv, "--enable-expert-parallel")
    assert page.pop("stderr") == err
    assert err[0].startswith("warning: --enable-expert-parallel has no effect")
    assert page == cli
    variant = "Qwen/Qwen3-8B-Instruct"  # not in the catalog: sized from Qwen/Qwen3-8B, noted
    page, cli, err = both(client, "/api/latency", {"model": variant, **q},
                          "latency", variant, *argv)
    assert page.pop("stderr") == err == [
        "note: using the config of Qwen/Qwen3-8B for Qwen/Qwen3-8B-Instruct (Instruct/chat "
        "variants share the base model's architecture)"]
    assert page == cli


def test_kv_notes_the_block_vllm_forces_for_mla_when_none_is_given(client: TestClient) -> None:
    v3 = "deepseek-ai/DeepSeek-V3"
    page, cli, err = both(client, "/api/kv", {"model": v3}, "kv", v3)
    assert page.pop("stderr") == err
    assert err[0].startswith("note: blocks of 16 tokens (vLLM's default); for MLA vLLM 0.11 "
                             "forces 64 on Hopper")
    assert page == cli
    page, cli, err = both(client, "/api/kv", {"model": v3, "block_size": 64},
                          "kv", v3, "--block-size", "64")
    assert err == [] and "stderr" not in page and page == cli


GOODPUT_NOTE = ("note: --goodput ttft given twice (500 ms, then 300 ms): the last, ttft:300, "
                "counts, as vllm bench serve reads it")


def test_simulate_carries_the_repeated_goodput_metric_note(client: TestClient) -> None:
    page, cli, err = both(
        client, "/api/simulate",
        {"model": M, "num_prompts": 20, "random_input_len": 256, "random_output_len": 16,
         "goodput": "ttft:500 ttft:300"},
        "simulate", M, "--gpu", "H100", "--num-prompts", "20", "--random-input-len", "256",
        "--random-output-len", "16", "--goodput", "ttft:500", "ttft:300")
    assert page.pop("stderr") == err == [GOODPUT_NOTE]
    assert page == cli


def test_a_simulate_job_carries_the_notes_of_its_own_thread(client: TestClient) -> None:
    # the --goodput note is made while the form is read, the sliding-window one (gemma-3's
    # shared prefix would hit in vLLM, reads 0 here) by the simulation on the job's thread
    body = {"model": "google/gemma-3-27b-it", "max_model_len": "4k", "num_prompts": 10,
            "random_input_len": 512, "random_output_len": 8, "random_prefix_len": 64,
            "goodput": "ttft:500 ttft:300"}
    r = client.post("/api/simulate/jobs", json=body, headers={"x-kvplan-client": "web15"})
    assert r.status_code == 200, r.text
    job = r.json()["job"]
    for _ in range(600):
        view = client.get(f"/api/simulate/jobs/{job}").json()
        if view["state"] not in ("queued", "running"):
            break
        time.sleep(0.1)
    assert view["state"] == "done", view
    got = run_cli("simulate", "google/gemma-3-27b-it", "--gpu", "H100", "--max-model-len", "4k",
                  "--num-prompts", "10", "--random-input-len", "512", "--random-output-len",
                  "8", "--random-prefix-len", "64", "--goodput", "ttft:500", "ttft:300", "--json")
    err = got.err.strip().splitlines()
    assert GOODPUT_NOTE in err and any("sliding-window" in line for line in err), err
    assert sorted(view["result"]["stderr"]) == sorted(err)


def test_plan_carries_the_repeated_goodput_metric_note(client: TestClient) -> None:
    page, cli, err = both(
        client, "/api/plan",
        {"model": M, "gpu": "H100-SXM-80GB", "tensor_parallel_size": "1", "num_prompts": 60,
         "request_rate": 4, "goodput": "ttft:500 ttft:300"},
        "plan", M, "--gpu", "H100-SXM-80GB", "--tensor-parallel-size", "1", "--num-prompts",
        "60", "--request-rate", "4", "--goodput", "ttft:500", "ttft:300", "--workers", "1",
        "--dataset", "random")
    assert page.pop("stderr") == err == [GOODPUT_NOTE]
    for d in (page, cli):
        d["search_report"].pop("wall_s")
    assert page == cli


# ---- the page (Debian's chromium): what its own script shows of those answers ----

@pytest.fixture(scope="module")
def served() -> Any:
    from tests.webtools import web_server

    with web_server("--max-sim-requests", "2000", "--max-sim-seconds", "60") as url:
        yield url


@pytest.fixture(scope="module")
def browser(served: str) -> Any:
    from tests.webtools import watched_page

    with watched_page() as pg:
        yield pg


def _api(base: str, path: str, **params: Any) -> Any:
    import json
    from urllib.parse import urlencode
    from urllib.request import urlopen

    with urlopen(f"{base}{path}?{urlencode(params)}", timeout=120) as r:
        return json.loads(r.read())


def _settled(page: Any) -> None:
    page.wait_for_selector("body[data-state=done], body[data-state=error]", state="attached",
                           timeout=120_000)
    assert page.evaluate("document.body.dataset.state") == "done"


def test_the_capacity_page_shows_the_clis_warning(served: str, browser: Any) -> None:
    browser.goto(f"{served}/capacity?kv_cache_memory=70GiB")
    _settled(browser)
    want = _api(served, "/api/capacity", model=M, kv_cache_memory="70GiB")["stderr"]
    assert browser.eval_on_selector_all("#capacity .stderr", "ps => ps.map(p => p.textContent)"
                                        ) == want


def _plan(page: Any, base: str, query: str) -> str:
    page.goto(f"{base}/plan?{query}")
    page.click("#run")
    page.wait_for_selector("body[data-state=done], body[data-state=error]", state="attached",
                           timeout=120_000)
    assert page.evaluate("document.body.dataset.state") == "done"
    return str(page.inner_text("#plan"))


def test_the_plan_page_names_the_output_figure_and_the_judged_requests_as_the_cli(
        served: str, browser: Any) -> None:
    # azure-code replays its own arrivals: a fleet run of 60 requests, the first 6 (60 x
    # --warmup-fraction 0.1) not judged, and Verify's warning that bench serve approximates it
    text = _plan(browser, served, "gpu=H100-SXM-80GB&tensor_parallel_size=1&dataset=azure-code"
                                  "&num_prompts=60&slo=ttft%3Ap99%3A5000")
    assert "judged on the 54 after the first 6 by arrival (warm-up, --warmup-fraction 0.1)" in text
    assert ("warning: Verify approximates azure-code: vllm bench serve cannot replay a trace's "
            "own arrival times") in text
    assert "output throughput (tok/s)" in text and "sustained output rate" not in text
    # random without --request-rate: one replica's capacity, the CLI's "sustained output rate
    # of one replica" (capacity x mean output tokens), not a run's throughput
    text = _plan(browser, served, "gpu=H100-SXM-80GB&tensor_parallel_size=1&num_prompts=60"
                                  "&slo=ttft%3Ap99%3A5000")
    assert "sustained output rate of one replica (tok/s)" in text
    assert "output throughput (tok/s)" not in text


def test_the_latency_page_prints_durations_and_rates_as_the_cli(served: str,
                                                                 browser: Any) -> None:
    # 16 x (2048 + 16,000 tokens) on H100: E2E = TTFT + 15,999 x TPOT(15.86 ms) = 254 s, which
    # the CLI prints as 4.24 min (units.fmt_seconds: minutes from 60 s on; the page printed
    # "254.419 s"), and 16 x 16,000 / 254 s = 1,006 tok/s (the page printed "1006")
    browser.goto(f"{served}/latency?prompt=2048&output=16000&batch=16")
    _settled(browser)
    cli = run_cli("latency", M, "--gpu", "H100", "--prompt", "2048", "--output", "16000",
                  "--batch", "16")
    assert cli.code == 0, cli.err
    row = {r[0]: r for r in ([c.strip() for c in line.strip("│ ").split("│")]
                             for line in cli.out.splitlines() if line.startswith("│"))}
    shown = dict(browser.eval_on_selector_all(
        "#latency table.kv tr", "trs => trs.map(t => [t.cells[0].textContent, "
        "t.cells[1].textContent])"))
    assert shown["end-to-end"] == row["end-to-end"][1] == "4.24 min"
    assert shown["end-to-end band (10-90%)"] == row["end-to-end"][2]
    assert shown["TTFT band (10-90%)"] == "631.72 ms - 1.085 s"  # 631.71 before hunt 16
    assert shown["output throughput (tok/s)"] == "1,006"
    assert (shown["output throughput band (10-90%)"] + " tok/s").replace(" - ", " tok/s - ") \
        == row["output throughput"][2]


def test_kv_carries_the_hybrid_block_size_note_made_while_the_report_is_built(
        client: TestClient) -> None:
    # Nemotron-H at TP4: an attention page must hold a state page, so vLLM's attention block
    # is 2080 tokens, not 16; the note is made while the report is built (kv_report_for)
    h = "nvidia/Nemotron-H-56B-Base-8K"
    page, cli, err = both(client, "/api/kv", {"model": h, "tensor_parallel_size": 4},
                          "kv", h, "--tensor-parallel-size", "4")
    assert page.pop("stderr") == err
    assert err == [f"note: {h}: vLLM sets the attention block size to 2080 tokens so that an "
                   "attention page holds a state page (blocks of 16 asked for)"]
    assert page == cli


def test_the_api_without_num_prompts_asks_what_the_cli_does(client: TestClient) -> None:
    # no --num-prompts: vllm bench serve's (and kvplan simulate's) 1000 random requests; the
    # API took 200 (the page's form value), so the same flags gave another answer
    capped = client
    client = TestClient(create_app(WebSettings(max_sim_requests=2000, max_sim_seconds=60)))
    q = {"model": M, "random_input_len": 256, "random_output_len": 16}
    page, cli, _ = both(client, "/api/simulate", q, "simulate", M, "--gpu", "H100",
                        "--random-input-len", "256", "--random-output-len", "16")
    assert page["completed"] == cli["completed"] == 1000
    assert page == cli
    page, cli, _ = both(client, "/api/plan", {**q, "gpu": "H100-SXM-80GB",
                                              "tensor_parallel_size": "1",
                                              "slo": "ttft:p99:2000"},
                        "plan", M, "--gpu", "H100-SXM-80GB", "--tensor-parallel-size", "1",
                        "--slo", "ttft:p99:2000", "--random-input-len", "256",
                        "--random-output-len", "16", "--workers", "1")
    # 1000 drawn, of which the capacity search samples --sample-requests 500 (200 before)
    assert page["summary"]["trace_requests"] == cli["summary"]["trace_requests"] == 1000
    for d in (page, cli):
        d["search_report"].pop("wall_s")
    assert page == cli
    # a trace without --num-prompts: as many as the CLI takes, refused over the page's cap
    r = capped.get("/api/plan", params={"model": M, "dataset": "azure-code",
                                        "slo": "ttft:p99:2000"})
    assert r.status_code == 422
    assert r.json() == {"detail": "--num-prompts: azure-code holds 8819 requests; the page plans"
                                  " over at most 300 (set --num-prompts)",
                        "field": "num_prompts"}


def test_the_model_page_leaves_the_block_size_to_vllm_and_shows_the_mla_note(
        served: str, browser: Any) -> None:
    # the form sent --block-size 16 on its own, so the page never said what `kvplan kv
    # deepseek-ai/DeepSeek-V3` says: vLLM forces 64 (Hopper) / 128 (Blackwell) blocks for MLA
    v3 = "deepseek-ai/DeepSeek-V3"
    browser.goto(f"{served}/model?model={v3}")
    _settled(browser)
    cli = run_cli("kv", v3, "--json")
    assert cli.code == 0 and cli.err.startswith("note: blocks of 16 tokens (vLLM's default)")
    assert browser.eval_on_selector_all("#kv .stderr", "ps => ps.map(p => p.textContent)"
                                        ) == cli.err.strip().splitlines()
    browser.goto(f"{served}/request?model={v3}")
    _settled(browser)
    assert browser.eval_on_selector_all("#request .stderr", "ps => ps.map(p => p.textContent)"
                                        ) == cli.err.strip().splitlines()
