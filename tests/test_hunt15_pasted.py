"""Fifteenth hunt round, a pasted `vllm serve` line (helper pasted): `kvplan simulate` and
`kvplan latency` read one as `kvplan capacity` does (they refused it), so the serve line
`kvplan plan` prints for its winner reproduces the plan's simulated figures."""

from __future__ import annotations

import json

from tests.conftest import assert_one_line_error, run_cli

M = "meta-llama/Llama-3.1-8B"
# Llama-3.1-8B at 10 req/s, 300 random prompts of 1024 + 128 tokens (test_hunt15_plan2's
# plan): the winner is one A100-80GB-SXM TP1 replica, chunk 512.
PLAN = ("plan", M, "--request-rate", "10", "--num-prompts", "300", "--slo", "ttft:p99:2000",
        "--slo", "tpot:p90:50", "--json")
WORKLOAD = ("--request-rate", "10", "--num-prompts", "300")


def test_the_plans_serve_line_pasted_into_simulate_reproduces_its_figures() -> None:
    """The plan's fleet is one replica given all 300 requests: simulate on the winner's GPU
    with its `vllm serve` line pasted must give the very figures the plan reports over all
    of them (p99 TTFT 1372.86 ms, p90 TPOT and output tok/s the plan's own), bit for bit."""
    plan = run_cli(*PLAN)
    assert plan.code == 0, plan.err
    doc = plan.json()
    best = next(c for c in doc["candidates"] if c["id"] == doc["summary"]["best"])
    line = doc["summary"]["vllm_serve"]
    assert line.startswith(f"vllm serve {M} ")
    sim = run_cli("simulate", "--gpu", best["gpu"], *WORKLOAD, "--metric-percentiles",
                  "50,90,99", "--json", "--", *line.split())
    assert sim.code == 0, sim.err
    got = sim.json()
    fleet = best["fleet"]
    assert got["p99_ttft_ms"] == fleet["achieved_all_requests"]["p99_ttft_ms"]
    assert got["p90_tpot_ms"] == fleet["achieved_all_requests"]["p90_tpot_ms"]
    assert got["output_throughput"] == fleet["output_tokens_per_s"]
    # the plan's text: "p99 TTFT 1.37 s" (1293.24 ms before hunt 16's step fixes)
    assert round(got["p99_ttft_ms"], 2) == 1372.86


PLAN_FLAGS = ("--tensor-parallel-size", "1", "--pipeline-parallel-size", "1",
              "--gpu-memory-utilization", "0.9", "--block-size", "16", "--kv-cache-dtype",
              "auto", "--dtype", "auto", "--max-model-len", "1152", "--max-num-seqs", "256",
              "--max-num-batched-tokens", "512", "--enable-prefix-caching",
              "--enable-chunked-prefill")


def test_simulate_pasted_line_and_flags_give_the_same_json() -> None:
    """Same engine, same workload: byte-identical stdout, on the fast path and typer's
    (a quoted line goes through typer: one word after --)."""
    own = run_cli("simulate", M, "--gpu", "A100-80GB-SXM", *WORKLOAD, *PLAN_FLAGS, "--json")
    pasted = run_cli("simulate", "--gpu", "A100-80GB-SXM", *WORKLOAD, "--json", "--", "vllm",
                     "serve", M, *PLAN_FLAGS, "--port", "8000")
    quoted = run_cli("simulate", M, "--gpu", "A100-80GB-SXM", *WORKLOAD, "--json", "--",
                     " ".join(("vllm", "serve", M, *PLAN_FLAGS)))
    assert own.code == pasted.code == quoted.code == 0, (own.err, pasted.err, quoted.err)
    assert own.out == pasted.out == quoted.out
    assert pasted.err.splitlines()[-1] == "note: ignored vLLM flags: --port"


def test_latency_pasted_line_and_flags_give_the_same_json() -> None:
    shape = ("--gpu", "H100", "--prompt", "1024", "--output", "128", "--batch", "8", "--json")
    own = run_cli("latency", M, *shape, "--max-num-batched-tokens", "512", "-tp", "2")
    pasted = run_cli("latency", *shape, "--", "vllm", "serve", M, "--max-num-batched-tokens",
                     "512", "-tp", "2")
    tp1 = run_cli("latency", M, *shape, "--max-num-batched-tokens", "512")
    assert own.code == pasted.code == tp1.code == 0, (own.err, pasted.err, tp1.err)
    assert own.out == pasted.out
    assert json.loads(own.out)["ttft_s"] < json.loads(tp1.out)["ttft_s"]  # -tp 2 was read


