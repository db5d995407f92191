"""hunt13: the GPU catalog and prices against datasheets, torch's totals and vLLM."""

from __future__ import annotations

from tests.conftest import assert_one_line_error, run_cli

L1B = "meta-llama/Llama-3.2-1B"
GIB = 2**30


def test_kv_cache_memory_is_bounded_by_the_cuda_total_not_the_datasheet_gb() -> None:
    # H100 SXM: CUDA reports 79.18 GiB (what `kvplan gpus` and the capacity table print);
    # the datasheet's 80 GB is 74.51 GiB. 76 GiB of KV + 2.32 GiB of Llama-3.2-1B weights fits
    # in 79.18 GiB, and vLLM allocates it; kvplan refused it ("exceeds ... 74.51 GiB").
    r = run_cli("capacity", L1B, "--gpu", "H100", "--kv-cache-memory", "76GiB", "--json")
    assert r.code == 0, r.err
    assert r.json()["available_kv_bytes"] == 76 * GIB
    # the bound is the CUDA total: 80 GiB > 79.18 GiB is refused, naming 79.18 GiB
    bad = run_cli("capacity", L1B, "--gpu", "H100", "--kv-cache-memory", "80GiB")
    assert_one_line_error(bad)
    assert "exceeds H100-SXM-80GB's 79.18 GiB" in bad.err
