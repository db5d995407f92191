"""The Verify line sends the plan's own requests where `vllm bench serve` can draw them:
`--dataset sharegpt` is vLLM's ShareGPT file (kvplan bundles its seed-0 requests), a random
workload keeps its range and seed. It sent random prompts of the median lengths for
both (87 in / 156 out for 200 ShareGPT requests): another workload than the one verified."""

from __future__ import annotations

from tests.conftest import run_cli

BASE = ("plan", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "-tp", "1", "--num-prompts", "200",
        "--slo", "ttft:p99:2000", "--json")


def _plan(*extra: str) -> dict:
    r = run_cli(*BASE, *extra)
    assert r.code == 0, r.err
    doc: dict = r.json()
    return doc


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
