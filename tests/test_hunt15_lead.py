"""Hunt 15 (merges): checks the merged helpers' work left between two commands."""

from __future__ import annotations

from tests.conftest import run_cli

M = "meta-llama/Llama-3.1-8B"


def test_simulate_warns_of_a_kv_cache_memory_vllm_cannot_start_as_capacity_does() -> None:
    # 70 GiB of KV cache beside 14.99 GiB of weights + 133 MiB non-torch on a 79.18 GiB H100:
    # 79.18 - 14.99 - 0.13 = 64.06 GiB at most (capacity's warning); simulate served the
    # 70 GiB pool silently
    cap = run_cli("capacity", M, "--gpu", "H100", "--kv-cache-memory", "70GiB", "--json")
    sim = run_cli("simulate", M, "--gpu", "H100", "--kv-cache-memory", "70GiB",
                  "--num-prompts", "10", "--json")
    assert cap.code == 0 and sim.code == 0, (cap.err, sim.err)
    warning = [x for x in cap.err.splitlines() if x.startswith("warning: --kv-cache-memory")]
    assert warning and "at most 64.06 GiB of KV cache fits beside them" in warning[0]
    assert warning[0] in sim.err.splitlines()


def test_simulate_within_the_gpu_gives_no_warning() -> None:
    sim = run_cli("simulate", M, "--gpu", "H100", "--kv-cache-memory", "60GiB",
                  "--num-prompts", "10", "--json")
    assert sim.code == 0, sim.err
    assert "warning" not in sim.err
