"""kvplan simulate -dp N --enable-expert-parallel: the lockstep fleet's text and JSON
(golden per-rank lines), and one-line refusals (exit 2)."""

from __future__ import annotations

import json

import pytest

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
