"""CUDA-graph padding of a step's token count (vLLM's captured sizes) and its price."""

from __future__ import annotations

import numpy as np
import pytest

from kvplan.costs.step.cudagraph import capture_sizes, max_capture_tokens, padded_tokens
from kvplan.costs.step.roofline import StepCostModel
from kvplan.specs.catalog import load_model
from kvplan.specs.hardware import load_gpu
from kvplan.specs.serving import EngineConfig


def test_capture_sizes_are_vllms() -> None:
    # vLLM 0.11.0 _set_cudagraph_sizes: [1, 2, 4] + range(8, max + 1, 8) - 67 graphs at 512
    # (gpt_oss's config comment: "increase the number of CUDA graphs from 67 to 81")
    sizes = capture_sizes(512)
    assert sizes[:6] == (1, 2, 4, 8, 16, 24)
    assert sizes[32:36] == (240, 248, 256, 264)
    assert sizes[-1] == 512 and len(sizes) == 3 + 64 == 67
    assert capture_sizes(16) == (1, 2, 4, 8, 16)
    # gpt-oss (GptOssForCausalLMConfig): range(8, 256, 8) + range(256, 993, 16), 81 graphs
    assert len(capture_sizes(992)) == 3 + 31 + 47 == 81 and capture_sizes(992)[34:36] == (256, 272)


def test_padding_by_hand() -> None:
    t = np.array([0, 1, 3, 5, 9, 250, 257, 512, 513, 8192])
    assert padded_tokens(t, 512).tolist() == [0, 1, 4, 8, 16, 256, 264, 512, 513, 8192]
    # max_num_seqs 8 -> largest graph 16 tokens: 17 runs unpadded
    assert max_capture_tokens(EngineConfig(max_num_seqs=8)) == 16
    assert max_capture_tokens(EngineConfig()) == 512
    assert padded_tokens(np.array([9, 17]), 16).tolist() == [16, 17]


def test_a_padded_step_costs_its_graph() -> None:
    """Llama-3.1-8B on H100: 9 decodes replay the 16-token graph, so their GEMMs cost what
    16 tokens' do (the attention still sees 9 requests); 513 tokens run unpadded."""
    m = StepCostModel(load_model("meta-llama/Llama-3.1-8B"), load_gpu("H100-SXM-80GB"),
                      EngineConfig())
    ms = m.measured
    assert ms is not None
    assert ms.dense_s[9] == ms.dense_s[16]
    assert ms.dense_s[257] == ms.dense_s[264] > ms.dense_s[256]
    assert ms.dense_s[513] < ms.dense_s[520]


def test_padding_rows_do_not_widen_the_routing() -> None:
    """Qwen3-30B-A3B on H100: the padding rows of a 10-token graph (16) share one routing, so
    the experts are priced at the 10 real tokens (their GEMMs outside the experts at 16)."""
    from kvplan.costs import kernels as kn
    from kvplan.costs.step.tables import routed_share

    m = StepCostModel(load_model("Qwen/Qwen3-30B-A3B"), load_gpu("H100-SXM-80GB"),
                      EngineConfig())
    ms, ops = m.measured, m.ops
    assert ms is not None and ops is not None and ops.moe is not None
    e = ops.moe

    def experts(t: int) -> float:  # the balanced table x random routing's share of experts
        share = float(routed_share(np.array([t]), e.experts, e.topk)[0])
        return e.count * share * float(kn.moe_s("H100-SXM-80GB", np.array([t]),
                                                hidden=e.hidden, inter=e.inter,
                                                num_experts=e.experts, topk=e.topk)[0])

    gap = ms.dense_s[16] - ms.dense_s[10]
    assert gap == pytest.approx(experts(16) - experts(10), rel=1e-9)


def test_stage_ops_memo_keys_the_captured_size_and_expert_kernels() -> None:
    """The planner's memo (kvplan.memo) must not hand one engine's ops to another: the
    largest captured size follows --max-num-seqs, the expert kernels the weight format."""
    from kvplan.costs.step.ops import _stage_ops, stage_ops
    from kvplan.specs.catalog import load_model
    from kvplan.specs.serving import EngineConfig

    engines = [EngineConfig(max_num_seqs=8), EngineConfig(max_num_seqs=256), EngineConfig()]
    for name in ("openai/gpt-oss-20b", "meta-llama/Llama-3.1-8B"):
        model = load_model(name)
        for engine in engines + engines[::-1]:
            assert stage_ops(model, engine) == _stage_ops(model, engine)
    assert stage_ops(model, engines[0]).cudagraph_max_tokens == 16
    assert stage_ops(model, engines[1]).cudagraph_max_tokens == 512
    # gpt-oss captures up to 992 whatever --max-num-seqs (GptOssForCausalLMConfig)
    oss = load_model("openai/gpt-oss-20b")
    assert stage_ops(oss, engines[0]).cudagraph_max_tokens == 992
