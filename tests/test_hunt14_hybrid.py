"""Hunt 14 (hybrid): state-space, linear-attention and sliding-window models against vLLM
0.11's arithmetic."""

from __future__ import annotations

from kvplan.costs.step.constants import step_constants
from kvplan.costs.step.ops import stage_ops
from kvplan.specs.catalog import load_model
from kvplan.specs.serving import EngineConfig

NEMOTRON = "nvidia/Nemotron-H-56B-Base-8K"
QWEN_NEXT = "Qwen/Qwen3-Next-80B-A3B-Thinking"


def test_nemotron_h_runs_one_all_reduce_per_layer() -> None:
    """A Nemotron-H layer is one block (mamba mixer, attention or MLP; vLLM nemotron_h.py),
    each ending in one RowParallelLinear (out_proj / o_proj / down_proj): 118 layers at TP2
    run 118 all-reduces a step, not 2 x 118 = 236 (n_groups 8 divides TP2, so the gated
    RMSNorm adds none). A mixer + MoE layer (Qwen3-Next) keeps 2 x 48 = 96 at TP4."""
    tp2 = EngineConfig(tensor_parallel_size=2)
    nemotron = load_model(NEMOTRON)
    assert stage_ops(nemotron, tp2).allreduces == 118
    assert step_constants(nemotron, tp2).allreduces == 118
    tp4 = EngineConfig(tensor_parallel_size=4)
    qwen = load_model(QWEN_NEXT)
    assert stage_ops(qwen, tp4).allreduces == 96
    assert step_constants(qwen, tp4).allreduces == 96
    assert stage_ops(nemotron, EngineConfig()).allreduces == 0
