"""Session 16 defect hunt: MoE data + expert + pipeline parallelism in capacity, latency and
simulate (-dp, --enable-expert-parallel, -tp, -pp), checked against vLLM 0.11's arithmetic."""

from __future__ import annotations

from tests.conftest import assert_one_line_error, run_cli

QWEN = "Qwen/Qwen3-30B-A3B"


def test_simulate_dp_with_pp_is_refused_not_priced_as_one_batch() -> None:
    """vLLM 0.11 runs each DP rank's engine with a queue of pp batches in flight
    (v1/engine/core.py: step_fn = step_with_batch_queue when max_concurrent_batches = pp > 1;
    DPEngineCoreProc inherits it). kvplan's lockstep fleet (sim/dp/lockstep.py) steps one
    batch per rank at the whole pipeline's latency, so -dp 2 -pp 2 printed the -pp 1 fleet's
    throughput (539.5 vs 539.9 tok/s at 5 req/s) whatever the queue would do. Refused now."""
    r = run_cli("simulate", QWEN, "--gpu", "H100", "-dp", "2", "-pp", "2",
                "--enable-expert-parallel", "--num-prompts", "8", "--request-rate", "5")
    assert_one_line_error(r)
    assert "--data-parallel-size 2 with --pipeline-parallel-size 2 is not simulated" in r.err


MIXTRAL = "/work/shared/data/model-configs/mistralai--Mixtral-8x7B-v0.1.json"


def test_dp_profile_run_gathers_every_ranks_tokens_into_the_moe_layer() -> None:
    """vLLM 0.11 FusedMoE.forward_impl under dp > 1 (default allgather_reducescatter exchange):
    AgRsAll2AllManager.dispatch all_gatherv's every rank's hidden states and router logits,
    then fused_experts_impl runs on dp x T rows (workspace M = min(dp x T, 16384), in place).
    The profiling run has all 4 ranks at T = 8192. Mixtral-8x7B (H 4096, I 14336, top-2, 8
    experts) DP4 + EP, TP1, bf16, N = 2 x 14336 = 28672:
      workspace  16384 x 2 x (max(28672, 4096) + 14336) x 2  = 2,818,572,288
      gathered   4 x 8192 x (4096 + 8) x 2                   =   268,959,744
      resident   2 x 8192 x 4096 x 2                         =   134,217,728
      activation = 3,221,749,760 (sampler 1024 x 32000 x 38 = 1,245,184,000 is smaller);
    kvplan priced one rank's 8192 rows: 134,217,728 + 1,409,286,144 = 1,543,503,872.
    KV: 76,518,000,000 - 25,768,239,104 weights - 3,221,749,760 - 579,862,528 non-torch
      = 46,948,148,608 B // 65,536 // 32 layers = 22,386 blocks (was 23,186), x 16 tokens."""
    r = run_cli("capacity", MIXTRAL, "--gpu", "H100", "-dp", "4", "--enable-expert-parallel",
                "--json")
    assert r.code == 0, r.err
    d = r.json()
    assert d["activation_bytes"] == 3_221_749_760
    assert d["available_kv_bytes"] == 46_948_148_608
    assert (d["num_blocks"], d["kv_cache_tokens"]) == (22_386, 358_176)


def test_deepep_exchange_prices_one_ranks_tokens() -> None:
    """DeepEP backends skip the naive dispatch (forward_impl_chunked / DeepEP HT prepare): the
    layer holds one rank's rows, the pre-fix figure 134,217,728 + 1,409,286,144."""
    from kvplan.costs.memory.activation import activation_bytes
    from kvplan.costs.memory.settings import resolve_settings
    from kvplan.specs.catalog import load_model
    from kvplan.specs.hardware import load_gpu
    from kvplan.specs.serving import EngineConfig

    m, hw = load_model(MIXTRAL), load_gpu("H100")
    for backend, want in (("deepep_low_latency", 1_543_503_872),
                          ("allgather_reducescatter", 3_221_749_760)):
        e = EngineConfig(data_parallel_size=4, enable_expert_parallel=True,
                         all2all_backend=backend)
        assert activation_bytes(m, resolve_settings(m, hw, e)) == want
