"""Hunt 15, `kvplan capacity` against vLLM 0.11's startup arithmetic."""

from __future__ import annotations

from tests.conftest import run_cli

LLAMA8 = "meta-llama/Llama-3.1-8B"

# Llama-3.1-8B on an H100 (CUDA total 85,020,000,000 B): weights 8,030,261,248 params x 2 B
# + the rope cache 131,072 x 128 x 2 B = 16,094,076,928 B; non-torch 133 MiB = 139,460,608 B;
# so at most 85,020,000,000 - 16,094,076,928 - 139,460,608 = 68,786,462,464 B of KV cache
# (64.06 GiB, above the 4.77 GiB peak activation) can be allocated beside them.
ROOM = 85_020_000_000 - 16_094_076_928 - 139_460_608


def test_given_kv_cache_memory_must_fit_beside_the_weights() -> None:
    """vLLM 0.11 with kv_cache_memory_bytes still loads the weights and then allocates that
    much KV cache: 75 GiB beside 14.99 GiB of weights on a 79.18 GiB H100 runs out of memory.
    kvplan used to answer 38,400 blocks, 4.69x without a word; now a stderr warning with the
    room left (the blocks the given size holds are still printed, as vLLM's arithmetic)."""
    fits = run_cli("capacity", LLAMA8, "--kv-cache-memory", str(ROOM), "--json")
    assert fits.code == 0 and "warning" not in fits.err, fits.err
    assert fits.json()["available_kv_bytes"] == ROOM
    over = run_cli("capacity", LLAMA8, "--kv-cache-memory", str(ROOM + 1), "--json")
    assert over.code == 0, over.err
    assert over.json()["available_kv_bytes"] == ROOM + 1  # stdout stays one JSON object
    assert over.err.startswith("warning: --kv-cache-memory 64.06 GiB does not fit on H100")
    assert "at most 64.06 GiB of KV cache fits beside them" in over.err


def test_given_kv_cache_memory_with_weights_larger_than_the_gpu() -> None:
    """Llama-3.1-70B's 131.45 GiB of bf16 weights on one H100 with --kv-cache-memory 20GiB:
    kvplan used to print 4,096 blocks and 8.00x as if it ran; vLLM cannot even load the
    weights. At TP 4 (32.87 GiB of weights + 20 GiB) it fits: no warning."""
    args = ("capacity", "meta-llama/Llama-3.1-70B", "--kv-cache-memory", "20GiB",
            "--max-model-len", "8192")
    r = run_cli(*args)
    assert r.code == 0, r.err
    assert "warning: --kv-cache-memory 20.00 GiB does not fit" in r.err
    assert r.err.rstrip().endswith("the weights alone do not fit")
    ok = run_cli(*args, "-tp", "4")
    assert ok.code == 0 and "warning" not in ok.err, ok.err


def test_utilization_one_is_refused_as_vllm_refuses_it() -> None:
    """vLLM 0.11's gpu_worker.init_device raises "Free memory on device (F/T GiB) on startup is
    less than desired GPU memory utilization (1.0, T GiB)": the worker's own CUDA context is
    never free, so F < T = 1.0 x T always. kvplan used to plan 30,356 blocks (3.71x) for
    Llama-3.1-8B on an H100 at 1.0; now one error line, exit 2. 0.999 is still planned."""
    from tests.conftest import assert_one_line_error

    for value in ("1", "1.0"):
        r = run_cli("capacity", LLAMA8, "--gpu-memory-utilization", value)
        assert_one_line_error(r)
        assert r.err.startswith("error: --gpu-memory-utilization 1.0: vLLM refuses to start")
    pasted = run_cli("capacity", "--", "vllm", "serve", LLAMA8, "--gpu-memory-utilization", "1")
    assert pasted.code == 2 and "refuses to start" in pasted.err
    ok = run_cli("capacity", LLAMA8, "--gpu-memory-utilization", "0.999", "--json")
    assert ok.code == 0, ok.err
    # 0.999 x 85,020,000,000 = 84,934,980,000 B requested
    assert ok.json()["requested_bytes"] == 84_934_980_000
