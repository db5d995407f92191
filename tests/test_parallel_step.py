"""Step-time terms under data / expert parallelism, by hand (docs/parallelism.md)."""

from __future__ import annotations

import numpy as np
import pytest

from kvplan.analysis.calibration.static_fit import profile_for
from kvplan.costs import kernels as kn
from kvplan.costs.step.latency import RequestShape
from kvplan.costs.step.parallel.dp_latency import fleet_latency
from kvplan.costs.step.parallel.ep_comm import (
    DEFAULT_IMBALANCE,
    Link,
    MoeExchange,
    cross_node_allreduce_s,
    touched,
)
from kvplan.costs.step.parallel.ep_step import link_of
from kvplan.costs.step.roofline import StepCostModel
from kvplan.costs.step.tables import routed_share
from kvplan.errors import InputError
from kvplan.specs.catalog import load_model
from kvplan.specs.hardware import load_gpu
from kvplan.specs.serving import EngineConfig

QWEN = "Qwen/Qwen3-30B-A3B"
LINK = Link(node_gpus=8, scale_up_bytes_per_s=300e9, scale_out_bytes_per_s=35e9,
            latency_s=10e-6)


def _exchange(**kw: object) -> MoeExchange:
    base: dict[str, object] = dict(layers=48, backend="allgather_reducescatter", hidden=2048,
                                   topk=8, tp=1, dp=8, ep=8, imbalance=1.18, link=LINK)
    return MoeExchange(**{**base, **kw})  # type: ignore[arg-type]


def test_default_imbalance_is_the_sglang_ratio() -> None:
    assert round(DEFAULT_IMBALANCE, 4) == 1.1796
    assert DEFAULT_IMBALANCE == 59_337 / 50_302


def test_allgather_reducescatter_bytes_and_seconds_by_hand() -> None:
    """8 tokens per rank, dp 8: each GPU receives 7 x 8 x 2048 x 2 = 229,376 B per collective;
    48 layers x 2 collectives x (10 us + 229,376 / 300 GB/s)."""
    x = _exchange()
    assert int(x.bytes_per_layer(np.array([8]))[0]) == 229_376
    want = 2 * 48 * (10e-6 + 229_376 / 300e9)
    assert float(x.seconds(np.array([8]))[0]) == pytest.approx(want, rel=1e-12)


def test_deepep_bytes_are_the_routed_share_leaving_the_gpu() -> None:
    """10 tokens per rank over tp 2: 5 per GPU, 8 copies each, 15 of 16 EP ranks remote:
    5 x 8 x 15 / 16 x 2048 x 2 = 153,600 B; the busiest GPU moves 1.18 x that."""
    x = _exchange(backend="deepep", tp=2, dp=8, ep=16, layers=1)
    assert int(x.bytes_per_layer(np.array([10]))[0]) == 153_600
    # 16 GPUs over 8-GPU nodes: 8 of the 15 peers are off-node
    on, off = 153_600 * 1.18 * 7 / 15, 153_600 * 1.18 * 8 / 15
    want = 2 * (10e-6 + max(on / 300e9, off / 35e9))
    assert float(x.seconds(np.array([10]))[0]) == pytest.approx(want, rel=1e-12)


