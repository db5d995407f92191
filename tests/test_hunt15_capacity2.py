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


def test_num_gpu_blocks_override_replaces_the_block_count() -> None:
    """vLLM 0.11 ``may_override_num_blocks``: after checking that one request fits in the free
    memory, num_blocks = the override (logged "Overriding num_gpu_blocks=26302 with
    num_gpu_blocks_override=1000"). Llama-3.1-8B, one group, block 16: "GPU KV cache size"
    = 1000 // 1 x 16 = 16,000 tokens; a 131,072-token request needs 131072 / 16 = 8,192
    blocks: concurrency 1000 / 8192 = 0.1220703125 (0.12x). kvplan used to warn 'ignored' and
    print 26,302 blocks, 420,832 tokens, 3.21x."""
    for args in (("capacity", LLAMA8, "--num-gpu-blocks-override", "1000", "--json"),
                 ("capacity", "--json", "--", "vllm", "serve", LLAMA8,
                  "--num-gpu-blocks-override", "1000")):
        r = run_cli(*args)
        assert r.code == 0 and "warning" not in r.err, r.err
        doc = r.json()
        assert (doc["num_blocks"], doc["kv_cache_tokens"]) == (1000, 16_000)
        assert doc["max_concurrency"] == 1000 / 8192
        assert doc["num_gpu_blocks_override"] == 1000 and doc["ignored_vllm_flags"] == []
    text = run_cli("capacity", LLAMA8, "--num-gpu-blocks-override", "1000").out
    assert "Overriding num_gpu_blocks=26302 with num_gpu_blocks_override=1000" in text
    assert "GPU KV cache size: 16,000 tokens" in text
    assert "Maximum concurrency for 131,072 tokens per request: 0.12x" in text


def test_num_gpu_blocks_override_with_several_groups_and_its_limits() -> None:
    """gemma-3-27b-it (7 groups of 10 layers) at 32k: 700 blocks // 7 x 16 = 1,600 tokens.
    Past the free memory vLLM allocates them anyway: 100,000 x 64 KiB (16 x 8 x 128 x 2 x
    2 B) x 32 layers = 195.31 GiB > 51.37 GiB free, a warning. 0 is refused (vLLM's
    BlockPool asserts num_gpu_blocks > 0)."""
    gemma = run_cli("capacity", "google/gemma-3-27b-it", "--max-model-len", "32768",
                    "--num-gpu-blocks-override", "700", "--json")
    assert (gemma.json()["num_blocks"], gemma.json()["kv_cache_tokens"]) == (700, 1_600)
    over = run_cli("capacity", LLAMA8, "--num-gpu-blocks-override", "100000")
    assert over.code == 0
    assert over.err.startswith("warning: --num-gpu-blocks-override 100,000 allocates "
                               "195.31 GiB of KV cache, more than the 51.37 GiB")
    zero = run_cli("capacity", "--", "vllm", "serve", LLAMA8, "--num-gpu-blocks-override", "0")
    assert zero.code == 2 and zero.err.startswith("error: --num-gpu-blocks-override")


def test_simulate_pool_takes_the_override() -> None:
    """simulate's block pool is vLLM's num_gpu_blocks: the override, not 26,302."""
    r = run_cli("simulate", LLAMA8, "--num-prompts", "4", "--random-input-len", "100",
                "--random-output-len", "4", "--num-gpu-blocks-override", "200", "--json")
    assert r.code == 0, r.err
    assert r.json()["num_blocks"] == 200


