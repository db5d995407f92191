"""Hunt 18 (planner, helper plan18): kvplan plan's figures and words against its own numbers."""

from __future__ import annotations

from tests.conftest import run_cli

AZURE = ("plan", "meta-llama/Llama-3.1-8B", "--dataset", "azure-conv", "--num-prompts", "2000",
         "--slo", "ttft:p99:2000", "tpot:p99:60", "--gpu", "L40S", "-tp", "1",
         "--max-num-batched-tokens", "2048", "--workers", "1")


# -------------------- D1: the binding term was the one the fleet with one replica fewer
# misses by the most, and a queue makes TTFT miss by the most whichever bound broke first.
# 2 L40S serve 2000 azure-conv requests: p99 TTFT margin 76 %, p99 TPOT margin 22 % (the
# term nearest its limit); the capacity search's first failing share misses TPOT (-84 %)
# while TTFT still passes (+51 %); 1 replica (twice each one's load) misses both, TTFT by
# 255 %, TPOT by 92 %. The plan said "p99_ttft_ms binds first: prompts wait for prefill
# compute" (binding prefill_compute) and the levers table showed p99 TTFT. Of the terms the
# one-fewer fleet misses, the one nearest its limit in the verified fleet breaks first:
# min(margin) over {ttft: 0.763, tpot: 0.216} -> p99_tpot_ms, decode_bandwidth.
def test_binding_is_the_missed_term_nearest_its_limit() -> None:
    res = run_cli(*AZURE, "--json")
    assert res.code == 0, res.err
    doc = res.json()
    s = doc["summary"]
    w = next(c for c in doc["candidates"] if c["id"] == s["best"])
    m, fewer = w["fleet"]["margins"], w["fleet_one_fewer"]["margins"]
    assert w["replicas"] == 2
    assert m["p99_tpot_ms"] < m["p99_ttft_ms"]
    assert fewer["p99_tpot_ms"] < 0 and fewer["p99_ttft_ms"] < 0
    assert s["binding"] == "decode_bandwidth"
    assert s["one_line_why"] == "p99_tpot_ms binds first: decode steps read weights and KV"
    assert doc["levers"][0]["binding_key"] == "p99_tpot_ms"


def test_binding_key_rule_by_hand() -> None:
    from kvplan.analysis.plan.records import FleetInfo
    from kvplan.analysis.plan.why.explain import breaking_term

    def fleet(ttft: float, tpot: float) -> FleetInfo:
        margins = (("p99_ttft_ms", ttft), ("p99_tpot_ms", tpot))
        return FleetInfo(replicas=1, ok=min(ttft, tpot) >= 0, achieved=(), margins=margins,
                         output_tokens_per_s=0.0, peak_kv_usage=0.0, preemptions=0,
                         requests_per_replica=())

    # both missed with one fewer: the one nearest its limit now (tpot 0.2 < ttft 0.7)
    assert breaking_term(fleet(0.7, 0.2), fleet(-2.5, -0.9)) == "p99_tpot_ms"
    # only ttft missed with one fewer: ttft, however far tpot is from its limit now
    assert breaking_term(fleet(0.7, 0.2), fleet(-2.5, 0.1)) == "p99_ttft_ms"
    # no verified fleet to compare: the most missed, as before
    assert breaking_term(None, fleet(-2.5, -0.9)) == "p99_ttft_ms"
    # the one-fewer fleet passes (or there is none): no term
    assert breaking_term(fleet(0.7, 0.2), fleet(0.1, 0.1)) is None
    assert breaking_term(fleet(0.7, 0.2), None) is None


# -------------------- D2: --goodput-target without --goodput was silently ignored
# `kvplan plan ... --slo ttft:p99:2000 --goodput-target 0.9` planned for the p99 alone and
# never said the 90 % target judged nothing (no goodput bound to count requests against).
def test_a_goodput_target_without_goodput_bounds_is_refused() -> None:
    from tests.conftest import assert_one_line_error

    res = run_cli("plan", "meta-llama/Llama-3.1-8B", "--gpu", "L40S", "-tp", "1",
                  "--num-prompts", "50", "--request-rate", "2", "--slo", "ttft:p99:2000",
                  "--goodput-target", "0.9")
    assert_one_line_error(res)
    assert "--goodput-target needs --goodput" in res.err


