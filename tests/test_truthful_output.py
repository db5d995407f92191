"""Output that tells the truth: latency's does-not-fit, sweeps, batch's equation, models."""

from __future__ import annotations

import re

from tests.conftest import assert_one_line_error, run_cli


def _gib(text: str, label: str) -> float:
    match = re.search(rf"{label} ([\d.]+) GiB", text)
    assert match, (label, text)
    return float(match.group(1))


def test_latency_names_weights_when_the_model_itself_does_not_fit() -> None:
    r = run_cli("latency", "meta-llama/Llama-3.1-70B", "--gpu", "H100", "--prompt", "1000",
                "--output", "100")
    assert_one_line_error(r)
    assert "does not fit before any KV cache" in r.err and "of KV cache per GPU" not in r.err
    # 70.55e9 parameters in bf16 = 131.45 GiB; vLLM's requested = 0.9 x 79.18 GiB CUDA total
    assert _gib(r.err, "weights") == 131.45 and _gib(r.err, "activation") > 0
    assert _gib(r.err, "requested") == 71.26


def test_latency_names_each_figure_when_the_kv_cache_does_not_fit() -> None:
    r = run_cli("latency", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--prompt", "100000",
                "--output", "100", "--batch", "64")
    assert_one_line_error(r)
    # 64 x ceil(100100 / 16) blocks x 16 tokens x 128 KiB/token = 782.12 GiB
    assert _gib(r.err, "needs") == round(64 * 6257 * 16 * 128 / 2**20, 2)
    assert _gib(r.err, "weights") == 14.99 and _gib(r.err, "activations") > 0
    assert "at most 4 such requests fit" in r.err  # 26302 blocks // 6257


def test_sweep_marks_rows_whose_weights_do_not_fit() -> None:
    args = ("latency", "meta-llama/Llama-3.1-70B", "--gpu", "H100", "--prompt", "1000",
            "--output", "100", "--sweep", "tensor-parallel-size=1,4")
    data = run_cli(*args, "--json").json()
    first, second = data["rows"]
    assert first["weights_fit"] is False and "ttft_s" not in first
    assert "weights 131.45 GiB" in first["does_not_fit"]
    assert second["weights_fit"] is True and second["ttft_s"] > 0
    text = run_cli(*args).out
    assert "weights do not fit" in text


def test_batch_equation_adds_up_for_sliding_window_models() -> None:
    # gemma-2-27b: 23 sliding (window 4096) + 23 global layers, 16 KV heads x 128, bf16:
    # 23 x 16 x 128 x 2 (K, V) x 2 bytes = 188,416 bytes/token per group
    r = run_cli("batch", "google/gemma-2-27b", "--batch", "4", "--context", "8192")
    assert r.code == 0, r.err
    text = " ".join(r.out.split())
    assert ("(188,416 bytes/token x 4,096 tokens [sliding window 4096" in text
            and "+ 188,416 bytes/token x 8,192 tokens [full attention" in text)
    assert "total: 8.62 GiB (9,261,023,232 bytes)" in text
    assert (188_416 * 4096 + 188_416 * 8192) * 4 == 9_261_023_232
    data = run_cli("batch", "google/gemma-2-27b", "--batch", "4", "--context", "8192",
                   "--json").json()
    assert sum(t["bytes"] for t in data["terms"]) * 4 == data["total_bytes"]


def test_batch_equation_has_a_state_term_for_hybrid_models() -> None:
    r = run_cli("batch", "Qwen/Qwen3-Next-80B-A3B-Thinking", "--batch", "4", "--context", "8192",
                "--json")
    terms = r.json()["terms"]
    state = next(t for t in terms if t["state_bytes"])
    assert state["tokens_held"] == 0 and state["num_layers"] == 36
    assert sum(t["bytes"] for t in terms) * 4 == r.json()["total_bytes"] == 963_379_200
    text = " ".join(run_cli("batch", "Qwen/Qwen3-Next-80B-A3B-Thinking", "--batch", "4",
                            "--context", "8192").out.split())
    assert "(39,518,208 bytes of state [linear attention state" in text


def _cli_env(columns: int) -> dict[str, str]:
    import os

    return {**os.environ, "COLUMNS": str(columns)}


def test_models_never_truncates_an_id_and_shows_mla_latent() -> None:
    import subprocess
    import sys

    ids = [m["id"] for m in run_cli("models", "--json").json()["models"]]
    for columns in (80, 120):
        out = subprocess.run([sys.executable, "-m", "kvplan", "models"], capture_output=True,
                             text=True, env=_cli_env(columns), check=True).stdout
        lines = out.splitlines()
        assert max(len(line) for line in lines) <= columns
        for model_id in ids:
            assert any(line.split()[:1] == [model_id] for line in lines), (columns, model_id)
        v3 = next(line for line in lines if line.startswith(" deepseek-ai/DeepSeek-V3 "))
        assert "MLA" in v3 and "56" not in v3.split()  # not hidden 7168 / 128 heads
    wide = subprocess.run([sys.executable, "-m", "kvplan", "models"], capture_output=True,
                          text=True, env=_cli_env(120), check=True).stdout
    assert "latent 576 (512 + 64)" in wide
    rows = {m["id"]: m for m in run_cli("models", "--json").json()["models"]}
    assert rows["deepseek-ai/DeepSeek-V3"]["latent_dim"] == 576
    assert rows["meta-llama/Llama-3.1-8B"]["latent_dim"] is None
