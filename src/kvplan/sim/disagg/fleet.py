"""simulate_disagg(): x prefill and y decode instances, a proxy and a KV link, event by event.

The proxy (vLLM's disaggregated proxy example, tests/v1/kv_connector/nixl_integration/
toy_proxy_server.py) sends each request to a prefill instance with max_tokens=1, round
robin, waits for its answer, then sends it to a decode instance, round robin, and streams
the decode instance's tokens to the client: decode instances take the answers in the order
they come back (prefill finish time, then prefill instance, then the step's plan order).
The fleet always runs the instance (or the
proxy's next arrival) that acts first; an instance's turn may hold several steps but
starts none after the next moment another one acts (its ``horizon``), so no event reaches
an instance in its past (docs/disaggregation.md, "Event order").
"""

from __future__ import annotations

import heapq
import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import numpy.typing as npt

from kvplan.costs.memory.kv_transfer import TransferCost
from kvplan.costs.step.batch import StepTimer
from kvplan.costs.step.parallel.dp_pad import padded_step_s
from kvplan.errors import InputError
from kvplan.limits import MAX_FLEET_ENGINES, MAX_FLEET_STATES
from kvplan.sim.blocks import KvShape
from kvplan.sim.disagg import compiled
from kvplan.sim.disagg.dp_instance import DecodeRank, DpInstance, PrefillRank
from kvplan.sim.disagg.instances import DecodeLoop, PrefillLoop
from kvplan.sim.disagg.link import (
    NIXL_ABORT_REQUEST_TIMEOUT_S,
    LinkQueues,
    refusals,
    refused_after_prefill,
)
from kvplan.sim.disagg.result import DisaggResult, Transfers, client_view
from kvplan.sim.dp.merge import DpResult
from kvplan.sim.inputs import check_arrivals
from kvplan.sim.result import KvSeries, SimulationResult
from kvplan.sim.scheduler import Limits
from kvplan.sim.state import REJECTED, FloatArray, IntArray, WorkloadLike

ROUTERS = ("round-robin", "least-outstanding")


@dataclass(frozen=True, slots=True, kw_only=True)
class PoolSim:
    """What each instance of one pool runs with (all instances of a pool are identical)."""

    instances: int
    timer: StepTimer
    num_blocks: int
    shape: KvShape
    limits: Limits
    max_model_len: int | None = None
    dp: int = 1
    """DP ranks per instance (vLLM --data-parallel-size): each rank its own scheduler and
    KV pool of ``num_blocks``, the ranks in lockstep (``timer``: the DP engine's step)."""


@dataclass(frozen=True, slots=True)
class _Work:
    """A workload's fields with the outputs replaced (the prefill side's max_tokens=1)."""

    arrival_s: FloatArray
    prompt_tokens: IntArray
    output_tokens: IntArray
    prefix_hashes: tuple[npt.NDArray[np.int64], ...] | None
    hash_block_tokens: int
    closed_loop_concurrency: int | None = None


def simulate_disagg(workload: WorkloadLike, *, prefill: PoolSim, decode: PoolSim,
                    transfer: TransferCost, router: str = "round-robin",
                    validate: bool = False) -> DisaggResult:
    """Replay ``workload`` on a disaggregated fleet (see the module docstring).

    ``router``: 'round-robin' (vLLM's proxy example) or 'least-outstanding' (each side to
    the instance with the fewest requests sent to it and not yet done there; ties to the
    lowest index)."""
    if router not in ROUTERS:
        raise InputError(f"--router {router!r}: a disaggregated proxy routes "
                         f"{' or '.join(ROUTERS)}")
    if workload.closed_loop_concurrency:
        raise InputError("--max-concurrency is not modelled for a disaggregated fleet yet; "
                         "give --request-rate instead")
    check_arrivals(workload)
    _check_size(len(workload.prompt_tokens), prefill, decode)
    fleet = _Fleet(workload, prefill, decode, transfer, validate, router)
    # the compiled fleet runs TP instances only: DP instances run here (docs/disaggregation.md)
    got = compiled.run(fleet) if prefill.dp == decode.dp == 1 else None
    return got if got is not None else fleet.run()


