"""hunt8-sim: the serving simulator and its metrics against vLLM v1 and `vllm bench serve`."""

from __future__ import annotations

from kvplan.analysis.metrics import compute_metrics
from kvplan.sim.scheduler import Limits
from kvplan.sim.simulator import simulate
from kvplan.sim.testing import LinearTimer, workload


def test_max_concurrent_requests_counts_requests_queued_in_the_server() -> None:
    """vLLM bench serve's max_concurrent_requests is the client's peak of requests in flight
    (sent, not yet answered), not the server's running set. Three requests sent at t = 0 to
    a server with max_num_seqs = 1 (1 s per step, prompt 2, output 2): A runs steps 0-1
    (answered at 2.0), B steps 2-3, C steps 4-5. All three are in flight on [0, 2): peak 3;
    the server never runs more than 1 (the value reported before)."""
    r = simulate(workload([0, 0, 0], [2, 2, 2], [2, 2, 2]), timer=LinearTimer(base_s=1.0),
                 num_blocks=100, block_size=4,
                 limits=Limits(max_num_batched_tokens=100, max_num_seqs=1))
    assert r.finish_s.tolist() == [2.0, 4.0, 6.0]
    assert int(r.steps.running.max()) == 1
    assert compute_metrics(r).max_concurrent_requests == 3