# -------------------- D3: a goodput binding quoted the misses of a fleet it did not name
# 300 requests at 10 req/s, --goodput ttft:1000 tpot:40, A100 TP1 chunk 512: 2 replicas,
# goodput 100 % of the 270 judged; 1 replica: goodput 13.3 % (36 of 270), its tpot bound
# missed by 80 %. The Binding line read "goodput_share (its tpot bound, missed by 80 % of
# judged requests) binds first" beside "goodput 100.0 %": it now says with how many
# replicas the 80 % were counted.
def test_goodput_binding_says_where_its_misses_were_counted() -> None:
    res = run_cli("plan", "meta-llama/Llama-3.1-8B", "--request-rate", "10", "--num-prompts",
                  "300", "--goodput", "ttft:1000", "tpot:40", "--gpu", "A100-80GB", "-tp", "1",
                  "--max-num-batched-tokens", "512", "--workers", "1", "--json")
    assert res.code == 0, res.err
    doc = res.json()
    s = doc["summary"]
    w = next(c for c in doc["candidates"] if c["id"] == s["best"])
    assert (w["replicas"], w["fleet"]["achieved"]["goodput_share"]) == (2, 1.0)
    assert w["fleet_one_fewer"]["achieved"]["goodput_share"] == 36 / 270
    assert s["one_line_why"] == ("goodput_share (its tpot bound, missed by 80 % of judged "
                                 "requests with 1 replica) binds first: decode steps read "
                                 "weights and KV")


def test_capacity_probe_misses_name_their_rate() -> None:
    from kvplan.analysis.plan.records import CapacityInfo
    from kvplan.analysis.plan.why.explain import binding

    cap = CapacityInfo(rate_rps=1.0, bracket_rps=(1.0, 2.0), probes=3,
                       binding_slo="goodput_share", goodput_misses=(("tpot", 0.3),),
                       peak_kv_usage=0.5, budget_full_share=0.1)
    assert binding(cap).why == ("goodput_share (its tpot bound, missed by 30 % of judged "
                                "requests on one replica at 2 req/s) binds first: decode "
                                "steps read weights and KV")


# -------------------- D4: "the KV pool is 100 % full at capacity" quoted the fleet one step
# too small. 400 requests of 8000 + 400 tokens at 6 req/s, ttft:p99:3000 tpot:p99:25, H100
# TP1 chunk 2048: 3 replicas verified, peak KV 51 %, 0 preemptions; the replica search's
# failing share (2 replicas) peaks at 100 % with 119 preemptions. Those counters explain the
# fleet size (kv_memory is right), but they are not the answer's: the line now says
# "with 2 replicas" where it said "at capacity" (capacity mode's counters are at capacity).
def test_kv_binding_names_the_fleet_its_counters_come_from() -> None:
    res = run_cli("plan", "meta-llama/Llama-3.1-8B", "--random-input-len", "8000",
                  "--random-output-len", "400", "--request-rate", "6", "--num-prompts", "400",
                  "--slo", "ttft:p99:3000", "tpot:p99:25", "--gpu", "H100", "-tp", "1",
                  "--max-num-batched-tokens", "2048", "--workers", "1", "--json")
    assert res.code == 0, res.err
    doc = res.json()
    s = doc["summary"]
    w = next(c for c in doc["candidates"] if c["id"] == s["best"])
    assert (w["replicas"], w["fleet"]["preemptions"]) == (3, 0)
    assert w["fleet"]["peak_kv_usage"] < 0.95
    assert (w["capacity"]["replicas_failing"], w["capacity"]["preemptions"]) == (2, 119)
    assert s["binding"] == "kv_memory"
    assert s["one_line_why"] == ("the KV pool is 100 % full with 2 replicas (119 preemptions; "
                                 "prefill claims 95 % of the blocks taken)")


# -------------------- D5: expert parallelism on one GPU was searched as its own candidate
# vLLM's FusedMoEParallelConfig.make: use_ep = dp_size * tp_size > 1 and
# enable_expert_parallel, so `-tp 1 --enable-expert-parallel` at DP 1 runs exactly as
# without it. `-tp 1 -dp 1 --enable-expert-parallel on,off` gave two verified candidates with
# the same figures (690,480 KV tokens each on an H200); the on one won the tie, was labelled
# "TP1 EP" and printed --enable-expert-parallel. EP now counts only where dp x tp > 1: the
# second is a duplicate and the serve line has no inert flag.
def test_expert_parallel_on_one_gpu_is_the_same_engine() -> None:
    res = run_cli("plan", "Qwen/Qwen3-30B-A3B", "--gpu", "H200", "-tp", "1", "-dp", "1",
                  "--enable-expert-parallel", "on,off", "--max-num-batched-tokens", "2048",
                  "--num-prompts", "60", "--request-rate", "2", "--slo", "ttft:p99:2000",
                  "--sample-requests", "60", "--workers", "1", "--json")
    assert res.code == 0, res.err
    doc = res.json()
    stages = [(c["id"], c["stage"], c["enable_expert_parallel"]) for c in doc["candidates"]]
    assert stages == [("c0000", "verified", False), ("c0001", "duplicate", False)]
    assert "--enable-expert-parallel" not in doc["summary"]["vllm_serve"]
