"""Hunt 19 (planner, helper plan19): kvplan plan's $ figures and words against its own numbers."""

from __future__ import annotations

from functools import cache
from pathlib import Path

import pytest

from tests.conftest import CliResult, run_cli

BURST = ("plan", "meta-llama/Llama-3.1-8B", "--dataset", "random", "--num-prompts", "50",
         "--request-rate", "100000", "--slo", "ttft:p99:1000", "tpot:p99:40", "--gpu", "L40S",
         "-tp", "1", "--max-num-batched-tokens", "2048", "--workers", "1")


@cache
def _burst_json() -> CliResult:
    res = run_cli(*BURST, "--json")
    assert res.code == 0, res.err
    return res


# -------------------- D1: $/M out tok priced a burst as a load held for good
# 50 requests arrive within about 0.5 ms (target rate 49 / span = 99,519 req/s). The winner,
# 4 L40S TP1 replicas at 4 x $1.09 = $4.36/h, serves them within the SLO, but no L40S TP1
# replica can hold more than its prefill-compute ceiling, 14.54 req/s (1 / (c_min x mean
# computed tokens), docs/planner.md) for good: 4 x 14.54 = 58.2 req/s, 58.2 x 128 = 7,446
# output tok/s at the very most. The plan priced $/M at the target load held for good,
# 99,519 x 128 = 12,738,476 tok/s: 4.36 / (12,738,476 x 3600) x 1e6 = $0.000095/M, about
# 8,500 x below what the fleet's own run turns out (its 6,400 tokens / run duration, 1,500
# tok/s: 4.36 / (1,500 x 3600) x 1e6 = $0.81/M). Where the target rate is above what the
# fleet can hold (its replicas x one replica's smallest ceiling), the trace is a burst the
# fleet drains: $/M is priced at the run's own output tokens / duration, and says so.
def test_a_burst_the_fleet_cannot_hold_is_priced_at_its_run() -> None:
    doc = _burst_json().json()
    s = doc["summary"]
    w = next(c for c in doc["candidates"] if c["id"] == s["best"])
    held = s["replicas"] * min(w["ceilings_rps"].values())
    assert doc["inputs"]["target_rate_rps"] > 1000 * held  # a burst, not a load held
    assert s["usd_per_hour"] == pytest.approx(s["replicas"] * 1.09)
    assert s["priced_output_tokens_per_s"] <= held * 128
    assert s["priced_output_tokens_per_s"] == pytest.approx(s["output_tokens_per_s"])
    assert s["usd_per_million_output_tokens"] == pytest.approx(
        s["usd_per_hour"] / (s["output_tokens_per_s"] * 3600) * 1e6)
    assert s["usd_per_million_output_tokens"] > 0.1
    assert w["usd_per_million_output_tokens"] == pytest.approx(s["usd_per_million_output_tokens"])
    assert "burst" in s["priced_output_tokens_per_s_definition"]
    assert f"{held:.3g} req/s" in s["priced_output_tokens_per_s_definition"]


def test_a_burst_text_says_what_its_dollars_per_token_are_priced_at() -> None:
    res = run_cli(*BURST)
    assert res.code == 0, res.err
    out = " ".join(res.out.split())
    assert "the target load held for good" not in out
    assert "$/M out tok is priced at" in out and "a burst the fleet drains" in out


# -------------------- D2: stale-price warnings named GPUs the plan never priced
# A --prices file with H100 and L40S rows read on 2025-01-01 (706 days before 2026-12-08) and
# an A100 row read on 2026-12-01: `--gpu A100` searches, prices and levers A100 alone (the
# --gpu lever takes the next GPU *of the space*), yet the plan warned "price of
# H100-SXM-80GB at acme was observed on 2025-01-01 (706 days ago)" and the same for L40S:
# two warnings about prices no figure of the answer uses. A warning now names only the rows
# of the GPUs searched: none here; with --gpu A100,L40S the L40S one.
PRICES = ("gpu,provider,instance,gpus_per_instance,gpus_per_node,usd_per_instance_hour,"
          "source_url,observed_on,transcribed_by\n"
          "H100,acme,8x H100,8,8,24.00,https://acme,2025-01-01,me\n"
          "L40S,acme,1x L40S,1,8,1.00,https://acme,2025-01-01,me\n"
          "A100,acme,1x A100,1,8,1.50,https://acme,2026-12-01,me\n")


