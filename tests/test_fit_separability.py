"""A fit that cannot tell its terms apart says so (issue 16 item 3)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from kvplan.analysis.calibration.separability import COLLINEAR, sensitivities, separability_problems
from kvplan.costs.step.profile import Profile


def tpot(batches: list[int]):  # type: ignore[no-untyped-def]
    """A decode step priced as step_overhead + request_overhead x batch (+ 5 ms of kernels)."""
    def predict(p: Profile) -> list[float]:
        return [5e-3 + p.step_overhead_s + p.request_overhead_s * b for b in batches]
    return predict


FIT = Profile(step_overhead_s=1e-3, request_overhead_s=50e-6)


def test_sensitivities_are_log_derivatives_by_hand() -> None:
    # one batch of 8: d log(t) / d log(step) = step / t = 1 ms / (5 + 1 + 0.4) ms
    s = sensitivities(tpot([8]), FIT, ("step_overhead_s", "request_overhead_s"))
    assert s["step_overhead_s"][0] == pytest.approx(1.0 / 6.4, rel=1e-3)
    assert s["request_overhead_s"][0] == pytest.approx(0.4 / 6.4, rel=1e-3)


def test_one_batch_size_cannot_separate_per_step_from_per_request() -> None:
    # runs at batch 8 only: both terms add a constant to every TPOT (cosine 1)
    out = separability_problems(tpot([8, 8, 8]), FIT, ("step_overhead_s",
                                                       "request_overhead_s"), "H100/bf16")
    assert len(out) == 1 and "cannot separate step_overhead_s from request_overhead_s" in out[0]


def test_batches_1_and_64_separate_them() -> None:
    out = separability_problems(tpot([1, 64]), FIT, ("step_overhead_s",
                                                     "request_overhead_s"), "H100/bf16")
    assert out == []


def test_a_term_no_point_sees_is_named() -> None:
    out = separability_problems(tpot([1, 64]), FIT, ("step_overhead_s", "api_request_s"), "g")
    assert out == ["g: api_request_s does not change any prediction (the points cannot see it)"]


def test_the_threshold_is_strict() -> None:
    assert 0.99 < COLLINEAR < 1.0
    near = replace(FIT, request_overhead_s=0.0)  # probed at 1 us when 0
    assert separability_problems(tpot([1, 64]), near, ("step_overhead_s",
                                                       "request_overhead_s"), "g") == []
