"""Fifteenth hunt round, `kvplan plan`'s words and figures (helper plan2): each defect pinned
by a hand-checkable golden value."""

from __future__ import annotations

from functools import cache

from kvplan.analysis.plan.why.rejections import RejectGroup
from tests.conftest import CliResult, run_cli

# Llama-3.1-8B at 10 req/s, 300 random prompts of 1024 + 128 tokens: the winner is one
# A100-80GB-SXM TP1 replica, chunk 512 (the earlier helper's repro).
TARGET = ("plan", "meta-llama/Llama-3.1-8B", "--request-rate", "10", "--num-prompts", "300",
          "--slo", "ttft:p99:2000", "--slo", "tpot:p90:50")


@cache
def _target_text() -> CliResult:
    res = run_cli(*TARGET)
    assert res.code == 0, res.err
    return res


def _flat(text: str) -> str:
    return " ".join(text.split())


# -------------------- D3: "1 SLO term(s)" / "1 request(s) rejected"
# The margin line counts the terms missed at the band's edge: here p90 TPOT alone (its
# upper edge 57.8 ms > 50 ms), so "1 SLO term"; a rejection group of one request says
# "1 request rejected", of two "2 requests rejected".
def test_margin_line_counts_terms_in_words() -> None:
    out = _flat(_target_text().out)
    assert "SLO margin: none - 1 SLO term would be missed at the band's edge" in out
    assert "(s)" not in out


def test_rejection_groups_count_requests_in_words() -> None:
    one = RejectGroup(kind="too long", count=1, examples=((7, "too long"),))
    two = RejectGroup(kind="too long", count=2, examples=((7, "too long"), (9, "too long")))
    assert one.line() == "1 request rejected: too long (e.g. request 7: too long)"
    assert two.line().startswith("2 requests rejected: too long")