def test_stale_price_warnings_name_only_the_gpus_searched(tmp_path: Path) -> None:
    import datetime as dt

    import kvplan
    from tests.plan_helpers import FAST, poisson_workload, slo

    path = tmp_path / "prices.csv"
    path.write_text(PRICES)
    wl = poisson_workload(60, 2.0, 512, 32)
    day = dt.date(2026, 12, 8)
    p = kvplan.plan("meta-llama/Llama-3.1-8B", wl, slo("ttft:p99:5000"), gpus=["A100"],
                    tensor_parallel_sizes=[1], max_num_batched_tokens=[2048],
                    prices_file=path, today=day, **FAST)
    assert p.winner is not None
    assert not [w for w in p.warnings if "observed on" in w]
    p = kvplan.plan("meta-llama/Llama-3.1-8B", wl, slo("ttft:p99:5000"),
                    gpus=["A100", "L40S"], tensor_parallel_sizes=[1],
                    max_num_batched_tokens=[2048], prices_file=path, today=day, **FAST)
    stale = [w for w in p.warnings if "observed on" in w]
    assert stale == ["price of L40S at acme was observed on 2025-01-01 (706 days ago); check "
                     "https://acme"]


# -------------------- D3: a disaggregated fleet's goodput binding always read prefill
# 200 random 8,000 + 300-token prompts at 3 req/s, --goodput ttft:3000 tpot:9 at 90 % on H100
# TP1 / TP2: the joint winner 1P1D (prefill TP1, decode TP2, $11.97/h) meets it with every
# judged request good, and of its two bounds TPOT is the near one: at the 90 % share the
# target asks for, p90 TPOT 7.73 ms is 86 % of its 9 ms, p90 TTFT 696 ms 23 % of its 3 s
# (`kvplan simulate --disagg 1P1D ... --metric-percentiles 90`). The decode TP is what made it
# (the three TP1-decode fleets are infeasible). The answer said "binding prefill: goodput_share
# binds; its slowest 1 % spend ... prefill 1,010.0 ms": a goodput binding was read as a TTFT
# one whatever bound bound. The goodput bound that binds is the one most judged requests
# miss, then (none missed here) the one whose value at the target share is nearest its
# limit; a TPOT bound is the decode instances' (as a tpot percentile term already was).
def test_a_disaggregated_goodput_binding_names_the_bound_near_its_limit() -> None:
    res = run_cli("plan", "meta-llama/Llama-3.1-8B", "--dataset", "random", "--num-prompts",
                  "200", "--random-input-len", "8000", "--random-output-len", "300",
                  "--request-rate", "3", "--goodput", "ttft:3000", "tpot:9",
                  "--goodput-target", "0.9", "--gpu", "H100", "-tp", "1,2", "--disagg",
                  "--workers", "1", "--json")
    assert res.code == 0, res.err
    best = res.json()["joint"]["best_disaggregated"]
    assert (best["prefill"]["tensor_parallel_size"], best["decode"]["tensor_parallel_size"]) \
        == (1, 2)
    assert best["achieved"]["goodput_share"] == 1.0
    assert best["binding"]["primary"] == "decode"
    assert best["binding"]["why"].startswith("goodput_share (its tpot bound) binds")


