"""The calibration replay (calibration/replay.py) prices a recorded schedule under each
profile; under async scheduling a step that started on an idle engine is priced
synchronously, as the simulator's loop prices it (costs.step.batch.idle_timer). Before, the
replay hid every step's host work, so `kvplan calibrate` and the public set disagreed with
`kvplan simulate` on async runs: a closed loop at concurrency 1 idles before every request."""

from __future__ import annotations

import pytest

from kvplan.analysis.calibration.public_set import serving_replay
from kvplan.analysis.metrics import compute_metrics
from kvplan.analysis.serving import simulate_serving
from kvplan.costs.step.profile import Profile
from kvplan.specs.requests.workload import WorkloadArgs, build_workload
from kvplan.specs.serving import EngineConfig

MODEL = "meta-llama/Llama-3.1-8B"
GPU = "H100-SXM-80GB"


@pytest.mark.parametrize(("conc", "n", "prompt", "out"), [
    (1, 6, 700, 30),  # every request's first step starts on an idle engine
    (None, 24, 900, 20),  # a burst: only the first step does
    (4, 16, 300, 40),  # fixed lengths finish together: every wave's first step does
])
def test_an_async_replay_equals_simulating(conc, n, prompt, out):
    engine = EngineConfig(max_num_batched_tokens=2048, async_scheduling=True)
    work = build_workload(WorkloadArgs(num_prompts=n, random_input_len=prompt,
                                       random_output_len=out, max_concurrency=conc))
    replay = serving_replay(MODEL, GPU, engine, work)
    for prof in (Profile(), Profile(step_overhead_s=2e-3, request_overhead_s=80e-6,
                                    api_request_s=0.015, api_prompt_token_s=3e-6)):
        got = replay.metrics(prof)
        m = compute_metrics(simulate_serving(MODEL, GPU, engine, work, profile=prof).result)
        assert got["ttft_s"] == pytest.approx(m.stats["ttft"].mean_ms / 1e3, rel=1e-9)
        assert got["tpot_s"] == pytest.approx(m.stats["tpot"].mean_ms / 1e3, rel=1e-9)
        assert got["output_throughput_tok_s"] == pytest.approx(m.output_throughput, rel=1e-9)


def test_a_concurrency_1_async_run_pays_each_request_s_first_host_work():
    """Concurrency 1, one-step prefills: each request's TTFT is its prefill step at the
    synchronous price, so the async replay's mean TTFT equals the synchronous replay's;
    its TPOT is lower (decode steps hide the host's 2 ms + 80 us)."""
    work = build_workload(WorkloadArgs(num_prompts=4, random_input_len=700,
                                       random_output_len=30, max_concurrency=1))
    prof = Profile(step_overhead_s=2e-3, request_overhead_s=80e-6)
    sync = serving_replay(MODEL, GPU, EngineConfig(max_num_batched_tokens=2048), work)
    asy = serving_replay(MODEL, GPU, EngineConfig(max_num_batched_tokens=2048,
                                                  async_scheduling=True), work)
    a, s = asy.metrics(prof), sync.metrics(prof)
    assert a["ttft_s"] == pytest.approx(s["ttft_s"], rel=1e-12)
    assert s["tpot_s"] - a["tpot_s"] == pytest.approx(2e-3 + 80e-6, rel=1e-6)
