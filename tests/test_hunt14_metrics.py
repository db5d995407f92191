"""Hunt 14 (metrics): kvplan's serving metrics and workloads against `vllm bench serve` 0.11
(vllm/benchmarks/serve.py, vllm/benchmarks/datasets.py), with hand-checkable goldens."""

from __future__ import annotations

import numpy as np
import pytest

from kvplan.specs.requests.workload import WorkloadArgs, build_workload


def _vllm_arrivals(n: int, rate: float, burstiness: float, seed: int) -> list[float]:
    """vLLM 0.11's get_request, step by step: main_async calls np.random.seed(--seed) (the
    random dataset draws its lengths from its own default_rng(seed), so the global stream's
    first draws are these), one np.random.gamma(shape=b, scale=1/(rate*b)) per request, a
    running sum, then every delay times (n / rate) / last."""
    legacy = np.random.RandomState(seed)  # == the global stream after np.random.seed(seed)
    delays = [float(legacy.gamma(shape=burstiness, scale=1.0 / (rate * burstiness)))
              for _ in range(n)]
    for i in range(1, n):
        delays[i] += delays[i - 1]
    factor = (n / rate) / delays[-1]
    return [d * factor for d in delays]


def test_seeded_arrivals_are_the_ones_vllm_bench_sends() -> None:
    # `vllm bench serve --request-rate 2 --num-prompts 5 --seed 0` sends at these times (s):
    # gamma(1, 0.5) draws of numpy's legacy stream seeded 0 are 0.3979, 0.6280, 0.4616,
    # 0.3936, 0.2755 (sum 2.1566), each running sum scaled by 2.5 / 2.1566 (0.3979 * 1.1592 =
    # 0.4613 first, 2.5 last). kvplan drew them
    # from default_rng(0) after the lengths instead: 0.748, 1.870, 1.892, 1.894, 2.5.
    w = build_workload(WorkloadArgs(num_prompts=5, random_input_len=100, random_output_len=10,
                                    request_rate=2.0, seed=0))
    assert w.arrival_s.tolist() == _vllm_arrivals(5, 2.0, 1.0, 0)
    assert w.arrival_s == pytest.approx([0.4612933, 1.1892378, 1.7243431, 2.1806092, 2.5],
                                        abs=1e-7)


def test_seeded_gamma_arrivals_and_lengths_both_follow_vllm() -> None:
    # burstiness 4 at 10 req/s, seed 7, 6 requests with range ratio 0.5: the lengths stay
    # RandomDataset's default_rng(7) integers (inputs, then outputs) and the arrivals are
    # get_request's legacy-stream gammas, each from its own generator as in vLLM.
    args = WorkloadArgs(num_prompts=6, random_input_len=100, random_output_len=20,
                        random_range_ratio=0.5, request_rate=10.0, burstiness=4.0, seed=7)
    w = build_workload(args)
    rng = np.random.default_rng(7)
    assert w.prompt_tokens.tolist() == rng.integers(50, 151, size=6).tolist()
    assert w.output_tokens.tolist() == rng.integers(10, 31, size=6).tolist()
    assert w.arrival_s.tolist() == _vllm_arrivals(6, 10.0, 4.0, 7)
    assert w.arrival_s[-1] == 0.6  # 6 / 10: the last request at n / rate


def test_trace_with_drawn_rate_uses_vllm_arrival_stream() -> None:
    # --dataset sharegpt --request-rate 4: vLLM's ShareGPT sampling shuffles with Python's
    # random, so numpy's global stream again gives get_request's first gammas.
    args = WorkloadArgs(dataset="sharegpt", num_prompts=4, request_rate=4.0, seed=3)
    assert build_workload(args).arrival_s.tolist() == _vllm_arrivals(4, 4.0, 1.0, 3)


def test_seed_beyond_numpys_legacy_range_is_one_error_line() -> None:
    # np.random.seed (vLLM's --seed) takes 0 .. 2**32 - 1; 2**32 used to pass the bound check
    # (2**63 - 1) and now reaches RandomState: refuse it as vLLM's range, not a traceback.
    from kvplan.errors import InputError

    with pytest.raises(InputError, match=r"--seed must be a whole number in \[0, 4,294,967,295\]"):
        build_workload(WorkloadArgs(num_prompts=2, request_rate=1.0, seed=2**32))
    assert len(build_workload(WorkloadArgs(num_prompts=2, request_rate=1.0, seed=2**32 - 1))) == 2


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
