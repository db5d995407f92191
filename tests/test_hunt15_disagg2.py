"""hunt15-disagg2: regressions found in the disaggregated prefill/decode path.

Traces on tests/test_disagg_trace.py's hand-worked pools: block size 4, a step is
1 s + 0.25 s per new token, budget 16 tokens; a transfer of b bytes takes b / 400 + 0.5 s.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.sim.disagg.fleet import PoolSim, simulate_disagg
from kvplan.sim.testing import workload
from tests.test_disagg_compiled import _both, assert_same_fleet
from tests.test_disagg_properties import fleets
from tests.test_disagg_trace import COST, LIMITS, SHAPE, TIMER


@pytest.fixture(autouse=True, params=["core", "python"])
def both_paths(request):
    """Every trace on the compiled fleet and on the Python fleet (the reference)."""
    if request.param == "core":
        yield
        return
    from tests.core_helpers import python_loop

    with python_loop():
        yield


def _pool(blocks: int, instances: int = 1) -> PoolSim:
    return PoolSim(instances=instances, timer=TIMER, num_blocks=blocks, shape=SHAPE,
                   limits=LIMITS, max_model_len=10)


def test_a_request_the_decode_side_refuses_still_runs_its_prefill() -> None:
    """vLLM's proxy sends every request to a prefill instance first (max_tokens=1, so
    prompt + 1 <= max_model_len passes there); only the decode instance's API server sees
    the full max_tokens and answers 400. r0 (8 prompt + 4 out = 12 > max_model_len 10) is
    refused by decode, r1 (8 + 2 = 10) is served; both arrive at t=0.

    prefill  [0, 5]   r0 and r1 together: 16 tokens, 1 + 0.25 x 16 = 5 s (kvplan had run
                      r1 alone, [0, 3], as if the proxy never sent r0 to prefill)
    proxy    r0's answer takes decode instance 0's round-robin turn (vLLM's proxy picks the
             decode server before sending), so r1 goes to decode instance 1
    link     r1: 2 pages = 800 B at 5: 800 / 400 + 0.5 -> [5, 7.5]
    decode   [7.5, 8.75] r1's last prompt token (1.25 s): TTFT 8.75 s (was 6.75)
    """
    w = workload([0.0, 0.0], [8, 8], [4, 2])
    r = simulate_disagg(w, prefill=_pool(64), decode=_pool(64, instances=2), transfer=COST,
                        validate=True)
    assert list(r.client.rejected) == [0]
    assert r.prefill[0].num_steps == 1
    assert float(r.transfers.prefill_end_s[0]) == 5.0  # r0's prefill was computed
    assert float(r.transfers.prefill_end_s[1]) == 5.0
    assert int(r.transfers.decode_instance[1]) == 1
    assert float(r.transfers.end_s[1]) == 7.5
    assert float(r.client.first_token_s[1]) == 8.75


def test_the_refused_requests_prefill_blocks_stay_held_until_nixls_abort_timeout() -> None:
    """The prefill side keeps a finished request's blocks for the decode side to read; no
    decode instance ever reads a refused request's, so NixlConnector frees them when
    VLLM_NIXL_ABORT_REQUEST_TIMEOUT (480 s in vLLM 0.11) runs out after its prefill.
    Prefill pool of 3 usable blocks; r0 (t=0, 8 prompt + 4 out: refused by decode) holds 2
    blocks from its prefill [0, 3] until 3 + 480 = 483; r1 (t=1, 8 prompt + 2 out) needs 2,
    1 is free: its prefill runs [483, 486] (kvplan had run it [1, 3], r0 never sent)."""
    w = workload([0.0, 1.0], [8, 8], [4, 2])
    r = simulate_disagg(w, prefill=_pool(4), decode=_pool(64), transfer=COST, validate=True)
    assert list(r.client.rejected) == [0]
    assert float(r.transfers.prefill_end_s[0]) == 3.0
    assert float(r.transfers.prefill_end_s[1]) == 486.0
    assert float(r.client.first_token_s[1]) == 486.0 + 2.5 + 1.25


def test_a_request_the_prefill_side_refuses_is_never_computed() -> None:
    """prompt + 1 > max_model_len: the prefill instance's API server refuses it (400), the
    proxy raises before any decode server is picked. r0 (10 prompt: 11 > 10) never runs;
    r1 (8 + 2) has the prefill [0, 3] and decode instance 0 to itself."""
    w = workload([0.0, 0.0], [10, 8], [1, 2])
    dec = replace(_pool(64), instances=2)
    r = simulate_disagg(w, prefill=_pool(64), decode=dec, transfer=COST, validate=True)
    assert list(r.client.rejected) == [0]
    assert float(r.transfers.prefill_end_s[1]) == 3.0
    assert int(r.transfers.decode_instance[1]) == 0


class _ApiTimer(TIMER.__class__):
    """TIMER with an API path of 0.1 s per prompt token (tokenisation) on every server."""

    def api_delays_s(self, prompt_tokens):
        return 0.1 * np.asarray(prompt_tokens, dtype=np.float64)


def test_the_proxy_picks_prefill_servers_in_the_order_requests_reach_it() -> None:
    """toy_proxy_server.py picks the next prefill server (round robin) as a request reaches
    the proxy; that server's API path (0.1 s a prompt token here) comes after the pick.
    r0 (t=0, 8 tokens), r1 (t=0.1, 4), r2 (t=0.2, 4) -> p0, p1, p0 (kvplan picked in the
    order they reached the engines, 0.8 / 0.5 / 0.6 s: r1 -> p0, r2 -> p1, r0 -> p0).
    p0: r2 reaches it at 0.2 + 0.4 = 0.6, [0.6, 2.6] (1 + 0.25 x 4); r0 at 0.8 waits,
    [2.6, 5.6] (1 + 0.25 x 8) (was [2.5, 5.5] behind r1)."""
    timer = _ApiTimer(base_s=1.0, per_token_s=0.25)
    pre = PoolSim(instances=2, timer=timer, num_blocks=64, shape=SHAPE, limits=LIMITS)
    dec = PoolSim(instances=1, timer=timer, num_blocks=64, shape=SHAPE, limits=LIMITS)
    w = workload([0.0, 0.1, 0.2], [8, 4, 4], [2, 2, 2])
    r = simulate_disagg(w, prefill=pre, decode=dec, transfer=COST, validate=True)
    assert r.transfers.prefill_instance.tolist() == [0, 1, 0]
    assert r.transfers.prefill_end_s.tolist() == pytest.approx([5.6, 2.5, 2.6])


@settings(max_examples=60, deadline=None)
@given(fleets(), st.sampled_from([0.0, 0.05, 0.3]), st.sampled_from([0.0, 0.5]))
def test_fleets_with_api_delays_agree_on_both_paths(case, per_token, base) -> None:
    """Requests reach the engines out of the proxy's order (a per-prompt-token API path):
    the compiled fleet equals the Python fleet, and every block comes back."""
    w, pre, dec, cost, router = case

    class Timer(_ApiTimer):
        def api_delays_s(self, prompt_tokens):
            return base + per_token * np.asarray(prompt_tokens, dtype=np.float64)

    pre = replace(pre, timer=Timer(base_s=pre.timer.base_s, per_token_s=pre.timer.per_token_s))
    dec = replace(dec, timer=Timer(base_s=dec.timer.base_s, per_token_s=dec.timer.per_token_s))
    got, ref = _both(w, pre, dec, cost, router)
    assert_same_fleet(got, ref)


@pytest.mark.parametrize(("max_model_len", "late"), [(1100, 5), (1000, 0)])
def test_simulate_says_which_refused_requests_were_prefilled(max_model_len: int,
                                                            late: int) -> None:
    """5 requests of 1,000 + 200 tokens: max_model_len 1100 passes the prefill side's
    1,000 + 1 and refuses 1,200 on the decode side, so all 5 ran their prefill and held its
    KV (the text said only '5 request(s) rejected'); at 1000 the prefill side refuses 1,001:
    none ran, no such line."""
    from tests.conftest import run_cli

    r = run_cli("simulate", "meta-llama/Llama-3.1-8B", "--dataset", "random",
                "--random-input-len", "1000", "--random-output-len", "200", "--num-prompts",
                "5", "--disagg", "1P1D", "--max-model-len", str(max_model_len))
    assert r.code == 0, r.err
    said = " ".join(r.out.split())
    assert "5 requests rejected" in said
    line = "Refused by the decode side after their prefill ran:"
    assert (f"{line} {late} requests of the rejected" in said) == (late > 0)
    assert (line in said) == (late > 0)