def test_deepep_high_throughput_sends_one_copy_per_gpu_and_node_by_hand() -> None:
    """The same 10 tokens (5 per GPU), k = 8 over ep 16 on two 8-GPU nodes: a token reaches
    15 x (1 - (15/16)^8) = 6.0492 other GPUs over NVLink and 1 x (1 - (1/2)^8) = 0.99609 other
    nodes over the network: 5 x 2048 x 2 x 6.0492 = 123,887 B on NVLink, 123,887 x 0.99609 /
    6.0492 = 20,400 B out; the busiest GPU 1.18 x both."""
    x = _exchange(backend="deepep_high_throughput", tp=2, dp=8, ep=16, layers=1)
    gpus, nodes = 15 * (1 - (15 / 16) ** 8), 1 - 0.5 ** 8
    assert int(x.bytes_per_layer(np.array([10]))[0]) == int(5 * 4096 * gpus) == 123_887
    nv = 123_887 * 1.18  # the network share: the same copies scaled by nodes / GPUs touched
    want = 2 * (10e-6 + max(nv / 300e9, nv * nodes / gpus / 35e9))
    assert float(x.seconds(np.array([10]))[0]) == pytest.approx(want, rel=1e-12)
    low = _exchange(backend="deepep_low_latency", tp=2, dp=8, ep=16, layers=1)
    old = _exchange(backend="deepep", tp=2, dp=8, ep=16, layers=1)
    t = np.array([1, 10, 4096])
    assert np.array_equal(low.seconds(t), old.seconds(t))  # deepep is the low-latency kernel
    assert np.all(x.seconds(t) < low.seconds(t))  # fewer copies, never slower


def test_touched_members_by_hand() -> None:
    assert touched(1, 8) == 0.0
    assert touched(4, 8) == pytest.approx(3 * (1 - 0.75 ** 8))  # 2.6997 of 3 other nodes
    assert touched(32, 1) == pytest.approx(31 / 32)  # one expert: off-GPU with p = 31/32


def test_more_bandwidth_is_never_slower() -> None:
    t = np.array([1, 64, 4096])
    slow = _exchange(backend="deepep").seconds(t)
    fast_link = Link(node_gpus=8, scale_up_bytes_per_s=600e9, scale_out_bytes_per_s=35e9,
                     latency_s=10e-6)
    assert np.all(_exchange(backend="deepep", link=fast_link).seconds(t) <= slow)


def test_cross_node_allreduce_by_hand() -> None:
    """TP16 ring: 2 x 15/16 of a 1 MiB message over the 35 GB/s scale-out hop + latency."""
    got = float(cross_node_allreduce_s(np.array([2.0**20]), 16, LINK)[0])
    assert got == pytest.approx(10e-6 + 2 * 15 / 16 * 2**20 / 35e9, rel=1e-12)


def test_deepep_needs_expert_parallelism() -> None:
    with pytest.raises(InputError, match="needs --enable-expert-parallel"):
        _exchange(backend="deepep", ep=1)


def _model(engine: EngineConfig, gpu: str = "H200") -> StepCostModel:
    m, hw = load_model(QWEN), load_gpu(gpu)
    return StepCostModel(m, hw, engine, profile_for(m, hw, engine))


def test_dp8_ep_tables_are_the_terms_by_hand() -> None:
    """DP8 + EP on H200: the step's collectives are the exchange alone (TP1: no all-reduce),
    and the MoE layers are the measured EP8 kernel at 8 x T tokens, x the imbalance."""
    engine = EngineConfig(data_parallel_size=8, enable_expert_parallel=True)
    model = _model(engine)
    ops, ms = model.ops, model.measured
    assert ops is not None and ops.exchange is not None and ms is not None
    assert ms.allreduce_s is not None
    t = np.array([1, 8, 512])
    assert np.array_equal(ms.allreduce_s[t], ops.exchange.seconds(t))
    hw = load_gpu("H200")
    link = link_of(hw, model.profile)
    probe = kn.nccl(hw.id, "alltoall", np.array([1024]), 8).seconds[0]
    assert link.latency_s == float(probe)
    assert link.scale_up_bytes_per_s == 900e9 / 2 * model.profile.comm_eff
    plain = _model(EngineConfig())
    assert plain.measured is not None and plain.ops is not None and plain.ops.moe is not None
    moe = kn.moe_s(hw.id, t * 8, hidden=2048, inter=768, num_experts=128, topk=8,
                   dtype="bfloat16", tp=1, ep=8) * DEFAULT_IMBALANCE
    moe = moe * routed_share(t * 8, 128, 8)  # random routing's share of the experts
    moe1 = kn.moe_s(hw.id, t, hidden=2048, inter=768, num_experts=128, topk=8,
                    dtype="bfloat16", tp=1) * routed_share(t, 128, 8)
    want = plain.measured.dense_s[t] + 48 * (moe - moe1)
    assert np.allclose(ms.dense_s[t], want, rtol=1e-12)


