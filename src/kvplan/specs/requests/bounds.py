"""Upper bounds on the workload flags (vLLM's `bench serve` has none): see kvplan.limits.

A run of 10^8 prompts, a 10^19-token random length or a rate of 1e-300 req/s would hang,
overflow numpy's int64 or lose every latency to float rounding; each gets one error naming
the flag and its range.
"""

from __future__ import annotations

import math
from typing import Any

from kvplan.errors import InputError
from kvplan.limits import (
    MAX_ARRIVAL_S,
    MAX_PROMPTS,
    MAX_REQUEST_RATE,
    MAX_TOKENS,
    MIN_REQUEST_RATE,
    check_int,
)

TIME_SCALE_RANGE = (1e-6, 1e6)
BURSTINESS_RANGE = (1e-3, 1e3)
MAX_SEED = 2**32 - 1
"""vllm bench serve seeds numpy's legacy stream (np.random.seed), which takes 0 .. 2**32 - 1."""
MAX_SIMULATED_TOKENS = 2e9
"""Tokens a random workload may hold in all (10^8 took ~5 s of simulator time)."""
DEFAULT_PROMPTS = 1000
"""vllm bench serve's --num-prompts default."""


def check_workload_bounds(a: Any) -> None:
    """InputError for the first flag past its range (lower bounds are checked elsewhere)."""
    for flag, value, high in (
        ("--num-prompts", a.num_prompts, MAX_PROMPTS),
        ("--max-concurrency", a.max_concurrency, MAX_PROMPTS),
        ("--random-input-len", a.random_input_len, MAX_TOKENS),
        ("--random-output-len", a.random_output_len, MAX_TOKENS),
        ("--random-prefix-len", a.random_prefix_len, MAX_TOKENS),
        ("--seed", a.seed, MAX_SEED),
    ):
        if value is not None and value > high:
            check_int(flag, value, 0 if flag in ("--random-prefix-len", "--seed") else 1, high)
    if a.seed < 0:
        check_int("--seed", a.seed, 0, MAX_SEED)
    if a.random_prefix_len + a.random_input_len > MAX_TOKENS:
        raise InputError(f"--random-prefix-len + --random-input-len must be at most "
                         f"{MAX_TOKENS:,} tokens")
    _check_floats(a)
    _check_random_total(a)


def _check_random_total(a: Any) -> None:
    """A random workload's tokens in all: each costs simulator time (~2.5 s per 10^8)."""
    if a.trace is not None or (a.dataset if a.dataset is not None else "random") != "random":
        return
    if not 0.0 <= a.random_range_ratio < 1.0:
        return  # the ratio's own range check names --random-range-ratio
    n = a.num_prompts or DEFAULT_PROMPTS
    each = a.random_prefix_len + (a.random_input_len + a.random_output_len) * (
        1 + a.random_range_ratio)
    if n * each > MAX_SIMULATED_TOKENS:
        raise InputError(
            f"--num-prompts {n:,} x up to {each:,.0f} tokens each is {n * each:.3g} tokens; "
            f"kvplan simulates at most {MAX_SIMULATED_TOKENS:.0e} tokens per run (fewer prompts "
            "or shorter lengths)"
        )


def _check_floats(a: Any) -> None:
    """Positive finite values outside the range (<= 0, NaN: the workload's own checks)."""
    for flag, value, (low, high), unit in (
        ("--request-rate", a.request_rate, (MIN_REQUEST_RATE, MAX_REQUEST_RATE), " requests/s"),
        ("--time-scale", a.time_scale, TIME_SCALE_RANGE, ""),
        ("--burstiness", a.burstiness, BURSTINESS_RANGE, ""),
    ):
        if value is not None and 0 < value < math.inf and not low <= value <= high:
            also = " or inf" if flag != "--time-scale" else ""
            raise InputError(f"{flag} must be in [{low:g}, {high:g}]{unit}{also}, got {value:g}")


def check_trace_size(name: str, rows: int) -> None:
    """A whole trace is simulated when --num-prompts is not given: at most 10^6 requests."""
    if rows > MAX_PROMPTS:
        raise InputError(
            f"'{name}' has {rows:,} requests; kvplan simulates at most {MAX_PROMPTS:,} per run: "
            f"give --num-prompts {MAX_PROMPTS:,} or fewer"
        )


_OWN_TIMES_ADVICE = ("a trace in ms needs --trace-columns arrival_unit=ms, else lower "
                     "--time-scale or --num-prompts, or raise --request-rate")
DRAWN_ADVICE = "raise --request-rate or lower --num-prompts"
"""What to change where the arrivals are drawn at --request-rate (no trace times, no scale)."""


def check_arrival_span(name: str, last_arrival_s: float, advice: str = _OWN_TIMES_ADVICE
                       ) -> None:
    """A workload's last arrival at most MAX_ARRIVAL_S (2^52 us): past it float64 seconds
    step by more than 1 us (2 ms at 10^13 s) and round the latencies away; ADVICE: what to
    change (a trace's own times by default, DRAWN_ADVICE for drawn arrivals)."""
    if last_arrival_s > MAX_ARRIVAL_S:
        raise InputError(
            f"workload '{name}': the last request arrives at {last_arrival_s:.4g} s, past "
            "2^52 us (4.5e9 s, ~142 years), where float64 seconds round latencies away; "
            f"{advice}")
