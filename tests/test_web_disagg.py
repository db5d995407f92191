"""The Simulate page's disaggregated form through FastAPI's TestClient: the answer is
`kvplan simulate --disagg ... --json`'s, the job draws the pools' charts, bad input is one
422 line beside its field (docs/web.md, docs/disaggregation.md)."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from kvplan.cli.app import _register, app
from kvplan.web.app import create_app
from kvplan.web.settings import WebSettings

M = "meta-llama/Llama-3.1-8B"
WORK = {"model": M, "gpu": "H100", "num_prompts": 40, "random_input_len": 512,
        "random_output_len": 32, "request_rate": 20}
ARGV = ["simulate", M, "--gpu", "H100", "--num-prompts", "40", "--random-input-len", "512",
        "--random-output-len", "32", "--request-rate", "20"]


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(WebSettings(max_sim_requests=300, max_sim_seconds=30)))


def cli_json(*args: str) -> Any:
    _register()
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


CASES = [
    ({"disagg": "1P1D"}, ["--disagg", "1P1D"]),
    ({"disagg": "2P1D", "kv_link": "eth-100g", "decode_tp": 2, "router": "least-outstanding"},
     ["--disagg", "2P1D", "--kv-link", "eth-100g", "--decode-tp", "2",
      "--router", "least-outstanding"]),
    ({"kv_link": "ib-xdr", "prefill_gpu": "H200", "decode_gpu": "A100-80GB"},
     ["--kv-link", "ib-xdr", "--prefill-gpu", "H200", "--decode-gpu", "A100-80GB"]),
]


@pytest.mark.parametrize(("form", "flags"), CASES, ids=[" ".join(c[1]) for c in CASES])
def test_disagg_answer_equals_cli_json(client: TestClient, form: dict[str, Any],
                                       flags: list[str]) -> None:
    r = client.get("/api/simulate", params={**WORK, **form})
    assert r.status_code == 200, r.text
    got = r.json()
    assert got == cli_json(*ARGV, *flags)
    assert got["kv_transfers"] == 40 and got["kv_link_bytes"] > 0
    assert got["disagg"] == flags[1] if flags[0] == "--disagg" else got["disagg"] == "1P1D"


def test_link_bytes_are_the_worked_arithmetic(client: TestClient) -> None:
    """Llama-3.1-8B: 32 layers x 8 KV heads x 128 x 2 (K, V) x 2 B = 131,072 B per token;
    40 prompts of 512 tokens, whole 16-token pages: 40 x 512 x 131,072 = 2,684,354,560 B."""
    r = client.get("/api/simulate", params={**WORK, "disagg": "1P1D"})
    assert r.json()["kv_link_bytes"] == 40 * 512 * 131_072 == 2_684_354_560


def test_the_job_draws_the_decode_pool_and_the_latency_cdf(client: TestClient) -> None:
    body = {**WORK, "disagg": "1P2D", "decode_tp": 2}
    job = client.post("/api/simulate/jobs", json=body, headers={"x-kvplan-client": "dg"}).json()
    for _ in range(600):
        view = client.get(f"/api/simulate/jobs/{job['job']}").json()
        if view["state"] not in ("queued", "running"):
            break
        time.sleep(0.05)
    assert view["state"] == "done", view
    assert view["result"] == cli_json(*ARGV, "--disagg", "1P2D", "--decode-tp", "2")
    charts = client.get(f"/api/simulate/jobs/{job['job']}/charts").json()
    assert set(charts) == {"kv_usage", "latency_cdf"}
    assert "decode instance 0 of 1P2D" in json.dumps(charts["kv_usage"])


BAD = [
    ({"disagg": "1X1D"}, "disagg", "write xPyD"),
    ({"disagg": "0P1D"}, "disagg", "--prefill-instances must be at least 1, got 0"),
    ({"disagg": "1P1D", "kv_link": "carrier-pigeon"}, "kv_link", "carrier-pigeon"),
    ({"disagg": "1P1D", "prefill_tp": 2, "decode_tp": 1}, "decode_tp", "multiple"),
    ({"disagg": "1P1D", "decode_gpu": "TPU-v9"}, "decode_gpu", "--decode-gpu: unknown GPU"),
    ({"router": "least-outstanding"}, "router", "disaggregated fleet's proxy"),
    ({"disagg": "1P1D", "max_concurrency": 4}, "max_concurrency", "not modelled"),
    ({"disagg": "1P1D", "decode_tp": 3}, "decode_tp", ""),
]


@pytest.mark.parametrize(("form", "field", "words"), BAD, ids=[b[1] for b in BAD])
def test_bad_disagg_input_is_422_with_one_line(client: TestClient, form: dict[str, Any],
                                               field: str, words: str) -> None:
    r = client.get("/api/simulate", params={**WORK, **form})
    assert r.status_code == 422, r.text
    body = r.json()
    assert "\n" not in body["detail"] and words in body["detail"], body
    assert body["field"] == field, body


def test_plan_page_dp_ep_fields_answer_the_clis_plan(client: TestClient) -> None:
    """The Plan form's --data-parallel-size / --enable-expert-parallel lists reach the same
    plan as the CLI's flags (an MoE model, DP2 + EP and DP1, one GPU)."""
    moe = "Qwen/Qwen3-30B-A3B"
    q = {"model": moe, "gpu": "H200", "tensor_parallel_size": "1", "num_prompts": 60,
         "request_rate": 4, "random_input_len": 256, "random_output_len": 16,
         "max_num_batched_tokens": "default", "data_parallel_size": "1,2",
         "enable_expert_parallel": "on", "slo": "ttft:p99:2000 tpot:p99:100"}
    r = client.get("/api/plan", params=q)
    assert r.status_code == 200, r.text
    mine = r.json()
    cli = cli_json("plan", moe, "--gpu", "H200", "-tp", "1", "--num-prompts", "60",
                   "--request-rate", "4", "--random-input-len", "256",
                   "--random-output-len", "16", "--max-num-batched-tokens", "default",
                   "-dp", "1,2", "--enable-expert-parallel", "on", "--dataset", "random",
                   "--workers", "1", "--slo", "ttft:p99:2000", "--slo", "tpot:p99:100")
    for d in (mine, cli):
        d["search_report"].pop("wall_s")
    assert mine == cli
    assert [(c["data_parallel_size"], c["enable_expert_parallel"])
            for c in mine["candidates"]] == [(1, False), (2, True)]  # vLLM ignores EP at DP1 TP1


