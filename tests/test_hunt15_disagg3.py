"""hunt15-disagg3: regressions found in the disaggregated prefill/decode path.

Traces on tests/test_disagg_trace.py's hand-worked pools: block size 4, a step is
1 s + 0.25 s per new token, budget 16 tokens; a transfer of b bytes takes b / 400 + 0.5 s;
max_model_len 10.
"""

from __future__ import annotations

import numpy as np

from kvplan.analysis.metrics import compute_metrics
from kvplan.sim.disagg.fleet import PoolSim, simulate_disagg
from kvplan.sim.testing import workload
from tests.test_disagg_trace import COST, LIMITS, SHAPE, TIMER
from tests.test_hunt15_disagg2 import both_paths  # noqa: F401  (autouse: core and python)


class _HopTimer(TIMER.__class__):
    """TIMER with a flat 0.5 s API path per request (the decode server's)."""

    def api_delays_s(self, prompt_tokens):
        return np.full(len(prompt_tokens), 0.5)


def _pool(timer=TIMER) -> PoolSim:
    return PoolSim(instances=1, timer=timer, num_blocks=64, shape=SHAPE, limits=LIMITS,
                   max_model_len=10)


def test_duration_waits_for_the_decode_sides_refusal() -> None:
    """vllm bench serve's benchmark_duration runs until every request has answered, a
    failed one included. r0 (t=0, 8 + 2) is served and done well before 20 s; r1 (t=20,
    8 prompt + 4 out = 12 > max_model_len 10) passes the prefill side (8 + 1 <= 10): its
    prefill runs [20, 21 + 0.25 x 8 = 23], then the proxy's request takes the decode API
    path (0.5 s) and is refused there: its failure comes back at 23.5. Duration 23.5 s,
    output throughput 2 / 23.5 tok/s (kvplan stopped at r1's arrival: 20 s, 2 / 20)."""
    w = workload([0.0, 20.0], [8, 8], [2, 4])
    r = simulate_disagg(w, prefill=_pool(), decode=_pool(_HopTimer(base_s=1.0,
                                                                   per_token_s=0.25)),
                        transfer=COST, validate=True)
    c = r.client
    assert list(c.rejected) == [1]
    assert bool(c.finished[0]) and float(c.finish_s[0]) < 20.0
    assert float(r.transfers.prefill_end_s[1]) == 23.0
    m = compute_metrics(c)
    assert m.duration_s == 23.5
    assert m.output_throughput == 2 / 23.5


def test_a_prefill_side_refusal_fails_at_its_send() -> None:
    """r1 (t=20, 10 prompt: 10 + 1 > 10) is refused by the prefill instance's API server
    as it arrives: the duration ends at 20 s (r0, 8 + 2, finished before)."""
    w = workload([0.0, 20.0], [8, 10], [2, 1])
    r = simulate_disagg(w, prefill=_pool(), decode=_pool(_HopTimer(base_s=1.0,
                                                                   per_token_s=0.25)),
                        transfer=COST, validate=True)
    assert list(r.client.rejected) == [1]
    assert compute_metrics(r.client).duration_s == 20.0


def test_the_reason_names_the_side_that_refused() -> None:
    """r0 (10 prompt + 4 out): the prefill instance's API server sees 10 + max_tokens 1 =
    11 > 10 and refuses it, so the client sees the prefill side's reason (kvplan showed the
    decode side's 'prompt + output = 14'); r1 (8 + 4 = 12 > 10, 8 + 1 fits) passes prefill
    and the decode side refuses it after its prefill ran."""
    w = workload([0.0, 0.0], [10, 8], [4, 4])
    r = simulate_disagg(w, prefill=_pool(), decode=_pool(), transfer=COST, validate=True)
    assert r.client.rejected == {
        0: "prefill side (the proxy's max_tokens=1): prompt + output = 11 tokens exceeds "
           "max_model_len 10",
        1: "decode side, after its prefill ran: prompt + output = 12 tokens exceeds "
           "max_model_len 10"}


def test_the_prefill_hold_includes_the_decode_api_hop() -> None:
    """r0 (t=0, 8 + 2): prefill [0, 3]; the proxy's request reaches the decode engine
    0.5 s later (its API path), is admitted at once (idle) and its 800 B move [3.5, 6.0]
    (800 / 400 + 0.5): the prefill blocks are held 3.0 s = 0.5 hop + 0 admission wait +
    0 queue + 2.5 transfer, and the figure's documentation names the hop (it said only
    'decode wait + queue + transfer', 2.5 s of the 3.0)."""
    import inspect

    from kvplan.analysis.disagg import metrics as dm

    w = workload([0.0], [8], [2])
    r = simulate_disagg(w, prefill=_pool(), decode=_pool(_HopTimer(base_s=1.0,
                                                                   per_token_s=0.25)),
                        transfer=COST, validate=True)
    got = dm.disagg_metrics(r, (99,))
    assert got.prefill_hold.mean_ms == 3000.0
    assert got.admission_wait.mean_ms == 0.0 and got.transfer_queue.mean_ms == 0.0
    assert got.transfer.mean_ms == 2500.0
    source = " ".join(inspect.getsource(dm.DisaggMetrics).split())
    assert "Prefill blocks held after the prefill ended: the proxy's hop to the decode" in source


def test_the_prefilled_count_line_reads_after_any_group() -> None:
    """40 requests of 500..1500 prompt + 100..300 output tokens at max_model_len 1250: some
    are refused by the prefill side (prompt + 1 > 1250), others by the decode side only.
    The rejection groups print largest first, so the prefilled-refusals line can follow
    the prefill side's group: it said '9 of them refused by the decode side' right after
    '8 requests rejected: prefill side ...' (9 of 8). Its count must name what it counts
    and equal the decode side's group."""
    import re

    from tests.conftest import run_cli

    r = run_cli("simulate", "meta-llama/Llama-3.1-8B", "--dataset", "random",
                "--random-input-len", "1000", "--random-output-len", "200",
                "--random-range-ratio", "0.5", "--num-prompts", "40", "--request-rate", "4",
                "--seed", "3", "--disagg", "1P2D", "--max-model-len", "1250")
    assert r.code == 0, r.err
    said = " ".join(r.out.split())
    assert "of them" not in said
    decode = re.search(r"(\d+) requests? rejected: decode side, after its prefill ran", said)
    prefill = re.search(r"(\d+) requests? rejected: prefill side", said)
    assert decode is not None and prefill is not None
    late = re.search(r"Refused by the decode side after their prefill ran: (\d+) requests? "
                     r"of the rejected", said)
    assert late is not None and late.group(1) == decode.group(1)
