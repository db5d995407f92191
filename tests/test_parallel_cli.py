"""capacity / latency with --data-parallel-size and --enable-expert-parallel: output, JSON
keys, the pasted vllm serve line, and one-line refusals (exit 2)."""

from __future__ import annotations

import pytest

from tests.conftest import assert_one_line_error, run_cli

QWEN = "Qwen/Qwen3-30B-A3B"
PARALLEL_KEYS = {
    "data_parallel_size", "expert_parallel", "expert_parallel_size",
    "expert_tensor_parallel_size", "num_experts", "local_experts_per_gpu",
    "uneven_expert_split", "gpus_per_rank", "total_gpus", "expert_weights_bytes_per_gpu",
    "non_expert_weights_bytes_per_gpu", "kv_cache_bytes_per_rank", "kv_cache_tokens_per_rank",
    "max_concurrency_per_rank", "kv_cache_tokens_fleet", "max_concurrency_fleet"}


def test_capacity_json_per_rank_and_fleet() -> None:
    r = run_cli("capacity", QWEN, "--gpu", "H200", "-dp", "8", "--enable-expert-parallel",
                "--max-model-len", "8192", "--json")
    assert r.code == 0, r.err
    doc = r.json()
    p = doc["parallel"]
    assert set(p) == PARALLEL_KEYS
    assert (p["expert_parallel_size"], p["local_experts_per_gpu"], p["total_gpus"]) == (8, 16, 8)
    assert p["expert_weights_bytes_per_gpu"] == 7_247_757_312
    assert p["kv_cache_tokens_per_rank"] == doc["kv_cache_tokens"]
    assert p["kv_cache_tokens_fleet"] == 8 * doc["kv_cache_tokens"]
    assert p["max_concurrency_fleet"] == 8 * doc["max_concurrency"]


def test_capacity_text_names_units_and_totals() -> None:
    r = run_cli("capacity", QWEN, "--gpu", "H200", "-dp", "8", "--enable-expert-parallel",
                "--max-model-len", "8192")
    assert r.code == 0, r.err
    assert "8 DP ranks x 1 GPUs (tp 1, pp 1) = 8 GPUs" in r.out
    assert "EP 8: 16 of 128 experts per GPU; 6.75 GiB per GPU" in r.out
    assert "per DP rank: KV cache" in r.out and "fleet (8 ranks):" in r.out


def test_tp_capacity_json_has_no_parallel_key() -> None:
    r = run_cli("capacity", QWEN, "--gpu", "H200", "-tp", "8", "--json")
    assert r.code == 0 and "parallel" not in r.json()


def test_pasted_line_sets_dp_and_ep() -> None:
    r = run_cli("capacity", "--gpu", "H200", "--json", "--", "vllm", "serve", QWEN,
                "--data-parallel-size", "8", "--enable-expert-parallel")
    assert r.code == 0, r.err
    assert "warning" not in r.err
    assert r.json()["parallel"]["local_experts_per_gpu"] == 16


def test_uneven_split_is_allowed_and_said() -> None:
    r = run_cli("capacity", QWEN, "--gpu", "H200", "-dp", "3", "--enable-expert-parallel")
    assert r.code == 0, r.err
    assert "43 of 128 experts per GPU (uneven" in r.out


def test_refusals_are_one_line_exit_2() -> None:
    for args in (
        ("capacity", QWEN, "--gpu", "L40S", "-dp", "16", "--enable-expert-parallel"),
        ("capacity", "mistralai/Mixtral-8x7B-v0.1", "--gpu", "H200", "-dp", "16",
         "--enable-expert-parallel"),
        ("latency", QWEN, "--gpu", "H100", "--prompt", "64", "--output", "4", "-dp", "2",
         "--all2all-backend", "deepep"),
        ("latency", QWEN, "--gpu", "H100", "--prompt", "64", "--output", "4", "-dp", "2",
         "--expert-imbalance", "0.5"),
        ("latency", QWEN, "--gpu", "H100", "--prompt", "64", "--output", "4", "-dp", "2",
         "--sweep", "batch=1,2"),
        ("latency", QWEN, "--gpu", "MI300X", "--prompt", "64", "--output", "4", "-dp", "2"),
    ):
        assert_one_line_error(run_cli(*args))


