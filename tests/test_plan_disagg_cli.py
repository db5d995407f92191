"""kvplan plan --disagg: the disaggregated search beside the aggregated plan, both ways.

Llama-3.1-8B on H100 (one price, $3.99 per GPU-hour in the bundled table's default provider):
- 8,000-token prompts, 300 outputs, 4 req/s, TPOT p99 <= 9 ms: aggregated replicas mix
  8k-token prefill chunks into decode steps, so TPOT needs more of them; a TP1 prefill + TP2
  decode fleet keeps decode steps clean: disaggregation is cheaper.
- 200-token prompts at 10 req/s: one aggregated GPU meets the SLO; a disaggregated fleet
  needs at least two: aggregation is cheaper.
"""

from __future__ import annotations

from tests.conftest import assert_one_line_error, run_cli

BASE = ("plan", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--num-prompts", "300")


def _plan(*extra: str) -> dict:
    r = run_cli(*BASE, *extra, "--disagg", "--json")
    assert r.code == 0, r.err
    return r.json()


def test_long_prompts_tight_tpot_disaggregation_wins() -> None:
    doc = _plan("--random-input-len", "8000", "--random-output-len", "300",
                "--request-rate", "4", "--slo", "ttft:p99:3000", "--slo", "tpot:p99:9")
    side = doc["disaggregated"]
    best = side["best"]
    assert best["stage"] == "simulated" and best["reason"].startswith("meets the SLO")
    assert best["usd_per_hour"] < doc["summary"]["usd_per_hour"]
    assert side["versus_aggregated"].startswith("disaggregated serving is cheaper")
    assert "NixlConnector" in side["serve"]["prefill"]
    assert best["achieved"]["p99_tpot_ms"] <= 9


def test_short_prompts_aggregation_wins() -> None:
    doc = _plan("--random-input-len", "200", "--random-output-len", "200",
                "--request-rate", "10", "--slo", "ttft:p99:500", "--slo", "tpot:p99:30")
    side = doc["disaggregated"]
    assert doc["summary"]["gpus"] == 1
    assert side["best"]["gpus"] >= 2
    assert side["versus_aggregated"].startswith("aggregated serving is cheaper")


def test_kv_link_needs_disagg_and_disagg_needs_a_rate() -> None:
    assert_one_line_error(run_cli(*BASE, "--slo", "ttft:p99:500", "--kv-link", "ib-ndr"))
    assert_one_line_error(run_cli(*BASE, "--slo", "ttft:p99:500", "--disagg"))
