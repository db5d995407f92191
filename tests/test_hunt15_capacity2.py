"""Hunt 15 (capacity, second pass): `kvplan capacity` against vLLM 0.11's arithmetic."""

from __future__ import annotations

from tests.conftest import run_cli

LLAMA8 = "meta-llama/Llama-3.1-8B"

# kvplan's CUDA-graph estimate for Llama-3.1-8B (max_num_seqs 256 on an H100): the largest
# captured batch is min(512, 2 x 256) = 512 tokens; its gated MLP intermediates are
# 512 x 14336 x 3 x 2 B = 44,040,192 B and four hidden-state buffers 4 x 512 x 4096 x 2 B =
# 16,777,216 B: 60,817,408 B = 58.00 MiB.
GRAPHS = 512 * 14336 * 3 * 2 + 4 * 512 * 4096 * 2


def test_enforce_eager_captures_no_cuda_graphs() -> None:
    """vLLM 0.11 with --enforce-eager captures no CUDA graphs (cudagraph mode NONE): their
    memory is 0. kvplan used to warn '--enforce-eager ignored' and print 58.00 MiB; the KV
    cache is unchanged (vLLM 0.11 captures graphs after sizing it)."""
    graphs = run_cli("capacity", LLAMA8, "--json")
    assert graphs.json()["cudagraph_bytes"] == GRAPHS
    for args in (("capacity", LLAMA8, "--enforce-eager", "--json"),
                 ("capacity", "--json", "--", "vllm", "serve", LLAMA8, "--enforce-eager")):
        r = run_cli(*args)
        assert r.code == 0 and "warning" not in r.err, r.err
        assert r.json()["cudagraph_bytes"] == 0
        assert r.json()["num_blocks"] == graphs.json()["num_blocks"] == 26_302
    text = run_cli("capacity", "--", "vllm", "serve", LLAMA8, "--enforce-eager").out
    assert "CUDA graphs (--enforce-eager: none) │        0 B" in text
    off = run_cli("capacity", "--json", "--", "vllm", "serve", LLAMA8, "--enforce-eager",
                  "--no-enforce-eager")
    assert off.json()["cudagraph_bytes"] == GRAPHS  # the last switch wins, as in argparse
