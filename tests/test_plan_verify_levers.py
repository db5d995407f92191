"""The plan's lever rows and Verify line say what vLLM would run (each pinned by a value)."""

from __future__ import annotations

import numpy as np

from kvplan.analysis.plan.traffic import gap_shape
from kvplan.specs.requests.workload import WorkloadArgs, build_workload
from tests.conftest import run_cli

L8B = "meta-llama/Llama-3.1-8B"
BASE = ("plan", L8B, "--gpu", "H100", "-tp", "1", "--num-prompts", "200",
        "--slo", "ttft:p99:2000", "--json")


def _plan(*extra: str) -> dict:
    r = run_cli(*BASE, *extra)
    assert r.code == 0, r.err
    doc: dict = r.json()
    return doc


def test_halving_the_token_budget_brings_max_num_seqs_down_with_it() -> None:
    # The winner runs --max-num-batched-tokens 512 with the default max-num-seqs capped at
    # 512. Halving the budget alone (256 < 512) is a server vLLM refuses to start; the row
    # used to say so. vLLM needs max_num_seqs <= max_num_batched_tokens: both come down.
    doc = _plan("--max-num-batched-tokens", "512", "--request-rate", "5")
    assert "--max-num-seqs 512 --max-num-batched-tokens 512" in doc["summary"]["vllm_serve"]
    rows = {x["change"]: x for x in doc["levers"]}
    half = rows["--max-num-batched-tokens 256 --max-num-seqs 256"]
    assert half["verified"] and half["note"] == "" and half["binding_p99_ms"] is not None
    assert "--max-num-batched-tokens 256" not in rows  # no refused row beside it


def test_a_budget_above_max_num_seqs_keeps_the_single_change() -> None:
    doc = _plan("--max-num-batched-tokens", "2048", "--max-num-seqs", "256",
                "--request-rate", "5")
    changes = [x["change"] for x in doc["levers"]]
    assert "--max-num-batched-tokens 1024" in changes


def test_gap_shape_by_hand() -> None:
    assert gap_shape(np.array([0.0, 1.0, 2.0, 3.0])) == 1.0  # even gaps: no variance
    assert gap_shape(np.array([0.0, 1.0, 4.0])) == 4.0  # gaps 1, 3: mean 2, variance 1
    assert gap_shape(np.array([4.0, 0.0, 1.0])) == 4.0  # order does not matter


def test_verify_carries_the_given_burstiness() -> None:
    bursty = _plan("--request-rate", "5", "--burstiness", "0.5")["summary"]["vllm_bench_serve"]
    assert "--request-rate 5 --burstiness 0.5 " in bursty
    poisson = _plan("--request-rate", "5")["summary"]["vllm_bench_serve"]
    assert "--burstiness" not in poisson


def test_verify_for_a_timed_trace_names_its_shape_and_says_it_approximates() -> None:
    doc = _plan("--dataset", "azure-conv")
    w = build_workload(WorkloadArgs(dataset="azure-conv", num_prompts=200))
    shape = f"{gap_shape(w.arrival_s):.2g}"
    rate = f"{(len(w) - 1) / (w.arrival_s[-1] - w.arrival_s[0]):g}"  # 6 digits (hunt 13)
    bench = doc["summary"]["vllm_bench_serve"]
    assert f"--request-rate {rate} --burstiness {shape} " in bench
    assert any(x.startswith("Verify approximates azure-conv") and f"--burstiness {shape}" in x
               for x in doc["warnings"])
    random = _plan("--request-rate", "5")
    assert not any(x.startswith("Verify approximates") for x in random["warnings"])


def test_replicas_without_an_offered_load_is_refused() -> None:
    # capacity mode answers one replica's capacity: --replicas 2 was silently ignored (exit 0)
    from tests.conftest import assert_one_line_error

    r = run_cli("plan", L8B, "--gpu", "H100", "-tp", "1", "--num-prompts", "100",
                "--slo", "ttft:p99:2000", "--replicas", "2")
    assert_one_line_error(r)
    assert "--replicas 2" in r.err and "--request-rate" in r.err
    assert run_cli("plan", L8B, "--gpu", "H100", "-tp", "1", "--num-prompts", "100",
                   "--slo", "ttft:p99:2000", "--replicas", "2", "--request-rate", "4").code == 0


def test_advice_outside_the_space_says_when_it_is_not_enough() -> None:
    # TP 4 (outside -tp 1,2) lowers the zero-load p99 TTFT 51 -> 49 ms against a 30 ms limit:
    # the advice said "add it", as if it would meet the limit
    r = run_cli("plan", L8B, "--gpu", "H100,L40S", "-tp", "1,2", "--num-prompts", "200",
                "--random-input-len", "512", "--random-output-len", "128", "--request-rate",
                "10", "--slo", "ttft:p99:30", "tpot:p99:50", "--json")
    assert r.code == 1
    advice = r.json()["summary"]["advice"]
    assert "still misses the 30 ms limit" in advice
    assert "add it" not in advice and "alone it is not enough" in advice


def test_a_zero_load_ttft_miss_names_the_api_path() -> None:
    # the bundled profile's API path (api_request_s 42.71 ms) alone is over a 30 ms TTFT
    # limit: no GPU or TP can meet it, and the answer says which term that is
    r = run_cli("plan", L8B, "--gpu", "H100,L40S", "-tp", "1,2", "--num-prompts", "200",
                "--random-input-len", "512", "--random-output-len", "128", "--request-rate",
                "10", "--slo", "ttft:p99:30", "tpot:p99:50", "--json")
    doc = r.json()
    note = "the API server's path alone is 42.7 ms, a fitted profile term"
    assert note in doc["summary"]["why"]
    assert all(note in c["reason"] for c in doc["candidates"] if c["stage"] == "pruned_bound")

# The Verify line sends the plan's own requests where `vllm bench serve` can draw them:
# `--dataset sharegpt` is vLLM's ShareGPT file (kvplan bundles its seed-0 requests), a random
# workload keeps its range and seed. It sent random prompts of the median lengths for both
# (87 in / 156 out for 200 ShareGPT requests): another workload than the one verified.


def test_sharegpt_is_verified_on_vllms_sharegpt() -> None:
    doc = _plan("--dataset", "sharegpt", "--request-rate", "20")
    bench = doc["summary"]["vllm_bench_serve"]
    assert ("--dataset-name sharegpt --dataset-path ShareGPT_V3_unfiltered_cleaned_split.json "
            "--num-prompts 200 --request-rate 20 ") in bench
    assert "--random-input-len" not in bench
    assert not any(x.startswith("Verify approximates") for x in doc["warnings"])


def test_random_keeps_its_range_prefix_and_seed() -> None:
    bench = _plan("--random-range-ratio", "0.5", "--seed", "3",
                  "--request-rate", "5")["summary"]["vllm_bench_serve"]
    assert ("--dataset-name random --random-input-len 1024 --random-output-len 128 "
            "--random-range-ratio 0.5 --seed 3 --num-prompts 200") in bench
    plain = _plan("--request-rate", "5")["summary"]["vllm_bench_serve"]
    assert "--random-input-len 1024 --random-output-len 128 --num-prompts" in plain


def test_a_length_trace_is_approximated_and_says_so() -> None:
    doc = _plan("--dataset", "sharegpt-multiturn", "--request-rate", "5")
    assert "--dataset-name random --random-input-len" in doc["summary"]["vllm_bench_serve"]
    assert any(x.startswith("Verify approximates sharegpt-multiturn: vllm bench serve cannot "
                            "replay its lengths") for x in doc["warnings"]), doc["warnings"]
