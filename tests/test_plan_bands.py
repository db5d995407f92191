"""Error bands on plan answers (value x the calibration group's residual percentiles), what
they mean for each SLO term, and --slo-margin band (the SLO judged at the band's edge).

The bundled profile's bands are refitted from time to time, so the hand values here use
small test groups (monkeypatched in) or read the stored percentiles from the profile."""

from __future__ import annotations

import numpy as np
import pytest

import kvplan
from kvplan.analysis.plan.bands import Ratios, edge_slo, goodput_band, plan_bands
from kvplan.analysis.plan.judge import Latencies
from kvplan.costs.step import uncertainty as unc
from kvplan.report.plan.plan_band_text import band_lines, check_line, margin_line
from kvplan.report.plan.plan_chart import chart_points
from kvplan.specs.slo import Slo, WarmupRule, parse_slo
from tests.plan_helpers import FAST, poisson_workload, slo

M8 = "meta-llama/Llama-3.1-8B"
R = Ratios(ratios=(("ttft", (0.5, 1.25)), ("tpot", (0.8, 1.5)), ("itl", None),
                   ("e2el", (0.9, 0.95)), ("output_tokens_per_s", (0.7, 1.1))),
           basis="test group, 9 held-out points", notes=("m/x was not measured",),
           bases=(("ttft", "ttft group"), ("tpot", "tpot group"),
                  ("output_tokens_per_s", "rate group")))


def test_edge_slo_divides_each_bound_by_the_high_ratio() -> None:
    s = Slo(bounds=parse_slo(["ttft:p99:2000 tpot:p90:50 itl:p99:80 e2el:p50:9000"]),
            goodput_ms=(("ttft", 1000.0), ("tpot", 60.0)))
    e = edge_slo(s, R)
    # ttft 2000 / 1.25, tpot 50 / 1.5; no itl band: unchanged; e2el high 0.95 < 1: unchanged
    assert [b.limit_ms for b in e.bounds] == pytest.approx([1600.0, 33.3333333, 80.0, 9000.0])
    assert [b.key for b in e.bounds] == [b.key for b in s.bounds]
    assert dict(e.goodput_ms) == pytest.approx({"ttft": 800.0, "tpot": 40.0})
    assert e.goodput_target == s.goodput_target


def test_checks_say_whether_each_term_holds_at_the_edge() -> None:
    s = slo("ttft:p95:2000", "tpot:p99:50", "itl:p99:80")
    b = plan_bands(s, R, {"p95_ttft_ms": 1100.0, "p99_tpot_ms": 40.0, "p99_itl_ms": 30.0},
                   None, 1000.0)
    ttft, tpot, itl = b.checks
    assert ttft.band == pytest.approx((550.0, 1375.0)) and ttft.met_at_edge is True
    assert tpot.band == pytest.approx((32.0, 60.0)) and tpot.met and tpot.met_at_edge is False
    assert itl.band is None and itl.met_at_edge is None
    assert b.output_tokens_per_s_band == pytest.approx((700.0, 1100.0))
    assert b.robust is False
    assert check_line(ttft) == ("p95 TTFT 1.10 s <= 2 s, band (10-90%) 550.0 ms - 1.38 s: "
                                "still met at the band's upper edge 1.38 s [ttft group]")
    assert check_line(tpot) == ("p99 TPOT 40.0 ms <= 50 ms, band (10-90%) 32.0 ms - 60.0 ms: "
                                "at the band's upper edge 60.0 ms it would be missed [tpot group]")
    assert check_line(itl) == "p99 ITL 30.0 ms <= 80 ms; no calibration residuals bound it"
    assert band_lines(b) == [
        "Error band: held-out calibration residuals of the nearest fitted group [named per "
        "term]",
        f"  {check_line(ttft)}", f"  {check_line(tpot)}", f"  {check_line(itl)}",
        "  output throughput 1000 tok/s, band (10-90%) 700 - 1100 tok/s [rate group]",
        "    = output tokens / run duration, as vllm bench serve's Output token throughput; "
        "$/M out tok is priced at this rate",
        "  note: m/x was not measured"]


def test_goodput_band_rejudges_scaled_latencies() -> None:
    n = 4
    lat = Latencies(arrival_s=np.arange(n, dtype=float),
                    ttft_ms=np.array([100.0, 200.0, 300.0, 400.0]),
                    tpot_ms=np.full(n, 10.0), e2el_ms=np.full(n, 1000.0),
                    itl_ms=np.full(n, 10.0), itl_req=np.arange(n, dtype=np.int64),
                    output_tokens=np.full(n, 2, dtype=np.int64))
    s = Slo(goodput_ms=(("ttft", 350.0),), goodput_target=0.7, warmup=WarmupRule(fraction=0))
    # pessimistic: 1.25 x ttft <= 350 keeps 100, 200 (2 of 4); optimistic: 0.5 x: all 4
    band = goodput_band(lat, s, R)
    assert band == pytest.approx((0.5, 1.0))
    b = plan_bands(s, R, {"goodput_share": 0.75}, band, None)
    (g,) = b.checks
    assert (g.met, g.edge, g.met_at_edge) == (True, 0.5, False)
    assert check_line(g) == ("goodput 75.0 % >= 70 %, band (10-90%) 50.0 % - 100.0 %: "
                             "at the band's lower edge 50.0 % it would be missed [ttft group]")


