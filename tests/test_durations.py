"""Durations in text switch to s / min / h when large (an overloaded run printed
'1,934,969.67-12,996,353.95 ms'); JSON keeps vLLM's ``_ms`` keys."""

from __future__ import annotations

import re

import pytest

from kvplan.report.durations import fmt_ms, fmt_ms_delta, fmt_ms_range
from kvplan.report.plan.plan_band_text import _limit_text, achieved_text, ms_text
from kvplan.units import fmt_seconds
from tests.conftest import run_cli


@pytest.mark.parametrize(("seconds", "text"), [
    (0.0000125, "12.5 us"), (0.8124, "812.40 ms"), (15.5321, "15.532 s"),
    (174.67027, "2.91 min"),            # 174.67 / 60 = 2.911
    (12996.35395, "3.61 h"),            # 12,996 / 3,600 = 3.610
    (3_600_000.0, "1,000.00 h"), (float("inf"), "inf s"), (float("nan"), "nan s"),
    (-1.1867493, "-1.187 s"), (-0.0000125, "-12.5 us"),  # a saving: the unit of its size
])
def test_fmt_seconds_units(seconds: float, text: str) -> None:
    assert fmt_seconds(seconds) == text


def test_fmt_ms_and_the_band_of_the_issue() -> None:
    assert fmt_ms(812.4) == "812.40 ms" and fmt_ms(1_934_969.67) == "32.25 min"
    # the overloaded band of issue 19: 1,934,969.67 ms = 32.25 min, 12,996,353.95 ms = 3.61 h
    assert fmt_ms_range(1_934_969.67, 12_996_353.95) == "32.25 min - 3.61 h"
    assert fmt_ms_range(90_776.14, 609_704.06) == "1.51-10.16 min"
    assert fmt_ms_range(13.77, 92.51) == "13.77-92.51 ms"
    assert fmt_ms_delta(3.1) == "+3.10 ms" and fmt_ms_delta(-174_670.27) == "-2.91 min"
    assert fmt_ms_delta(0.0) == "+0.00 ms" and fmt_ms_delta(-0.0004) == "-0.4 us"


def test_plan_band_words() -> None:
    assert [ms_text(x) for x in (812.44, 1100.0, 174_670.0, 12_996_353.95)] == [
        "812.4 ms", "1.10 s", "2.91 min", "3.61 h"]
    assert [_limit_text(x) for x in (50.0, 2000.0, 120_000.0, 7_200_000.0)] == [
        "50 ms", "2 s", "2 min", "2 h"]
    assert achieved_text("p99_ttft_ms", 174_670.0) == "p99 TTFT 2.91 min"
    assert achieved_text("goodput_share", 0.97) == "goodput 97.0 %"


_DURATION = re.compile(r"([0-9][0-9,]*\.?[0-9]*) (us|ms|s|min|h)\b")
_UPPER = {"us": 1000, "ms": 1000, "s": 60, "min": 60}


def test_overloaded_simulate_reads_in_minutes_and_json_keeps_ms() -> None:
    args = ("simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--num-prompts", "1000",
            "--request-rate", "50", "--random-input-len", "4096", "--random-output-len", "512")
    text, data = run_cli(*args), run_cli(*args, "--json").json()
    assert text.code == 0, text.err
    assert "overloaded" in text.out and data["mean_ttft_ms"] > 60_000  # queueing for minutes
    for value, unit in _DURATION.findall(text.out):
        assert float(value.replace(",", "")) < _UPPER.get(unit, float("inf")), (value, unit)
    row = next(line for line in text.out.splitlines() if "Mean / median TTFT" in line)
    assert f"{data['mean_ttft_ms'] / 60_000:.2f} min" in row  # the same value, in minutes
    band = data["mean_ttft_ms_band"]
    assert f"TTFT {fmt_ms_range(*band)}" in " ".join(text.out.split())
    assert not any(key.endswith("_min") or key.endswith("_h") for key in data)


def test_plan_levers_cells() -> None:
    from kvplan.report.plan.plan_text import _band, _p99

    assert _p99(812.4, 0.0) == "812.40 ms (+0.00 ms)"
    assert _p99(174_670.27, -1_200.0) == "2.91 min (-1.200 s)"
    assert _p99(None, None) == "-" and _p99(50.0, None) == "50.00 ms (-)"
    assert _band((90_776.14, 609_704.06)) == "1.51-10.16 min" and _band(None) == "-"
