"""Whether a simulated server kept up: arrivals against completions while requests arrive.

Over the second half of the arrival window (after the ramp-up), an open-loop client sends
``offered`` requests per second and the server finishes ``sustained``. The run is overloaded
when it finishes under 90 % of what arrives and the waiting queue is longer when the last
request arrives than at the window's midpoint: the queue is still growing, so TTFT depends on
how long the trace is, not on a steady state.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from kvplan.sim.result import SimulationResult

KEEP_UP = 0.9
"""The server keeps up when it finishes at least this share of the arrival rate."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Overload:
    """The verdict and its figures (rates in requests per second over the window)."""

    overloaded: bool
    window_start_s: float
    window_end_s: float
    offered_rate_req_s: float
    sustained_rate_req_s: float
    waiting_at_mid_arrivals: int
    waiting_at_last_arrival: int

    def to_json(self) -> dict[str, Any]:
        return {
            "overloaded": self.overloaded, "window_start_s": self.window_start_s,
            "window_end_s": self.window_end_s, "offered_rate_req_s": self.offered_rate_req_s,
            "sustained_rate_req_s": self.sustained_rate_req_s,
            "waiting_at_mid_arrivals": self.waiting_at_mid_arrivals,
            "waiting_at_last_arrival": self.waiting_at_last_arrival,
            "message": self.message() if self.overloaded else None,
        }

    def message(self) -> str:
        return (
            f"overloaded: accepted requests arrived at {self.offered_rate_req_s:.2f} req/s but "
            f"the server finished {self.sustained_rate_req_s:.2f} req/s over the second half of "
            f"the arrivals; the waiting queue grew from {self.waiting_at_mid_arrivals} to "
            f"{self.waiting_at_last_arrival} requests and was still growing when the last "
            "request arrived, so these latencies grow with the trace's length (no steady "
            "state). Lower --request-rate, or add GPUs or replicas."
        )


def _waiting_at(r: SimulationResult, t: float) -> int:
    starts = r.steps.start_s
    i = int(np.searchsorted(starts, t, side="right")) - 1
    return int(r.steps.waiting[i]) if i >= 0 else 0


def overload(r: SimulationResult) -> Overload | None:
    """The verdict for an open-loop run; None when requests were not spread over time."""
    served = np.ones(r.num_requests, dtype=bool)
    served[np.fromiter(r.rejected, dtype=np.int64, count=len(r.rejected))] = False
    sent = r.sent_s[served & ~np.isnan(r.sent_s)]
    if len(sent) < 4 or r.num_steps == 0:
        return None
    t0, t1 = float(sent.min()), float(sent.max())
    mid = t0 + (t1 - t0) / 2
    span = t1 - mid
    if not np.isfinite(span) or span <= 0:
        return None
    arrived = int(((sent > mid) & (sent <= t1)).sum())
    done = r.finish_s[r.finished]
    finished = int(((done > mid) & (done <= t1)).sum())
    offered, sustained = arrived / span, finished / span
    w_mid, w_end = _waiting_at(r, mid), _waiting_at(r, t1)
    return Overload(
        overloaded=bool(sustained < KEEP_UP * offered and w_end > w_mid),
        window_start_s=mid, window_end_s=t1, offered_rate_req_s=offered,
        sustained_rate_req_s=sustained, waiting_at_mid_arrivals=w_mid,
        waiting_at_last_arrival=w_end,
    )
