"""Latencies in milliseconds as a person reads them: ms below a second, then s, min and h
(text only; JSON keeps vLLM's ``_ms`` keys)."""

from __future__ import annotations

from kvplan.units import fmt_seconds


def fmt_ms(ms: float) -> str:
    """``812.40 ms``, ``15.532 s``, ``2.91 min``, ``3.61 h``."""
    return fmt_seconds(ms / 1000.0)


def fmt_ms_range(low_ms: float, high_ms: float) -> str:
    """A band: ``1.51-10.16 min`` when both ends share a unit, else ``812.40 ms - 1.51 min``."""
    low, high = fmt_ms(low_ms), fmt_ms(high_ms)
    low_value, low_unit = low.rsplit(" ", 1)
    high_value, high_unit = high.rsplit(" ", 1)
    return f"{low_value}-{high_value} {high_unit}" if low_unit == high_unit else f"{low} - {high}"


def fmt_ms_delta(ms: float) -> str:
    """A signed change: ``+3.10 ms``, ``-2.91 min``; no change is ``+0.00 ms``."""
    if ms == 0:
        return "+0.00 ms"
    return f"{'-' if ms < 0 else '+'}{fmt_ms(abs(ms))}"