def _check_size(requests: int, prefill: PoolSim, decode: PoolSim) -> None:
    """Every engine (an instance, or each of its DP ranks) holds every request's state and
    its own KV pool: refuse fleets whose engines x requests no machine holds, before any."""
    engines = prefill.instances * prefill.dp + decode.instances * decode.dp
    fleet = f"{prefill.instances}P{decode.instances}D"
    if engines > MAX_FLEET_ENGINES:
        raise InputError(f"{fleet} has {engines:,} engines (instances x DP ranks); kvplan "
                         f"simulates at most {MAX_FLEET_ENGINES:,}: give fewer instances")
    if engines * requests > MAX_FLEET_STATES:
        raise InputError(
            f"{fleet}: {engines:,} engines x {requests:,} requests = "
            f"{engines * requests:,} request states (each engine keeps every request's, "
            f"~200 B); kvplan simulates at most {MAX_FLEET_STATES:,}: give at most "
            f"{MAX_FLEET_STATES // engines:,} requests (--num-prompts) or fewer instances")


def _loop(cls: Any, work: _Work, pool: PoolSim, validate: bool) -> Any:
    """One instance: the loop of ``cls``, or ``pool.dp`` of its ranks in lockstep."""
    if pool.num_blocks < 2:
        raise InputError(f"the KV pool must have at least two blocks (one is vLLM's null "
                         f"block), got {pool.num_blocks}")
    if pool.dp < 1:
        raise InputError(f"a pool's --data-parallel-size must be at least 1, got {pool.dp}")

    def make(kind: Any, fast: bool) -> Any:
        loop = kind(workload=work, timer=pool.timer, shape=pool.shape, limits=pool.limits,
                    num_blocks=pool.num_blocks, max_model_len=pool.max_model_len,
                    shared_prefix_tokens=0, fast=fast, progress=None)
        loop.validate = validate
        return loop

    if pool.dp == 1:
        return make(cls, True)
    rank = PrefillRank if cls is PrefillLoop else DecodeRank
    return DpInstance([make(rank, False) for _ in range(pool.dp)], pool.timer)


