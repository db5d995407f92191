"""Pipeline parallelism with vLLM V1's batch queue (sim/pipeline.py): up to pp batches in
flight, scheduled by ``step_with_batch_queue``'s rule and timed stage by stage."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from kvplan.sim import pipeline
from kvplan.sim.scheduler import Limits
from kvplan.sim.simulator import simulate
from kvplan.sim.testing import ArrayWorkload, PipeTimer, workload

# stage = 1 + T / 8 s, hop 0.25 s, host 0.5 s; a batch alone: host + stage + hop + stage
TIMER = PipeTimer(pp=2, stage_s=1.0, per_token_s=0.125, hop_s=0.25, host_s=0.5)
LIM = Limits(max_num_batched_tokens=8, max_num_seqs=8)


class OneBatch:
    """The same step times without the pipeline's pieces: one batch at a time."""

    def __init__(self, timer: PipeTimer) -> None:
        self.t = timer

    def step_time_s(self, new, ctx):
        return self.t.step_time_s(new, ctx)

    def decode_run_s(self, ctx, k):
        return self.t.decode_run_s(ctx, k)


def _traced(monkeypatch) -> list:
    got: list = []

    def run(loop, sp):
        p = pipeline.Pipeline(loop, sp)
        p.trace = []
        got.append(p)
        return p.run()

    monkeypatch.setattr(pipeline, "run", run)
    return got


def _three():
    return workload([0.0, 0.0, 0.0], [4, 4, 4], [2, 2, 2])


def test_three_prompts_two_batches_in_flight(monkeypatch):
    """pp=2, budget 8, three 4-token prompts with 2 output tokens, all at t=0.

    t=0    B0 = {0, 1} (4 + 4 tokens, stage 2.0): host 0-0.5, stage0 0.5-2.5, stage1
           2.75-4.75; the queue is not full and B0 is not back: schedule again at once.
    t=0    B1 = {2} (r0, r1 in flight are skipped; 4 tokens, stage 1.5): host 0.5-1.0,
           stage0 2.5-4.0 (after B0), stage1 max(4.25, 4.75) = 4.75-6.25. Queue full: block.
    t=4.75 B0 back: r0, r1 first tokens. B2 = {0, 1} decodes (2 tokens, stage 1.25): host
           4.75-5.25, stage0 5.25-6.5, stage1 max(6.75, 6.25) = 6.75-8.0. Full: block.
    t=6.25 B1 back: r2's first token. B3 = {2} (stage 1.125): host 6.25-6.75, stage0
           6.75-7.875, stage1 max(8.125, 8.0) = 8.125-9.25. Full: block.
    t=8.0  B2 back: r0, r1 finish. Nothing to schedule (r2 in flight): block on B3.
    t=9.25 B3 back: r2 finishes.
    """
    got = _traced(monkeypatch)
    r = simulate(_three(), timer=TIMER, num_blocks=64, block_size=4, limits=LIM,
                 validate=True)
    assert got[0].trace == [([0, 1], 0.0, 4.75), ([2], 0.0, 6.25), ([0, 1], 4.75, 8.0),
                            ([2], 6.25, 9.25)]
    assert r.steps.new_tokens.tolist() == [8, 4, 2, 1]
    assert r.first_token_s.tolist() == [4.75, 4.75, 6.25]
    assert r.finish_s.tolist() == [8.0, 8.0, 9.25]
    assert r.token_times(2).tolist() == [6.25, 9.25]
    assert r.itl_s().tolist() == [3.25, 3.25, 3.0]


def test_one_batch_model_of_the_same_case():
    """The one-batch model (every step passes both stages alone): step = 2 x stage + 0.75.
    {0:4, 1:4}: 4.75; {0:1, 1:1, 2:4} (T=6, stage 1.75): 4.25 -> 9.0; {2:1}: 3.0 -> 12.0."""
    r = simulate(_three(), timer=OneBatch(TIMER), num_blocks=64, block_size=4, limits=LIM)
    assert r.finish_s.tolist() == [9.0, 9.0, 12.0]


def test_a_lone_request_takes_the_one_batch_time():
    """One request at a time: the pipeline never holds two batches (pp=4, hop 0.5, host
    0.25; 6-token prompt, stage 1 + 6/8 = 1.75: 0.25 + 1.75 + 3 x 2.25 = 8.75; decodes
    stage 1.125: 0.25 + 1.125 + 3 x 1.625 = 6.25 -> 15.0, 21.25)."""
    t = PipeTimer(pp=4, stage_s=1.0, per_token_s=0.125, hop_s=0.5, host_s=0.25)
    w = workload([0.0], [6], [3])
    a = simulate(w, timer=t, num_blocks=64, block_size=4, limits=LIM)
    b = simulate(w, timer=OneBatch(t), num_blocks=64, block_size=4, limits=LIM)
    assert a.token_times(0).tolist() == b.token_times(0).tolist() == [8.75, 15.0, 21.25]


