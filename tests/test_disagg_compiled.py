"""The disaggregated fleet on the compiled core (sim/disagg/compiled.py) against the Python
fleet (sim/disagg/fleet.py, the reference): every instance's result, the transfers, the
client's view and the link's bytes equal to the bit on random fleets and workloads, the
fleets it covers taken by it, and the ones it does not (or cannot settle) left to Python."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.costs.memory.kv_transfer import GroupPages, TransferCost
from kvplan.sim import core
from kvplan.sim.blocks import CacheGroup, KvShape
from kvplan.sim.disagg import compiled
from kvplan.sim.disagg.fleet import PoolSim, simulate_disagg
from kvplan.sim.scheduler import Limits
from kvplan.sim.testing import LinearTimer, workload
from tests.core_helpers import assert_same, python_loop, segments
from tests.test_disagg_properties import fleets
from tests.test_disagg_trace import COST, SHAPE, TIMER
from tests.test_disagg_trace import _pool as trace_pool

BUILT = core.module() is not None
"""Without the build every fleet runs in Python (test_sim_core.py fails the run where
scripts/test.sh requires the build): the counts below say which path ran."""
CORE = [1, 1] if BUILT else [0, 2]
"""[results from the core, hand-overs to Python] of one _both() on a covered fleet: the
core's run, then python_loop()'s."""

_TRANSFER_FIELDS = ("prefill_instance", "decode_instance", "prefill_end_s", "decode_arrival_s",
                    "admitted_s", "start_s", "end_s", "link_bytes", "waited_for_blocks")


def assert_same_fleet(a, b) -> None:
    assert len(a.prefill) == len(b.prefill) and len(a.decode) == len(b.decode)
    for x, y in zip((*a.prefill, *a.decode, a.client), (*b.prefill, *b.decode, b.client),
                    strict=True):
        assert_same(x, y)
    for name in _TRANSFER_FIELDS:
        x, y = getattr(a.transfers, name), getattr(b.transfers, name)
        assert x.dtype == y.dtype and np.array_equal(x, y, equal_nan=True), name
    assert a.moved_bytes == b.moved_bytes


@pytest.fixture
def taken(monkeypatch):
    """[compiled runs that gave a result, ones that handed over to Python]."""
    count = [0, 0]
    real = compiled.run

    def counting(fleet):
        got = real(fleet)
        count[got is None] += 1
        return got
    monkeypatch.setattr(compiled, "run", counting)
    return count


def _both(w, pre, dec, cost, router):
    got = simulate_disagg(w, prefill=pre, decode=dec, transfer=cost, router=router,
                          validate=True)
    with python_loop():
        ref = simulate_disagg(w, prefill=pre, decode=dec, transfer=cost, router=router,
                              validate=True)
    return got, ref


class _Paths:
    """Counts compiled.run's results and hand-overs while in use (hypothesis tests cannot
    take the function-scoped ``taken`` fixture)."""

    def __enter__(self) -> list[int]:
        self.count, self.real = [0, 0], compiled.run

        def counting(fleet):
            got = self.real(fleet)
            self.count[got is None] += 1
            return got
        compiled.run = counting
        return self.count

    def __exit__(self, *exc) -> None:
        compiled.run = self.real


@settings(max_examples=300, deadline=None)
@given(fleets(), st.sampled_from([None, 1, 2, 3]))
def test_the_compiled_fleet_equals_the_python_fleet(case, decode_instances) -> None:
    """Any fleet: 1-3 instances a side, either router (least-outstanding over several
    instances hands over to Python; so may a fleet the rounds do not settle)."""
    w, pre, dec, cost, router = case
    if decode_instances is not None:
        dec = replace(dec, instances=decode_instances)
    with _Paths() as taken:
        got, ref = _both(w, pre, dec, cost, router)
    covered = router == "round-robin" or pre.instances == dec.instances == 1
    if not covered or not BUILT:
        assert taken == [0, 2]
    assert_same_fleet(got, ref)


@settings(max_examples=150, deadline=None)
@given(fleets(), st.integers(2, 3))
def test_several_decode_instances_run_in_the_core(case, decode_instances) -> None:
    """Round robin to 2-3 decode instances sharing the prefill instances' NICs, a prefill
    pool that never runs short of blocks (so the first round settles): the core's result,
    equal to the Python fleet's."""
    w, pre, dec, cost, _ = case
    pre = replace(pre, num_blocks=1024)
    dec = replace(dec, instances=decode_instances)
    with _Paths() as taken:
        got, ref = _both(w, pre, dec, cost, "round-robin")
    assert taken == CORE
    assert_same_fleet(got, ref)