class _Fleet:
    """The proxy, the instances and the link; callbacks record every transfer."""

    def __init__(self, work: WorkloadLike, prefill: PoolSim, decode: PoolSim,
                 transfer: TransferCost, validate: bool, router: str = "round-robin") -> None:
        prompt = np.asarray(work.prompt_tokens, dtype=np.int64)
        self.arrival = np.asarray(work.arrival_s, dtype=np.float64)
        self.prompt, self.output = prompt, np.asarray(work.output_tokens, dtype=np.int64)
        # prefix hashes go to the prefill side only (the decode side reads the whole prompt)
        full = _Work(self.arrival, prompt, self.output, None, work.hash_block_tokens)
        one = replace(full, output_tokens=np.ones_like(prompt),
                      prefix_hashes=work.prefix_hashes)
        self.pre = [_loop(PrefillLoop, one, prefill, validate) for _ in range(prefill.instances)]
        self.dec = [_loop(DecodeLoop, full, decode, validate) for _ in range(decode.instances)]
        for p, loop in enumerate(self.pre):
            loop.attach(self._done_on(p))
        for d, loop in enumerate(self.dec):
            loop.attach(self._admit_on(d), self._decode_done)
        # a transfer holds the NICs of the prefill rank's and the decode rank's GPUs
        self.dp = (prefill.dp, decode.dp)
        self.link = LinkQueues(transfer, prefill.instances * prefill.dp,
                               decode.instances * decode.dp)
        self.nbytes = transfer.link_bytes(prompt)
        self.rejected = refusals(self.pre[0].reasons, {**_whole_prompt_reasons(prompt, decode),
                                                       **self.dec[0].reasons})
        self.late = refused_after_prefill(self.rejected, self.pre[0].reasons)
        self.p_delay = _delays(prefill.timer, prompt)
        self.d_delay = _delays(decode.timer, prompt)
        self._set_up_arrivals(router)
        self._set_up_books(len(prompt))
        self._set_up_lookahead(prefill.timer, transfer, prefill.dp > 1)

    def _set_up_lookahead(self, timer: StepTimer, transfer: TransferCost, dp: bool) -> None:
        """The least time from an instance acting to its next event reaching the other pool:
        a prefill step (at least one 1-token step) plus the decode API delay; a transfer
        (at least the link's latency). Lets a decode run go that far past the prefill side's
        clock and stay exact (step times grow with tokens: the roofline's sums do)."""
        one = np.ones(1, dtype=np.int64)
        step = float(timer.step_time_s(one, np.zeros(1, dtype=np.int64)))
        if dp:  # a lockstep step is priced padded: take the least of the two forms
            step = min(step, padded_step_s(timer, one, np.zeros(1, dtype=np.int64), 1))
        delay = float(self.d_delay.min()) if len(self.d_delay) else 0.0
        self.p_look = max(0.0, step + delay)
        self.p_step = step
        self.d_look = transfer.latency_s

    def _set_up_arrivals(self, router: str) -> None:
        # the proxy picks each request's prefill server when the request reaches it (arrival
        # order); that server's API path (p_delay: per prompt token too) comes after the pick
        self.order = np.argsort(self.arrival, kind="stable").tolist()
        self.proxy_at = self.arrival.tolist()
        self.engine_at = (self.arrival + self.p_delay).tolist()
        self.ptr = 0
        self.rr_p = self.rr_d = 0
        self.least = router == "least-outstanding"
        self.out_p = _Outstanding(len(self.pre))
        self.out_d = _Outstanding(len(self.dec))

    def _set_up_books(self, n: int) -> None:
        self.p_of = np.full(n, -1, dtype=np.int64)
        self.d_of = np.full(n, -1, dtype=np.int64)
        self.p_rank = np.full(n, -1, dtype=np.int64)
        self.d_rank = np.full(n, -1, dtype=np.int64)
        self.p_end = np.full(n, np.nan)
        self.t_start = np.full(n, np.nan)
        self.t_end = np.full(n, np.nan)
        self.answers: list[tuple[float, int, int, int]] = []
        """Prefill answers known and not yet routed: (finish, instance, plan order, r)."""
        self.seq = 0

    # ------------------------------------------------------------ callbacks

    def _done_on(self, p: int) -> Any:
        def done(r: int, end: float) -> None:
            self._prefill_done(p, r, end)
        return done

    def _prefill_done(self, p: int, r: int, end: float) -> None:
        """r's prefill answer, known when its step is planned (a step's finishes come in
        its plan order); the proxy routes it when it comes back (``_route_answers``)."""
        self.out_p.done(p, end)
        self.p_end[r] = end
        if r in self.late:  # no decode side reads its KV: NIXL frees it after the timeout
            self.pre[p].release(end + NIXL_ABORT_REQUEST_TIMEOUT_S, r)
        heapq.heappush(self.answers, (end, p, self.seq, r))
        self.seq += 1

    def _to_decode(self, r: int, end: float) -> int:
        """The proxy sends r, answered by prefill at ``end``, to its next decode instance."""
        d = self.out_d.pick(end) if self.least else self.rr_d
        self.rr_d = (d + 1) % len(self.dec)
        if r in self.late:  # it takes its turn; the decode server refuses it
            return d
        self.out_d.add(d)
        self.d_of[r] = d
        self.dec[d].add(end + float(self.d_delay[r]), r)
        return d

    def _route_answers(self, tp: list[float], nxt: float) -> None:
        """Route the known answers, earliest first, while none still unknown can come back
        before them: an instance's next step starts at its clock at the earliest, and an
        idle or stalled one's at its next event, the next arrival or a release (at least
        ``d_look`` after a decode instance acts), and ends at least one 1-token step later.
        A tie with an unknown answer waits (it might have the lower instance)."""
        md = math.inf
        while self.answers:
            if md == math.inf:
                md = min(e.next_time() for e in self.dec)
            woken = min(nxt, md + self.d_look)
            soonest = min(max(e.s.clock, min(t, woken)) for e, t in zip(self.pre, tp,
                                                                        strict=True))
            end, _, _, r = self.answers[0]
            if end >= soonest + self.p_step:
                return
            heapq.heappop(self.answers)
            md = min(md, self.dec[self._to_decode(r, end)].next_time())

    def _first_answer_at(self) -> float:
        """The earliest decode arrival among the answers not yet routed."""
        return min((end + float(self.d_delay[r]) for end, _, _, r in self.answers),
                   default=math.inf)

    def _admit_on(self, d: int) -> Any:
        def admit(r: int, t: float) -> float:
            p = int(self.p_of[r])
            kp, kd = self.pre[p].rank(r), self.dec[d].rank(r)
            self.p_rank[r], self.d_rank[r] = kp, kd
            start, end = self.link.schedule(t, p * self.dp[0] + kp, d * self.dp[1] + kd,
                                            int(self.nbytes[r]))
            self.t_start[r], self.t_end[r] = start, end
            self.pre[p].release(end, r)
            return end
        return admit

    def _decode_done(self, r: int, end: float) -> None:
        self.out_d.done(int(self.d_of[r]), end)

    # ------------------------------------------------------------ the loop

    def _next_arrival(self) -> float:
        return self.proxy_at[self.order[self.ptr]] if self.ptr < len(self.order) else math.inf

    def _route(self) -> None:
        r = self.order[self.ptr]
        self.ptr += 1
        p = self.out_p.pick(self.proxy_at[r]) if self.least else self.rr_p
        self.rr_p = (p + 1) % len(self.pre)  # a refused request used its turn: vLLM's
        if r in self.rejected:               # proxy picks the prefill server before sending
            for loop in self.dec if r in self.late else (*self.pre, *self.dec):
                loop.s.status[r] = REJECTED
            if r not in self.late:  # refused by decode only: its prefill runs first
                return
        self.out_p.add(p)
        self.p_of[r] = p
        self.pre[p].add(self.engine_at[r], r)

    def run(self) -> DisaggResult:
        pre, dec, inf = self.pre, self.dec, math.inf
        while True:
            tp, nxt = [e.next_time() for e in pre], self._next_arrival()
            self._route_answers(tp, nxt)
            td = [e.next_time() for e in dec]
            mp, md, held = min(tp), min(td), self._first_answer_at()
            t = min(mp, md)
            if nxt <= t:
                if nxt == inf:
                    break
                self._route()
                continue
            if mp <= md:
                e = pre[tp.index(mp)]
                e.horizon = min(min(md, held) + self.d_look, nxt)
            else:
                e = dec[td.index(md)]
                e.horizon = min(min(mp, nxt) + self.p_look, held)
            e.wake(t)
            e.turn()
        return self._result()

    def _result(self) -> DisaggResult:
        return self.assemble(tuple(p._result() for p in self.pre),
                             tuple(d._result() for d in self.dec))

    def assemble(self, pre: tuple[SimulationResult, ...], dec: tuple[SimulationResult, ...],
                 steps: KvSeries | None = None) -> DisaggResult:
        """The fleet's result from its instances' results and its books (either path;
        ``steps``: the decode instances' series joined, where the core joined them)."""
        n = len(self.prompt)
        adm, arr, starved = np.full(n, np.nan), np.full(n, np.nan), np.zeros(n, dtype=np.bool_)
        for d, loop in enumerate(self.dec):
            mine = self.d_of == d
            adm[mine], arr[mine] = loop.admit_s[mine], loop.arrive_s[mine]
            starved[mine] = loop.starved[mine]
        moved = ~np.isnan(self.t_end)
        t = Transfers(prefill_instance=self.p_of, decode_instance=self.d_of,
                      prefill_end_s=self.p_end, decode_arrival_s=arr, admitted_s=adm,
                      start_s=self.t_start, end_s=self.t_end,
                      link_bytes=np.where(moved, self.nbytes, 0), waited_for_blocks=starved,
                      prefill_rank=np.where(moved, self.p_rank if self.dp[0] > 1 else 0, -1),
                      decode_rank=np.where(moved, self.d_rank if self.dp[1] > 1 else 0, -1))
        rejected = {i: self.rejected[i] for i in sorted(self.rejected)}
        client = client_view(self.arrival, self.prompt, self.output, pre, dec, t, rejected,
                             steps, self._failed_s())
        return DisaggResult(prefill=pre, decode=dec, transfers=t, client=client,
                            moved_bytes=self.link.moved_bytes,
                            prefill_dp=_dp_results(self.pre), decode_dp=_dp_results(self.dec))

    def _failed_s(self) -> FloatArray:
        """When each rejected request's failure reached the client: a prefill instance's API
        server refuses it after its path (p_delay: when it would reach that engine, as one
        server's refusal, sim.frontend.refusal_times); the decode side only once its prefill
        answered and the proxy's request passed the decode API server (its delay), as vLLM
        bench's duration counts."""
        failed = np.full(len(self.prompt), np.nan)
        gone = np.array(sorted(self.rejected), dtype=np.int64)
        failed[gone] = self.arrival[gone] + self.p_delay[gone]
        late = np.array(sorted(self.late), dtype=np.int64)
        failed[late] = self.p_end[late] + self.d_delay[late]
        return failed


