"""Latency SLOs with `vllm bench serve`'s metric names: percentile bounds and goodput.

``--slo ttft:p99:2000 tpot:p90:50`` bounds a percentile of a metric (ms);
``--goodput ttft:2000 tpot:50 --goodput-target 0.99`` asks that at least 99 % of requests
meet every bound at once (vLLM's ``request_goodput`` definition). Only requests in the
steady-state window are judged (``WarmupRule``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from kvplan.api_check import check_fields, named_fields
from kvplan.errors import InputError
from kvplan.limits import SLO_LIMIT_MS

SLO_METRICS = ("ttft", "tpot", "itl", "e2el")
GOODPUT_METRICS = ("ttft", "tpot", "e2el")
"""vllm bench serve's --goodput accepts these three (no itl)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class PercentileBound:
    """The ``percentile``-th percentile of ``metric`` must be at most ``limit_ms``."""

    metric: str
    percentile: float
    limit_ms: float

    def __post_init__(self) -> None:
        check_fields(self)
        if self.metric not in SLO_METRICS:
            raise InputError(f"SLO metric {self.metric!r}: choose one of {', '.join(SLO_METRICS)}")
        if not 0 < self.percentile <= 100:
            raise InputError(f"SLO percentile must be in (0, 100], got {self.percentile!r}")
        _check_limit(self.limit_ms, f"{self.metric}:p{_pword(self.percentile)} limit")

    @property
    def key(self) -> str:
        """vLLM's result key for this percentile, e.g. ``p99_ttft_ms``."""
        return f"p{_pword(self.percentile)}_{self.metric}_ms"

    @property
    def text(self) -> str:
        return f"{self.metric}:p{_pword(self.percentile)}:{_num(self.limit_ms)}"


@dataclass(frozen=True, slots=True, kw_only=True)
class WarmupRule:
    """Which requests are judged: drop the first ``fraction`` of requests by arrival order
    (at least ``closed_loop_concurrency`` of them under a closed loop, the start-up burst)."""

    fraction: float = 0.1

    def __post_init__(self) -> None:
        check_fields(self)
        if not 0.0 <= self.fraction < 1.0:
            raise InputError(f"--warmup-fraction must be in [0, 1), got {self.fraction!r}")

    def first_judged(self, num_requests: int, concurrency: int | None = None) -> int:
        """Index (in arrival order) of the first request whose latency counts."""
        skip = math.floor(self.fraction * num_requests)
        if concurrency is not None:
            skip = max(skip, concurrency)
        return min(skip, max(0, num_requests - 1))


@named_fields
@dataclass(frozen=True, slots=True, kw_only=True)
class Slo:
    """Percentile bounds and/or a goodput target, judged on the steady-state window."""

    bounds: tuple[PercentileBound, ...] = ()
    goodput_ms: tuple[tuple[str, float], ...] = ()
    goodput_target: float = 0.99
    warmup: WarmupRule = WarmupRule()

    def __post_init__(self) -> None:
        check_fields(self)
        names = [metric for metric, _ in self.goodput_ms]
        for metric, ms in self.goodput_ms:
            if metric not in GOODPUT_METRICS or names.count(metric) > 1:
                raise InputError(f"Slo goodput_ms {metric!r}: each of "
                                 f"{', '.join(GOODPUT_METRICS)} at most once (vllm bench "
                                 "serve's --goodput metrics)")
            _check_limit(ms, f"goodput {metric} limit")
        if not self.bounds and not self.goodput_ms:
            raise InputError("give an SLO: --slo ttft:p99:2000 ... and/or --goodput ttft:MS ...")
        if not 0.0 < self.goodput_target <= 1.0:
            raise InputError(
                f"--goodput-target must be in (0, 1], e.g. 0.99; got {self.goodput_target}"
            )

    @property
    def judges_itl(self) -> bool:
        """Whether a bound is on ITL (goodput has no ITL term): only then does judging need
        every inter-token gap."""
        return any(b.metric == "itl" for b in self.bounds)

    @property
    def text(self) -> str:
        """The SLO as the flags that give it."""
        parts = [b.text for b in self.bounds]
        if self.goodput_ms:
            good = " ".join(f"{m}:{_num(v)}" for m, v in self.goodput_ms)
            parts.append(f"goodput {good} >= {_num(100 * self.goodput_target)} %")
        return ", ".join(parts)


def parse_slo(items: Sequence[str]) -> tuple[PercentileBound, ...]:
    """``["ttft:p99:2000", "tpot:p90:50"]`` (also space-separated in one item) -> bounds."""
    out: list[PercentileBound] = []
    for item in items:
        out += [_bound(part) for part in item.split()]
    metrics = [(b.metric, b.percentile) for b in out]
    if len(set(metrics)) != len(metrics):
        raise InputError("--slo: each metric:percentile may be given once")
    return tuple(out)


def _bound(part: str) -> PercentileBound:
    fields = part.split(":")
    usage = "use METRIC:pPCT:MS, e.g. ttft:p99:2000 (metrics ttft, tpot, itl, e2el)"
    if len(fields) != 3 or fields[0] not in SLO_METRICS or not fields[1].startswith("p"):
        raise InputError(f"--slo {part!r}: {usage}")
    pct = _number(fields[1][1:], f"--slo {part!r}: the percentile")
    limit = _number(fields[2], f"--slo {part!r}: the limit in ms")
    if not 0 < pct <= 100:
        raise InputError(f"--slo {part!r}: the percentile must be in (0, 100], e.g. p99")
    _check_limit(limit, f"--slo {part!r}: the limit")
    return PercentileBound(metric=fields[0], percentile=pct, limit_ms=limit)


def parse_goodput_slo(items: Sequence[str]) -> tuple[tuple[str, float], ...]:
    """``["ttft:2000", "tpot:50"]`` -> (("ttft", 2000.0), ("tpot", 50.0)) (vllm --goodput)."""
    out: dict[str, float] = {}
    for item in items:
        for part in item.split():
            name, sep, value = part.partition(":")
            if not sep or name not in GOODPUT_METRICS:
                raise InputError(f"--goodput {part!r}: use ttft:MS, tpot:MS or e2el:MS")
            ms = _number(value, f"--goodput {part!r}: the limit in ms")
            _check_limit(ms, f"--goodput {part!r}: the limit")
            note_goodput_repeat(name, out.get(name), ms)
            out[name] = ms
    return tuple(out.items())


def note_goodput_repeat(name: str, before: float | None, now: float) -> None:
    """A --goodput metric given again with another limit: the last one counts, as vllm bench
    serve reads --goodput (a dict filled in order); a note says so on stderr."""
    if before is None or before == now:
        return
    from kvplan.notes import note

    note("--goodput %s given twice (%s ms, then %s ms): the last, %s:%s, counts, as vllm "
         "bench serve reads it", name, _num(before), _num(now), name, _num(now))


def _number(text: str, what: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise InputError(f"{what} must be a number, got {text!r}") from None
    if not math.isfinite(value):
        raise InputError(f"{what} must be finite, got {text!r}")
    return value


def _check_limit(ms: float, what: str) -> None:
    low, high = SLO_LIMIT_MS
    if not low <= ms <= high:
        raise InputError(f"{what} must be in [{low:g}, {high:,.0f}] ms (1 us to 24 hours), "
                         f"got {ms:g}")


def _pword(p: float) -> str:
    return str(int(p)) if float(p).is_integer() else str(p)


def _num(x: float) -> str:
    return str(int(x)) if float(x).is_integer() else f"{x:g}"
