"""kvplan simulate -dp N --enable-expert-parallel: the lockstep fleet's text and JSON
(golden per-rank lines), and one-line refusals (exit 2)."""

from __future__ import annotations

from tests.conftest import assert_one_line_error, run_cli

QWEN = "Qwen/Qwen3-30B-A3B"
DP8 = ("simulate", QWEN, "--gpu", "H200", "-dp", "8", "--enable-expert-parallel",
       "--max-model-len", "8192", "--num-prompts", "16")


def test_text_rank_lines() -> None:
    """16 prompts at once: the balancer's local counts send 2 to each of 8 ranks. Each
    request holds 1,024 + 127 computed tokens at its last step: cdiv(1151, 16) = 72 blocks,
    2 requests = 144 of a rank's 1,201,584 / 16 - 1 = 75,098 usable blocks
    (docs/parallelism.md). Steps: 1 prefill (2 x 1,024 <= 8,192) + 127 decodes = 128, four
    32-step waves' worth: the wave ends with no dummy step."""
    r = run_cli(*DP8)
    assert r.code == 0, r.err
    assert "DP 8 ranks in lockstep, 128 steps:" in r.out
    for k in range(8):
        assert (f"rank {k}: 2 requests, peak KV 144 / 75098 blocks (0.2 %), 0 dummy steps"
                in r.out)


def test_json_keys() -> None:
    r = run_cli(*DP8, "--json")
    assert r.code == 0, r.err
    doc = r.json()
    assert (doc["data_parallel_size"], doc["enable_expert_parallel"]) == (8, True)
    assert doc["completed"] == 16 and doc["dp_lockstep_steps"] == 128
    ranks = doc["dp_ranks"]
    assert [x["requests"] for x in ranks] == [2] * 8
    assert {x["num_gpu_blocks"] for x in ranks} == {75_099}
    assert {x["peak_kv_blocks"] for x in ranks} == {144}
    assert doc["max_concurrent_requests"] == 16


def test_dense_dp_refused() -> None:
    r = run_cli("simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H200", "-dp", "2",
                "--num-prompts", "4")
    assert_one_line_error(r)
    assert "independent engines" in r.err


def test_ep_wider_than_experts_refused() -> None:
    r = run_cli("simulate", QWEN, "--gpu", "H200", "-dp", "256", "--enable-expert-parallel",
                "--num-prompts", "4")
    assert_one_line_error(r)
    assert "exceeds the 128 experts" in r.err


def test_dp_with_disagg_refused() -> None:
    r = run_cli("simulate", QWEN, "--gpu", "H200", "-dp", "2", "--enable-expert-parallel",
                "--disagg", "1p1d", "--num-prompts", "4")
    assert_one_line_error(r)
    assert "--disagg takes TP pools only" in r.err


def test_dp_closed_loop_refused() -> None:
    r = run_cli("simulate", QWEN, "--gpu", "H200", "-dp", "2", "--enable-expert-parallel",
                "--max-concurrency", "2", "--num-prompts", "4")
    assert_one_line_error(r)
    assert "--max-concurrency" in r.err
