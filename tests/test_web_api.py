"""The web API through FastAPI's TestClient: each answer equals the CLI's --json, bad input 422."""

from __future__ import annotations

import json
from typing import Any

import pytest
from fastapi.testclient import TestClient
from typer.testing import CliRunner

from kvplan.cli.app import _register, app
from kvplan.web.app import create_app
from kvplan.web.settings import WebSettings

M = "meta-llama/Llama-3.1-8B"


@pytest.fixture(scope="module")
def client() -> TestClient:
    return TestClient(create_app(WebSettings(max_sim_requests=300, max_sim_seconds=30)))


def cli_json(*args: str) -> Any:
    _register()
    result = CliRunner().invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    return json.loads(result.stdout)


CASES = [
    ("/api/models", {}, ["models"]),
    ("/api/gpus", {}, ["gpus"]),
    ("/api/kv", {"model": M, "kv_cache_dtype": "fp8", "tensor_parallel_size": 2},
     ["kv", M, "--kv-cache-dtype", "fp8", "--tensor-parallel-size", "2"]),
    ("/api/levers", {"model": M, "batch": 8, "context": 4096},
     ["levers", M, "--batch", "8", "--context", "4096"]),
    ("/api/request", {"model": M, "prompt": 2048, "output": 64, "chunk": 512},
     ["request", M, "--prompt", "2048", "--output", "64", "--chunk", "512"]),
    ("/api/capacity", {"model": M, "gpu": "H100", "max_model_len": 16000},
     ["capacity", M, "--gpu", "H100", "--max-model-len", "16000"]),
    ("/api/capacity", {"model": "Qwen/Qwen3-8B", "gpu": "L40S", "kv_cache_dtype": "fp8",
                       "kv_cache_memory": "24GiB"},
     ["capacity", "Qwen/Qwen3-8B", "--gpu", "L40S", "--kv-cache-dtype", "fp8",
      "--kv-cache-memory", "24GiB"]),
    ("/api/latency", {"model": M, "gpu": "H100", "prompt": 1024, "output": 128, "batch": 8},
     ["latency", M, "--gpu", "H100", "--prompt", "1024", "--output", "128", "--batch", "8"]),
    ("/api/latency/sweep", {"model": M, "gpu": "H100", "prompt": 1024, "output": 128,
                            "sweep": "batch=1,64,512"},
     ["latency", M, "--gpu", "H100", "--prompt", "1024", "--output", "128",
      "--sweep", "batch=1,64,512"]),
    ("/api/simulate", {"model": M, "gpu": "H100", "num_prompts": 40, "random_input_len": 512,
                       "random_output_len": 32, "request_rate": 20},
     ["simulate", M, "--gpu", "H100", "--num-prompts", "40", "--random-input-len", "512",
      "--random-output-len", "32", "--request-rate", "20"]),
    ("/api/latency", {"model": M, "gpu": "H100", "prompt": 1024, "output": 128, "batch": 8,
                      "async_scheduling": "on"},
     ["latency", M, "--gpu", "H100", "--prompt", "1024", "--output", "128", "--batch", "8",
      "--async-scheduling"]),
    ("/api/simulate", {"model": M, "gpu": "H100", "num_prompts": 40, "random_input_len": 512,
                       "random_output_len": 32, "async_scheduling": "on"},
     ["simulate", M, "--gpu", "H100", "--num-prompts", "40", "--random-input-len", "512",
      "--random-output-len", "32", "--async-scheduling"]),
]


@pytest.mark.parametrize(("url", "params", "argv"), CASES, ids=[c[0] for c in CASES])
def test_answer_equals_cli_json(client: TestClient, url: str, params: dict[str, Any],
                                argv: list[str]) -> None:
    r = client.get(url, params=params)
    assert r.status_code == 200, r.text
    assert r.json() == cli_json(*argv)


BAD = [
    ("/api/kv", {"model": "no/such-model"}, "model", "unknown model"),
    ("/api/kv", {"model": "/etc/passwd"}, "model", "unknown model"),
    ("/api/kv", {"model": "../specs/catalog/models/x.json"}, "model", "unknown model"),
    ("/api/kv", {"model": M, "tensor_parallel_size": "two"}, "tensor_parallel_size", "integer"),
    ("/api/kv", {"model": M, "kv_cache_dtype": "fp7"}, "kv_cache_dtype", "fp7"),
    ("/api/kv", {"model": M, "bogus": "1"}, "bogus", "Extra inputs"),
    ("/api/kv", {"model": M, "tensor_parallel_size": 3}, "tensor_parallel_size", ""),
    ("/api/capacity", {"model": M, "tensor_parallel_size": 3}, "tensor_parallel_size", ""),
    ("/api/levers", {"model": M, "batch": -1}, "batch", "batch"),
    ("/api/request", {"model": M, "prompt": -5, "output": 1}, "prompt", "prompt"),
    ("/api/request", {"model": M, "output": 1}, "prompt", "Field required"),
    ("/api/request", {"model": M, "prompt": 10, "output": 1, "block_size": 0}, "block_size", ""),
    ("/api/capacity", {"model": M, "gpu": "TPU-v9"}, "gpu", "unknown GPU"),
    ("/api/capacity", {"model": M, "gpu": "/etc/gpu.yaml"}, "gpu", "unknown GPU"),
    ("/api/capacity", {"model": M, "gpu_memory_utilization": 3}, "gpu_memory_utilization", ""),
    ("/api/capacity", {"model": "meta-llama/Llama-3.1-70B", "gpu": "L4"}, None, "KV cache"),
    ("/api/capacity/chart", {"model": M, "block_size": 3}, "block_size", ""),
    ("/api/latency", {"model": M, "prompt": 1, "output": 1, "batch": 0}, "batch", ""),
    ("/api/latency/sweep", {"model": M, "prompt": 1, "output": 1, "sweep": "x=1"}, "sweep", ""),
    ("/api/latency/chart", {"model": M, "prompt": 1, "output": 1, "sweep": "batch=a"}, "sweep",
     ""),
    ("/api/levers/chart", {"model": "nope"}, "model", ""),
    ("/api/request/chart", {"model": M, "prompt": 0, "output": 0}, "prompt", ""),
    ("/api/simulate", {"model": M, "num_prompts": 100000}, "num_prompts", "at most 300"),
    ("/api/simulate", {"model": M, "dataset": "/etc/passwd"}, "dataset", ""),
    ("/api/simulate", {"model": M, "num_prompts": 5, "request_rate": -1}, "request_rate", ""),
    ("/api/simulate", {"model": M, "num_prompts": 5, "goodput": "ttft"}, "goodput", ""),
    ("/api/latency", {"model": M, "prompt": 1, "output": 1, "async_scheduling": "maybe"},
     "async_scheduling", "boolean"),
]