# -------------------- D4: the nothing-feasible line counted ruled-out candidates wrongly
# L40S TP1 and TP2 at chunk 512 under --max-gpus 1 (300 random prompts at 10 req/s,
# ttft:p99:1000 tpot:p99:40): TP2 needs 2 GPUs, so 1 candidate is ruled out by --max-gpus;
# the line read "(1 others were ruled out by --max-gpus/--max-cost-per-hour)", no
# --max-cost-per-hour given. It now counts in words and names the flag that ruled it out.
def test_the_ruled_out_count_reads_in_words_and_names_its_flag() -> None:
    res = run_cli("plan", "meta-llama/Llama-3.1-8B", "--dataset", "random", "--num-prompts",
                  "300", "--request-rate", "10", "--slo", "ttft:p99:1000", "tpot:p99:40",
                  "--gpu", "L40S", "-tp", "1,2", "--max-gpus", "1",
                  "--max-num-batched-tokens", "512", "--workers", "1")
    assert res.code == 1, res.err
    out = " ".join(res.out.split())
    assert "(1 other was ruled out by --max-gpus);" in out
    assert "1 capacity search (1 probe), 0 fleet runs" in out


# -------------------- D5: kvplan's own limits were worded as vLLM's refusals
# `--gpu L40S -tp 16` on Llama-3.1-8B: a TP group of 16 spans two 8-GPU L40S nodes, which
# vLLM runs (TP over nodes with Ray) but kvplan cannot price (it knows no L40S inter-node
# link). The answer read "error: vLLM refuses every configuration in the space
# (--tensor-parallel-size 16 spans nodes of L40S, whose inter-node interconnect kvplan does
# not know)". A refusal that names kvplan's own limit is now said to be kvplan's.
def test_a_space_kvplan_cannot_model_is_not_called_vllms_refusal() -> None:
    res = run_cli("plan", "meta-llama/Llama-3.1-8B", "--dataset", "random", "--num-prompts",
                  "50", "--request-rate", "1", "--slo", "ttft:p99:5000", "--gpu", "L40S",
                  "-tp", "16")
    assert res.code == 2
    assert "vLLM refuses" not in res.err
    assert res.err.startswith("error: kvplan cannot model any configuration in the space "
                              "(--tensor-parallel-size 16 spans nodes of L40S")
    mixed = run_cli("plan", "meta-llama/Llama-3.1-8B", "--dataset", "random", "--num-prompts",
                    "50", "--request-rate", "1", "--slo", "ttft:p99:5000", "--gpu", "L40S",
                    "-tp", "3,16")
    assert mixed.code == 2
    assert mixed.err.startswith("error: vLLM refuses or kvplan cannot model every "
                                "configuration in the space (--tensor-parallel-size 3 must")
    vllm = run_cli("plan", "meta-llama/Llama-3.1-8B", "--dataset", "random", "--num-prompts",
                   "50", "--request-rate", "1", "--slo", "ttft:p99:5000", "--gpu", "L40S",
                   "-tp", "3")
    assert vllm.err.startswith("error: vLLM refuses every configuration in the space")


# -------------------- D6: "over 1 judged requests" and "(1 preemptions; ...)"
# --warmup-fraction 0.95 on 20 requests judges 1 request (the first 19 by arrival are the
# warm-up): the sampling-error line read "over 1 judged requests". The KV binding's "(1
# preemptions; ...)" counted the same way. Both now count in words.
def test_the_sampling_line_counts_one_judged_request_in_words() -> None:
    res = run_cli("plan", "meta-llama/Llama-3.1-8B", "--dataset", "random", "--num-prompts",
                  "20", "--request-rate", "5", "--slo", "ttft:p99:1000", "--gpu", "L40S",
                  "-tp", "1", "--warmup-fraction", "0.95", "--workers", "1")
    assert res.code == 0, res.err
    out = " ".join(res.out.split())
    assert "over 1 judged request):" in out and "1 judged requests" not in out


def test_the_kv_binding_counts_one_preemption_in_words() -> None:
    from kvplan.analysis.plan.records import CapacityInfo
    from kvplan.analysis.plan.why.explain import binding

    cap = CapacityInfo(rate_rps=1.0, bracket_rps=(1.0, 2.0), probes=3, binding_slo="p99_ttft_ms",
                       peak_kv_usage=0.5, preemptions=1, seqs_capped_share=0.0,
                       budget_full_share=0.0, prefill_token_share=0.9, prefill_kv_share=0.9)
    assert "(1 preemption; prefill claims 90 % of the blocks taken)" in binding(cap).why
