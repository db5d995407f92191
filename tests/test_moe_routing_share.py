"""The MoE tables time aiconfigurator's balanced routing, which spreads a step's T x k routed
rows over min(E, T k) experts; independent top-k picks touch E (1 - (1 - k/E)^T). A decode
step's experts read weights, so the step model prices them at random routing's share."""

import numpy as np
import pytest

from kvplan.costs import kernels as kn
from kvplan.costs.step.roofline import StepCostModel
from kvplan.costs.step.tables import moe_times, routed_share
from kvplan.specs.catalog import load_model
from kvplan.specs.hardware import load_gpu
from kvplan.specs.serving import EngineConfig


def test_share_by_hand_qwen3_30b() -> None:
    # E 128, top-8: one token touches 8 experts either way; 10 tokens touch
    # 128 (1 - (120/128)^10) = 60.87 of the balanced 80; 16 tokens 82.42 of 128
    share = routed_share(np.array([1, 10, 16, 4096]), 128, 8)
    assert share[0] == 1.0
    assert share[1] == pytest.approx(128 * (1 - (120 / 128) ** 10) / 80)  # 0.76086
    assert share[2] == pytest.approx(128 * (1 - (120 / 128) ** 16) / 128)  # 0.64392
    assert share[1] == pytest.approx(0.76086, abs=1e-5)
    assert share[2] == pytest.approx(0.64392, abs=1e-5)
    assert share[3] == pytest.approx(1.0)  # compute-bound prefill: every expert either way


def test_share_never_above_one_and_the_priced_experts_grow_with_tokens() -> None:
    for experts, topk in ((128, 8), (32, 4), (256, 8), (8, 2), (512, 10)):
        t = np.arange(1, 4097)
        share = routed_share(t, experts, topk)
        assert np.all(share <= 1.0 + 1e-12) and np.all(share > 1 - 1 / np.e - 1e-3)
        touched = share * np.minimum(experts, t * topk)
        assert np.all(np.diff(touched) >= 0)


def test_decode_step_experts_priced_at_random_routing() -> None:
    """Qwen3-30B-A3B on one H100, a 10-token decode step: the 48 MoE layers cost the
    balanced table's time x 0.76086."""
    m = StepCostModel(load_model("Qwen/Qwen3-30B-A3B"), load_gpu("H100"), EngineConfig())
    assert m.ops is not None and m.ops.moe is not None and m.measured is not None
    e = m.ops.moe
    table = float(kn.moe_s("H100-SXM-80GB", np.array([10]), hidden=e.hidden, inter=e.inter,
                           num_experts=e.experts, topk=e.topk)[0])
    got = float(moe_times("H100-SXM-80GB", e, np.array([10]), "bfloat16")[0])
    assert got == pytest.approx(table * 0.760863, rel=1e-5)


def test_power_law_tables_are_read_as_measured() -> None:
    """A100's MoE rows were measured under power-law routing (no balanced rows): no share."""
    assert kn.moe_routing("A100") == "power_law_1.01" and kn.moe_routing("H200") == "balanced"
    m = StepCostModel(load_model("Qwen/Qwen3-30B-A3B"), load_gpu("A100"), EngineConfig())
    assert m.ops is not None and m.ops.moe is not None
    e = m.ops.moe
    table = kn.moe_s("A100-80GB-SXM", np.array([10]), hidden=e.hidden, inter=e.inter,
                     num_experts=e.experts, topk=e.topk)
    got = moe_times("A100-80GB-SXM", e, np.array([10]), "bfloat16")
    assert np.array_equal(got, table)
