"""kvplan plan --disagg: aggregated and disaggregated candidates in one ranking, both ways.

Llama-3.1-8B on H100 (one price, $3.99 per GPU-hour in the bundled table's default provider):
- 8,000-token prompts, 300 outputs, 4 req/s, TPOT p99 <= 9 ms: aggregated replicas mix
  8k-token prefill chunks into decode steps, so TPOT needs more of them; a TP1 prefill + TP2
  decode fleet keeps decode steps clean: disaggregation is cheaper.
- 200-token prompts at 10 req/s: one aggregated GPU meets the SLO; a disaggregated fleet
  needs at least two: aggregation is cheaper.
"""

from __future__ import annotations

import pytest

from tests.conftest import assert_one_line_error, run_cli

BASE = ("plan", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--num-prompts", "300")


def _plan(*extra: str) -> dict:
    r = run_cli(*BASE, *extra, "--disagg", "--json")
    assert r.code == 0, r.err
    return r.json()


def test_long_prompts_tight_tpot_disaggregation_wins() -> None:
    """Aggregated: 3 x H100 TP2 = 6 x $3.99 = $23.94/h; 1P1D (a TP1 prefill, a TP2 decode) on
    3 H100s = $11.97/h wins the one ranking (1P4D on 5 H100s, $19.95/h, under the 125-point
    profile, whose per-request step cost was 149 us against the 139-point refit's 97 us); its
    TPOT binds, in the decode phase."""
    doc = _plan("--random-input-len", "8000", "--random-output-len", "300",
                "--request-rate", "4", "--slo", "ttft:p99:3000", "--slo", "tpot:p99:9")
    joint = doc["joint"]
    assert doc["summary"]["usd_per_hour"] == 23.94
    assert joint["winner_kind"] == "disaggregated"
    assert joint["winner"]["usd_per_hour"] == pytest.approx(11.97)
    assert joint["versus"].startswith("disaggregated wins") and "$23.94/h" in joint["versus"]
    best = joint["best_disaggregated"]
    assert best["fleet"] == "1P1D" and best["stage"] == "verified"
    assert best["achieved"]["p99_tpot_ms"] <= 9 and best["binding"]["primary"] == "decode"
    assert set(best["intervals"]) == {"p99_ttft_ms", "p99_tpot_ms"}
    assert [c["key"] for c in best["slo_at_band_edge"]] == ["p99_ttft_ms", "p99_tpot_ms"]
    nixl = '\'{"kv_connector":"NixlConnector","kv_role":"kv_both"}\''
    assert nixl in best["serve"]["prefill"] and nixl in best["serve"]["decode"]
    assert "--base-url http://PROXY:PORT" in best["serve"]["bench"]
    assert "toy_proxy_server.py" in best["serve"]["proxy"]
    levers = joint["levers"]
    assert levers[0]["change"] == "none (the winner)" and levers[0]["delta_usd_per_hour"] == 0
    assert levers[0]["binding_ms"] == best["achieved"]["p99_tpot_ms"]
    assert {c["kind"] for c in joint["candidates"]} == {"aggregated", "disaggregated"}


def test_short_prompts_aggregation_wins() -> None:
    """One H100 ($3.99/h) meets the SLO; every disaggregated fleet needs 2 GPUs ($7.98/h)."""
    doc = _plan("--random-input-len", "200", "--random-output-len", "200",
                "--request-rate", "10", "--slo", "ttft:p99:500", "--slo", "tpot:p99:30")
    joint = doc["joint"]
    assert doc["summary"]["gpus"] == 1 and joint["winner_kind"] == "aggregated"
    assert joint["winner"]["id"] == doc["summary"]["best"]
    assert "every disaggregated fleet costs at least $7.98/h (2 GPUs" in joint["versus"]
    assert joint["best_disaggregated"] is None and joint["simulations"] == 0


def test_text_names_the_winner_kind() -> None:
    r = run_cli(*BASE, "--random-input-len", "200", "--random-output-len", "200",
                "--request-rate", "10", "--slo", "ttft:p99:500", "--slo", "tpot:p99:30",
                "--disagg")
    assert r.code == 0, r.err
    assert "aggregated wins: c0000 aggregated: 1 x H100-SXM-80GB TP1 at $3.99/h" in r.out
    assert "the KV link adds $0" in r.out


def test_kv_link_needs_disagg_and_disagg_needs_a_rate() -> None:
    assert_one_line_error(run_cli(*BASE, "--slo", "ttft:p99:500", "--kv-link", "ib-ndr"))
    assert_one_line_error(run_cli(*BASE, "--slo", "ttft:p99:500", "--disagg"))


def test_disagg_leaves_the_aggregated_answer_as_it_was() -> None:
    """--disagg only adds the `joint` key: the rest of the document is the plain plan's."""
    flags = ("--random-input-len", "200", "--random-output-len", "200", "--request-rate",
             "10", "--slo", "ttft:p99:500", "--slo", "tpot:p99:30")
    plain = run_cli(*BASE, *flags, "--json")
    assert plain.code == 0, plain.err
    joint = _plan(*flags)
    joint.pop("joint")
    docs = [plain.json(), joint]
    for d in docs:
        d["search_report"].pop("wall_s")
    assert docs[0] == docs[1]


def test_the_fleets_take_the_plans_kv_cache_dtype() -> None:
    """`--kv-cache-dtype fp8` reaches both pools of every fleet (fuzz-4: the fleets ran vLLM's
    default 16-bit cache and printed serve lines without the flag); the same 160 fleets."""
    doc = _plan("--random-input-len", "8000", "--random-output-len", "300",
                "--request-rate", "4", "--slo", "ttft:p99:3000", "--slo", "tpot:p99:9",
                "--kv-cache-dtype", "fp8")
    joint = doc["joint"]
    fleets = [c for c in joint["candidates"] if c["kind"] == "disaggregated"]
    assert len(fleets) == 160
    best = joint["best_disaggregated"]
    assert "--kv-cache-dtype fp8" in best["serve"]["prefill"]
    assert "--kv-cache-dtype fp8" in best["serve"]["decode"]
