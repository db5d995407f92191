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


DSV3 = "/work/shared/data/model-configs/deepseek-ai--DeepSeek-V3.json"


def test_dp_pp_rank_lines_read_the_tables_stage_and_every_stages_kv() -> None:
    """DeepSeek-V3 H200 DP8 + EP, PP2, --max-num-seqs 64. get_pp_indices(61, 2): stage 0 =
    layers 0-30 (3 dense + 28 MoE), stage 1 = 31-60 (30 MoE). Each stage: requested
    135,020,886,884 - non-torch 579,862,528 - activation 3,623,878,656 (resident 2 x 8192 x
    7168 x 2 + the DP8 MoE layer 16384 x 8 x 9216 x 2 + 65536 x 7424 x 2; the 64-request
    sampler is smaller) - weights (stage 0 50,712,438,560, stage 1 52,217,042,496):
      stage 0: 80,104,707,140 B // 73,728 // 31 = 35,048 blocks   <- fewest: the table's
      stage 1: 78,600,103,204 B // 73,728 // 30 = 35,536 blocks
    The rank line mixed stages: experts of the fullest stage (stage 1: 30 x 32 x 44,050,944 =
    42,288,906,240) against stage 0's weights (non-expert 8,423,532,320), and KV 2 x stage 0's
    160,209,414,280. Stage 0's experts: 28 x 32 x 44,050,944 = 39,469,645,824, the rest
    50,712,438,560 - 39,469,645,824 = 11,242,792,736; the rank's KV: each worker allocates its
    own budget (vLLM get_kv_cache_configs keeps the tensors, only num_blocks is the min):
    80,104,707,140 + 78,600,103,204 = 158,704,810,344."""
    args = ("capacity", DSV3, "--gpu", "H200", "-dp", "8", "-pp", "2",
            "--enable-expert-parallel", "--max-num-seqs", "64")
    r = run_cli(*args, "--json")
    assert r.code == 0, r.err
    d = r.json()
    assert (d["num_blocks"], d["layers_per_group"], d["weights_bytes"]) == (
        35_048, 31, 50_712_438_560)
    p = d["parallel"]
    assert p["expert_weights_bytes_per_gpu"] == 39_469_645_824
    assert p["non_expert_weights_bytes_per_gpu"] == 11_242_792_736
    assert p["kv_cache_bytes_per_rank"] == 158_704_810_344
    text = run_cli(*args)
    assert text.code == 0, text.err
    assert "per GPU of pipeline stage 0 (the table's)" in " ".join(text.out.split())


def test_latency_kv_refusal_under_dp_counts_the_whole_batch() -> None:
    """latency -dp 2 --batch 30 prices the fullest rank's ceil(30 / 2) = 15 requests; each
    rank holds 385,280 tokens (24,080 blocks x 16), and 30,000 + 2,000 tokens = 2,000 blocks
    a request, so 12 fit per rank: --batch 24 over 2 ranks runs, 25 does not. The refusal said
    'a batch of 15 requests ... at most 12 such requests fit (lower --batch ...)', in the rank's
    units, so --batch 12 looked like the ceiling."""
    base = ("latency", QWEN, "--gpu", "H100", "--prompt", "30000", "--output", "2000", "-dp", "2",
            "--enable-expert-parallel")
    r = run_cli(*base, "--batch", "30")
    assert_one_line_error(r)
    assert "a DP rank's batch of 15 requests" in r.err
    assert "at most 12 such requests fit per rank (--batch 24 over 2 ranks)" in r.err
    assert run_cli(*base, "--batch", "24").code == 0
    assert run_cli(*base, "--batch", "25").code == 2
