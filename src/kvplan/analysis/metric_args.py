"""The arguments of ``compute_metrics`` (vllm bench serve's --percentile-metrics,
--metric-percentiles and --goodput), parsed from flag text and checked at the Python API's
door: a bad one is one InputError naming it, not a KeyError or a NaN index deep inside."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

from kvplan.errors import InputError
from kvplan.limits import SLO_LIMIT_MS
from kvplan.specs.slo import note_goodput_repeat

METRIC_NAMES = ("ttft", "tpot", "itl", "e2el")
GOODPUT_NAMES = ("ttft", "tpot", "e2el")
"""vllm bench serve's --goodput metrics (no itl)."""


def parse_goodput(items: Sequence[str]) -> dict[str, float]:
    """``["ttft:200", "tpot:50"]`` -> {"ttft": 200.0, ...} in ms (vllm bench --goodput)."""
    out: dict[str, float] = {}
    for item in items:
        for part in item.split():
            name, sep, value = part.partition(":")
            if not sep or name not in GOODPUT_NAMES:
                raise InputError(f"--goodput {part!r}: use ttft:MS, tpot:MS or e2el:MS")
            before = out.get(name)
            try:
                out[name] = float(value)
            except ValueError:
                raise InputError(f"--goodput {part!r}: {value!r} is not a number of ms") from None
            note_goodput_repeat(name, before, out[name])
            high = SLO_LIMIT_MS[1]
            if not 0 <= out[name] <= high:  # vllm bench accepts 0 (nothing meets it)
                raise InputError(f"--goodput {part!r}: the SLO must be in [0, {high:,.0f}] ms "
                                 "(at most 24 hours)")
    return out


def parse_percentile_metrics(text: str) -> tuple[str, ...]:
    names = tuple(x.strip() for x in text.split(",") if x.strip())
    bad = [x for x in names if x not in METRIC_NAMES]
    if bad or not names:
        raise InputError(f"--percentile-metrics {text!r}: choose from {','.join(METRIC_NAMES)}")
    return names


def parse_percentiles(text: str) -> tuple[float, ...]:
    try:
        values = tuple(float(x) for x in text.split(",") if x.strip())
    except ValueError:
        raise InputError(f"--metric-percentiles {text!r}: use numbers like 50,90,99") from None
    if not values or any(not 0 <= v <= 100 for v in values):
        raise InputError(f"--metric-percentiles {text!r}: each must be in [0, 100]")
    return values


def check_metric_args(percentile_metrics: Sequence[str], percentiles: Sequence[float],
                      goodput_ms: Mapping[str, float] | None) -> None:
    """The parsers' rules on already-parsed values (the Python API's callers skip them)."""
    for name in percentile_metrics:
        if name not in METRIC_NAMES:
            raise InputError(f"compute_metrics(): percentile_metrics {name!r}: choose from "
                             f"{', '.join(METRIC_NAMES)}")
    for p in percentiles:
        if not (math.isfinite(p) and 0 <= p <= 100):
            raise InputError(f"compute_metrics(): percentiles {p!r}: each must be in [0, 100] "
                             "(99 is p99)")
    for name, ms in (goodput_ms or {}).items():
        if name not in GOODPUT_NAMES:
            raise InputError(f"compute_metrics(): goodput_ms {name!r}: choose from "
                             f"{', '.join(GOODPUT_NAMES)}")
        if not (math.isfinite(ms) and 0 <= ms <= SLO_LIMIT_MS[1]):
            raise InputError(f"compute_metrics(): goodput_ms[{name!r}] {ms!r}: the SLO must "
                             f"be in [0, {SLO_LIMIT_MS[1]:,.0f}] ms")
