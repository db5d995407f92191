"""SLO parsing (vLLM metric names), the warm-up rule, and judging latencies (hand values)."""

import numpy as np
import pytest

from kvplan.analysis.plan.judge import Latencies, judge
from kvplan.errors import InputError
from kvplan.specs.slo import PercentileBound, Slo, WarmupRule, parse_goodput_slo, parse_slo


def test_parse_slo_names_and_keys() -> None:
    bounds = parse_slo(["ttft:p99:2000 tpot:p90:50", "e2el:p99.9:30000", "itl:p50:20"])
    assert [b.key for b in bounds] == ["p99_ttft_ms", "p90_tpot_ms", "p99.9_e2el_ms",
                                       "p50_itl_ms"]
    assert bounds[0] == PercentileBound(metric="ttft", percentile=99.0, limit_ms=2000.0)
    assert bounds[1].text == "tpot:p90:50"


@pytest.mark.parametrize("bad", ["ttft:99:2000", "foo:p99:1", "ttft:p99", "ttft:p99:abc",
                                 "ttft:p0:100", "ttft:p101:5", "ttft:p99:-1", "ttft:p99:inf"])
def test_parse_slo_rejects_malformed(bad: str) -> None:
    with pytest.raises(InputError, match="--slo"):
        parse_slo([bad])


def test_parse_slo_rejects_duplicates() -> None:
    with pytest.raises(InputError, match="once"):
        parse_slo(["ttft:p99:1 ttft:p99:2"])


def test_goodput_parse() -> None:
    assert parse_goodput_slo(["ttft:500 tpot:50"]) == (("ttft", 500.0), ("tpot", 50.0))
    for bad in ("itl:50", "ttft", "ttft:x", "tpot:0"):
        with pytest.raises(InputError, match="--goodput"):
            parse_goodput_slo([bad])


def test_slo_needs_a_term_and_a_sane_target() -> None:
    with pytest.raises(InputError, match="give an SLO"):
        Slo()
    with pytest.raises(InputError, match="goodput-target"):
        Slo(goodput_ms=(("ttft", 1.0),), goodput_target=1.5)


def test_warmup_rule() -> None:
    rule = WarmupRule(fraction=0.1)
    assert rule.first_judged(100) == 10
    assert rule.first_judged(100, concurrency=32) == 32  # a closed loop's start-up burst
    assert rule.first_judged(1) == 0


def _lat(ttft: list[float], tpot: list[float], out: list[int]) -> Latencies:
    n = len(ttft)
    e2el = [a + b * (o - 1) for a, b, o in zip(ttft, tpot, out, strict=True)]
    return Latencies(arrival_s=np.arange(n, dtype=float), ttft_ms=np.array(ttft),
                     tpot_ms=np.array(tpot), e2el_ms=np.array(e2el),
                     itl_ms=np.array(tpot), itl_req=np.arange(n, dtype=np.int64),
                     output_tokens=np.array(out, dtype=np.int64))


def test_judge_percentile_on_the_window_only() -> None:
    # 10 requests; warm-up 0.1 drops request 0 (TTFT 10 s); the rest have TTFT 100..900 ms
    lat = _lat([10000.0] + [100.0 * k for k in range(1, 10)], [10.0] * 10, [2] * 10)
    slo = Slo(bounds=parse_slo(["ttft:p50:600"]))
    v = judge(lat, slo)
    assert v.judged_requests == 9
    assert v.value("p50_ttft_ms") == pytest.approx(500.0)  # median of 100..900
    assert v.ok and v.margin == pytest.approx((600 - 500) / 600)


def test_judge_goodput_share_and_margin() -> None:
    lat = _lat([100.0] * 10, [10.0] * 8 + [90.0] * 2, [3] * 10)
    slo = Slo(goodput_ms=(("tpot", 50.0),), goodput_target=0.9, warmup=WarmupRule(fraction=0))
    v = judge(lat, slo)
    assert v.value("goodput_share") == pytest.approx(0.8)
    assert not v.ok and v.binding == "goodput_share"
    assert v.margin == pytest.approx(-0.1)
