"""`kvplan capacity` and `kvplan gpus` as a user runs them."""

from __future__ import annotations

from kvplan.cli.pasted import parse_vllm_command
from tests.conftest import assert_one_line_error, run_cli

KEYS = {
    "requested_bytes",
    "weights_bytes",
    "activation_bytes",
    "non_torch_bytes",
    "cudagraph_bytes",
    "available_kv_bytes",
    "num_blocks",
    "kv_cache_tokens",
    "max_concurrency",
    "groups",
}


def test_json_reference_case_issue_10517() -> None:
    # 1952 blocks x 2 MiB + 1 MiB: vLLM issue #10517's "3.81 GiB" -> 1952 blocks, 1.56x
    size = str(1952 * 2 * 2**20 + 2**20)
    r = run_cli(
        "capacity",
        "meta-llama/Llama-3.1-8B",
        "--gpu",
        "RTX-3090",
        "--max-model-len",
        "20000",
        "--kv-cache-memory",
        size,
        "--json",
    )
    assert r.code == 0, r.err
    data = r.json()
    assert data.keys() >= KEYS
    assert data["available_kv_bytes"] == int(size)
    assert (data["num_blocks"], data["kv_cache_tokens"]) == (1952, 31_232)
    assert round(data["max_concurrency"], 2) == 1.56
    assert data["groups"][0]["pages_per_request"] == 1250


def test_text_view_prints_vllm_lines() -> None:
    r = run_cli(
        "capacity",
        "meta-llama/Llama-3.1-8B",
        "--gpu",
        "h100",
        "--max-model-len",
        "16000",
        "--block-size",
        "128",
        "--kv-cache-memory",
        "28GiB",
    )
    assert r.code == 0, r.err
    assert "GPU KV cache size: 229,376 tokens" in r.out  # 28 GiB / 16 MiB per block = 1792
    assert "Maximum concurrency for 16,000 tokens per request: 14.34x" in r.out  # 1792/125


def test_pasted_vllm_command_line() -> None:
    r = run_cli(
        "capacity",
        "--gpu",
        "H100",
        "--json",
        "--",
        "vllm",
        "serve",
        "Qwen/Qwen3-8B",
        "--kv-cache-dtype",
        "fp8",
        "--max-model-len=32768",
        "-tp",
        "2",
        "--port",
        "8000",
    )
    assert r.code == 0, r.err
    data = r.json()
    assert data["max_model_len"] == 32768 and data["tensor_parallel_size"] == 2
    assert data["page_size_bytes"] == 16 * 4 * 128 * 2  # 4 KV heads per GPU, fp8 K and V
    assert data["ignored_vllm_flags"] == ["--port"]


def test_parse_vllm_command_forms() -> None:
    found, ignored = parse_vllm_command(
        [
            "vllm",
            "serve",
            "m",
            "--gpu_memory_utilization=0.8",
            "--max-num-seqs",
            "64",
            "--enforce-eager",
            "--trust-remote-code",
        ]
    )
    assert found == {"model": "m", "gpu_memory_utilization": 0.8, "max_num_seqs": 64,
                     "enforce_eager": True}  # read: capacity shows no CUDA graph memory
    assert ignored == ["--trust-remote-code"]


def test_does_not_fit_one_line_exit_1() -> None:
    # exit codes: 0 fits, 1 does not fit, 2 bad input
    r = run_cli("capacity", "Qwen/Qwen3-32B", "--gpu", "H100", "--max-model-len", "40960")
    assert r.code == 1 and not r.out and len(r.err.strip().splitlines()) == 1
    assert r.err.startswith("error: ") and "Traceback" not in r.err
    assert "largest --max-model-len that fits" in r.err and "--tensor-parallel-size 2" in r.err


def test_does_not_fit_json_has_the_fit_keys_and_what_would_fit() -> None:
    fit = run_cli("capacity", "Qwen/Qwen3-32B", "--gpu", "H100", "--max-model-len", "8192",
                  "--json")
    r = run_cli("capacity", "Qwen/Qwen3-32B", "--gpu", "H100", "--max-model-len", "40960",
                "--json")
    assert (fit.code, r.code) == (0, 1)
    yes, no = fit.json(), r.json()
    assert set(no) == set(yes) | {"why", "needed_bytes", "largest_max_model_len", "fits_with",
                                  "over_budget_bytes"}
    assert no["over_budget_bytes"] == 0  # the weights fit; the KV pool is too small
    assert yes["fits"] is True and no["fits"] is False
    # the same budget: only max_model_len differs, so the KV pool is the same size
    assert no["available_kv_bytes"] == yes["available_kv_bytes"]
    assert no["needed_bytes"] > no["available_kv_bytes"]
    assert "--tensor-parallel-size 2" in no["fits_with"]
    # the largest length that fits, fits
    ok = run_cli("capacity", "Qwen/Qwen3-32B", "--gpu", "H100", "--max-model-len",
                 str(no["largest_max_model_len"]))
    bad = run_cli("capacity", "Qwen/Qwen3-32B", "--gpu", "H100", "--max-model-len",
                  str(no["largest_max_model_len"] + 16))
    assert (ok.code, bad.code) == (0, 1)


def test_bad_flags_one_line() -> None:
    for args in (
        ["--gpu-memory-utilization", "0"],
        ["--tensor-parallel-size", "3"],
        ["--gpu", "Z80"],
        ["--quantization", "int3"],
        ["--kv-cache-memory", "lots"],
    ):
        r = run_cli("capacity", "meta-llama/Llama-3.1-8B", "--max-model-len", "4096", *args)
        assert_one_line_error(r)


def test_gpus_lists_catalog() -> None:
    r = run_cli("gpus", "--json")
    assert r.code == 0, r.err
    ids = {g["id"] for g in r.json()["gpus"]}
    assert {"H100-SXM-80GB", "RTX-3090"} <= ids