# ------------------------------------------------------------ which path runs a fleet


def _stalled_case(decode_instances: int = 1):
    """test_disagg_trace's stalled prefill pool (3 usable blocks): r1 waits for r0's transfer,
    so the first guess (blocks freed at the finish) is wrong and a second round settles it."""
    dec = replace(trace_pool(64), instances=decode_instances)
    return workload([0.0, 0.5], [8, 8], [3, 2]), trace_pool(4), dec


@pytest.mark.parametrize("decode_instances", [1, 2])
def test_a_covered_fleet_runs_in_the_core_in_rounds(taken, monkeypatch,
                                                    decode_instances) -> None:
    w, pre, dec = _stalled_case(decode_instances)
    rounds = [0]
    real = compiled._decode

    def counting(*a):
        rounds[0] += 1
        return real(*a)
    monkeypatch.setattr(compiled, "_decode", counting)
    got, ref = _both(w, pre, dec, COST, "round-robin")
    assert taken == CORE
    assert rounds[0] == 2 * BUILT  # P0 (guess) -> D0 -> P1 (r1 later) -> D1 -> P2 == P1
    assert got.transfers.prefill_end_s.tolist() == [3.0, 8.5]  # the trace's, by hand
    assert got.transfers.decode_instance.tolist() == [0, decode_instances - 1]
    assert_same_fleet(got, ref)


@pytest.mark.parametrize("decode_instances", [1, 2])
def test_rounds_running_out_hand_over_to_python(taken, monkeypatch, decode_instances) -> None:
    monkeypatch.setattr(compiled, "ROUNDS", 0)
    w, pre, dec = _stalled_case(decode_instances)
    got, ref = _both(w, pre, dec, COST, "round-robin")
    assert taken == [0, 2]
    assert got.transfers.prefill_end_s.tolist() == [3.0, 8.5]
    assert_same_fleet(got, ref)


def test_a_release_due_before_its_finish_hands_over_to_python(taken) -> None:
    """Nine 1-token prompts at once, a 2-block prefill pool, one sequence per step, a 2 s
    link latency: freed at their finish (the first guess) the prompts run every 0.5 s, but
    held for their transfers they run every 2.5 s or so, so the guessed releases of later
    requests fall due before those requests finish: the core gives up, Python runs it."""
    lim = Limits(max_num_batched_tokens=8, max_num_seqs=1, prefix_caching=False)
    shape = KvShape(block_size=4, groups=(CacheGroup(bytes_per_token=8),))
    timer = LinearTimer(base_s=0.5, per_token_s=0.0)
    pre = PoolSim(instances=1, timer=timer, num_blocks=3, shape=shape, limits=lim)
    dec = PoolSim(instances=1, timer=timer, num_blocks=8, shape=shape, limits=lim)
    cost = TransferCost(groups=(GroupPages(layers=1, block_size=4, page_bytes=32),),
                        prefill_tp=1, decode_tp=1, bytes_per_s_per_gpu=1e6, latency_s=2.0)
    w = workload([0.0] * 9, [1] * 9, [1] * 9)
    got, ref = _both(w, pre, dec, cost, "round-robin")
    assert taken == [0, 2]
    assert_same_fleet(got, ref)


@pytest.mark.parametrize(("x", "y", "router", "covered"),
                         [(2, 1, "round-robin", True), (2, 1, "least-outstanding", False),
                          (1, 1, "least-outstanding", True), (1, 2, "round-robin", True),
                          (2, 2, "round-robin", True), (1, 3, "round-robin", True),
                          (3, 2, "round-robin", True), (1, 2, "least-outstanding", False),
                          (2, 2, "least-outstanding", False)])