def test_ep_on_a_dense_model_warns_like_vllm_ignores() -> None:
    r = run_cli("latency", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--prompt", "64",
                "--output", "4", "--batch", "4", "-dp", "2", "--enable-expert-parallel",
                "--json")
    assert r.code == 0, r.err
    assert "has no effect on meta-llama/Llama-3.1-8B, a dense model" in r.err
    assert r.json()["parallel"] == {"data_parallel_size": 2, "enable_expert_parallel": False,
                                    "batch_per_rank": 2, "all2all_backend": None,
                                    "expert_imbalance": 1.0}


def test_latency_json_parallel_keys() -> None:
    r = run_cli("latency", QWEN, "--gpu", "H200", "--prompt", "256", "--output", "8",
                "--batch", "64", "-dp", "8", "--enable-expert-parallel", "--all2all-backend",
                "deepep", "--json")
    assert r.code == 0, r.err
    doc = r.json()
    assert doc["parallel"]["batch_per_rank"] == 8
    assert doc["parallel"]["all2all_backend"] == "deepep"
    ops = {o["op"] for s in doc["step_ops"] for o in s["ops"]}
    assert "moe_dispatch_combine (deepep)" in ops and "all_reduce" not in ops
    assert doc["output_throughput_tok_s"] == 64 * 8 / doc["e2e_s"]


def test_gpus_json_says_which_gpus_price_multi_node() -> None:
    r = run_cli("gpus", "--json")
    assert r.code == 0, r.err
    by_id = {g["id"]: g for g in r.json()["gpus"]}
    assert by_id["H200-SXM-141GB"]["node_gpus"] == 8
    assert by_id["H200-SXM-141GB"]["scale_out_bytes_per_s"] == 50e9
    assert by_id["L40S"]["scale_out_bytes_per_s"] is None


def test_explain_lists_collectives_of_steps_longer_than_the_first_tables() -> None:
    """A 16,384-token prefill step (past the 8,192-token tables built up front) lists its
    all-reduces, each 16,384 x 8,192 x 2 B = 268,435,456 B over 8 GPUs, not folded into
    "overheads + rest"; the ops and the rest add up to the step."""
    r = run_cli("latency", "meta-llama/Llama-3.1-70B", "--gpu", "H100", "-tp", "8",
                "--prompt", "16384", "--output", "2", "--max-num-batched-tokens", "16384",
                "--json")
    assert r.code == 0, r.err
    prefill = next(s for s in r.json()["step_ops"] if s["phase"] == "prefill")
    (ar,) = [o for o in prefill["ops"] if o["op"] == "all_reduce"]
    # 2L + 1 all-reduces: the embedding's output too (hunt 15)
    assert ar["layers"] == 161 and ar["shape"] == "268435456 B x 8 GPUs"
    assert ar["seconds"] > 0.05  # 2 per layer x 80 layers of 256 MiB: tens of ms at least
    assert sum(o["seconds"] for o in prefill["ops"]) == pytest.approx(prefill["kernels_s"])


def test_explain_all_reduce_shows_the_padded_tokens_its_graph_runs() -> None:
    """A 100-token prefill replays the 104-token CUDA graph (multiples of 8 below 256): its
    GEMM rows say m=104 and its all-reduces move 104 x 8,192 x 2 B = 1,703,936 B (they run
    inside the graph; the row said 100 x 16,384 = 1,638,400 B while pricing 104)."""
    r = run_cli("latency", "meta-llama/Llama-3.1-70B", "--gpu", "H100", "-tp", "4",
                "--prompt", "100", "--output", "2", "--json")
    assert r.code == 0, r.err
    prefill = next(s for s in r.json()["step_ops"] if s["phase"] == "prefill")
    rows = {o["op"]: o for o in prefill["ops"]}
    assert rows["qkv_proj"]["shape"].startswith("m=104 ")
    assert rows["all_reduce"]["shape"] == "1703936 B x 4 GPUs"