def test_chunks_of_one_prompt_go_in_successive_batches(monkeypatch):
    """A 12-token prompt, budget 8: B0 computes 8 tokens, B1 (scheduled at once, the prompt
    not caught up) the other 4 and samples; tokens only when B1 is back. stage(8) = 2,
    stage(4) = 1.5: B0 0.5-2.5 | 2.75-4.75; B1 host 0.5-1.0, stage0 2.5-4.0, stage1 4.75-6.25."""
    got = _traced(monkeypatch)
    r = simulate(workload([0.0], [12], [1]), timer=TIMER, num_blocks=64, block_size=4,
                 limits=LIM)
    assert got[0].trace == [([0], 0.0, 4.75), ([0], 0.0, 6.25)]
    assert r.first_token_s.tolist() == r.finish_s.tolist() == [6.25]


@st.composite
def cases(draw):
    n = draw(st.integers(1, 20))
    gaps = draw(st.lists(st.floats(0, 2.0), min_size=n, max_size=n))
    w = ArrayWorkload(
        arrival_s=np.cumsum(gaps),
        prompt_tokens=np.array(draw(st.lists(st.integers(1, 40), min_size=n, max_size=n))),
        output_tokens=np.array(draw(st.lists(st.integers(1, 12), min_size=n, max_size=n))))
    lim = Limits(max_num_batched_tokens=draw(st.integers(8, 64)),
                 max_num_seqs=draw(st.integers(1, 8)), chunked_prefill=draw(st.booleans()),
                 prefix_caching=False)
    stage = draw(st.sampled_from([0.25, 1.0]))
    timer = PipeTimer(pp=draw(st.integers(2, 4)), stage_s=stage,
                      per_token_s=draw(st.sampled_from([0.0, 1 / 64, 1 / 16])),
                      hop_s=draw(st.sampled_from([0.0, 0.125])),
                      host_s=stage * draw(st.sampled_from([0.0, 0.5, 1.0])))
    return w, lim, timer, draw(st.integers(12, 80))


@settings(max_examples=150, deadline=None)
@given(cases())
def test_invariants(case):
    """Every request's tokens in order, all of them, first and last where the result says;
    the pool's books hold after every turn (validate) and KV never exceeds the pool; never
    more than pp batches in flight."""
    w, lim, timer, blocks = case
    got: list = []
    orig = pipeline.run

    def run(loop, sp):
        p = pipeline.Pipeline(loop, sp)
        p.trace = got
        return p.run()

    pipeline.run = run
    try:
        r = simulate(w, timer=timer, num_blocks=blocks, block_size=4, limits=lim,
                     validate=True)
    finally:
        pipeline.run = orig
    for _, sched, _ in got:  # at most pp batches in flight when one is scheduled
        assert sum(a <= sched < b for _, a, b in got) <= timer.pp
    for i in range(r.num_requests):
        if i in r.rejected:
            continue
        tt = r.token_times(i)
        assert len(tt) == w.output_tokens[i]
        assert np.all(np.diff(tt) > 0)
        assert tt[0] == r.first_token_s[i] and tt[-1] == r.finish_s[i]
    assert r.num_steps == 0 or int(r.steps.used_blocks.max()) <= r.usable_blocks
    assert np.all(np.diff(r.steps.end_s) >= 0)


@st.composite
def loads(draw):
    """Everyone at t=0, alike (a load test): n prompts of P tokens, O outputs each."""
    n, p, o = draw(st.integers(1, 24)), draw(st.integers(1, 40)), draw(st.integers(1, 12))
    w = workload([0.0] * n, [p] * n, [o] * n)
    lim = Limits(max_num_batched_tokens=draw(st.integers(max(8, p), 96)),
                 max_num_seqs=draw(st.integers(1, 12)), prefix_caching=False)
    timer = PipeTimer(pp=draw(st.integers(2, 4)), stage_s=draw(st.sampled_from([0.25, 1.0])),
                      per_token_s=draw(st.sampled_from([0.0, 1 / 64, 1 / 16])),
                      hop_s=draw(st.sampled_from([0.0, 0.125])))
    return w, lim, timer


