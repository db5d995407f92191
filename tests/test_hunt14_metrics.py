"""Hunt 14 (metrics): kvplan's serving metrics and workloads against `vllm bench serve` 0.11
(vllm/benchmarks/serve.py, vllm/benchmarks/datasets.py), with hand-checkable goldens."""

from __future__ import annotations


def _table_lines(*flags: str) -> set[str]:
    from tests.conftest import run_cli

    r = run_cli("simulate", "meta-llama/Llama-3.2-1B", "--num-prompts", "5",
                "--random-input-len", "100", "--random-output-len", "10", *flags)
    assert r.code == 0, r.err
    return {" ".join(x.replace("│", " ").split()) for x in r.out.splitlines()}


def test_the_table_prints_vllms_token_totals_and_peak_concurrency() -> None:
    # vllm bench serve prints "Total input tokens", "Total generated tokens" and "Peak
    # concurrent requests"; kvplan's table had none of them (the JSON had the keys). 5
    # prompts of 100 + 10 tokens: 500 in, 50 out. --max-concurrency 2 at rate inf: the run
    # lasts ~0.23 s, so vLLM's one-second buckets put all 5 requests in bucket 0: peak 5,
    # though at most 2 were ever in flight at once (vLLM 0.11's calculate_metrics).
    lines = _table_lines("--max-concurrency", "2")
    assert {"Total input tokens 500", "Total generated tokens 50",
            "Peak concurrent requests 5", "Maximum request concurrency 2"} <= lines
    assert not any(x.startswith("Request rate configured") for x in lines)  # rate inf


def test_the_table_prints_the_configured_rate_as_vllm_does() -> None:
    # vLLM prints "Request rate configured (RPS):" with 2 decimals when the rate is finite,
    # and "Maximum request concurrency" only when one is set.
    lines = _table_lines("--request-rate", "2")
    assert "Request rate configured (RPS) 2.00" in lines
    assert not any(x.startswith("Maximum request concurrency") for x in lines)
