"""The web API answers as the CLI does: model ids resolved by the CLI's resolver (Instruct
variants, the local Hugging Face cache), the overload verdict in the CLI's words, the infeasible
plan's closest candidates, and the serve line naming the id the user gave."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from kvplan.cli.app import _register, app
from kvplan.specs.catalog import catalog
from kvplan.web.app import create_app
from kvplan.web.settings import WebSettings

M = "meta-llama/Llama-3.1-8B"
INSTRUCT = "meta-llama/Llama-3.1-8B-Instruct"


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(WebSettings(max_sim_requests=300, max_sim_seconds=30)))


def cli_json(*args: str, code: int = 0) -> Any:
    _register()
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == code, result.output
    return json.loads(result.stdout)


def test_instruct_id_resolves_as_on_the_cli(client: TestClient) -> None:
    r = client.get("/api/kv", params={"model": INSTRUCT})
    assert r.status_code == 200, r.text
    answer = r.json()
    assert answer.pop("stderr") == [  # the CLI's note on stderr, as the key stderr
        f"note: using the config of {M} for {INSTRUCT} (Instruct/chat variants share the base "
        "model's architecture)"]
    assert answer == cli_json("kv", INSTRUCT)
    assert answer["bytes_per_token"] == 131072  # Llama-3.1-8B: 32 x 8 x 128 x 2 x 2 B


def test_hf_cache_model_resolves_as_on_the_cli(client: TestClient, tmp_path: Path,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    repo = tmp_path / "models--acme--tiny-qwen"
    (repo / "refs").mkdir(parents=True)
    (repo / "refs" / "main").write_text("abc123")
    (repo / "snapshots" / "abc123").mkdir(parents=True)
    (repo / "snapshots" / "abc123" / "config.json").write_bytes(
        catalog()["qwen/qwen3-8b"].path.read_bytes())
    monkeypatch.setenv("HF_HUB_CACHE", str(tmp_path))
    r = client.get("/api/kv", params={"model": "acme/tiny-qwen"})
    assert r.status_code == 200, r.text
    answer = r.json()
    assert answer.pop("stderr")[0].startswith(  # the CLI's note, as the key stderr
        "note: using acme/tiny-qwen's config.json from the local Hugging Face cache")
    assert answer["bytes_per_token"] == 147456  # Qwen3-8B: 36 x 8 x 128 x 2 x 2 B
    assert answer == cli_json("kv", "acme/tiny-qwen")


def test_unknown_id_is_422_naming_the_nearest(client: TestClient) -> None:
    r = client.get("/api/kv", params={"model": "meta-llama/Llama-3.1-8X"})
    assert r.status_code == 422 and r.json()["field"] == "model"
    assert "Nearest catalog ids: meta-llama/Llama-3.1-8B" in r.json()["detail"]


def test_capacity_says_the_block_vllm_forces_as_the_cli_prints_it(client: TestClient) -> None:
    q = {"model": "deepseek-ai/DeepSeek-V2-Lite", "gpu": "H100", "block_size": 16}
    r = client.get("/api/capacity", params=q)
    assert r.status_code == 200, r.text
    doc = r.json()
    assert doc["block_size"] == 64
    assert doc["block_size_log"] == "Forcing kv cache block size to 64 for FlashMLA backend."
    llama = client.get("/api/capacity", params={"model": M, "gpu": "H100"}).json()
    assert llama["block_size_log"] is None


def test_overload_verdict_carries_the_clis_line(client: TestClient) -> None:
    q = {"model": M, "gpu": "H100", "num_prompts": 300, "request_rate": 200,
         "random_input_len": 2048, "random_output_len": 64}
    r = client.get("/api/simulate", params=q)
    assert r.status_code == 200, r.text
    load = r.json()["overload"]
    assert load["overloaded"] and load["message"].startswith(
        "overloaded: accepted requests arrived at 199.19 req/s but the server finished")
    _register()
    text = CliRunner().invoke(app, ["simulate", M, "--gpu", "H100", "--num-prompts", "300",
                                    "--request-rate", "200", "--random-input-len", "2048",
                                    "--random-output-len", "64"])
    assert load["message"] in " ".join(text.stdout.split())


PLAN = {"model": INSTRUCT, "gpu": "H100-SXM-80GB", "tensor_parallel_size": "1",
        "num_prompts": 100, "request_rate": 5}
ARGV = ["plan", INSTRUCT, "--gpu", "H100-SXM-80GB", "--tensor-parallel-size", "1",
        "--num-prompts", "100", "--request-rate", "5", "--dataset", "random", "--workers", "1"]


def test_plan_serve_line_names_the_instruct_id(client: TestClient) -> None:
    r = client.get("/api/plan", params={**PLAN, "slo": "ttft:p99:2000 tpot:p99:100"})
    assert r.status_code == 200, r.text
    assert r.json()["summary"]["vllm_serve"].startswith(f"vllm serve {INSTRUCT} --")


def test_infeasible_plan_answers_with_the_clis_closest_candidates(client: TestClient) -> None:
    r = client.get("/api/plan", params={**PLAN, "slo": "ttft:p99:2000 tpot:p99:5"})
    assert r.status_code == 200, r.text
    mine = r.json()
    cli = cli_json(*ARGV, "--slo", "ttft:p99:2000", "--slo", "tpot:p99:5", code=1)
    for d in (mine, cli):
        d["search_report"].pop("wall_s")
    assert mine.pop("stderr")[0].startswith(f"note: using the config of {M} for {INSTRUCT}")
    assert mine == cli
    s = mine["summary"]
    assert s["status"] == "infeasible" and s["why"].startswith("nothing in the space meets")
    assert s["closest"] and s["closest"][0]["misses"] == "p99_tpot_ms"
    assert s["closest"][0]["margin"] < 0