TEST_U = unc.Uncertainty(groups=(
    unc.BandGroup(family="*", gpu="*", tp="*", metric="tpot_s", n=10, low_ratio=0.8,
                  high_ratio=2.0),), coverage=unc.Coverage(gpus=("H100-SXM-80GB",)))
"""Only TPOT is banded (x 0.8 .. x 2.0): TTFT has no residuals (its band is null)."""
PRICES = {"price_overrides": ["L40S=0.5", "H100=4"]}


def test_margin_band_changes_the_winner_and_says_what_it_costs(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(unc, "bundled_uncertainty", lambda: TEST_U)
    work = poisson_workload(200, 2.0, 1000, 150)
    space = {"gpus": ["H100", "L40S"], "tensor_parallel_sizes": [1], **PRICES, **FAST}
    probe = kvplan.plan(M8, work, slo("ttft:p99:5000", "tpot:p99:1000"), explain=False,
                        **space)
    l40s = next(c for c in probe.candidates if c.deployment.gpu.id == "L40S")
    z = 1000 * (1 - dict(l40s.zero_load_margins)["p99_tpot_ms"])  # its zero-load p99 TPOT
    # a limit of 1.6 z: the L40S meets it (with replicas), but x 2.0 at the edge it never can
    s = slo("ttft:p99:5000", f"tpot:p99:{1.6 * z:.3f}")
    raw = kvplan.plan(M8, work, s, explain=False, **space)
    held = kvplan.plan(M8, work, s, explain=False, slo_margin="band", **space)
    assert raw.winner is not None and held.winner is not None
    assert raw.winner.deployment.gpu.id == "L40S"
    assert held.winner.deployment.gpu.id == "H100-SXM-80GB"
    assert held.without_margin is not None and held.without_margin.id == raw.winner.id
    assert held.without_margin.usd_per_hour == raw.winner.usd_per_hour
    gone = next(c for c in held.candidates if c.id == raw.winner.id)
    assert gone.stage == "pruned_bound" and "zero load" in gone.reason
    # the winner's answer holds at the band's edge; the raw winner's does not
    assert held.winner.bands is not None and held.winner.bands.robust is True
    assert raw.winner.bands is not None and raw.winner.bands.robust is False
    assert any("L40S is not in the calibration set" in n for n in raw.winner.bands.notes)
    assert held.winner.bands.notes == ()
    ttft = held.winner.bands.checks[0]
    assert ttft.key == "p99_ttft_ms" and ttft.band is None
    tpot = held.winner.bands.checks[1]
    assert tpot.band == pytest.approx((0.8 * tpot.value, 2.0 * tpot.value))
    # the text says what the margin changed and what it costs
    assert margin_line(raw) == ("SLO margin: none - 1 SLO term would be missed at the "
                                "band's edge; --slo-margin band plans for the edge instead")
    extra = (held.winner.usd_per_hour or 0.0) - (raw.winner.usd_per_hour or 0.0)
    assert margin_line(held).endswith(
        f"without it the winner would be {raw.winner.id} (L40S TP1 kv auto), "
        f"{raw.winner.replicas} replica{'' if raw.winner.replicas == 1 else 's'}, "
        f"${raw.winner.usd_per_hour:.2f}/h: "
        f"the margin costs +${extra:.2f}/h")
    # the Pareto chart's error bar is the binding value's band (TTFT: none in this profile)
    for pt in chart_points(raw):
        v, low, high = pt["binding_value_ms"], pt["band_low_ms"], pt["band_high_ms"]
        if pt["binding"] == "p99_tpot_ms" and pt["feasible"]:
            assert (low, high) == pytest.approx((0.8 * v, 2.0 * v))
        elif pt["binding"] == "p99_ttft_ms":
            assert (low, high) == (None, None)
    # only the L40S: nothing meets the edge, and the refusal names the margin
    alone = kvplan.plan(M8, work, s, explain=False, slo_margin="band",
                        **{**space, "gpus": ["L40S"]})
    assert alone.winner is None and "with --slo-margin band the SLO must hold" in \
        alone.infeasible_why
    base = alone.without_margin
    assert base is not None and base.replicas == raw.winner.replicas
    noun = "replica" if base.replicas == 1 else "replicas"
    assert f"without the margin {base.id} (L40S TP1, {base.replicas} {noun}" in \
        alone.infeasible_why
    # the funnel's pruning stays sound under the margin: exhaustive search agrees
    full = kvplan.plan(M8, work, s, explain=False, slo_margin="band", search="exhaustive",
                       **space)
    assert full.winner is not None
    assert (full.winner.id, full.winner.replicas) == (held.winner.id, held.winner.replicas)


def test_margin_name_is_checked() -> None:
    with pytest.raises(kvplan.KvplanError, match="--slo-margin 'edge'"):
        kvplan.plan(M8, poisson_workload(20, 1.0, 100, 10), slo("tpot:p99:100"),
                    slo_margin="edge", **FAST)