def test_tp_paths_untouched() -> None:
    """dp = 1, EP off: no exchange, no re-laid-out MoE (the TP tables as before)."""
    model = _model(EngineConfig(tensor_parallel_size=4))
    assert model.ops is not None and model.ops.exchange is None
    assert model.ops.moe is not None and (model.ops.moe.ep, model.ops.moe.token_scale) == (1, 1)


def test_dense_dp_latency_is_one_rank_of_its_share() -> None:
    """Llama-3.1-8B, DP2, batch 4: each rank runs 2 requests, the plain TP1 answer at
    batch 2; the fleet's throughput is all 4 requests' tokens over that E2E."""
    m, hw = load_model("meta-llama/Llama-3.1-8B"), load_gpu("H100")
    dp = EngineConfig(data_parallel_size=2)
    prof = profile_for(m, hw, dp)
    shape = RequestShape(batch=4, prompt_tokens=512, output_tokens=32)
    fleet = fleet_latency(m, hw, dp, shape, prof)
    one = fleet_latency(m, hw, EngineConfig(), RequestShape(batch=2, prompt_tokens=512,
                                                            output_tokens=32), prof)
    assert fleet.rank_shape.batch == 2
    assert (fleet.result.ttft_s, fleet.result.tpot_s) == (one.result.ttft_s, one.result.tpot_s)
    assert fleet.result.output_throughput_tok_s == 4 * 32 / one.result.e2e_s


def test_roofline_gpus_refuse_moe_dp() -> None:
    with pytest.raises(InputError, match="measured kernel tables"):
        _model(EngineConfig(data_parallel_size=2, enable_expert_parallel=True), "MI300X")


def test_tp16_is_priced_over_the_scale_out_link() -> None:
    m, hw = load_model("deepseek-ai/DeepSeek-V3"), load_gpu("H200")
    engine = EngineConfig(tensor_parallel_size=16)
    model = StepCostModel(m, hw, engine, profile_for(m, hw, engine))
    ops, ms = model.ops, model.measured
    assert ops is not None and ops.allreduce_link is not None and ms is not None
    assert ms.allreduce_s is not None
    want = ops.allreduces * cross_node_allreduce_s(np.array([64.0]) * 2 * 7168, 16,
                                                   ops.allreduce_link)
    assert float(ms.allreduce_s[64]) == pytest.approx(float(want[0]), rel=1e-12)


def test_step_constants_count_the_local_experts() -> None:
    """DP8 + EP: the GPU holds 16 of 128 experts (7,247,757,312 B); one rank token comes
    with 7 more from the other ranks, so a local expert stays untouched with (1 - 8/128)^8."""
    from kvplan.costs.step.constants import step_constants

    m = load_model(QWEN)
    k = step_constants(m, EngineConfig(data_parallel_size=8, enable_expert_parallel=True))
    plain = step_constants(m, EngineConfig())
    assert k.routed_expert_bytes == 7_247_757_312
    assert k.expert_miss_per_token == (1 - 8 / 128) ** 8
    assert k.weight_bytes == plain.weight_bytes  # attention etc.: TP1 on every rank
    assert k.gemm_flops_per_token == plain.gemm_flops_per_token  # k x 6 H I / tp per token


def test_simulate_refuses_data_parallel_engines() -> None:
    from kvplan.sim.simulator import simulate

    with pytest.raises(InputError, match="simulate runs one engine"):
        simulate([], timer=_model(EngineConfig()), num_blocks=100,
                 engine=EngineConfig(data_parallel_size=2))


