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


def _verify_line(*flags: str) -> str:
    from tests.conftest import run_cli

    r = run_cli("plan", "meta-llama/Llama-3.2-1B", "--gpu", "H100", "--num-prompts", "50",
                "--random-input-len", "200", "--random-output-len", "20", "--slo",
                "ttft:p99:2000", "--price", "H100=2", *flags, "--json")
    assert r.code == 0, r.err
    line: str = r.json()["summary"]["vllm_bench_serve"]
    return line + " "


def test_plan_verify_repeats_the_drawn_flags_digit_for_digit() -> None:
    # The plan simulated --burstiness 0.125 (gamma shape 1/8, CV sqrt(8) = 2.83) and range
    # ratio 0.3333333, but its `vllm bench serve` line said --burstiness 0.12 (2 significant
    # digits, CV 2.89: other gaps) and --random-range-ratio 0.333333; and %g turned --seed
    # 1234567 into "1.23457e+06", which vLLM's int flag refuses. Now the drawn values as given.
    line = _verify_line("--request-rate", "5", "--burstiness", "0.125", "--random-range-ratio",
                        "0.3333333", "--seed", "1234567")
    assert "--burstiness 0.125 " in line
    assert "--random-range-ratio 0.3333333 " in line
    assert "--seed 1234567 " in line
    assert "--request-rate 5 " in line


def test_plan_verify_keeps_a_given_burstiness_near_one() -> None:
    # --burstiness 1.04 is not a Poisson process; ".2g" printed it "1" and dropped the flag.
    assert "--burstiness 1.04 " in _verify_line("--request-rate", "5", "--burstiness", "1.04")
