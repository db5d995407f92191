"""Hunt 14 (hybrid): state-space, linear-attention and sliding-window models against vLLM
0.11's arithmetic."""

from __future__ import annotations

from kvplan.costs.step.constants import step_constants
from kvplan.costs.step.ops import stage_ops
from kvplan.specs.catalog import load_model
from kvplan.specs.serving import EngineConfig
from tests.conftest import assert_one_line_error, run_cli

NEMOTRON = "nvidia/Nemotron-H-56B-Base-8K"
QWEN_NEXT = "Qwen/Qwen3-Next-80B-A3B-Thinking"


def test_nemotron_h_runs_one_all_reduce_per_layer() -> None:
    """A Nemotron-H layer is one block (mamba mixer, attention or MLP; vLLM nemotron_h.py),
    each ending in one RowParallelLinear (out_proj / o_proj / down_proj): 118 layers at TP2
    run 118 all-reduces a step + the embedding's one = 119, not 2 x 118 + 1 = 237 (n_groups 8
    divides TP2, so the gated RMSNorm adds none). A mixer + MoE layer (Qwen3-Next) keeps
    2 x 48 + 1 = 97 at TP4."""
    tp2 = EngineConfig(tensor_parallel_size=2)
    nemotron = load_model(NEMOTRON)
    assert stage_ops(nemotron, tp2).allreduces == 119
    assert step_constants(nemotron, tp2).allreduces == 119
    tp4 = EngineConfig(tensor_parallel_size=4)
    qwen = load_model(QWEN_NEXT)
    assert stage_ops(qwen, tp4).allreduces == 97
    assert step_constants(qwen, tp4).allreduces == 97
    assert stage_ops(nemotron, EngineConfig()).allreduces == 0


def test_nemotron_h_tp_that_splits_its_mamba_groups_is_refused() -> None:
    """vLLM 0.11's MambaMixer2 asserts ``n_groups % tp == 0 or n_groups == 1``: Nemotron-H's
    n_groups 8 allows TP 1, 2, 4, 8; TP 16 divides the 64 attention and 256 Mamba2 heads but
    not the 8 groups, so vLLM does not start (kvplan printed a capacity for it)."""
    for cmd in ("capacity", "kv"):
        r = run_cli(cmd, NEMOTRON, "-tp", "16")
        assert_one_line_error(r)
        assert "n_groups 8" in r.err
    assert run_cli("capacity", NEMOTRON, "-tp", "8", "--json").code == 0


def test_flags_that_turn_the_hybrid_kv_cache_manager_off_are_modelled() -> None:
    """vLLM 0.11 VllmConfig.__post_init__ turns the hybrid KV cache manager off under
    --disable-hybrid-kv-cache-manager, --kv-events-config or --kv-transfer-config, and
    unify_hybrid_kv_cache_specs then caches gemma-3's sliding layers as full attention: one
    group of all 62 layers (UniformTypeKVCacheSpecs), page 62 x 16 x 16 heads x 128 x 2 x 2 B
    = 8,126,464 B; 10,745,876,640 B (11,678,658,432 less the 846,120,672 B vision tower,
    hunt 15, and the 86,661,120 B of dummy image embeddings the profiling run holds, hunt
    16) // 8,126,464 = 1,322 blocks, 1,322 x 16 = 21,152 tokens, 1,322 / cdiv(8192, 16)
    = 2.58x (kvplan kept the windows: 7 groups, 8,910 blocks, 20,352
    tokens, 2.48x). A model mixing state and attention layers cannot be unified: vLLM raises
    "failed to convert the KV cache specs to one unified type"; kvplan answered."""
    for flag in (["--disable-hybrid-kv-cache-manager"], ["--kv-events-config", "{}"]):
        r = run_cli("capacity", "--json", "--", "vllm", "serve", "google/gemma-3-27b-it",
                    "--max-model-len", "8192", *flag)
        assert r.code == 0, r.err
        doc = r.json()
        assert (doc["num_blocks"], doc["kv_cache_tokens"]) == (1322, 21152)
        assert round(doc["max_concurrency"], 2) == 2.58
        assert len(doc["groups"]) == 1 and doc["ignored_vllm_flags"] == []
        bad = run_cli("capacity", "--", "vllm", "serve", QWEN_NEXT, "-tp", "4", *flag)
        assert_one_line_error(bad)
        assert "refuses to start" in bad.err


def test_cuda_graph_sizes_are_vllm_0_11_0s() -> None:
    """vLLM 0.11.0 _set_cudagraph_sizes: [1, 2, 4] + range(8, 513, 8) (67 graphs), so 257
    tokens replay the 264-token graph (kvplan padded to 272, a later vLLM's 16-step list).
    gpt-oss's GptOssForCausalLMConfig (run before the sizes are set) captures range(8, 256, 8)
    + range(256, 993, 16) (81 graphs) whatever --max-num-seqs: 513 tokens replay the 528-token
    graph and 992 the 992 one (kvplan stopped at 512 and ran them unpadded)."""
    import numpy as np

    from kvplan.costs.step.cudagraph import padded_tokens

    llama = stage_ops(load_model("meta-llama/Llama-3.1-8B"), EngineConfig())
    oss = stage_ops(load_model("openai/gpt-oss-20b"), EngineConfig(max_num_seqs=64))
    assert (llama.cudagraph_max_tokens, oss.cudagraph_max_tokens) == (512, 992)
    t = np.array([257, 513, 600, 992, 993])
    assert padded_tokens(t, llama.cudagraph_max_tokens).tolist() == [264, 513, 600, 992, 993]
    assert padded_tokens(t, oss.cudagraph_max_tokens).tolist() == [272, 528, 608, 992, 993]