def test_a_setting_given_both_ways_is_refused_naming_both() -> None:
    for cmd, extra in (("simulate", ()), ("latency", ("--prompt", "8", "--output", "8")),
                       ("capacity", ())):
        res = run_cli(cmd, M, "--gpu", "H100", *extra, "--max-num-batched-tokens", "1k", "--",
                      "vllm", "serve", M, "--max-num-batched-tokens", "512")
        assert_one_line_error(res)
        assert res.err.strip() == (  # 1k = 1,000 tokens (human_readable_int)
            "error: --max-num-batched-tokens 1000 (before --) and the pasted line's "
            "--max-num-batched-tokens 512 both set max_num_batched_tokens: give it once, as an "
            "option or in the line")
    res = run_cli("simulate", M, "--no-enable-prefix-caching", "--", "vllm", "serve", M,
                  "--enable-prefix-caching")
    assert_one_line_error(res)
    assert "--no-enable-prefix-caching (before --) and the pasted line's " \
           "--enable-prefix-caching" in res.err


def test_pasted_line_refusals_and_warnings_are_capacitys() -> None:
    bad = run_cli("simulate", "--", "vllm", "serve", M, "--max-model-lenn", "4096")
    assert_one_line_error(bad)
    assert bad.err.startswith("error: vllm serve refuses --max-model-lenn: unrecognized "
                              "argument (vLLM 0.11.0)")
    other = run_cli("latency", "--gpu", "H100", "--prompt", "8", "--output", "8", "Qwen/Qwen3-8B",
                    "--", "vllm", "serve", M)
    assert_one_line_error(other)
    warned = run_cli("simulate", "--num-prompts", "20", "--json", "--", "vllm", "serve", M,
                     "--enforce-eager")
    assert warned.code == 0, warned.err
    assert "warning: --enforce-eager ignored: without CUDA graphs" in warned.err


def test_no_model_at_all_is_one_error_line() -> None:
    """`kvplan capacity` with neither MODEL nor a pasted line raised IndexError (traceback)."""
    for args in (("capacity",), ("capacity", "--gpu", "H100"), ("simulate", "--"),
                 ("latency", "--gpu", "H100", "--prompt", "8", "--output", "8")):
        res = run_cli(*args)
        assert_one_line_error(res)
        assert res.err.strip() == ("error: give a MODEL, or a vLLM command line after -- "
                                   "(vllm serve MODEL ...)")


def test_hybrid_manager_off_carried_into_simulate() -> None:
    """gemma-2-9b-it (sliding 4096 + full layers): --disable-hybrid-kv-cache-manager caches
    the sliding layers in full, so vLLM's KV blocks halve, as capacity says: 17,370 -> 8,685
    blocks (the two layer groups' pages merge into one group of twice the layers); the
    simulator's KV pool is then 8,685 blocks, its peak below that."""
    g = "google/gemma-2-9b-it"
    flags = ("--max-model-len", "8192", "--disable-hybrid-kv-cache-manager")
    cap = run_cli("capacity", "--json", "--", "vllm", "serve", g, *flags)
    assert cap.code == 0, cap.err
    assert cap.json()["num_blocks"] == 8685
    on = run_cli("simulate", "--num-prompts", "200", "--random-input-len", "6000",
                 "--random-output-len", "200", "--json", "--", "vllm", "serve", g, *flags[:2])
    off = run_cli("simulate", "--num-prompts", "200", "--random-input-len", "6000",
                  "--random-output-len", "200", "--json", "--", "vllm", "serve", g, *flags)
    assert on.code == off.code == 0, (on.err, off.err)
    assert on.json()["peak_kv_blocks"] > 8685 >= off.json()["peak_kv_blocks"]


def test_the_refusal_names_the_commands_that_read_a_line() -> None:
    res = run_cli("plan", M, "--", "vllm", "serve", M)
    assert_one_line_error(res)
    assert "(kvplan capacity, latency and simulate do)" in res.err