class _Outstanding:
    """Requests sent to each instance and not yet done there, as of a given time (a step's
    finishes are known when the step is planned, before its end: they count from then)."""

    def __init__(self, n: int) -> None:
        self.count = [0] * n
        self.ends: list[tuple[float, int]] = []

    def add(self, i: int) -> None:
        self.count[i] += 1

    def done(self, i: int, t: float) -> None:
        heapq.heappush(self.ends, (t, i))

    def pick(self, now: float) -> int:
        """The instance with the fewest outstanding at ``now`` (ties: the lowest index)."""
        while self.ends and self.ends[0][0] <= now:
            self.count[heapq.heappop(self.ends)[1]] -= 1
        return self.count.index(min(self.count))


def _dp_results(loops: list[Any]) -> tuple[DpResult, ...]:
    """Each DP instance's ranks (after its _result); empty for a pool of TP instances."""
    return tuple(e.dp for e in loops if isinstance(e, DpInstance) and e.dp is not None)


def _whole_prompt_reasons(prompt: IntArray, decode: PoolSim) -> dict[int, str]:
    """Requests whose whole prompt's blocks exceed the decode pool: the KV arrives at once,
    so the decode side allocates every prompt block before the transfer (sliding windows
    free theirs only later), and such a request could never be admitted."""
    usable = decode.num_blocks - 1
    need = decode.shape.blocks(prompt, np.zeros_like(prompt))
    return {int(i): f"its {int(prompt[i])}-token prompt needs {int(need[i])} KV blocks at "
                    f"once on a decode instance (the transferred KV lands whole); the pool "
                    f"has {usable}"
            for i in np.flatnonzero(need > usable)}


def _delays(timer: Any, prompt: IntArray) -> FloatArray:
    """The API server's delay per request (0 when the timer prices none)."""
    f = getattr(timer, "api_delays_s", None)
    if f is None:
        return np.zeros(len(prompt))
    return np.asarray(f(prompt), dtype=np.float64)
