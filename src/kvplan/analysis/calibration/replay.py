"""Replay a measured serving run in the simulator once, then re-price it under any profile.

A `vllm bench serve` run with request rate inf (every prompt at t = 0), optionally capped by
``--max-concurrency`` (a client sends the next prompt the moment one answers), schedules the
same requests into the same steps whatever each step costs: arrivals happen at t = 0 or at a
step's end, never in between. So one simulation records every step's batch (its
``StepAggregates``) and which step each request was sent in, first answered in and finished
in; any other profile then re-prices all steps at once (``StepCostModel.times_s``) and the
metrics follow from the new step end times - equal to simulating again, at a fraction of the
cost (``tests/test_replay.py`` proves the equality). Runs with a finite request rate depend on
the timing and are simulated again for every profile (``simulate_metrics``).

The API server's path (``Profile.api_delay_s``: a request reaches the engine that long after
it is sent) is recorded as each request's *slot chain*: in a closed loop the request sent when
request j finished waits on j's whole chain, so its times move by the delays of every request
before it in that chain, plus its own. Adding those shifts is exact at concurrency 1 and when
a run's requests finish together (fixed lengths); otherwise it leaves out that a slot idles
while the others run (the simulator models that).

The API server's serial admission (``Profile.api_admission_s``: one process admits requests
one at a time, FIFO in send order) is part of each request's own delay along its chain, and
its queue wait is added on top where it is longer than the request waited for the engine in
the recorded schedule: ``extra = max(0, W - slack)``, W = time queued behind earlier
admissions (from the replayed send times), slack = how long the recorded request waited in
the engine's queue before its first step. Exact at concurrency 1 (the server is idle when a
request is sent: W = 0) and with no admission cost; otherwise an approximation (the engine
would have used the late request's place for another), which ``tests/test_replay.py``
bounds against the simulator, the exact model.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import numpy.typing as npt

from kvplan.costs.step.batch import FloatArray, IntArray
from kvplan.costs.step.roofline import Profile, StepAggregates, StepCostModel
from kvplan.errors import InputError
from kvplan.sim.result import SimulationResult
from kvplan.specs.requests.workload import Workload

METRIC_KEYS = ("ttft_s", "tpot_s", "itl_s", "e2e_s", "output_throughput_tok_s")
"""Means over completed requests as vllm bench serve prints them (ITL over all token gaps)."""


class _Recorder:
    """A StepTimer that prices with ``model`` and keeps every step's aggregates, and whether
    the step started on an idle engine (the loop prices those with its ``idle_timer``, this
    recorder's synchronous twin under async scheduling: costs.step.batch.idle_timer)."""

    def __init__(self, model: StepCostModel, steps: list[StepAggregates] | None = None,
                 idle: list[bool] | None = None, sync: bool = False) -> None:
        self.model = model
        self.steps: list[StepAggregates] = [] if steps is None else steps
        self.idle: list[bool] = [] if idle is None else idle
        self._sync = sync
        self._async = model._async and not sync

    @property
    def profile(self) -> Profile:
        return self.model.profile

    def with_profile(self, profile: Profile, overlap: bool | None = None) -> _Recorder:
        """The twin that records into the same lists: its steps marked idle."""
        return _Recorder(self.model.with_profile(profile, overlap), self.steps, self.idle,
                         sync=True)

    def step_time_s(self, new_tokens: IntArray, context_tokens: IntArray) -> float:
        self.steps.append(self.model.aggregates(new_tokens, context_tokens))
        self.idle.append(self._sync)
        return self.model.step_time_s(new_tokens, context_tokens)

    def decode_run_s(self, context_tokens: IntArray, num_steps: int) -> FloatArray:
        raise AssertionError("recording runs the step-by-step scheduler (fast=False)")


@dataclass(frozen=True, slots=True, kw_only=True)
class Replay:
    """One recorded run: the steps it took and where each completed request sat in them."""

    model: StepCostModel
    steps: StepAggregates
    """Arrays over steps, in order."""
    sent_step: IntArray
    """Index of the step at whose end a request was sent; -1 = at t = 0."""
    first_step: IntArray
    finish_step: IntArray
    join_step: IntArray
    """Index of the step before the one that first scheduled the request; -1 = step 0."""
    output_tokens: IntArray
    prompt_tokens: IntArray
    chain_requests: IntArray
    """Requests in each one's slot chain, itself included (1 in an open-loop run)."""
    chain_prompt_tokens: IntArray
    """Prompt tokens of those requests."""
    idle_steps: npt.NDArray[np.bool_] | None = None
    """Steps that started on an idle engine (async scheduling: priced synchronously)."""

    def metrics(self, profile: Profile) -> dict[str, float]:
        """The run's mean TTFT, TPOT, ITL, E2E and output throughput under ``profile``."""
        ends = np.cumsum(self._times(profile))
        c = profile.api_admission_s
        a, b = profile.api_request_s + c, profile.api_prompt_token_s
        shift = np.asarray(a * self.chain_requests + b * self.chain_prompt_tokens, np.float64)
        own = np.asarray(a + b * self.prompt_tokens, dtype=np.float64)
        if c > 0.0:  # the wait moves its engine times, not when it was sent
            wait = self._admission_wait(ends, shift, own, c)
            shift, own = shift + wait, own + wait
        return _metrics(ends, self.sent_step, self.first_step, self.finish_step,
                        self.output_tokens, shift, own)

    def _times(self, profile: Profile) -> FloatArray:
        """Each step's seconds under ``profile``; a step that started on an idle engine at
        its synchronous price (what the simulator's loop gives it)."""
        times = self.model.with_profile(profile).times_s(self.steps)
        if self.idle_steps is not None and self.idle_steps.any():
            sync = self.model.with_profile(profile, overlap=False).times_s(self.steps)
            times = np.where(self.idle_steps, sync, times)
        return times

    def _admission_wait(self, ends: FloatArray, shift: FloatArray, own: FloatArray,
                        c: float) -> FloatArray:
        """Per request: how much longer it waits behind earlier admissions on the API
        server's one process than it waited for the engine in the recorded schedule."""
        at = np.concatenate(([0.0], ends))
        sent = at[self.sent_step + 1] + (shift - own)
        fifo = np.argsort(sent, kind="stable")
        t = sent[fifo]
        k = np.arange(len(t), dtype=np.float64)
        exits = np.maximum.accumulate(t - c * k) + c * (k + 1.0)  # FIFO, c each
        wait = np.empty(len(t))
        wait[fifo] = exits - t - c
        slack = at[self.join_step + 1] - at[self.sent_step + 1]
        return np.asarray(np.maximum(0.0, wait - slack), dtype=np.float64)


def _metrics(ends: FloatArray, sent: IntArray, first: IntArray, fin: IntArray,
             out: IntArray, shift: FloatArray, own: FloatArray) -> dict[str, float]:
    """``shift``: how far each request's engine times move (its chain's API delays);
    ``own``: its own delay (sent = engine arrival - own)."""
    at = np.concatenate(([0.0], ends))
    t0, t1, t2 = at[sent + 1] + (shift - own), at[first + 1] + shift, at[fin + 1] + shift
    ttft, e2e = t1 - t0, t2 - t0
    many = out > 1
    tpot = (e2e[many] - ttft[many]) / (out[many] - 1)
    gaps = int((out - 1).sum())
    return {"ttft_s": float(ttft.mean()), "tpot_s": float(tpot.mean()) if many.any() else 0.0,
            "itl_s": float((e2e - ttft).sum() / gaps) if gaps else 0.0,
            "e2e_s": float(e2e.mean()),
            "output_throughput_tok_s": float(out.sum() / t2.max()) if len(t2) else 0.0}


def timing_invariant(workload: Workload) -> bool:
    """True when the schedule cannot depend on step costs (all arrivals at t = 0)."""
    return workload.is_offline


def record(run_sim: Any, model: StepCostModel, workload: Workload) -> Replay:
    """Simulate ``workload`` once through ``run_sim(timer, fast=False)`` and record it."""
    if not timing_invariant(workload):
        raise InputError("only request-rate-inf runs (optionally with max concurrency) can be "
                         "replayed; simulate the others again for every profile")
    rec = _Recorder(model)
    result: SimulationResult = run_sim(rec, fast=False)
    if not rec.steps:
        raise InputError("the simulated run took no steps (nothing completed)")
    steps = _stack(rec.steps)
    ends = result.steps.end_s
    done = result.finished
    sent, fin = _step_of(result.sent_s[done], ends), _step_of(result.finish_s[done], ends)
    prompt = result.prompt_tokens[done].astype(np.int64)
    count, tokens = _chains(sent, fin, prompt)
    return Replay(model=model, steps=steps, sent_step=sent,
                  first_step=_step_of(result.first_token_s[done], ends), finish_step=fin,
                  join_step=_step_of(result.scheduled_s[done], ends),
                  output_tokens=result.output_tokens[done].astype(np.int64),
                  prompt_tokens=prompt, chain_requests=count, chain_prompt_tokens=tokens,
                  idle_steps=np.array(rec.idle, dtype=np.bool_) if any(rec.idle) else None)


def _chains(sent: IntArray, fin: IntArray, prompt: IntArray) -> tuple[IntArray, IntArray]:
    """Per request: requests and prompt tokens in its slot chain (itself and every request
    whose slot it inherited, transitively). A request sent at step j's end takes the slot of
    one that finished at step j, in index order."""
    freed: dict[int, list[int]] = {}
    for i in np.argsort(fin, kind="stable").tolist():
        freed.setdefault(int(fin[i]), []).append(i)
    count = np.ones(len(sent), dtype=np.int64)
    tokens = prompt.copy()
    for i in np.argsort(sent, kind="stable").tolist():
        slots = freed.get(int(sent[i]))
        if sent[i] >= 0 and slots:
            j = slots.pop(0)
            count[i] += count[j]
            tokens[i] += tokens[j]
    return count, tokens


def _step_of(times: FloatArray, ends: FloatArray) -> IntArray:
    """The step whose end each time is (-1 for t = 0): times are step ends in these runs."""
    idx = np.searchsorted(ends, times - 1e-12 * np.maximum(1.0, times), side="left")
    idx = np.where(times <= 0.0, -1, idx)
    return np.asarray(idx, dtype=np.int64)


def _stack(steps: list[StepAggregates]) -> StepAggregates:
    names = StepAggregates.__slots__
    cols = {n: np.array([getattr(s, n) for s in steps], dtype=np.int64) for n in names}
    return StepAggregates(**cols)