def test_deepep_dispatches_block_fp8_models_in_fp8() -> None:
    """DeepSeek-V3 (128 x 128 fp8 blocks) under DeepEP: a token dispatches as 7,168 fp8
    values + 56 fp32 scales = 7,392 B and combines in bf16 (14,336 B). 256 tokens on one of
    72 GPUs: dispatch 256 x 8 x 71/72 x 7,392 = 14,928,554 B (floored), combine 28,952,348."""
    m, hw = load_model("deepseek-ai/DeepSeek-V3"), load_gpu("H100")
    e = EngineConfig(data_parallel_size=72, enable_expert_parallel=True,
                     all2all_backend="deepep")
    x = StepCostModel(m, hw, e, profile_for(m, hw, e)).ops.exchange  # type: ignore[union-attr]
    assert x is not None and x.dispatch_token_bytes == 7168 + 56 * 4 == 7392
    t = np.array([256])
    assert int(x.bytes_per_layer(t, dispatch=True)[0]) == 256 * 8 * 71 * 7392 // 72
    assert int(x.bytes_per_layer(t)[0]) == 256 * 8 * 71 * 7168 * 2 // 72 == 28_952_348
    off = 64 / 71  # 72 GPUs over 8-GPU nodes: 64 of the 71 peers are elsewhere
    f = DEFAULT_IMBALANCE
    want = sum(x.link.latency_s + max(b * f * (1 - off) / x.link.scale_up_bytes_per_s,
                                      b * f * off / x.link.scale_out_bytes_per_s)
               for b in (14_928_554, 28_952_348))
    assert float(x.seconds(t)[0]) == pytest.approx(58 * want, rel=1e-12)


def test_deepep_experts_run_only_the_routed_rows() -> None:
    """DeepEP: the local experts' kernel is the all-experts kernel at dp x T tokens times
    ceil(E / ep) / E (each expert gets the rows it would on one GPU holding all E)."""
    m, hw = load_model("deepseek-ai/DeepSeek-V3"), load_gpu("H100")
    e = EngineConfig(data_parallel_size=72, enable_expert_parallel=True,
                     all2all_backend="deepep")
    model = StepCostModel(m, hw, e, profile_for(m, hw, e))
    plain = EngineConfig(data_parallel_size=72, enable_expert_parallel=True)
    gathered = StepCostModel(m, hw, plain, profile_for(m, hw, plain))
    assert model.measured is not None and gathered.measured is not None
    t = np.array([256])  # served: block fp8 never above bf16 experts (hunt 18)
    all_e = kn.served_moe_s(hw.id, t * 72, hidden=7168, inter=2048, num_experts=256, topk=8,
                            dtype="fp8_block", tp=1, ep=1)
    mapped = kn.served_moe_s(hw.id, t * 72, hidden=7168, inter=2048, num_experts=256, topk=8,
                             dtype="fp8_block", tp=1, ep=72)
    delta = model.measured.dense_s[t] - gathered.measured.dense_s[t]
    want = 58 * DEFAULT_IMBALANCE * (all_e * 4 / 256 - mapped)
    assert np.allclose(delta, want, rtol=1e-9)


def test_step_constants_memo_tells_dp_and_ep_apart() -> None:
    """The planner's memo (kvplan.memo) keys step constants by every flag they read: a TP8
    engine priced first must not answer for DP8 + EP, nor the other way round."""
    from kvplan.costs.step.constants import _step_constants, step_constants

    model = load_model("Qwen/Qwen3-30B-A3B")
    engines = [EngineConfig(tensor_parallel_size=8),
               EngineConfig(data_parallel_size=8, enable_expert_parallel=True),
               EngineConfig(data_parallel_size=8)]
    for engine in engines + engines[::-1]:
        assert step_constants(model, engine) == _step_constants(model, engine)
    assert step_constants(model, engines[0]) != step_constants(model, engines[1])
