"""Hunt 16 (planner): wrong numbers in kvplan plan's cost, bounds and words."""

from __future__ import annotations

from functools import cache

import pytest

from tests.conftest import CliResult, run_cli

TARGET = ("plan", "meta-llama/Llama-3.1-8B", "--request-rate", "10", "--num-prompts", "300",
          "--slo", "ttft:p99:2000", "--slo", "tpot:p90:50")


@cache
def _target_json() -> CliResult:
    res = run_cli(*TARGET, "--json")
    assert res.code == 0, res.err
    return res


# -------------------- D1: target mode priced $/M out tok at the run's tokens / duration
# The 300 requests arrive over 30.0 - 0.078 s (target rate 299 / 29.92 = 9.9928 req/s), 128
# output tokens each. Served for good at that load the fleet turns out 9.9928 x 128 =
# 1279.07 tok/s; the run's 38,400 tokens / 32.32 s = 1188.19 tok/s also count the drain
# after the last arrival (a 10,000-request trace of the same process would read ~1279), so
# $/M came out 7.6 % high: 1.79 $/h / (1188.19 x 3600) x 1e6 = 0.4185 -> / (1279.07 x 3600)
# x 1e6 = 0.3887 (capacity mode already priced a sustained rate, capacity x mean output).
def test_target_mode_prices_the_steady_output_rate() -> None:
    doc = _target_json().json()
    s = doc["summary"]
    rate = doc["inputs"]["target_rate_rps"]
    assert rate == pytest.approx(9.9928, abs=1e-4)
    assert s["usd_per_hour"] == pytest.approx(1.79)
    assert s["usd_per_million_output_tokens"] == pytest.approx(
        1.79 / (rate * 128 * 3600) * 1e6)
    assert round(s["usd_per_million_output_tokens"], 4) == 0.3887
    assert s["priced_output_tokens_per_s"] == pytest.approx(rate * 128)
    assert s["priced_output_tokens_per_s"] == pytest.approx(1279.07, abs=0.01)
    # the run's own figure is still reported, as vllm bench serve prints it
    # (1188.19 before the ops16 step fixes: the lm_head line and eager all-reduces)
    assert s["output_tokens_per_s"] == pytest.approx(1186.89, abs=0.01)
    assert s["priced_output_tokens_per_s_definition"].startswith("the target load held for")


def test_target_mode_text_names_the_rate_it_prices_at() -> None:
    res = run_cli(*TARGET)
    assert res.code == 0, res.err
    out = " ".join(res.out.split())
    assert ("= output tokens / run duration, as vllm bench serve's Output token throughput; "
            "$/M out tok is priced at 1279 tok/s, the target load held for good: target rate "
            "x output tokens per request, with no run start or drain after the last arrival"
            ) in out


# -------------------- D2: the bounds counted a trailing partial hash block as cached
# Mooncake lists a hash for every 512 tokens of the prompt, the last one partial. The
# simulator shares only whole hash blocks (sim.state.trace_keys: the partial block's extent
# is unknown), so a 1,000-token prompt with hashes [7, 8] computes 1000 - 512 = 488 tokens
# even after an identical request cached its blocks. The bounds took 2 x 512 off: max(1,
# 1000 - 1024) = 1 token (on mooncake-conversation's first 2,000 requests, 99.85 % of which
# end inside a hash block: mean uncached prompt 1.0 token instead of 265).
# Hunt 17 (test_hunt17_work17 D1): the simulator now shares the partial block's leading
# tokens too (an id names its block's tokens, the last one truncated), so the bound covers
# min(ids x 512, prompt) tokens: still never more than the simulator shares.
def test_uncached_prompt_keeps_the_partial_hash_block() -> None:
    from kvplan.analysis.plan.bounds import uncached_prompts
    from kvplan.sim.testing import workload

    w = workload([0.0, 10.0, 20.0], [1000, 1000, 1024], [4, 4, 4],
                 hashes=[[7, 8], [7, 8], [7, 8]])
    # hunt 17: the ids cover each prompt, the partial block [7, 8] of 1000 tokens too (an
    # equal chain shares its leading tokens, sim.state.trace_keys): max(1, 1000 - 1000) = 1
    assert uncached_prompts(w, True).tolist() == [1, 1, 1]  # type: ignore[arg-type]
    assert uncached_prompts(w, False).tolist() == [1000, 1000, 1024]  # type: ignore[arg-type]


def test_the_simulator_computes_the_partial_block_the_bound_now_counts() -> None:
    from kvplan.analysis.plan.fleet import Replica
    from kvplan.sim.testing import workload
    from kvplan.specs.catalog import load_model
    from kvplan.specs.deployment import Deployment
    from kvplan.specs.hardware import load_gpu
    from kvplan.specs.serving import EngineConfig

    rep = Replica(Deployment(model=load_model("meta-llama/Llama-3.1-8B"), gpu=load_gpu("H100"),
                             engine=EngineConfig(max_model_len=4096)))
    w = workload([0.0, 10.0], [1000, 1000], [4, 4], hashes=[[7, 8], [7, 8]])
    r = rep.simulate(w)  # type: ignore[arg-type]
    # hunt 17: the second, identical request hits every full 16-token block of the first but
    # the last token's (vLLM: at most prompt - 1 tokens): (1000 - 1) // 16 * 16 = 992
    assert r.prefix_lookup_hits == 992


