"""Eighth hunt round, step-time pricing and the planner (helper hunt8-plan): each defect
pinned by a hand-checkable golden value."""

from __future__ import annotations

import numpy as np

import kvplan
from kvplan.costs.step.profiles import profile_for
from kvplan.costs.step.roofline import StepCostModel

NEXT = "Qwen/Qwen3-Next-80B-A3B-Thinking"


def _timer(model: str, gpu: str, **engine: object) -> StepCostModel:
    m, hw = kvplan.load_model(model), kvplan.load_gpu(gpu)
    eng = kvplan.EngineConfig(**engine)  # type: ignore[arg-type]
    return StepCostModel(m, hw, eng, profile_for(m, hw, eng))


# -------------------- D1: a roofline GPU floored by a measured one crashed on a long step
# H100-PCIe has no tables; H100-SXM beats it on every datasheet figure, so its measured step
# floors the roofline (coefficients.floored), GDN sequence table included. The tables start at
# 8,192 tokens; a 9,000-token step grows them to 16,384, but the grown roofline kept the old
# 8,193-entry GDN table and np.maximum(8193, 16385) raised ValueError (a traceback from
# `kvplan latency Qwen/Qwen3-Next-80B-A3B-Thinking --gpu H100-PCIe-80GB -tp 4 --prompt 9000`).
def test_floored_roofline_grows_past_8192_tokens_with_gdn() -> None:
    pcie = _timer(NEXT, "H100-PCIe-80GB", tensor_parallel_size=4)
    sxm = _timer(NEXT, "H100-SXM-80GB", tensor_parallel_size=4)
    new, ctx = np.array([9000]), np.array([0])
    slow, fast = pcie.step_time_s(new, ctx), sxm.step_time_s(new, ctx)
    assert pcie.table_tokens == 2 * 8192  # grown: max(9000, 2 x 8192)
    assert slow >= fast > 0  # the floor's promise: never faster than the dominating H100-SXM
