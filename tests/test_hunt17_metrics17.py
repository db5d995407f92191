"""Hunt 17 (metrics17): the serving metrics kvplan prints and the pictures that draw them."""

from __future__ import annotations

import re
from typing import Any

import numpy as np
import pytest

from kvplan.analysis.metrics import compute_metrics
from kvplan.analysis.serving import simulate_serving
from kvplan.report import sim_charts
from kvplan.report.charts import chart_spec
from kvplan.sim.result import SimulationResult
from kvplan.specs.requests.workload import WorkloadArgs
from kvplan.specs.serving import EngineConfig
from tests.conftest import run_cli

M = "meta-llama/Llama-3.1-8B"


def _three_requests() -> SimulationResult:
    """3 random prompts of 300-5700 tokens (seed 3), 2 req/s, 5 output tokens each."""
    work = WorkloadArgs(num_prompts=3, request_rate=2, random_input_len=3000,
                        random_output_len=5, random_range_ratio=0.9, seed=3)
    return simulate_serving(M, "H100", EngineConfig(), work).result


def _drawn_ms(spec: dict[str, Any], metric: str, fraction: float) -> float:
    """Where the drawn CDF line of ``metric`` reaches ``fraction``, read as the chart's own
    interpolation draws it between its points."""
    pts = sorted((x["fraction"], x["ms"]) for x in spec["data"]["values"]
                 if x["metric"] == metric)
    how = spec["spec"]["mark"]["interpolate"]
    if how == "step-after":  # flat at each point's fraction up to the next point's ms
        return next(ms for f, ms in pts if f >= fraction)
    assert how == "linear", how
    return float(np.interp(fraction, [f for f, _ in pts], [ms for _, ms in pts]))


def test_cdf_line_reads_the_printed_percentiles_between_its_points() -> None:
    # The table prints numpy's linear percentiles; the CDF chart drew its points (x_(k),
    # k / (n - 1)) joined step-after, so between two points it read the upper one: with the
    # sorted TTFTs 67.232, 76.327, 150.665 ms, `--metric-percentiles 25,75` prints P25 =
    # 67.232 + 0.5 x (76.327 - 67.232) = 71.780 ms and P75 = 76.327 + 0.5 x (150.665 -
    # 76.327) = 113.496 ms (np.percentile: index (3 - 1) x 0.25 = 0.5), while the drawn line
    # reached 0.25 only at 76.327 ms and 0.75 at 135.798 ms (its p90 point). Joined linearly
    # the points are numpy's percentile function itself (every order statistic is a point
    # up to 400 values), so the line passes through every printed percentile.
    r = _three_requests()
    m = compute_metrics(r, percentile_metrics=("ttft", "tpot", "itl", "e2el"),
                        percentiles=[25, 75])
    spec = chart_spec(sim_charts.latency_cdf_chart(r))
    p = dict(m.stats["ttft"].percentiles_ms)
    assert p[25.0] == pytest.approx(71.780, abs=1e-3)
    assert p[75.0] == pytest.approx(113.496, abs=1e-3)
    for metric, key in (("TTFT", "ttft"), ("TPOT", "tpot"), ("ITL", "itl"),
                        ("E2EL", "e2el")):
        printed = dict(m.stats[key].percentiles_ms)
        for q in (25.0, 75.0):
            assert _drawn_ms(spec, metric, q / 100) == pytest.approx(printed[q], rel=1e-12), (
                metric, q)


ONE_TOKEN = ("simulate", M, "--num-prompts", "4", "--random-output-len", "1")


def test_no_tpot_or_itl_band_when_no_request_has_a_second_token() -> None:
    # Every request with 1 output token: vLLM leaves all of them out of TPOT (output_len > 1
    # only) and has no inter-token gap, so mean/median TPOT and ITL are its placeholder 0
    # (np.mean([] or 0)), not a prediction. kvplan bounded that 0 with a calibration band:
    # "band (10-90%...): TTFT 105.92-181.94 ms; TPOT 0.0-0.0 us" and [0.0, 0.0] in --json,
    # as it once did for a run with nothing completed (tests/test_sim_bands_none.py).
    r = run_cli(*ONE_TOKEN)
    assert r.code == 0, r.err
    band_line = " ".join(r.out.split()).split("band (10-90%")[1]
    assert "TTFT" in band_line and "TPOT" not in band_line.split("):")[1], band_line
    doc = run_cli(*ONE_TOKEN, "--json").json()
    assert doc["completed"] == 4 and doc["total_output_tokens"] == 4
    assert doc["mean_tpot_ms"] == 0.0 and doc["mean_itl_ms"] == 0.0  # vLLM's placeholders
    for key in ("mean_tpot_ms", "median_tpot_ms", "mean_itl_ms", "median_itl_ms"):
        assert doc[f"{key}_band"] is None, key
    low, high = doc["mean_ttft_ms_band"]  # the requests' TTFT and E2EL still have theirs
    assert 0 < low <= doc["mean_ttft_ms"] < high
    assert doc["mean_e2el_ms_band"] is not None


