"""CLI golden output and JSON keys for models/kv/request/batch/levers, and one-line errors."""

import json
from pathlib import Path

import pytest

from tests.conftest import assert_one_line_error, run_cli


def test_kv_json_keys() -> None:
    r = run_cli("kv", "meta-llama/Llama-2-70b-hf", "--kv-cache-dtype", "fp8", "--json")
    assert r.code == 0, r.err
    data = r.json()
    assert data["bytes_per_token"] == 163_840
    assert data["bytes_per_token_per_gpu"] == 163_840
    assert data["groups"][0]["kind"] == "full" and data["groups"][0]["num_layers"] == 80
    assert "range" in data["precision_risk"]


def test_kv_tp_per_gpu() -> None:
    r = run_cli("kv", "meta-llama/Llama-2-70b-hf", "--tensor-parallel-size", "4", "--json")
    data = r.json()
    assert (data["bytes_per_token"], data["bytes_per_token_per_gpu"]) == (327_680, 81_920)


def test_kv_text_shows_formula() -> None:
    r = run_cli("kv", "meta-llama/Llama-2-70b-hf")
    assert r.code == 0
    flat = " ".join(r.out.split())
    assert "2 (K and V) x 80 layers x 8 KV heads x 128 head_dim x 2 bytes = 327,680" in flat
    assert "320.00 KiB" in flat


def test_request_json_lesson() -> None:
    r = run_cli(
        "request", "meta-llama/Llama-2-70b-hf", "--prompt", "2048", "--output", "128", "--json"
    )
    data = r.json()
    assert data["prefill_bytes"] == 671_088_640
    assert data["decode_bytes"] == 41_943_040
    assert data["final_bytes"] == 713_031_680
    assert round(data["prefill_share"], 3) == 0.941
    assert len(data["steps"]) == 129 and data["steps"][0]["phase"] == "prefill"


def test_request_plot(tmp_path: Path) -> None:
    out = tmp_path / "stairs.svg"
    r = run_cli(
        "request",
        "meta-llama/Llama-2-7b-hf",
        "--prompt",
        "300",
        "--output",
        "20",
        "--chunk",
        "128",
        "--plot",
        str(out),
    )
    assert r.code == 0, r.err
    assert out.read_text().startswith("<svg")


def test_batch_json() -> None:
    r = run_cli(
        "batch",
        "meta-llama/Llama-2-70b-hf",
        "--batch",
        "64",
        "--context",
        "4096",
        "--kv-cache-dtype",
        "fp8",
        "--json",
    )
    assert r.json()["total_bytes"] == 40 * 1024**3


def test_levers_stack() -> None:
    data = run_cli(
        "levers", "meta-llama/Llama-2-70b-hf", "--batch", "64", "--context", "4096", "--json"
    ).json()
    rows = {r["lever"].split(" (")[0]: r for r in data["levers"]}
    assert rows["model as configured"]["factor_vs_baseline"] == pytest.approx(8 / 64)
    assert rows["KV cache dtype fp8"]["factor_vs_baseline"] == pytest.approx(8 / 64 / 2)
    stacked = rows["stacked: fp8 + TP 2"]["factor_vs_baseline"]
    assert stacked == pytest.approx(8 / 64 * 0.5 * 0.5)


def test_models_lists_catalog() -> None:
    data = run_cli("models", "--json").json()
    ids = {m["id"] for m in data["models"]}
    assert "deepseek-ai/DeepSeek-V3" in ids and len(ids) == 27


def test_json_output_is_only_json() -> None:
    r = run_cli("request", "google/gemma-3-27b-it", "--prompt", "10", "--output", "1", "--json")
    json.loads(r.out)
    assert r.err == ""


@pytest.mark.parametrize(
    "args",
    [
        ("kv", "acme/unknown-model"),
        ("kv", "meta-llama/Llama-2-7b-hf", "--kv-cache-dtype", "fp7"),
        ("kv", "meta-llama/Llama-2-7b-hf", "--tensor-parallel-size", "0"),
        ("request", "meta-llama/Llama-2-7b-hf", "--prompt", "-1", "--output", "5"),
        ("request", "meta-llama/Llama-2-7b-hf", "--prompt", "0", "--output", "5"),
        ("request", "meta-llama/Llama-2-7b-hf", "--prompt", "10", "--output", "5", "--chunk", "0"),
        (
            "request",
            "meta-llama/Llama-2-7b-hf",
            "--prompt",
            "10",
            "--output",
            "5",
            "--plot",
            "x.gif",
        ),
        ("request", "meta-llama/Llama-2-7b-hf", "--prompt", "ten", "--output", "5"),
        ("batch", "meta-llama/Llama-2-7b-hf", "--batch", "0", "--context", "5"),
        ("batch", "meta-llama/Llama-2-7b-hf", "--batch", "3", "--context", "-5"),
        ("kv", "/nonexistent/config.json"),
    ],
)
def test_bad_input_one_line(args: tuple[str, ...]) -> None:
    assert_one_line_error(run_cli(*args))


def test_malformed_config_file(tmp_path: Path) -> None:
    bad = tmp_path / "config.json"
    bad.write_text('{"hidden_size": 4096}')
    r = run_cli("kv", str(bad))
    assert_one_line_error(r)
    assert "num_hidden_layers" in r.err and str(bad) in r.err
    assert bad.read_text() == '{"hidden_size": 4096}'


@pytest.mark.parametrize("args", [
    ("batch", "meta-llama/Llama-3.1-8B", "--batch", "1", "--context", "1000000000000"),
    ("request", "meta-llama/Llama-3.1-8B", "--prompt", "200000000", "--output", "1"),
    ("capacity", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--block-size", "7"),
])
def test_absurd_values_one_line(args: tuple[str, ...]) -> None:
    assert_one_line_error(run_cli(*args))


def test_request_mla_notes_the_block_size_vllm_forces() -> None:
    # request knows no GPU: DeepSeek's latent is paged in 64 (Hopper) / 128 (Blackwell)
    r = run_cli("request", "deepseek-ai/DeepSeek-V3", "--prompt", "2048", "--output", "128",
            "--json")
    assert r.code == 0, r.err
    assert r.json()["block_size"] == 16
    assert "forces 64 on Hopper" in r.err and r.err.startswith("note: ")
    r64 = run_cli("request", "deepseek-ai/DeepSeek-V3", "--prompt", "2048", "--output", "128",
              "--block-size", "64", "--json")
    assert r64.code == 0 and "note:" not in r64.err
    dense = run_cli("request", "meta-llama/Llama-2-70b-hf", "--prompt", "2048", "--output", "128")
    assert dense.code == 0 and "note:" not in dense.err
