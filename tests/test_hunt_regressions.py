"""Hunt round: defects a user hits, each pinned by a hand-checkable golden value."""

from __future__ import annotations

import pytest

from tests.conftest import run_cli

L8B = "meta-llama/Llama-3.1-8B"

# ------------------------------------ H1: --kv-cache-memory-bytes as vLLM 0.11 reads it
# vLLM parses the flag with human_readable_int: lowercase k/m/g/t are decimal (24g =
# 24,000,000,000 bytes), uppercase binary (24G = 24 x 2^30). Llama-3.1-8B's block is
# 16 tokens x 128 KiB = 2 MiB, so 24e9 bytes hold 24e9 // 2,097,152 = 11,444 blocks.


@pytest.mark.parametrize(("value", "available", "blocks", "pasted"), [
    *((v, a, b, p) for v, a, b in (("24g", 24_000_000_000, 11_444), ("24G", 24 * 2**30, 12_288),
                                   ("6000m", 6_000_000_000, 2_861)) for p in (False, True)),
    # kvplan's own flag only: vLLM's human_readable_int refuses them (tests/test_hunt11_paste.py)
    ("24GiB", 24 * 2**30, 12_288, False),
    ("24GB", 24_000_000_000, 11_444, False),
])
def test_kv_cache_memory_suffixes_read_as_vllm(value: str, available: int, blocks: int,
                                               pasted: bool) -> None:
    args = (["capacity", "--gpu", "H100", "--json", "--", "vllm", "serve", L8B,
             "--max-model-len", "8192", "--kv-cache-memory-bytes", value] if pasted else
            ["capacity", L8B, "--gpu", "H100", "--json", "--max-model-len", "8192",
             "--kv-cache-memory", value])
    res = run_cli(*args)
    assert res.code == 0, res.err
    doc = res.json()
    assert doc["available_kv_bytes"] == available
    assert doc["num_blocks"] == blocks


# --------------------------- H2: --max-num-batched-tokens takes vLLM's human-readable ints
# vLLM 0.11 parses max_num_batched_tokens with human_readable_int too: 16k = 16,000,
# 16K = 16,384; both were refused ("not a valid int").


@pytest.mark.parametrize(("value", "tokens"), [("16k", 16_000), ("16K", 16_384),
                                                ("2048", 2048)])
def test_max_num_batched_tokens_human_readable(value: str, tokens: int) -> None:
    own = run_cli("capacity", L8B, "--gpu", "H100", "--json",
                  "--max-num-batched-tokens", value)
    assert own.code == 0, own.err
    assert own.json()["max_num_batched_tokens"] == tokens
    pasted = run_cli("capacity", "--gpu", "H100", "--json", "--", "vllm", "serve", L8B,
                     "--max-num-batched-tokens", value)
    assert pasted.code == 0, pasted.err
    assert pasted.json()["max_num_batched_tokens"] == tokens


@pytest.mark.parametrize("command", [
    ["latency", L8B, "--gpu", "H100", "--prompt", "64", "--output", "4"],
    ["simulate", L8B, "--gpu", "H100", "--num-prompts", "2", "--random-input-len", "64",
     "--random-output-len", "4"],
])
def test_max_num_batched_tokens_human_readable_other_commands(command: list[str]) -> None:
    res = run_cli(*command, "--max-num-batched-tokens", "4K", "--json")
    assert res.code == 0, res.err
    bad = run_cli(*command, "--max-num-batched-tokens", "4.5K", "--json")
    assert bad.code == 2
    assert bad.err.startswith("error: --max-num-batched-tokens")


# ------------------------------ H3: --dtype sets the KV cache's dtype when it is 'auto'
# vLLM's --kv-cache-dtype auto is the model's *served* dtype, which --dtype sets. Llama-3.1-8B
# at --dtype float32: 2 x 32 layers x 8 heads x 128 x 4 bytes = 256 KiB per token, a
# 16-token block 4 MiB, so 24 GiB hold 6,144 blocks (it was sized at bf16: 12,288).


@pytest.mark.parametrize("pasted", [False, True])
def test_dtype_float32_sizes_the_auto_kv_cache(pasted: bool) -> None:
    flags = ["--dtype", "float32", "--max-model-len", "8192", "--kv-cache-memory-bytes", "24G"]
    args = (["capacity", "--gpu", "H100", "--json", "--", "vllm", "serve", L8B, *flags]
            if pasted else ["capacity", L8B, "--gpu", "H100", "--json", *flags])
    res = run_cli(*args)
    assert res.code == 0, res.err
    doc = res.json()
    assert doc["page_size_bytes"] == 16 * 8 * 128 * 2 * 4  # one layer's block: 128 KiB
    assert doc["num_blocks"] == 6_144
    assert doc["kv_cache_tokens"] == 98_304


def test_dtype_float32_kv_in_simulate_and_explicit_kv_dtype_wins() -> None:
    sim = run_cli("simulate", L8B, "--gpu", "H100", "--dtype", "float32", "--max-model-len",
                  "8192", "--kv-cache-memory", "24G", "--num-prompts", "2",
                  "--random-input-len", "64", "--random-output-len", "4", "--json")
    assert sim.code == 0, sim.err
    assert sim.json()["num_blocks"] == 6_144
    fp8 = run_cli("capacity", L8B, "--gpu", "H100", "--json", "--dtype", "float32",
                  "--kv-cache-dtype", "fp8", "--max-model-len", "8192",
                  "--kv-cache-memory", "24G")
    assert fp8.code == 0, fp8.err
    assert fp8.json()["num_blocks"] == 24_576  # 1-byte cache: 1 MiB blocks
