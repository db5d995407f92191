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
