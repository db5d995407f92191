"""A DP rank's step priced at the widest rank's tokens (costs/step/dp_pad): unpadded it is
the step timer's own price, padding never makes it cheaper, MLA takes the sums path, GDN the
aggregate path with its longest prompt chunk (300 tokens here, where the sequence binds)."""

from __future__ import annotations

import numpy as np
import pytest

from kvplan.costs.step.parallel.dp_pad import dummy_step_s, padded_step_s
from kvplan.costs.step.roofline import StepCostModel
from kvplan.specs.catalog import load_model
from kvplan.specs.hardware import load_gpu
from kvplan.specs.serving import EngineConfig

NEW = np.array([1, 1, 300], dtype=np.int64)
CTX = np.array([900, 40, 0], dtype=np.int64)


@pytest.fixture(scope="module", params=["Qwen/Qwen3-30B-A3B", "deepseek-ai/DeepSeek-V2-Lite",
                                        "Qwen/Qwen3-Next-80B-A3B-Thinking"])
def timer(request: pytest.FixtureRequest) -> StepCostModel:
    engine = EngineConfig(data_parallel_size=2, enable_expert_parallel=True)
    return StepCostModel(load_model(request.param), load_gpu("H200"), engine)


def test_unpadded_is_the_step_price(timer: StepCostModel) -> None:
    own = timer.step_time_s(NEW, CTX)
    assert padded_step_s(timer, NEW, CTX, int(NEW.sum())) == pytest.approx(own, rel=1e-12)


def test_padding_never_cheaper(timer: StepCostModel) -> None:
    own = padded_step_s(timer, NEW, CTX, int(NEW.sum()))
    assert padded_step_s(timer, NEW, CTX, 2048) > own
    # the padded tokens cost what a rank of that many tokens pays for them, no more
    wide = np.array([1, 1, 2046], dtype=np.int64)
    assert padded_step_s(timer, NEW, CTX, 2048) < timer.step_time_s(wide, CTX)


def test_dummy_step(timer: StepCostModel) -> None:
    one = dummy_step_s(timer, 1)
    assert 0 < one < dummy_step_s(timer, 512)
    assert padded_step_s(timer, np.zeros(0, dtype=np.int64), np.zeros(0, dtype=np.int64),
                         512) == dummy_step_s(timer, 512)
