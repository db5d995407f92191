"""The highest request rate one replica sustains under an SLO (common random numbers).

One request stream is sampled once at unit rate; probing rate r divides its arrival times
by r, so every probe replays the same requests in the same order and the SLO margin moves
smoothly with r. The search brackets the rate (doubling up or halving down from a guess,
never above the optimistic ceiling), then narrows the bracket with secant steps on the
margin (clipped to the inner 80 % of the bracket) until it is within ``tolerance`` (or, for a
fleet rate, until every rate in the bracket needs the same replica count)::

    margin(r) = min over SLO terms of (limit - achieved) / limit   (goodput: share - target)
    lo = highest rate that passed, hi = lowest rate that failed;  capacity = lo
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from kvplan.analysis.plan.fleet import Replica
from kvplan.analysis.plan.judge import Latencies, Verdict, judge, latencies
from kvplan.sim.result import SimulationResult
from kvplan.specs.requests.workload import Workload
from kvplan.specs.slo import Slo

TOLERANCE = 0.03
MAX_PROBES = 10
SHRINK_STEPS = 8


@dataclass(frozen=True, slots=True, kw_only=True)
class Probe:
    """One simulated rate and what it gave."""

    rate_rps: float
    verdict: Verdict
    peak_kv_usage: float
    preemptions: int
    seqs_capped_share: float
    """Share of steps running max_num_seqs requests (the scheduler cap reached)."""
    budget_full_share: float
    """Share of steps whose new tokens filled max_num_batched_tokens (the chunk budget)."""
    prefill_token_share: float
    """Share of computed tokens that were prompt tokens."""
    prefill_kv_share: float
    """Share of the KV blocks claimed during the run that prefill steps claimed."""
    latencies: Latencies
    """Per-request latencies (kept in the job's process: the plan's bands read them)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Capacity:
    """The bracket [lo, hi] around the highest passing rate; ``lo`` is the capacity."""

    lo: Probe | None
    hi: Probe | None
    probes: int
    sim_requests: int

    @property
    def rate_rps(self) -> float:
        return self.lo.rate_rps if self.lo is not None else 0.0


def at_rate(unit: Workload, rate: float) -> Workload:
    """The unit-rate stream replayed at ``rate`` requests/s."""
    return Workload(name=unit.name, arrival_s=unit.arrival_s / rate,
                    prompt_tokens=unit.prompt_tokens, output_tokens=unit.output_tokens,
                    prefix_hashes=unit.prefix_hashes, hash_block_tokens=unit.hash_block_tokens)


def probe(rep: Replica, unit: Workload, slo: Slo, rate: float) -> Probe:
    """Simulate the stream at ``rate`` and judge it."""
    r = rep.simulate(at_rate(unit, rate))
    return judged_probe([r], latencies(r, itl=slo.judges_itl), rep, slo, rate)


def judged_probe(runs: list[SimulationResult], lat: Latencies, rep: Replica, slo: Slo,
                 rate: float) -> Probe:
    """The verdict on ``lat`` and the counters of the replica runs behind it (pooled)."""
    steps = sum(max(1, r.num_steps) for r in runs)
    dp = rep.ranks  # a DP group's steps sum its ranks: capped / full means every rank is
    capped = sum(int(np.sum(r.steps.running >= dp * rep.limits.max_num_seqs)) for r in runs)
    full = sum(int(np.sum(r.steps.new_tokens >= dp * rep.limits.max_num_batched_tokens))
               for r in runs)
    prompt = sum(float(r.prompt_tokens[r.finished].sum()) for r in runs)
    total = prompt + sum(float(r.output_tokens[r.finished].sum()) for r in runs)
    return Probe(rate_rps=rate, verdict=judge(lat, slo), latencies=lat,
                 peak_kv_usage=max(r.peak_kv_blocks / max(1, r.usable_blocks) for r in runs),
                 preemptions=sum(r.total_preemptions for r in runs),
                 seqs_capped_share=capped / max(1, steps),
                 budget_full_share=full / max(1, steps),
                 prefill_token_share=prompt / total if total else 0.0,
                 prefill_kv_share=_share(sum(r.prefill_claimed_blocks for r in runs),
                                         sum(r.decode_claimed_blocks for r in runs)))


def _share(a: int, b: int) -> float:
    return a / (a + b) if a + b else 0.0


def find_capacity(rep: Replica, unit: Workload, slo: Slo, *, guess: float, ceiling: float,
                  tolerance: float = TOLERANCE, target_rps: float | None = None) -> Capacity:
    """Bracket then narrow the highest rate whose steady-state window meets ``slo``.

    With ``target_rps`` (a fleet rate) the search also stops once every rate in the bracket
    gives the same replica count ceil(target / rate): the fleet size is decided.
    """
    tried: list[Probe] = []

    def run(rate: float) -> Probe:
        tried.append(probe(rep, unit, slo, rate))
        return tried[-1]

    lo, hi = _bracket(run, min(guess, ceiling), ceiling)
    while lo is not None and hi is not None and len(tried) < MAX_PROBES \
            and hi.rate_rps - lo.rate_rps > tolerance * lo.rate_rps \
            and not _decided(lo.rate_rps, hi.rate_rps, target_rps):
        p = run(_secant(lo, hi))
        lo, hi = (p, hi) if p.verdict.ok else (lo, p)
    return Capacity(lo=lo, hi=hi, probes=len(tried), sim_requests=len(tried) * len(unit))


def _decided(lo: float, hi: float, target: float | None) -> bool:
    """True when every capacity in [lo, hi) needs the same replica count for ``target``:
    ceil(target / lo) replicas at lo, floor(target / hi) + 1 just below hi."""
    return target is not None and math.ceil(target / lo) == math.floor(target / hi) + 1


def _bracket(run: object, guess: float, ceiling: float) -> tuple[Probe | None, Probe | None]:
    assert callable(run)
    first: Probe = run(guess)
    if first.verdict.ok:
        lo, rate = first, guess
        while rate < ceiling:
            rate = min(2 * rate, ceiling)
            p = run(rate)
            if not p.verdict.ok:
                return lo, p
            lo = p
        return lo, None
    hi, rate = first, guess
    for _ in range(SHRINK_STEPS):
        rate /= 2
        p = run(rate)
        if p.verdict.ok:
            return p, hi
        hi = p
    return None, hi


def _secant(lo: Probe, hi: Probe) -> float:
    """Where the margin line through lo and hi crosses 0, kept in the bracket's inner 80 %."""
    a, b = lo.rate_rps, hi.rate_rps
    ma, mb = lo.verdict.margin, max(hi.verdict.margin, -1.0)
    x = a + (b - a) * ma / (ma - mb) if ma > mb else (a + b) / 2
    return float(min(max(x, a + 0.1 * (b - a)), b - 0.1 * (b - a)))
