"""A recorded serving run re-priced under another profile equals simulating it again
(request rate inf, with and without --max-concurrency): the property the calibration fit
relies on (kvplan.analysis.calibration.replay)."""

from __future__ import annotations

import pytest

from kvplan.analysis.calibration.public_set import serving_replay
from kvplan.analysis.metrics import compute_metrics
from kvplan.analysis.serving import simulate_serving
from kvplan.costs.step.roofline import Profile
from kvplan.specs.requests.workload import WorkloadArgs, build_workload
from kvplan.specs.serving import EngineConfig

OTHER = Profile(compute_eff=0.45, bandwidth_eff=0.65, step_overhead_s=2e-3,
                prefill_overhead_s=6e-3, layer_overhead_s=20e-6, request_overhead_s=40e-6)


@pytest.mark.parametrize(("model", "conc", "n", "prompt", "out"), [
    ("meta-llama/Llama-3.1-8B", 4, 24, 700, 60),
    ("meta-llama/Llama-3.1-8B", None, 48, 3000, 20),
    ("mistralai/Mixtral-8x7B-v0.1", 8, 32, 400, 40),
])
def test_replay_equals_simulating_again(model: str, conc: int | None, n: int, prompt: int,
                                        out: int) -> None:
    engine = EngineConfig(tensor_parallel_size=2, max_num_batched_tokens=2048)
    work = build_workload(WorkloadArgs(num_prompts=n, random_input_len=prompt,
                                       random_output_len=out, max_concurrency=conc))
    replay = serving_replay(model, "H100-SXM-80GB", engine, work)
    for profile in (Profile(), OTHER):
        got = replay.metrics(profile)
        m = compute_metrics(simulate_serving(model, "H100-SXM-80GB", engine, work,
                                             profile=profile).result)
        assert got["ttft_s"] == pytest.approx(m.stats["ttft"].mean_ms / 1e3, rel=1e-9)
        assert got["tpot_s"] == pytest.approx(m.stats["tpot"].mean_ms / 1e3, rel=1e-9)
        assert got["itl_s"] == pytest.approx(m.stats["itl"].mean_ms / 1e3, rel=1e-9)
        assert got["output_throughput_tok_s"] == pytest.approx(m.output_throughput, rel=1e-9)


def test_replay_refuses_timed_arrivals() -> None:
    from kvplan.errors import InputError

    work = build_workload(WorkloadArgs(num_prompts=8, request_rate=2.0))
    with pytest.raises(InputError, match="request-rate-inf"):
        serving_replay("meta-llama/Llama-3.1-8B", "H100-SXM-80GB", EngineConfig(), work)
