"""kvplan simulate -dp N --enable-expert-parallel: the lockstep fleet's text and JSON
(golden per-rank lines), and one-line refusals (exit 2)."""

from __future__ import annotations

import json

import pytest

from tests.conftest import assert_one_line_error, run_cli

QWEN = "Qwen/Qwen3-30B-A3B"
DP8 = ("simulate", QWEN, "--gpu", "H200", "-dp", "8", "--enable-expert-parallel",
       "--max-model-len", "8192", "--num-prompts", "16")


RANKS = [(2, 144, 29), (3, 216, 30), (3, 216, 30), (2, 144, 31), (2, 144, 31), (2, 144, 31),
         (1, 72, 32), (1, 72, 32)]
"""(requests, peak KV blocks, dummy steps) per rank."""


def test_text_rank_lines() -> None:
    """16 prompts sent at t 0 leave vLLM 0.11.0's one API server 8.993 ms apart (its serial
    admission; --api-server-count defaults to 1) and reach the balancer 42.71 ms later, at
    51.7, 60.7, ..., 186.6 ms. The local counts send r0..r5 to ranks 0..5; the coordinator's
    0.1 s forward carries the counts rank 0 published after step 0 (0.0991 s: rank 0 running
    1, the rest still 0: r1..r5 arrived during the step), which replace the local +1s, so
    r6..r10 go to ranks 1..5; the 0.2 s forward comes after r15: r11..r15 -> ranks 6, 7, 0,
    1, 2. Ranks hold 2, 3, 3, 2, 2, 2, 1, 1 requests; each request holds 1,024 + 127
    computed tokens at its last step, cdiv(1151, 16) = 72 blocks, of a rank's
    1,201,584 / 16 - 1 = 75,098 usable (docs/parallelism.md). The staggered prefills take
    160 lockstep steps (5 waves of 32). Until 2026-12-07 the fleet skipped the admission:
    all 16 at 42.7 ms, 2 per rank, 128 steps."""
    r = run_cli(*DP8)
    assert r.code == 0, r.err
    assert "DP 8 ranks in lockstep, 160 steps:" in r.out
    for k, (n, peak, dummy) in enumerate(RANKS):
        pct = f"{100 * peak / 75098:.1f}"
        assert (f"rank {k}: {n} requests, peak KV {peak} / 75098 blocks ({pct} %), {dummy} "
                f"dummy steps" in r.out)


def test_json_keys() -> None:
    r = run_cli(*DP8, "--json")
    assert r.code == 0, r.err
    doc = r.json()
    assert (doc["data_parallel_size"], doc["enable_expert_parallel"]) == (8, True)
    assert doc["completed"] == 16 and doc["dp_lockstep_steps"] == 160
    ranks = doc["dp_ranks"]
    assert [(x["requests"], x["peak_kv_blocks"], x["dummy_steps"]) for x in ranks] == RANKS
    assert {x["num_gpu_blocks"] for x in ranks} == {75_099}
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


def test_dp_with_disagg_runs_dp_pools() -> None:
    """-dp applies to both pools; --decode-dp overrides the decode pool's (docs/
    disaggregation.md, "DP / EP pools")."""
    r = run_cli("simulate", QWEN, "--gpu", "H200", "-dp", "2", "--enable-expert-parallel",
                "--disagg", "1p1d", "--decode-dp", "4", "--num-prompts", "4", "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["prefill"]["data_parallel_size"] == 2
    assert doc["decode"]["data_parallel_size"] == 4
    assert doc["decode"]["enable_expert_parallel"] is True
    assert doc["prefill_data_parallel_size"] == 2 and doc["decode_data_parallel_size"] == 4
    assert doc["completed"] == 4 and doc["kv_transfers"] == 4
    # 4 prompts of 1,024 tokens, each decode GPU (TP1) receives 48 layers x 4 KV heads x
    # 128 x (K, V) x 2 B per token, DP adding no bytes: 4 x 1,024 x 98,304 B
    assert doc["kv_link_bytes"] == 4 * 1024 * 48 * 4 * 128 * 2 * 2 == 402_653_184


@pytest.mark.parametrize(("args", "says"), [
    (("--gpu", "A100-80GB", "-tp", "4", "--decode-dp", "4"),
     "16 GPUs spans more than one 8-GPU node of A100-80GB-SXM, whose inter-node "
     "interconnect kvplan does not know (give scale_out_gbps in a GPU file); within one "
     "node: --decode-dp 2 at --decode-tp 4"),
    (("--gpu", "H200", "--prefill-dp", "256"),
     "prefill pool (H200-SXM-141GB, DP256 x TP1 EP): expert parallelism over 256 GPUs "
     "(tp 1 x dp 256) exceeds the 128 experts"),
    (("--gpu", "H200", "--decode-dp", "0"), "--decode-dp must be a whole number in [1,"),
])
def test_dp_pool_bad_input(args: tuple[str, ...], says: str) -> None:
    r = run_cli("simulate", QWEN, "--disagg", "1p1d", "--enable-expert-parallel",
                "--num-prompts", "4", *args)
    assert_one_line_error(r)
    assert says in r.err


def test_dp_pool_of_a_dense_model_refused() -> None:
    r = run_cli("simulate", "meta-llama/Llama-3.1-8B", "--disagg", "1p2d", "--decode-dp", "2",
                "--num-prompts", "4")
    assert_one_line_error(r)
    assert ("--decode-dp 2: meta-llama/Llama-3.1-8B is dense" in r.err
            and "--decode-instances 4, --decode-dp 1" in r.err)


def test_dp_closed_loop_refused() -> None:
    r = run_cli("simulate", QWEN, "--gpu", "H200", "-dp", "2", "--enable-expert-parallel",
                "--max-concurrency", "2", "--num-prompts", "4")
    assert_one_line_error(r)
    assert "--max-concurrency" in r.err


def test_deepseek_dp_pools_move_the_mla_latent() -> None:
    """docs/disaggregation.md, "DP / EP pools", measured: DeepSeek-V3 on H200, DP2 x TP8 both
    pools, 50 prompts of 1,024 tokens: every decode GPU of the receiving rank gets 61 layers x
    1,024 tokens x 1,152 B (MLA's 576-value latent in bf16, replicated over TP8)."""
    r = run_cli("simulate", "deepseek-ai/DeepSeek-V3", "--gpu", "H200", "-tp", "8", "--disagg",
                "1P1D", "-dp", "2", "--num-prompts", "50", "--json")
    assert r.code == 0, r.err
    doc = json.loads(r.out)
    assert doc["kv_link_bytes"] == 50 * 8 * 61 * 1024 * 1152 == 28_783_411_200
    assert doc["completed"] == 50
    assert doc["prefill"]["data_parallel_size"] == doc["decode"]["data_parallel_size"] == 2
