"""Static-batch latency: chunked prefill steps, TTFT/TPOT/E2E conventions, fit checks."""

from __future__ import annotations

import numpy as np
import pytest

from kvplan.costs.step.latency import (
    RequestShape,
    kv_fit,
    parse_sweep,
    prefill_steps,
    request_latency,
    static_batch_latency,
    sweep,
)
from kvplan.costs.step.roofline import Profile, StepCostModel
from kvplan.errors import DoesNotFitError, InputError
from kvplan.specs.catalog import load_model
from kvplan.specs.hardware import load_gpu
from kvplan.specs.serving import EngineConfig

MODEL, GPU = load_model("meta-llama/Llama-2-7b-hf"), load_gpu("A100-80GB-SXM")


def test_prefill_steps_follow_the_token_budget_in_request_order() -> None:
    steps = prefill_steps(RequestShape(batch=3, prompt_tokens=5, output_tokens=2), 8)
    assert [(n.tolist(), c.tolist()) for n, c in steps] == [([5, 3], [0, 0]), ([2, 5], [3, 0])]
    whole = prefill_steps(RequestShape(batch=3, prompt_tokens=5, output_tokens=2), None)
    assert [(n.tolist(), c.tolist()) for n, c in whole] == [([5, 5, 5], [0, 0, 0])]
    long = prefill_steps(RequestShape(batch=1, prompt_tokens=10, output_tokens=1), 4)
    assert [(n.tolist(), c.tolist()) for n, c in long] == [([4], [0]), ([4], [4]), ([2], [8])]


def test_latency_is_built_on_step_time() -> None:
    t = StepCostModel(MODEL, GPU, EngineConfig(), Profile())
    shape = RequestShape(batch=4, prompt_tokens=100, output_tokens=5)
    r = static_batch_latency(t, shape, max_num_batched_tokens=256)
    ttft = sum(t.step_time_s(n, c) for n, c in prefill_steps(shape, 256))
    decode = [t.step_time_s(np.ones(4, dtype=np.int64), np.full(4, 100 + k)) for k in range(4)]
    assert r.ttft_s == pytest.approx(ttft, rel=1e-12)
    assert r.tpot_s == pytest.approx(sum(decode) / 4, rel=1e-12)
    assert r.e2e_s == pytest.approx(ttft + sum(decode), rel=1e-12)
    assert r.output_throughput_tok_s == pytest.approx(4 * 5 / r.e2e_s)
    assert r.decode_bound == "memory"
    # 200-token chunks on A100: 2 FLOP per weight byte x 200 < the measured ridge (~223
    # FLOP/byte: 294 TFLOP/s GEMMs over 1.3 TB/s streaming), so prefill reads weights twice
    assert r.prefill.ridge_point == pytest.approx(223, rel=0.05)
    assert r.prefill_bound == "memory"
    assert r.prefill.steps == 2 and r.decode is not None and r.decode.steps == 4


def test_single_output_token_has_no_decode() -> None:
    r = request_latency(MODEL, GPU, EngineConfig(), RequestShape(prompt_tokens=128,
                                                                  output_tokens=1))
    assert r.tpot_s is None and r.decode is None and r.e2e_s == r.ttft_s


@pytest.mark.parametrize("field", ["batch", "prompt_tokens", "output_tokens"])
def test_zero_or_negative_lengths_are_rejected(field: str) -> None:
    kwargs = {"batch": 1, "prompt_tokens": 10, "output_tokens": 10, field: 0}
    with pytest.raises(InputError, match="positive whole number"):
        RequestShape(**kwargs)


def test_batch_that_does_not_fit_says_what_fits() -> None:
    shape = RequestShape(batch=1000, prompt_tokens=2000, output_tokens=128)
    with pytest.raises(DoesNotFitError, match=r"at most \d+ such requests fit") as info:
        request_latency(MODEL, GPU, EngineConfig(), shape)
    assert info.value.needed_bytes > info.value.available_bytes
    fit = kv_fit(MODEL, GPU, EngineConfig(), shape)
    assert not fit.fits and 0 < fit.max_batch < 1000
    ok = RequestShape(batch=fit.max_batch, prompt_tokens=2000, output_tokens=128)
    assert kv_fit(MODEL, GPU, EngineConfig(), ok).fits


def test_context_limit_is_checked() -> None:
    with pytest.raises(InputError, match="context limit"):
        request_latency(MODEL, GPU, EngineConfig(), RequestShape(prompt_tokens=4000,
                                                                  output_tokens=200))


def test_sweep_batch_marks_fit_and_bounds() -> None:
    lever, values = parse_sweep("batch=1,64,1024")
    rows = sweep(MODEL, GPU, EngineConfig(), RequestShape(prompt_tokens=1000, output_tokens=100),
                 lever, values)
    assert [r.fits for r in rows] == [True, True, False]
    tpots = [r.result.tpot_s for r in rows]
    assert tpots == sorted(tpots)  # a bigger batch is slower per step
    kv = sweep(MODEL, GPU, EngineConfig(), RequestShape(batch=32, prompt_tokens=4000,
                                                        output_tokens=50),
               *parse_sweep("kv-cache-dtype=auto,int8_per_token_head"))  # no fp8 on A100
    assert kv[1].result.tpot_s < kv[0].result.tpot_s  # type: ignore[operator]


def test_bad_sweep_is_rejected() -> None:
    with pytest.raises(InputError, match="LEVER"):
        parse_sweep("colour=red")