def test_plan_page_disagg_answers_the_clis_joint_key(client: TestClient) -> None:
    """The Plan form's --disagg / --kv-link reach `kvplan plan --disagg --json`'s document,
    the `joint` key included; --kv-link without --disagg is one 422 line."""
    q = {"model": M, "gpu": "H100", "tensor_parallel_size": "1", "num_prompts": 60,
         "request_rate": 4, "random_input_len": 512, "random_output_len": 32,
         "max_num_batched_tokens": "default", "slo": "ttft:p99:2000 tpot:p99:100",
         "disagg": "on", "kv_link": "ib-ndr"}
    r = client.get("/api/plan", params=q)
    assert r.status_code == 200, r.text
    mine = r.json()
    argv = ["plan", M, "--gpu", "H100", "-tp", "1", "--num-prompts", "60", "--request-rate",
            "4", "--random-input-len", "512", "--random-output-len", "32",
            "--max-num-batched-tokens", "default", "--dataset", "random", "--workers", "1",
            "--slo", "ttft:p99:2000", "--slo", "tpot:p99:100", "--disagg", "--kv-link",
            "ib-ndr"]
    cli = cli_json(*argv)
    for d in (mine, cli):
        d["search_report"].pop("wall_s")
    assert mine == cli
    assert mine["joint"]["winner_kind"] in ("aggregated", "disaggregated")
    assert any(c["kind"] == "disaggregated" for c in mine["joint"]["candidates"])
    bad = client.get("/api/plan", params={**q, "disagg": "off"})
    assert bad.status_code == 422 and bad.json()["field"] == "kv_link", bad.text