@settings(max_examples=150, deadline=None)
@given(loads())
def test_never_slower_than_one_batch_at_a_time_under_load(case):
    """Alike requests all at once, KV for all, no host time: the batch queue finishes no
    later than the one-batch model, so throughput at pp = N is never below it. (Not a law
    in general: arrivals while the engine blocks on its oldest batch wait for it, and each
    micro-batch pays its own host time.)"""
    w, lim, timer = case
    big = int((w.prompt_tokens + w.output_tokens).sum()) + 8
    a = simulate(w, timer=timer, num_blocks=big, block_size=1, limits=lim)
    b = simulate(w, timer=OneBatch(timer), num_blocks=big, block_size=1, limits=lim)
    assert a.finished.all() and b.finished.all()
    assert a.finish_s.max() <= b.finish_s.max() + 1e-9


def test_single_stage_timers_keep_the_one_batch_loop():
    assert pipeline.split(OneBatch(TIMER), 8) is None
    assert pipeline.split(PipeTimer(pp=1), 8) is None
    sp = pipeline.split(TIMER, 8)
    assert sp is not None and sp.pp == 2 and sp.overhead_s == (0.5, 0.5)


@pytest.mark.parametrize("pp", [2, 4])
def test_llama70b_four_h100_batch_queue_raises_throughput(pp):
    """docs/simulator.md: Llama-3.1-70B on 4 H100, 400 random 1024/256 prompts at once.
    One batch at a time gave 1,209 tok/s (TP2 PP2) and 709 (PP4); with the batch queue
    2,057 and 1,771 (TP4: 1,921, unchanged; TP2 PP2 was 2,081 before hunt 16's eager
    all-reduce rows for steps past 512 tokens)."""
    from kvplan.analysis.serving import simulate_serving
    from kvplan.specs.requests.workload import WorkloadArgs
    from kvplan.specs.serving import EngineConfig

    e = EngineConfig(tensor_parallel_size=4 // pp, pipeline_parallel_size=pp)
    w = WorkloadArgs(num_prompts=400, random_input_len=1024, random_output_len=256,
                     request_rate=float("inf"))
    r = simulate_serving("llama-3.1-70b", "H100", e, w).result
    tok_s = float(r.output_tokens[r.finished].sum() / r.finish_s.max())
    assert tok_s == pytest.approx({2: 2057, 4: 1771}[pp], rel=0.01)


def test_busy_seconds_of_a_loaded_pipeline():
    """max(host, stage): 8 prompt tokens, stage 1 + 8/8 = 2.0 s, host 0.5 -> 2.0; host 3.0
    -> 3.0; one stage: the whole step (2.0 + 0.5)."""
    new, ctx = np.array([8]), np.array([0])
    assert pipeline.busy_s(TIMER, 8)(new, ctx) == 2.0
    assert pipeline.busy_s(PipeTimer(pp=2, per_token_s=0.125, host_s=3.0), 8)(new, ctx) == 3.0
    one = PipeTimer(pp=1, per_token_s=0.125, host_s=0.5)
    assert pipeline.busy_s(one, 8)(new, ctx) == 2.5


@pytest.mark.parametrize("tp,pp", [(2, 2), (1, 4)])
def test_planner_ceilings_stay_above_the_pipelined_simulation(tp, pp):
    """The planner's optimistic ceilings (analysis/plan/bounds.py; its capacity search never
    probes above them) priced -pp one batch at a time: Llama-3.1-70B on 4 H100, 400
    1024/256 prompts at once, prefill_compute 7.89 req/s at TP2 PP2 and 4.54 at PP4, below
    the 8.13 and 6.92 the simulator sustains. A loaded pipeline passes a batch per
    max(host, stage): 15.56 and 18.26 (15.92 before hunt 15's embedding all-reduce, 15.89
    before hunt 16's eager all-reduce rows past 512 tokens)."""
    from kvplan.analysis.plan import bounds as bd
    from kvplan.analysis.plan.fleet import Replica
    from kvplan.specs.catalog import load_model
    from kvplan.specs.deployment import Deployment
    from kvplan.specs.hardware import load_gpu
    from kvplan.specs.requests.workload import Workload
    from kvplan.specs.serving import EngineConfig
    from kvplan.specs.slo import Slo, parse_slo

    n = 400
    work = Workload(name="burst", arrival_s=np.zeros(n), prompt_tokens=np.full(n, 1024),
                    output_tokens=np.full(n, 256))
    rep = Replica(Deployment(model=load_model("meta-llama/Llama-3.1-70B"), gpu=load_gpu("H100"),
                             engine=EngineConfig(tensor_parallel_size=tp,
                                                 pipeline_parallel_size=pp)))
    b = bd.bounds(rep, work, Slo(bounds=parse_slo(["e2el:p99:10000000"])))
    sustained = n / float(rep.simulate(work).finish_s.max())
    assert min(v for _, v in b.ceilings_rps) >= sustained
    assert dict(b.ceilings_rps)["prefill_compute"] == pytest.approx(
        {2: 15.56, 4: 18.26}[pp], abs=0.01)