# -------------------- D3: a goodput binding was always explained as decode bandwidth
# binding() read "ttft" in the binding term's name; "goodput_share" never holds it, so
# `--goodput ttft:300` alone (no decode bound judged at all) read "decode_bandwidth -
# goodput_share binds first: decode steps read weights and KV". The goodput bound the most
# judged requests miss now picks the rule (its TTFT: prefill compute / chunk budget).
def test_goodput_binding_names_the_bound_it_misses() -> None:
    from kvplan.analysis.plan.records import CapacityInfo
    from kvplan.analysis.plan.why.explain import binding

    def cap(misses: tuple[tuple[str, float], ...]) -> CapacityInfo:
        return CapacityInfo(rate_rps=1.0, bracket_rps=(1.0, 2.0), probes=3,
                            binding_slo="goodput_share", goodput_misses=misses,
                            peak_kv_usage=0.5, budget_full_share=0.1)

    b = binding(cap((("ttft", 0.30), ("tpot", 0.05))))
    assert b.primary == "prefill_compute"
    assert b.why == ("goodput_share (its ttft bound, missed by 30 % of judged requests on "
                     "one replica at 2 req/s) binds first: prompts wait for prefill compute")
    assert binding(cap((("ttft", 0.05), ("tpot", 0.30)))).primary == "decode_bandwidth"


def test_a_ttft_only_goodput_plan_binds_on_prefill() -> None:
    res = run_cli("plan", "meta-llama/Llama-3.1-8B", "--gpu", "L40S", "-tp", "1",
                  "--max-num-batched-tokens", "2048", "--num-prompts", "300",
                  "--request-rate", "12", "--goodput", "ttft:300", "--json")
    assert res.code == 0, res.err
    s = res.json()["summary"]
    assert s["binding"] == "prefill_compute"
    assert s["one_line_why"].startswith("goodput_share (its ttft bound, missed by ")


# -------------------- D4: capacity mode said "$/M out tok is priced at this rate" (one
# replica's sustained 5976 tok/s) beside the rented unit's $55.04/h, though $/M was priced
# at the 8 replicas the unit holds: 55.04 / (5976 x 3600) x 1e6 = $2.558/M read from the
# printed figures, where the answer is 55.04 / (8 x 5976.04 x 3600) x 1e6 = $0.3198/M.
def test_capacity_mode_names_the_units_rate_it_prices_at() -> None:
    args = ("plan", "meta-llama/Llama-3.1-8B", "--gpu", "h100", "-tp", "1", "--provider",
            "aws", "--num-prompts", "200", "--slo", "ttft:p99:2000", "tpot:p90:50",
            "--workers", "1")
    s = run_cli(*args, "--json").json()["summary"]
    assert (s["replicas"], s["usd_per_hour"]) == (8, 55.04)
    assert s["priced_output_tokens_per_s"] == pytest.approx(8 * s["output_tokens_per_s"])
    assert s["usd_per_million_output_tokens"] == pytest.approx(
        55.04 / (s["priced_output_tokens_per_s"] * 3600) * 1e6)
    assert round(s["usd_per_million_output_tokens"], 4) == 0.3198
    out = " ".join(run_cli(*args).out.split())
    rate = f"{s['priced_output_tokens_per_s']:.0f}"  # 8 x ~5976 (47804 since ops16's lm_head)
    assert (f"$/M out tok is priced at {rate} tok/s, the 8 replicas one rented unit holds, each "
            "at its sustained rate") in out
    assert "priced at this rate" not in out


# -------------------- D5: an E2EL binding was always explained as decode bandwidth
# 4,000-token prompts with 4-token outputs under e2el:p99:1500 on one L40S: 99.9 % of the
# computed tokens are prompt tokens and TTFT is 67 % of the judged requests' E2EL, yet the
# answer read "decode_bandwidth - p99_e2el_ms binds first: decode steps read weights and
# KV". An E2EL term whose time is at least half TTFT now binds on the prefill side.
def test_e2el_binding_follows_where_its_time_goes() -> None:
    from kvplan.analysis.plan.records import CapacityInfo
    from kvplan.analysis.plan.why.explain import binding

    def cap(share: float) -> CapacityInfo:
        return CapacityInfo(rate_rps=1.0, bracket_rps=(1.0, 2.0), probes=3,
                            binding_slo="p99_e2el_ms", e2el_ttft_share=share,
                            peak_kv_usage=0.1, budget_full_share=0.3)

    b = binding(cap(0.67))
    assert b.primary == "prefill_compute"
    assert b.why == ("p99_e2el_ms (TTFT 67 % of it) binds first: prompts wait for prefill "
                     "compute")
    assert binding(cap(0.01)).primary == "decode_bandwidth"


def test_a_prefill_heavy_e2el_plan_binds_on_prefill() -> None:
    res = run_cli("plan", "meta-llama/Llama-3.1-8B", "--gpu", "L40S", "-tp", "1",
                  "--max-num-batched-tokens", "2048", "--num-prompts", "300",
                  "--request-rate", "4", "--random-input-len", "4000",
                  "--random-output-len", "4", "--slo", "e2el:p99:1500", "--json")
    assert res.code == 0, res.err
    d = res.json()
    s = d["summary"]
    assert s["binding"] == "prefill_compute"
    w = next(c for c in d["candidates"] if c["id"] == s["best"])
    assert w["binding"]["evidence"]["e2el_ttft_share"] > 0.5
    assert w["binding"]["evidence"]["prefill_token_share"] > 0.99
