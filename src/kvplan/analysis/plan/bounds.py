"""Analytic bounds for one replica, from the step-cost model (no simulation).

* zero-load latencies: each request alone on the server (the API server's path, then its
  uncached prompt prefilled in chunks of max_num_batched_tokens, then decode steps with
  nothing else running). Real
  latencies are never below these, so when they already break the SLO the candidate is out;
* optimistic capacity (requests/s), the smallest of four ceilings::

    compute   1 / (c_min x mean(uncached prompt + output - 1))    c_min = cheapest s/token
    decode    S / t_decode(S) / mean(output)                      S = max_num_seqs
    kv        usable_blocks / mean(prompt_blocks x (output - 1) x t_min)   (Little's law)
    scheduler S / mean(ttft0 + (output - 1) x t_min)                        (Little's law)

  t_min = one decode step of one request; c_min = the cheapest of a full- and a half-budget
  prefill step, each split evenly over 1..S prompts (``split_prefill_s``), and S decodes;
  the argmin is the preliminary binding resource. With pp > 1 (one engine) c_min and
  t_decode price a batch at max(host, stage) (sim.pipeline.busy_s: batches in flight).

A DP group of dp lockstep ranks (parallel/): each rank's step is priced by the DP timer
(experts at dp x T tokens, the exchange), a rank alone runs at its own tokens (the others'
dummy steps are padded to it), so the zero-load latencies are one rank's; every ceiling is
one rank's x dp (dp schedulers, dp KV pools, dp x T tokens a step at most).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from kvplan.analysis.plan.fleet import Replica
from kvplan.analysis.plan.judge import Latencies, Verdict, judge, judged_mask
from kvplan.analysis.plan.window import Works, window_replicas
from kvplan.analysis.weighted import counted_percentile
from kvplan.costs.step.parallel.pp_queue import Split, prefill_back_s, queued_backs, split
from kvplan.costs.step.records import StepAggregates
from kvplan.memo import Memo
from kvplan.sim.pipeline import busy_s
from kvplan.specs.requests.workload import Workload
from kvplan.specs.slo import Slo

FloatArray = npt.NDArray[np.float64]
IntArray = npt.NDArray[np.int64]
GRID_POINTS = 48


@dataclass(frozen=True, slots=True, kw_only=True)
class Bounds:
    """Zero-load verdict and optimistic per-replica capacity ceilings (requests/s)."""

    zero_load: Verdict
    """Achieved values and margins only (no sampling intervals: the bound is analytic)."""
    ceilings_rps: tuple[tuple[str, float], ...]
    window_replicas: int = 1
    """The fewest replicas the trace's TTFT / E2EL deadline windows allow (``window``): the
    optimistic fleet in target mode (the ceilings are steady-state rates, not a bound on a
    finite trace)."""
    window_why: str = ""
    """The term and resource that set ``window_replicas`` ('' when it is 1)."""

    @property
    def optimistic_rps(self) -> float:
        return min(v for _, v in self.ceilings_rps)

    @property
    def limiting(self) -> str:
        return min(self.ceilings_rps, key=lambda kv: kv[1])[0]


def _ints(values: list[int]) -> IntArray:
    return np.asarray(values, dtype=np.int64)


def split_prefill_s(step: Callable[[IntArray, IntArray], float], tokens: int,
                    most_seqs: int) -> float:
    """The cheapest zero-context prefill step of ``tokens`` new tokens over 1..``most_seqs``
    sequences, each split even (k pieces of tokens // k or one more): fewer tokens per
    sequence score fewer attention pairs (sum n (n + 1) / 2) at more per-request cost, so
    one sequence is not the cheapest step (Qwen3-30B-A3B on H100, 8,192 tokens: 141.8 ms
    as one prompt, 110.1 ms as four prompts of 2,048). k on a grid of four points per octave."""
    most = max(1, min(tokens, most_seqs))
    grid = sorted({1, most, *(round(2 ** (i / 4)) for i in range(4 * most.bit_length()))})
    best = float("inf")
    for k in (k for k in grid if k <= most):
        q, r = divmod(tokens, k)
        new = np.full(k, q, dtype=np.int64)
        new[:r] += 1
        best = min(best, float(step(new, np.zeros(k, dtype=np.int64))))
    return best


def uncached_prompts(work: Workload, prefix_caching: bool) -> IntArray:
    """Prompt tokens that must be computed at least once: all but the tokens its hash ids
    cover (a trailing hash block the prompt ends inside too: an equal chain shares its
    leading tokens, ``sim.state.trace_keys``), and at least the one vLLM always computes."""
    p: IntArray = work.prompt_tokens.astype(np.int64)
    if not prefix_caching or work.prefix_hashes is None:
        return p
    hashed = np.fromiter((len(h) for h in work.prefix_hashes), dtype=np.int64, count=len(p))
    covered = np.minimum(hashed * work.hash_block_tokens, p)
    out: IntArray = np.maximum(1, p - covered)
    return out


def _grid(top: int) -> IntArray:
    g = np.unique(np.geomspace(1, max(2, top), GRID_POINTS).astype(np.int64))
    return g[g >= 1]


def _round_down(x: IntArray, grid: IntArray) -> IntArray:
    """The index of the largest grid point <= x (latency is monotone in tokens, so the time
    there is a lower bound)."""
    out: IntArray = np.searchsorted(grid, x, side="right") - 1
    return out


def prefill_alone_s(rep: Replica, prompt: int) -> float:
    """Seconds to prefill ``prompt`` tokens alone, in chunks of the token budget; with pp > 1
    (one engine) the chunks go in flight together, as the simulator runs them
    (costs.step.parallel.pp_queue); lockstep DP ranks run one batch at a time."""
    budget = rep.limits.max_num_batched_tokens
    steps = [(_ints([min(budget, prompt - d)]), _ints([d])) for d in range(0, prompt, budget)]
    if rep.ranks == 1:
        return prefill_back_s(rep.timer, steps)
    t = 0.0
    for new, ctx in steps:
        t += rep.timer.step_time_s(new, ctx)
    return t


@dataclass(frozen=True, slots=True, kw_only=True)
class _Grid:
    """A workload's zero-load grid and each request's grid point (the same for every
    candidate of a plan: only the step times at the points differ)."""

    points: IntArray
    ttft_at: IntArray
    """Each request's uncached prompt, rounded down to the grid (an index)."""
    tpot_at: IntArray
    """Each request's prompt, rounded down to the grid (an index)."""


_GRIDS: Memo[tuple[Workload, _Grid]] = Memo(16)
"""(id(workload), prefix caching) -> (the workload, its grid): the workload is held beside
its grid, so its id cannot be another's while the entry lasts."""


def _grid_of(work: Workload, prefix_caching: bool) -> _Grid:
    def build() -> tuple[Workload, _Grid]:
        grid = _grid(int(work.prompt_tokens.max()))
        return work, _Grid(points=grid,
                           ttft_at=_round_down(uncached_prompts(work, prefix_caching), grid),
                           tpot_at=_round_down(work.prompt_tokens.astype(np.int64), grid))

    return _GRIDS.get((id(work), prefix_caching), build)[1]


def _grid_times(rep: Replica, points: IntArray) -> tuple[FloatArray, FloatArray]:
    """(prefill alone, one decode step) seconds at every grid point."""
    fast = _priced_at_once(rep, points.tolist())
    if fast is not None:
        return fast
    ttft = np.array([prefill_alone_s(rep, int(p)) for p in points])
    tpot = np.array([rep.timer.step_time_s(_ints([1]), _ints([int(p)])) for p in points])
    return ttft, tpot


def _priced_at_once(rep: Replica, points: list[int]) -> tuple[FloatArray, FloatArray] | None:
    """``_grid_times`` from one ``times_s`` call over every step the loops would price: the
    full chunks (shared by every point: the same prefix of each prompt), each point's last
    partial chunk and its decode step. For a one-request step ``times_s`` does the float
    operations of ``step_time_s`` (its small-batch path) and the chunks are summed in the
    loop's order (with pp > 1 on one engine, in flight as ``prefill_alone_s`` runs them), so
    the values are the loop's to the bit. None where that is not so: a sliding window or MLA
    (per-request sums), or a step past the tables (the loop would grow them part-way)."""
    timer, budget = rep.timer, rep.limits.max_num_batched_tokens
    full = max(points) // budget
    new, ctx, last = [budget] * full, [j * budget for j in range(full)], []
    for p in points:
        k, r = divmod(p, budget)
        last.append(len(new) if r else -1)
        if r:
            new.append(r)
            ctx.append(k * budget)
    if not timer.supports_aggregates or max(new, default=1) > timer.table_tokens:
        return None
    n, c = _ints(new + [1] * len(points)), _ints(ctx + points)
    one = np.ones(len(n), dtype=np.int64)
    zero = np.zeros(len(n), dtype=np.int64)
    s = timer.times_s(StepAggregates(n, one, c, n * c + n * (n + 1) // 2, zero, zero,
                                     ((n > 1) | (c == 0)).astype(np.int64),
                                     prefill_longest=np.where(n > 1, n, 0))).tolist()
    sp = split(timer, max(new, default=1)) if rep.ranks == 1 else None
    if sp is not None:
        return np.array(_in_flight(sp, points, budget, s, last)), np.array(s[len(new):])
    sums, t = [0.0], 0.0
    for x in s[:full]:
        t += x
        sums.append(t)
    ttft = [sums[p // budget] + s[i] if i >= 0 else sums[p // budget]
            for p, i in zip(points, last, strict=True)]
    return np.array(ttft), np.array(s[len(new):])


def _in_flight(sp: Split, points: list[int], budget: int, s: list[float],
               last: list[int]) -> list[float]:
    """Each point's prefill alone from its chunks' seconds ``s`` (the full chunks first,
    ``last``: its partial chunk's index or -1), the chunks in flight together."""
    full = [(s[j], _ints([budget]), _ints([j * budget])) for j in range(max(points) // budget)]
    out = []
    for p, i in zip(points, last, strict=True):
        k, r = divmod(p, budget)
        tail = [(s[i], _ints([r]), _ints([k * budget]))] if i >= 0 else []
        out.append(queued_backs(sp, full[:k] + tail)[-1])
    return out


def zero_load(rep: Replica, work: Workload, slo: Slo) -> tuple[Latencies, FloatArray]:
    """Every request's latencies with the server to itself (lower bounds), and its TTFT0 (s:
    the engine's part, what holds a scheduler slot)."""
    g = _grid_of(work, rep.limits.prefix_caching)
    ttft_g, tpot_g = _grid_times(rep, g.points)
    seen_g = ttft_g + _api_s(rep, g.points)
    return _latencies(work, slo, g, seen_g, tpot_g), ttft_g[g.ttft_at]


def _api_s(rep: Replica, points: IntArray) -> FloatArray:
    """The API server's parallel path at each grid point (``Profile.api_delay_s``): every
    served request reaches the engine that long after it was sent (sim.frontend; DP ranks
    and disaggregated floors alike), so it adds to each TTFT and E2EL. A grid point is at
    most the request's prompt, so the sum stays a lower bound; the serial admission is left
    out (a DP group does not queue on it)."""
    delays = getattr(rep.timer, "api_delays_s", None)
    return np.zeros(len(points)) if delays is None else np.asarray(delays(points), np.float64)


def _latencies(work: Workload, slo: Slo, g: _Grid, ttft_g: FloatArray, tpot_g: FloatArray
               ) -> Latencies:
    ttft = ttft_g[g.ttft_at]
    tpot = tpot_g[g.tpot_at]
    out = work.output_tokens.astype(np.int64)
    e2el = ttft + (out - 1) * tpot
    gaps = np.maximum(out - 1, 0)
    itl = slo.judges_itl  # every gap only for an ITL bound
    return Latencies(arrival_s=work.arrival_s, ttft_ms=ttft * 1000,
                     tpot_ms=np.where(out > 1, tpot * 1000, np.nan), e2el_ms=e2el * 1000,
                     itl_ms=np.repeat(tpot * 1000, gaps) if itl else None,
                     itl_req=np.repeat(np.arange(len(out), dtype=np.int64), gaps) if itl
                     else None,
                     output_tokens=out)


_COUNTS: dict[tuple[int, bool, Slo], tuple[Workload, dict[str, IntArray], int]] = {}
"""(id(workload), prefix caching, SLO) -> judged requests per grid point for TTFT and TPOT,
and how many are judged: a zero-load TTFT / TPOT sample holds grid values only, so every
candidate's percentiles come from its grid times and these counts."""


def _zero_verdict(rep: Replica, work: Workload, slo: Slo) -> tuple[Verdict, FloatArray]:
    """``judge(zero_load(...), intervals=False)`` and TTFT0: from the grid points' times and
    the judged counts once a candidate has counted them (TTFT / TPOT bounds; the same
    numbers to the bit: ``counted_percentile``), else by judging every request."""
    g = _grid_of(work, rep.limits.prefix_caching)
    ttft_g, tpot_g = _grid_times(rep, g.points)
    seen_g = ttft_g + _api_s(rep, g.points)
    key = (id(work), rep.limits.prefix_caching, slo)
    got = _COUNTS.get(key)
    values = {"ttft": seen_g * 1000, "tpot": tpot_g * 1000}
    if got is not None and got[0] is work and all(np.isfinite(v).all() for v in values.values()):
        return _counted(slo, values, got[1], got[2]), ttft_g[g.ttft_at]
    lat = _latencies(work, slo, g, seen_g, tpot_g)
    if not slo.goodput_ms and all(b.metric in values for b in slo.bounds):
        keep = judged_mask(lat, slo)
        if len(_COUNTS) >= 16:
            _COUNTS.clear()
        _COUNTS[key] = (work, {
            "ttft": np.bincount(g.ttft_at[keep], minlength=len(g.points)),
            "tpot": np.bincount(g.tpot_at[keep & (lat.output_tokens > 1)],
                                minlength=len(g.points))}, int(keep.sum()))
    return judge(lat, slo, intervals=False), ttft_g[g.ttft_at]


def _counted(slo: Slo, values: dict[str, FloatArray], counts: dict[str, IntArray],
             judged: int) -> Verdict:
    achieved, margins, empty = [], [], []
    for b in slo.bounds:
        c = counts[b.metric]
        v = counted_percentile(values[b.metric], c, b.percentile) if c.any() else 0.0
        if not c.any():  # no judged value (judge's ``unsampled``)
            empty.append(b.key)
        achieved.append((b.key, v))
        margins.append((b.key, (b.limit_ms - v) / b.limit_ms))
    return Verdict(achieved=tuple(achieved), margins=tuple(margins), judged_requests=judged,
                   unsampled=tuple(empty))


def bounds(rep: Replica, work: Workload, slo: Slo) -> Bounds:
    """Zero-load verdict and the four optimistic capacity ceilings of one replica."""
    verdict, ttft0 = _zero_verdict(rep, work, slo)
    seqs = rep.limits.max_num_seqs
    budget = rep.limits.max_num_batched_tokens
    t_min = rep.timer.step_time_s(_ints([1]), _ints([1]))
    # loaded, -pp > 1 keeps batches in flight (sim.pipeline): a batch per max(host, stage)
    step = busy_s(rep.timer, budget) if rep.ranks == 1 else rep.timer.step_time_s
    c_min = min(split_prefill_s(step, k, seqs) / k for k in (budget, max(1, budget // 2)))
    c_min = min(c_min, step(np.ones(seqs, dtype=np.int64), np.ones(seqs, dtype=np.int64)) / seqs)
    t_dec = step(np.ones(seqs, dtype=np.int64), np.ones(seqs, dtype=np.int64))
    out = work.output_tokens.astype(np.float64)
    unc = uncached_prompts(work, rep.limits.prefix_caching).astype(np.float64)
    blocks = np.ceil(unc / rep.plan.block_size)  # cdiv, vectorised (unc are whole numbers)
    usable = rep.plan.num_blocks - 1
    ceilings = (
        ("prefill_compute", 1.0 / (c_min * float(np.mean(unc + out - 1)))),
        ("decode_bandwidth", seqs / t_dec / float(np.mean(out))),
        ("kv_memory", _ratio(usable, float(np.mean(blocks * (out - 1) * t_min)))),
        ("scheduler_cap", _ratio(seqs, float(np.mean(ttft0 + (out - 1) * t_min)))),
    )
    dp = rep.ranks
    keep = _judged(work, slo)
    order = np.argsort(work.arrival_s[keep], kind="stable")

    def per(x: FloatArray) -> FloatArray:
        out: FloatArray = np.asarray(x, np.float64)[keep][order]
        return out

    hold = (out - 1) * t_min
    works = Works(arrival_s=per(work.arrival_s),
                  ttft=(("compute", per(c_min * unc), dp),
                        ("scheduler slots", per(ttft0), seqs * dp)),
                  e2el=(("compute", per(c_min * (unc + out - 1)), dp),
                        ("scheduler slots", per(ttft0 + hold), seqs * dp),
                        ("batch slot-steps", per(out), seqs / t_dec * dp),
                        ("KV blocks", per(blocks * hold), usable * dp)))
    n, why = window_replicas(works, slo)
    return Bounds(zero_load=verdict,
                  ceilings_rps=ceilings if dp == 1 else tuple((k, v * dp) for k, v in ceilings),
                  window_replicas=n, window_why=why)


def _judged(work: Workload, slo: Slo) -> npt.NDArray[np.bool_]:
    """The requests the SLO judges (all but the warm-up ones by arrival)."""
    a = np.asarray(work.arrival_s, dtype=np.float64)
    lat = Latencies(arrival_s=a, ttft_ms=a, tpot_ms=a, e2el_ms=a, itl_ms=None, itl_req=None,
                    output_tokens=np.asarray(work.output_tokens))
    return judged_mask(lat, slo)


def _ratio(a: float, b: float) -> float:
    return a / b if b > 0 else 1e12