def test_a_two_token_run_keeps_its_tpot_band() -> None:
    doc = run_cli(*ONE_TOKEN[:-1], "2", "--json").json()
    low, high = doc["mean_tpot_ms_band"]
    assert 0 < low <= doc["mean_tpot_ms"] < high


@pytest.mark.parametrize(("seconds", "text"), [
    # each unit up to where its rounded figure would read the next unit's 1: 0.999996 s is
    # 999.996 ms, "1000.00 ms" at 2 decimals, so it reads 1.000 s (before: "1000.00 ms",
    # "1000.0 us", "60.000 s", "60.00 min")
    (0.999996, "1.000 s"), (0.00099996, "1.00 ms"), (59.9996, "1.00 min"),
    (3599.9999, "1.00 h"), (0.99999, "999.99 ms"), (59.9994, "59.999 s"),
])
def test_a_duration_rounding_up_to_the_next_unit_reads_in_it(seconds: float, text: str) -> None:
    from kvplan.units import fmt_seconds

    assert fmt_seconds(seconds) == text


@pytest.mark.parametrize(("ms", "text"), [
    (999.96, "1.00 s"), (59_999.9, "1.00 min"), (3_599_999.0, "1.00 h"),  # before: 1000.0 ms,
    (999.94, "999.9 ms"), (59_994.0, "59.99 s"),                         # 60.00 s, 60.00 min
])
def test_plan_latency_words_roll_over_to_the_next_unit(ms: float, text: str) -> None:
    from kvplan.report.plan.plan_band_text import ms_text

    assert ms_text(ms) == text


GOODPUT_BINDS = ("plan", M, "--gpu", "H100,L40S", "-tp", "1,2", "--num-prompts", "200",
                 "--random-input-len", "8000", "--random-output-len", "300", "--request-rate",
                 "4", "--slo", "ttft:p99:3000 tpot:p99:9", "--goodput", "tpot:9.2",
                 "--goodput-target", "0.999", "--workers", "1", "--disagg")


def test_disagg_what_ifs_give_a_goodput_binding_term_as_a_share(tmp_path: Any) -> None:
    # The best 3P1D fleet's binding term is goodput_share (margin +0.1 %: share 1.0 against
    # the 0.999 target). Its what-ifs printed that share as a latency: `report --plan` wrote
    # "3P1D 11.25 $/h, goodput_share 1 ms, meets the SLO" and the text "goodput_share 1.0
    # (+0.0)"; a share reads as the plan's other goodput figures do, "goodput 100.0 %".
    r = run_cli(*GOODPUT_BINDS)
    assert r.code == 0, r.err
    text = " ".join(r.out.split())
    assert "what-if none (the winner): 3P1D $11.25/h, goodput 100.0 % (+0.0 pp)" in text, text
    assert "goodput_share 1.0" not in text
    # its interval [0.979, 1.0] printed "1.0 - 1.0" (.1f of a share); now in % as the plan's
    # sampling-error line gives it (Wilson's interval of 180 / 180 judged: 0.9791)
    assert "goodput 100.0 %, 95 % interval 97.9 % - 100.0 % (within noise)" in text
    saved = tmp_path / "plan.json"
    saved.write_text(run_cli(*GOODPUT_BINDS, "--json").out)
    page = tmp_path / "plan.html"
    assert run_cli("report", "--plan", str(saved), "-o", str(page)).code == 0
    html = page.read_text()
    assert "3P1D 11.25 $/h, goodput 100.0 %, meets the SLO" in html
    assert "goodput_share 1 ms" not in html


@pytest.fixture(scope="module")
def page() -> Any:
    from tests.webtools import watched_page, web_server

    with web_server() as url, watched_page() as pg:
        pg.goto(f"{url}/plan")
        yield pg


APP = """async ([name, args]) => {
  // static/app.js's own function, its IIFE's body run once more with the name exposed
  const src = await (await fetch("/static/app.js")).text();
  const body = src.slice(src.indexOf("(() => {") + 8, src.lastIndexOf("})();"));
  return new Function(`${body}; return ${name};`)()(...args);
}"""


def _js(page: Any, name: str, *args: Any) -> Any:
    return page.evaluate(APP, [name, list(args)])


def test_the_pages_durations_roll_over_as_the_clis(page: Any) -> None:
    # static/app.js secs() mirrors units.fmt_seconds: "1000.00 ms" for 0.999996 s before
    from kvplan.units import fmt_seconds

    for s in (0.999996, 0.00099996, 59.9996, 3599.9999, 0.99999, 0.8124, 174.67027):
        assert _js(page, "secs", s) == fmt_seconds(s), s


