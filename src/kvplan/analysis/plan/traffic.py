"""A plan's traffic: the fleet workload at the target rate and the unit-rate sample stream.

* With arrival times (a timed trace, or ``--request-rate``) the fleet must serve that rate:
  ``target`` is the workload itself — the whole trace, cut to its first
  ``DEFAULT_PLAN_PROMPTS`` requests only when longer, unless ``--num-prompts`` says
  otherwise — and the target rate is (requests - 1) / arrival span. The capacity searches
  replay the router's shares of it (plan_shares) and the fleet verification all of it.
* Without (every request at t = 0), the plan answers the capacity question: the highest rate
  one replica sustains; ``target`` is None.

The unit stream is the first ``sample`` requests with their arrival times rescaled to a mean
of one request per second (target mode: only the lengths and the probe size are read from
it); without arrivals, gamma gaps at rate 1 drawn from the seed (burstiness as given) —
capacity mode's rate search replays it at scaled rates, which is exact for such a process.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from kvplan.analysis.plan.fleet import subset
from kvplan.errors import InputError
from kvplan.specs.requests.generators import vllm_arrival_rng
from kvplan.specs.requests.workload import (
    Workload,
    WorkloadArgs,
    build_workload,
    gamma_arrivals,
    replays_trace_times,
    trace_rows,
)

DEFAULT_PLAN_PROMPTS = 10000
"""A longer trace is cut to its first this many requests (the answer says what share)."""
DEFAULT_SAMPLE = 500


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanTraffic:
    name: str
    target: Workload | None
    unit: Workload
    rate_rps: float | None
    trace_requests: int = 0
    """Requests in the whole trace before any cut (the plan says what share it serves)."""
    burstiness: float = 1.0
    """The arrivals' gamma shape (vLLM --burstiness): as given for drawn arrivals; for a
    trace on its own timestamps, mean^2 / variance of its gaps (1 / CV^2)."""
    own_arrivals: bool = False
    """A timed trace replayed on its own timestamps (vllm bench serve cannot replay them)."""
    given_rate_rps: float | None = None
    """--request-rate as given, where the arrivals were drawn at it (``rate_rps`` is the
    draw's realized rate, (requests - 1) / span)."""
    args: WorkloadArgs | None = None
    """The workload flags as given (None: a Workload passed in): the Verify line repeats
    them where `vllm bench serve` draws the same requests (random, sharegpt)."""

    @property
    def requests(self) -> int:
        return len(self.target) if self.target is not None else len(self.unit)

    @property
    def longest_tokens(self) -> int:
        w = self.target if self.target is not None else self.unit
        return int((w.prompt_tokens + w.output_tokens).max())

    @property
    def mean_output_tokens(self) -> float:
        return float(np.mean(self.unit.output_tokens))


def plan_traffic(workload: Workload | WorkloadArgs, *, sample: int = DEFAULT_SAMPLE,
                 seed: int = 0, burstiness: float = 1.0, quiet: bool = False) -> PlanTraffic:
    """The fleet workload and the unit-rate sample (see the module docstring); ``burstiness``
    shapes capacity mode's drawn gaps (target mode reads a WorkloadArgs' own). ``quiet``: no
    note when a timed trace spans 0 s (a check that refuses such a workload first)."""
    if sample < 20:
        raise InputError(f"--sample-requests must be at least 20, got {sample}")
    closed = workload.max_concurrency if isinstance(workload, WorkloadArgs) else (
        workload.closed_loop_concurrency)
    if closed is not None:
        raise InputError("plan sizes open-loop traffic; drop --max-concurrency")
    w, whole = (workload, len(workload)) if isinstance(workload, Workload) else _windowed(
        workload)
    if len(w) < 2:
        raise InputError("plan needs at least 2 requests in the workload: give --num-prompts "
                         "2 or more (or a trace with more rows)")
    n = min(sample, len(w))
    head = subset(w, np.arange(n, dtype=np.int64))
    span = float(w.arrival_s[-1] - w.arrival_s[0])
    if span <= 0:
        if not quiet:
            _note_no_span(workload, w)
        head = _drawn_head(workload, head, n)
        # vLLM bench's own stream: at the found rate R these are the send times of the
        # Verify line's `vllm bench serve --request-rate R --seed SEED` (gaps scale as 1 / R)
        gaps = gamma_arrivals(n, 1.0, burstiness, vllm_arrival_rng(seed))
        return PlanTraffic(name=w.name, target=None, unit=_with_arrivals(head, gaps),
                           rate_rps=None, trace_requests=whole,
                           args=workload if isinstance(workload, WorkloadArgs) else None)
    rate = (len(w) - 1) / span
    unit = _with_arrivals(head, (head.arrival_s - head.arrival_s[0]) * rate)
    args = workload if isinstance(workload, WorkloadArgs) else None
    drawn = args is not None and args.request_rate is not None
    shape = args.burstiness if args is not None and drawn else gap_shape(w.arrival_s)
    given = args.request_rate if args is not None else None
    return PlanTraffic(name=w.name, target=w, unit=unit, rate_rps=rate, trace_requests=whole,
                       burstiness=shape, own_arrivals=not drawn, given_rate_rps=given,
                       args=args)


def _note_no_span(workload: Workload | WorkloadArgs, w: Workload) -> None:
    """A timed trace whose requests all arrive at one time has no rate to serve: the plan
    turns to capacity mode, which only its title said."""
    if isinstance(workload, WorkloadArgs) and replays_trace_times(workload):
        from kvplan.notes import note

        note("%s: its %d requests taken all arrive at %g s (the trace's own times span 0 s), "
             "so there is no rate to serve: the plan answers the capacity of one replica "
             "instead; give more --num-prompts, or --request-rate R to size a fleet for R",
             w.name, len(w), float(w.arrival_s[0]))


def _drawn_head(workload: Workload | WorkloadArgs, head: Workload, n: int) -> Workload:
    """Random prompts of varying length are drawn for N requests at once (vLLM draws every
    input length, then every output length), so the first n of more requests are not the n
    `vllm bench serve --num-prompts n` sends: draw n, as the Verify line does."""
    if not isinstance(workload, WorkloadArgs) or workload.dataset_name != "random":
        return head
    if workload.random_range_ratio == 0 or workload.num_prompts == n:
        return head
    return build_workload(replace(workload, num_prompts=n))


def gap_shape(arrival_s: np.ndarray) -> float:
    """The gamma shape matching the gaps' first two moments: mean^2 / variance (1 for a
    Poisson process, below 1 for bursts); 1 when the gaps do not vary."""
    gaps = np.diff(np.sort(arrival_s))
    var = float(np.var(gaps))
    return 1.0 if var <= 0 else float(np.mean(gaps)) ** 2 / var


def _windowed(args: WorkloadArgs) -> tuple[Workload, int]:
    """The workload, cut to its first DEFAULT_PLAN_PROMPTS requests unless --num-prompts
    (and the size of the whole trace, for the answer's "verified on x of y requests": every
    row, also where the dataset's own default takes fewer, as sharegpt's 1000)."""
    w = build_workload(args)
    traced = args.trace is not None or args.dataset not in (None, "random")
    whole = max(trace_rows(args), len(w)) if traced else len(w)
    if args.num_prompts is not None or len(w) <= DEFAULT_PLAN_PROMPTS:
        return w, whole
    return subset(w, np.arange(DEFAULT_PLAN_PROMPTS, dtype=np.int64)), whole


def _with_arrivals(w: Workload, arrival_s: np.ndarray) -> Workload:
    return Workload(name=w.name, arrival_s=arrival_s, prompt_tokens=w.prompt_tokens,
                    output_tokens=w.output_tokens, prefix_hashes=w.prefix_hashes,
                    hash_block_tokens=w.hash_block_tokens)