GEMMA3 = "google/gemma-3-27b-it"
# gemma-3-27b-it's vision_config (SigLIP: hidden 1152, MLP 4304, 27 layers, 896 px images in
# 14 px patches, 3 channels, no pooling head) and text hidden 5376, as vLLM 0.11's siglip.py
# and gemma3_mm.py build them (every bias and LayerNorm weight+bias counted):
PATCH = 3 * 14 * 14 * 1152 + 1152  # Conv2d weight + bias                     678,528
POSITIONS = (896 // 14) ** 2 * 1152  # 4096 positions (a multiple of 64)    4,718,592
LAYER = ((3 * 1152 * 1152 + 3 * 1152)  # qkv_proj + bias                     3,984,768
         + (1152 * 1152 + 1152)  # out_proj + bias                           1,328,256
         + (4304 * 1152 + 4304)  # fc1 + bias                                4,962,512
         + (1152 * 4304 + 1152)  # fc2 + bias                                4,959,360
         + 2 * 2 * 1152)  # layer_norm1, layer_norm2 (weight + bias)             4,608
PROJECTOR = 1152 * 5376 + 1152  # mm_input_projection_weight + mm_soft_emb_norm
VISION = PATCH + POSITIONS + 27 * LAYER + 2 * 1152 + PROJECTOR  # post_layernorm 2,304
# TP 2: q/k/v, fc1 (weights and biases), out_proj / fc2 weights and the positions halve;
# the conv, out_proj / fc2 biases, LayerNorms and projector stay whole on each GPU.
HALVED = POSITIONS + 27 * (3 * 1152 * 1152 + 3 * 1152 + 1152 * 1152 + 2 * 4304 * 1152 + 4304)
VISION_TP2 = VISION - HALVED // 2


def test_gemma3_vision_tower_is_loaded_beside_the_text_model() -> None:
    """vLLM 0.11 loads gemma-3-27b-it's SigLIP tower and projector: 423,060,336 parameters,
    846,120,672 B in bf16 (0.79 GiB) more weights than the text model kvplan priced (50.59
    -> 51.38 GiB on an H100), so the KV cache is that much smaller: 11,678,658,432 B (8,910
    blocks of 10 x 128 KiB) -> 10,832,537,760 B // 1,310,720 = 8,264 blocks (8,198 since
    hunt 16 counts the profiling run's 86,661,120 B of dummy image embeddings)."""
    from kvplan.costs.memory.vision import vision_bytes, vision_params
    from kvplan.specs.catalog import load_model

    assert VISION == 423_060_336
    model = load_model(GEMMA3)
    assert vision_params(model) == VISION
    assert vision_bytes(model) == 2 * VISION == 846_120_672
    assert vision_bytes(model, tp=2) == 2 * VISION_TP2 == 430_122_096
    assert vision_params(load_model("google/gemma-2-27b")) == 0  # text-only: no tower
    r = run_cli("capacity", GEMMA3, "--max-model-len", "32768", "--json")
    doc = r.json()
    text_weights = 54_320_682_496  # kvplan's earlier figure: text model + its rope caches
    assert doc["weights_bytes"] == text_weights + 846_120_672
    held = 31 * 260 * 5376 * 2  # dummy image embeddings (test_hunt16_vision)
    assert doc["available_kv_bytes"] == 11_678_658_432 - 846_120_672 - held
    assert doc["num_blocks"] == (11_678_658_432 - 846_120_672 - held) // (10 * 128 * 1024)
    assert doc["num_blocks"] == 8_198
    from kvplan.costs.memory.activation import rope_cache_bytes
    from kvplan.costs.memory.params import weight_bytes_per_gpu

    tp2 = run_cli("capacity", GEMMA3, "-tp", "2", "--max-model-len", "32768", "--json").json()
    text_tp2 = weight_bytes_per_gpu(model, tp=2) + rope_cache_bytes(model)
    assert tp2["weights_bytes"] == text_tp2 + 430_122_096


def test_gpt_oss_cuda_graph_estimate_uses_its_992_capture() -> None:
    """vLLM 0.11's GptOssForCausalLMConfig captures graphs up to 992 tokens (kvplan's step
    model pads to it: costs/step/cudagraph.py), but the memory estimate used 512. gpt-oss-20b
    (hidden 2880, 32 experts of 2880, top-4) at 992 tokens: fused-MoE workspace 992 x 4 x
    (max(5760, 2880) + 2880) x 2 B = 68,567,040 B (above the dense 992 x 8640 x 2 B) plus four
    hidden buffers 4 x 992 x 2880 x 2 B = 22,855,680 B: 91,422,720 B = 87.19 MiB (was
    47,185,920 B = 45.00 MiB, the same terms at 512)."""
    for seqs in ((), ("--max-num-seqs", "8")):
        r = run_cli("capacity", "openai/gpt-oss-20b", *seqs, "--json")
        assert r.json()["cudagraph_bytes"] == 992 * 4 * 8640 * 2 + 4 * 992 * 2880 * 2
    assert "CUDA graphs (after, not subtracted) │  87.19 MiB" in run_cli(
        "capacity", "openai/gpt-oss-20b").out
