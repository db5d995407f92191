"""`kvplan calibrate` replays a measured `vllm bench serve` run at its request rate with the
arrivals vLLM sent: the gaps of numpy's legacy stream seeded by --seed (0 by default), the
same send times `kvplan simulate --request-rate R --seed 0` uses."""

from __future__ import annotations

import numpy as np

from kvplan.analysis.calibration.serving_fit import run_workload
from kvplan.analysis.calibration.serving_runs import ServingRun
from kvplan.specs.requests.workload import WorkloadArgs, build_workload
from kvplan.specs.serving import EngineConfig


def test_a_rated_run_is_replayed_with_vllms_send_times() -> None:
    """Was: the replay drew its gaps from default_rng(0), so at 2 req/s, 5 prompts, it sent at
    0.748, 1.870, 1.892, 1.894, 2.5 s where vLLM (and `simulate`) send at 0.4613, 1.1892,
    1.7243, 2.1806, 2.5 s (the last arrival lands at N / rate = 2.5 s either way)."""
    run = ServingRun(id="r", where="f", model="meta-llama/Llama-3.1-8B", gpu="H100",
                     engine=EngineConfig(), num_prompts=5, input_lens=(100,) * 5,
                     output_lens=(10,) * 5, request_rate=2.0, burstiness=1.0,
                     max_concurrency=None, measured={})
    replay = run_workload(run).arrival_s
    sim = build_workload(WorkloadArgs(num_prompts=5, request_rate=2.0, seed=0,
                                      random_input_len=100, random_output_len=10)).arrival_s
    assert np.array_equal(replay, sim)
    assert np.round(replay, 4).tolist() == [0.4613, 1.1892, 1.7243, 2.1806, 2.5]