def test_the_pages_closest_candidates_give_a_goodput_share_in_percent(page: Any) -> None:
    # An infeasible plan's closest candidates (summary.closest) missing the goodput target
    # carry the share they reached in "achieved" (0.0: no judged request met tpot:7.3 on one
    # H100 at 20 req/s, `plan --goodput tpot:7.3 --request-rate 20 --max-gpus 1`); the
    # page's column "achieved (ms)" showed it as "0.000" ms. A share reads "0.0 %", a missed
    # latency keeps its ms.
    closest = [{"id": "c0000", "misses": "goodput_share", "margin": -0.99, "achieved": 0.0},
               {"id": "c0001", "misses": "p99_tpot_ms", "margin": -0.5, "achieved": 7.5}]
    html = _js(page, "infeasible", {"why": "x", "closest": closest})
    cells = re.findall(r'data-key="summary\.closest\.(\d)\.achieved"[^>]*>([^<]*)<', html)
    assert cells == [("0", "0.0 %"), ("1", "7.500 ms")], html
    assert "achieved (ms)" not in html


def test_a_request_that_never_finished_is_never_good_for_goodput() -> None:
    # 4 one-token requests, the second 1,001 tokens long against max_model_len 500: vLLM's
    # API rejects it and calculate_metrics counts a good request only among the successful
    # outputs, so 3 of 4 are good under --goodput tpot:50 (request_goodput x duration = 3).
    # The planner's judge gave a 1-token request's missing TPOT as 0 (vLLM's rule for a
    # *completed* one) before looking at whether it finished: goodput share 1.0, not 0.75.
    from kvplan.analysis.plan.judge import judge, latencies
    from kvplan.specs.requests.arrays import Workload
    from kvplan.specs.slo import Slo, WarmupRule

    w = Workload(name="t", arrival_s=np.arange(4) * 0.5,
                 prompt_tokens=np.array([100, 1000, 100, 100]),
                 output_tokens=np.ones(4, dtype=np.int64))
    r = simulate_serving(M, "H100", EngineConfig(max_model_len=500), w).result
    assert list(r.rejected) == [1]
    m = compute_metrics(r, goodput_ms={"tpot": 50.0})
    assert m.request_goodput is not None
    assert m.request_goodput * m.duration_s == pytest.approx(3.0)
    slo = Slo(goodput_ms=(("tpot", 50.0),), warmup=WarmupRule(fraction=0.0))
    assert judge(latencies(r), slo).value("goodput_share") == pytest.approx(0.75)


def test_the_levers_binding_column_is_not_headed_ms_over_seconds() -> None:
    # 8,000-token prompts at 4 req/s on one H100, TTFT p99 <= 2.5 s: the winner's p99 TTFT
    # is 1.351 s, printed in readable units ("1.351 s (+0.00 ms)", fmt_ms) under a column
    # headed "p99 TTFT (ms)"; each cell carries its unit, so the head names the term alone.
    r = run_cli("plan", M, "--gpu", "H100", "-tp", "1", "--num-prompts", "200",
                "--random-input-len", "8000", "--random-output-len", "50", "--request-rate",
                "4", "--slo", "ttft:p99:2500", "--workers", "1")
    assert r.code == 0, r.err
    table = r.out.split("One lever at a time")[1]
    head = next(line for line in table.splitlines() if "change" in line)
    assert "p99 TTFT" in head and "(ms)" not in head, head
    winner = next(line for line in table.splitlines() if "none (the winner)" in line)
    assert re.search(r"\d\.\d{3} s \(\+0\.00 ms\)", winner), winner


def test_an_slo_term_with_no_sample_is_not_within_sampling_noise() -> None:
    # Every request 1 output token: no judged request has a TPOT (vLLM: output_len > 1), so
    # p99 TPOT is vLLM's placeholder 0 and has no sampling interval. The plan printed
    # "p99 TPOT unbounded - unbounded" among intervals "over 90 judged requests" and "p99
    # TPOT: the limit lies inside the interval - the pass is within sampling noise; another
    # sample of the same traffic could miss it" - no sample of this traffic has a TPOT.
    r = run_cli("plan", M, "--gpu", "H100", "-tp", "1", "--num-prompts", "100",
                "--random-output-len", "1", "--request-rate", "10", "--slo",
                "ttft:p99:500 tpot:p99:30", "--workers", "1", "--json")
    assert r.code == 0, r.err
    fleet = r.json()["candidates"][0]["fleet"]
    assert fleet["achieved"]["p99_tpot_ms"] == 0.0
    assert "p99_tpot_ms" not in fleet["intervals"] and "p99_tpot_ms" not in fleet["within_noise"]
    assert "p99_ttft_ms" in fleet["intervals"]  # TTFT has its 90 judged values
