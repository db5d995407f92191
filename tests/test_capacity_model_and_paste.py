"""``kvplan capacity MODEL -- vllm serve ...``: both given. Before, the words after MODEL were
read as more positional words and silently dropped (a bad VLLM_ALL2ALL_BACKEND passed, a
different model in the pasted line was ignored); now the pasted line is read, and a second,
different model is refused in one line (exit 2)."""

from __future__ import annotations

import json

from tests.conftest import assert_one_line_error, run_cli

M = "meta-llama/Llama-3.1-8B"


def test_model_then_pasted_line_reads_the_line() -> None:
    r = run_cli("capacity", M, "--gpu", "H100", "--json", "--", "vllm", "serve", M,
                "--max-model-len", "4096")
    assert r.code == 0, r.err
    assert json.loads(r.out)["max_model_len"] == 4096


def test_model_then_flags_only() -> None:
    r = run_cli("capacity", M, "--gpu", "H100", "--json", "--", "--max-model-len", "8192")
    assert r.code == 0, r.err
    assert json.loads(r.out)["max_model_len"] == 8192


def test_two_different_models_are_refused() -> None:
    r = run_cli("capacity", M, "--gpu", "H100", "--", "vllm", "serve", "Qwen/Qwen3-8B")
    assert_one_line_error(r)
    assert "MODEL meta-llama/Llama-3.1-8B and the pasted line's Qwen/Qwen3-8B differ" in r.err


def test_environment_after_model_is_read() -> None:
    r = run_cli("capacity", M, "--gpu", "H100", "--", "VLLM_ALL2ALL_BACKEND=foo", "vllm",
                "serve", M)
    assert_one_line_error(r)
    assert "VLLM_ALL2ALL_BACKEND='foo'" in r.err