@pytest.mark.parametrize(("url", "params", "field", "words"), BAD,
                         ids=[f"{b[0]}-{b[2]}" for b in BAD])
def test_bad_input_is_422_with_one_line(client: TestClient, url: str, params: dict[str, Any],
                                        field: str | None, words: str) -> None:
    r = client.get(url, params=params)
    assert r.status_code == 422, r.text
    body = r.json()
    assert "\n" not in body["detail"] and words in body["detail"]
    if field is not None:
        assert body["field"] == field, body


def test_charts_are_the_cli_specs(client: TestClient) -> None:
    from kvplan.analysis.timeline import request_timeline
    from kvplan.report.charts import staircase_chart
    from kvplan.specs.catalog import load_model
    from kvplan.specs.kv import kv_spec

    r = client.get("/api/request/chart", params={"model": M, "prompt": 300, "output": 40})
    tl = request_timeline(kv_spec(load_model(M)), 300, 40)
    assert r.json() == staircase_chart(tl, M).to_dict()
    for url, params in (("/api/capacity/chart", {"model": M}),
                        ("/api/latency/chart", {"model": M, "prompt": 64, "output": 8}),
                        ("/api/levers/chart", {"model": M})):
        spec = client.get(url, params=params).json()
        assert spec["$schema"].startswith("https://vega.github.io/schema/vega-lite/")


def test_upload_then_use_the_token(client: TestClient) -> None:
    from kvplan.specs.catalog import catalog

    raw = catalog()[M.lower()].path.read_bytes()
    up = client.post("/api/upload", files={"file": ("my-config.json", raw)})
    assert up.status_code == 200, up.text
    token = up.json()["model"]
    assert token.startswith("upload:")
    mine = client.get("/api/kv", params={"model": token}).json()
    ours = client.get("/api/kv", params={"model": M}).json()
    assert mine["bytes_per_token"] == ours["bytes_per_token"] == 131072
    assert client.get("/api/kv", params={"model": "upload:0000"}).status_code == 422


@pytest.mark.parametrize("raw", [b"", b"not json", b"[1, 2]", b'{"model_type": "llama"}'])
def test_bad_upload_is_422(client: TestClient, raw: bytes) -> None:
    r = client.post("/api/upload", files={"file": ("config.json", raw)})
    assert r.status_code == 422, r.text
    assert "\n" not in r.json()["detail"]


def test_body_over_the_cap_is_refused(client: TestClient) -> None:
    big = b"{" + b" " * (2 * 2**20 + 10) + b"}"
    r = client.post("/api/upload", files={"file": ("config.json", big)})
    assert r.status_code == 413
    assert "request body over" in r.json()["detail"]


def test_pages_and_docs_are_served(client: TestClient) -> None:
    for name in ("model", "request", "capacity", "latency", "simulate"):
        r = client.get(f"/{name}")
        assert r.status_code == 200 and 'id="form"' in r.text
    assert "/api/kv" in client.get("/openapi.json").json()["paths"]
    assert client.get("/docs").status_code == 200
    bundle = client.get("/static/vega-bundle.js")
    assert bundle.status_code == 200 and "vegaEmbed" in bundle.text
    assert "http" not in client.get("/model").text.split("<body")[0].replace("http-equiv", "")


PLAN = {"model": M, "gpu": "H100-SXM-80GB", "tensor_parallel_size": "1", "num_prompts": 100,
        "request_rate": 5, "slo": "ttft:p99:2000 tpot:p99:100"}
PLAN_ARGV = ["plan", M, "--gpu", "H100-SXM-80GB", "--tensor-parallel-size", "1",
             "--num-prompts", "100", "--request-rate", "5", "--slo", "ttft:p99:2000",
             "--slo", "tpot:p99:100", "--dataset", "random", "--workers", "1"]


def test_plan_equals_cli_json(client: TestClient) -> None:
    r = client.get("/api/plan", params=PLAN)
    assert r.status_code == 200, r.text
    mine, cli = r.json(), cli_json(*PLAN_ARGV)
    for d in (mine, cli):  # wall time differs run to run
        d["search_report"].pop("wall_s")
    assert mine == cli
    assert mine["summary"]["status"] == "feasible"


@pytest.mark.parametrize(("params", "field"), [
    ({"slo": "fast please"}, "slo"),
    ({"gpu": "/etc/gpu.yaml"}, "gpu"),
    ({"num_prompts": 100000}, "num_prompts"),
    ({"tensor_parallel_size": "1,x"}, "tensor_parallel_size"),
])
def test_plan_bad_input_is_422(client: TestClient, params: dict[str, Any], field: str) -> None:
    r = client.get("/api/plan", params={**PLAN, **params})
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field, r.json()
