"""A request alone in the simulated server gets exactly the latency model's TTFT and TPOT."""

import numpy as np
import pytest

import kvplan
from kvplan.costs.step.latency import RequestShape, request_latency
from kvplan.costs.step.profiles import profile_for
from kvplan.specs.requests.workload import Workload
from kvplan.specs.serving import EngineConfig


def _one_request(prompt: int, output: int) -> Workload:
    return Workload(name="one", arrival_s=np.zeros(1), prompt_tokens=np.array([prompt]),
                    output_tokens=np.array([output]))


@pytest.mark.parametrize(("model", "gpu", "prompt", "output", "budget"), [
    ("meta-llama/Llama-3.1-8B", "H100", 3000, 64, 1024),   # chunked prefill: 3 chunks
    ("google/gemma-2-9b-it", "A100", 5000, 40, 8192),      # sliding + full layers
    ("deepseek-ai/DeepSeek-V2-Lite", "L40S", 700, 20, 2048),  # MLA + MoE
])
def test_single_request_equals_static_latency(model: str, gpu: str, prompt: int, output: int,
                                              budget: int) -> None:
    spec, hw = kvplan.load_model(model), kvplan.load_gpu(gpu)
    engine = EngineConfig(max_num_batched_tokens=budget, max_model_len=prompt + output,
                          enable_prefix_caching=False)
    expected = request_latency(spec, hw, engine, RequestShape(batch=1, prompt_tokens=prompt,
                                                              output_tokens=output))
    run = kvplan.simulate_serving(spec, hw, engine, _one_request(prompt, output))
    r = run.result
    # a served request reaches the engine after the API server's path (its admission on the
    # idle server, then the parallel delay); a static batch has none
    prof = profile_for(spec, hw, engine)
    api = prof.api_admission_s + prof.api_delay_s(prompt)
    assert r.scheduled_s[0] == pytest.approx(api, rel=1e-12)
    assert r.first_token_s[0] - api == pytest.approx(expected.ttft_s, rel=1e-9)
    tpot = (r.finish_s[0] - r.first_token_s[0]) / (output - 1)
    assert expected.tpot_s is not None
    assert tpot == pytest.approx(expected.tpot_s, rel=1e-9)
    assert r.finish_s[0] - api == pytest.approx(expected.e2e_s, rel=1e-9)
