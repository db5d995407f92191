"""vLLM's checks on the two step budgets (SchedulerConfig._verify_args) and EngineArgs' cap on
a defaulted max_num_seqs (``min(default, max_num_batched_tokens)``), through the CLI."""

from __future__ import annotations

from tests.conftest import assert_one_line_error, run_cli

M = "meta-llama/Llama-3.1-8B"


def test_token_budget_below_max_num_seqs_is_refused() -> None:
    for cmd in ("simulate", "capacity"):  # latency has no --max-num-seqs (its --batch)
        r = run_cli(cmd, M, "--gpu", "H100", "--max-num-batched-tokens", "100",
                    "--max-num-seqs", "256")
        assert_one_line_error(r)
        assert "--max-num-batched-tokens 100 is below --max-num-seqs 256" in r.err, cmd
        assert "raise it to 256 or lower --max-num-seqs" in r.err


def test_token_budget_below_max_model_len_without_chunking_runs_chunked() -> None:
    # vLLM 0.11.0 turns chunked prefill back on (EngineArgs._set_default_args), so its
    # SchedulerConfig check of the budget against max_model_len never fires
    # (tests/test_hunt16_sched16.py)
    r = run_cli("simulate", M, "--gpu", "H100", "--max-num-batched-tokens", "2048",
                "--no-enable-chunked-prefill", "--num-prompts", "3", "--json")
    assert r.code == 0, r.err
    assert r.json()["max_num_batched_tokens"] == 2048
    chunked = run_cli("simulate", M, "--gpu", "H100", "--max-num-batched-tokens", "2048",
                      "--num-prompts", "3", "--json")
    assert chunked.code == 0, chunked.err
    assert chunked.json()["num_steps"] == r.json()["num_steps"]


def test_a_defaulted_max_num_seqs_is_capped_at_the_token_budget() -> None:
    """H100's default 1,024 sequences capped at 512 tokens: the dummy sampler then holds 512
    rows, so the activation peak is 2 x 512 x 4096 x 2 (hidden states) + 512 x 128,256 x 38
    (sampler) = 8,388,608 + 2,495,348,736 = 2,503,737,344 B (default: 5,124,915,200 B)."""
    r = run_cli("capacity", M, "--gpu", "H100", "--max-num-batched-tokens", "512", "--json")
    assert r.code == 0, r.err
    doc = r.json()
    assert (doc["max_num_batched_tokens"], doc["max_num_seqs"]) == (512, 512)
    assert doc["activation_bytes"] == 2 * 512 * 4096 * 2 + 512 * 128256 * 38 == 2_503_737_344
    big = run_cli("capacity", M, "--gpu", "H100", "--max-num-batched-tokens", "4096",
                  "--json").json()
    assert big["max_num_seqs"] == 1024
    s = run_cli("simulate", M, "--gpu", "H100", "--max-num-batched-tokens", "512",
                "--num-prompts", "3", "--json")
    assert s.code == 0 and s.json()["max_num_seqs"] == 512