def test_the_fleets_the_core_covers(taken, x, y, router, covered) -> None:
    """Round robin, or one instance a side (module docstring). r1 (4 tokens at 0.1) finishes
    before r0 (32 tokens at 0) on 2P: the proxy's order to decode is the fleet's."""
    w = workload([0.0, 0.1, 3.0, 3.5, 3.5, 3.6], [32, 4, 4, 9, 8, 8], [1, 3, 2, 4, 5, 5])
    pool = PoolSim(instances=x, timer=TIMER, num_blocks=64, shape=SHAPE,
                   limits=Limits(max_num_batched_tokens=64, max_num_seqs=8,
                                 prefix_caching=False))
    got, ref = _both(w, pool, replace(pool, instances=y), COST, router)
    assert taken == (CORE if covered else [0, 2])
    assert_same_fleet(got, ref)


@pytest.mark.parametrize(("x", "y"), [(1, 1), (1, 2), (2, 2)])
def test_a_real_deployment_on_azure_conv(taken, x, y) -> None:
    """Llama-3.1-8B on H100 xPyD over ib-ndr, the first 3,000 azure-conv requests (the
    benchmark's fleets, benchmarks/bench_disagg.py): the core's result is Python's."""
    from kvplan.analysis.disagg.serving import simulate_disagg_serving
    from kvplan.specs.catalog import load_model
    from kvplan.specs.deployment import Deployment
    from kvplan.specs.disagg import DisaggDeployment
    from kvplan.specs.hardware import load_gpu
    from kvplan.specs.links import load_link
    from kvplan.specs.requests.workload import WorkloadArgs, build_workload
    from kvplan.specs.serving import EngineConfig

    work = build_workload(WorkloadArgs(dataset="azure-conv", num_prompts=3000))
    dep = Deployment(model=load_model("meta-llama/Llama-3.1-8B"), gpu=load_gpu("H100"),
                     engine=EngineConfig())
    dd = DisaggDeployment(prefill=replace(dep, replicas=x), decode=replace(dep, replicas=y),
                          link=load_link("ib-ndr"))
    runs = core.DECODE_RUN_STEPS[0]
    got = simulate_disagg_serving(dd, work).result
    runs = core.DECODE_RUN_STEPS[0] - runs
    with python_loop():
        ref = simulate_disagg_serving(dd, work).result
    assert taken == CORE
    # the decode instances step most of their steps in decode runs (_core_run.h)
    steps = sum(len(d.steps.end_s) for d in got.decode)
    assert runs > steps // 2 if BUILT else runs == 0
    assert_same_fleet(got, ref)


@pytest.mark.parametrize("path", ["core", "python"])
def test_a_request_preempted_after_its_first_token_starts_a_new_emission_run(path) -> None:
    """Decode pool of 7 usable blocks; r3 (8-token prompt, 2 outputs) samples its first token
    at decode step 3 and then, with 5 blocks held by transfers in flight, cannot grow to its
    3rd block: it is preempted and recomputes its 8 tokens (the 8-token budget, one short
    of its 9) 15 times until r4's transfer lands. It samples again at step 19 only: two
    emission runs, (3, 3) and (19, 19), on both paths (the lean step's cohort once counted
    it as decoding since step 3)."""
    shape = KvShape(block_size=4, groups=(CacheGroup(bytes_per_token=8),))
    timer = LinearTimer(base_s=0.5, per_token_s=0.0)
    lim = Limits(max_num_batched_tokens=8, max_num_seqs=1, prefix_caching=False)
    pre = PoolSim(instances=1, timer=timer, num_blocks=14, shape=shape, limits=lim)
    dec = PoolSim(instances=1, timer=timer, num_blocks=8, shape=shape,
                  limits=replace(lim, max_num_seqs=2))
    cost = TransferCost(groups=(GroupPages(layers=1, block_size=4, page_bytes=32),),
                        prefill_tp=1, decode_tp=1, bytes_per_s_per_gpu=16.0, latency_s=0.0)
    w = workload([0.0] * 6, [1, 1, 1, 8, 13, 1], [1, 1, 1, 2, 1, 1])
    if path == "python":
        with python_loop():
            r = simulate_disagg(w, prefill=pre, decode=dec, transfer=cost, validate=True)
    else:
        r = simulate_disagg(w, prefill=pre, decode=dec, transfer=cost, validate=True)
    d = r.decode[0]
    assert d.preemptions.tolist() == [0, 0, 0, 15, 1, 0]  # and r4 once
    assert [s for s in segments(d) if s[0] == 3] == [(3, 3, 3), (3, 19, 19)]
