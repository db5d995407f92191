"""Hunt 13, same question: one number asked of different kvplan entry points must agree."""

from __future__ import annotations

from tests.conftest import run_cli

Q30 = "Qwen/Qwen3-30B-A3B"


def test_dp_simulate_num_blocks_is_the_ranks_vllm_blocks_summed() -> None:
    # Qwen3-30B-A3B at TP 2: 48 layers x 16 tokens x (K+V) x 2 KV heads x 128 x 2 B = 786,432 B
    # a block; --kv-cache-memory 1G = 2^30 B: 1,365 blocks per rank (capacity's num_blocks),
    # 2 ranks: 2,730, of which 2 are null blocks (one per engine): 2,728 usable.
    # The fleet reported 2,729 (usable + 1), a count no engine has.
    flags = ["-tp", "2", "-dp", "2", "--kv-cache-memory", "1G", "--max-model-len", "4096"]
    cap = run_cli("capacity", Q30, "--gpu", "H100", "--json", *flags)
    assert cap.code == 0, cap.err
    assert cap.json()["num_blocks"] == 1_365
    sim = run_cli("simulate", Q30, "--gpu", "H100", *flags, "--num-prompts", "4",
                  "--random-input-len", "1000", "--random-output-len", "10", "--json")
    assert sim.code == 0, sim.err
    doc = sim.json()
    assert [r["num_gpu_blocks"] for r in doc["dp_ranks"]] == [1_365, 1_365]
    assert doc["num_blocks"] == 2_730
    assert doc["peak_kv_usage"] == doc["peak_kv_blocks"] / 2_728
    text = run_cli("simulate", Q30, "--gpu", "H100", *flags, "--num-prompts", "4",
                   "--random-input-len", "1000", "--random-output-len", "10")
    assert f"{doc['peak_kv_blocks']} / 2728 usable" in text.out
