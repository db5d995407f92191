"""Hunt 16 (bench16): kvplan's workloads and reported metrics against `vllm bench serve`
(vllm/benchmarks/serve.py, vllm/benchmarks/datasets.py), with hand-checkable goldens."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.conftest import assert_one_line_error, run_cli

SMALL = "meta-llama/Llama-3.2-1B"


def _table_rows(*flags: str) -> list[str]:
    """The metrics table's row names, top to bottom."""
    r = run_cli("simulate", SMALL, "--num-prompts", "5", "--random-input-len", "100",
                "--random-output-len", "10", *flags)
    assert r.code == 0, r.err
    rows = [x.split("│")[1].strip() for x in r.out.splitlines() if x.count("│") == 3]
    return [x for x in rows if x]


def test_goodput_row_sits_under_the_request_throughput_as_vllm_prints_it() -> None:
    # vllm/benchmarks/serve.py (benchmark(), the "Serving Benchmark Result" block) prints
    # "Request throughput (req/s):", then "Request goodput (req/s):" when --goodput is set,
    # then "Output token throughput (tok/s):". kvplan printed the goodput last, after "Total
    # token throughput", while docs/metrics.md says its rows are in vLLM's order.
    rows = _table_rows("--goodput", "ttft:1000")
    at = rows.index("Request throughput (req/s)")
    assert rows[at + 1:at + 3] == ["Request goodput (req/s)", "Output token throughput (tok/s)"]
    assert "Request goodput (req/s)" not in _table_rows()  # no --goodput: no row, as vLLM


def _far_trace(tmp_path: Path, second_s: str) -> Path:
    trace = tmp_path / "far.csv"
    trace.write_text(f"ts,p,o\n0,10,5\n{second_s},10,5\n")
    return trace


def test_arrivals_past_2_pow_52_us_are_refused_not_rounded(tmp_path: Path) -> None:
    # Two identical requests (10 prompt, 5 output tokens), each alone on the server, have the
    # same TTFT and ITLs. At 1e13 s float64 seconds step by 2^-9 s (1.95 ms): kvplan printed
    # the second one's TTFT 54.69 ms against the first's 54.15 and its four ITLs summing to
    # 7.81 ms (4 x 1.95) against 9.70: latencies rounded away, no word said. Now a workload
    # whose last arrival is past 2^52 us (4.5e9 s, where the step is 2^-20 s < 1 us) is one
    # error line; at 4e9 s both requests read the same to 2 us.
    r = run_cli("simulate", SMALL, "--trace", str(_far_trace(tmp_path, "1e13")),
                "--trace-columns", "arrival=ts,input=p,output=o")
    assert_one_line_error(r)
    assert "1e+13 s, past 2^52 us" in r.err and "arrival_unit=ms" in r.err
    out = tmp_path / "near.json"
    ok = run_cli("simulate", SMALL, "--trace", str(_far_trace(tmp_path, "4e9")),
                 "--trace-columns", "arrival=ts,input=p,output=o", "--save-result", str(out),
                 "--save-detailed", "--json")
    assert ok.code == 0, ok.err
    d = json.loads(out.read_text())
    assert d["ttfts"][1] == pytest.approx(d["ttfts"][0], abs=2e-6)
    assert sum(d["itls"][1]) == pytest.approx(sum(d["itls"][0]), abs=4e-6)
    # drawn arrivals too: 10,000 requests at 1e-6 req/s arrive until 1e10 s
    drawn = run_cli("simulate", SMALL, "--num-prompts", "10000", "--request-rate", "1e-6",
                    "--random-input-len", "10", "--random-output-len", "2")
    assert_one_line_error(drawn)
    assert "1e+10 s" in drawn.err and "4.5e+09 s" in drawn.err  # the span check's words


def test_percentile_metrics_keep_vllms_order_whatever_the_flag_says() -> None:
    # vllm/benchmarks/serve.py calls process_one_metric for "ttft", "tpot", "itl", then
    # "e2el", each only if it is in --percentile-metrics: the result file's keys and the
    # printed blocks follow that order. `--percentile-metrics e2el,ttft` wrote and printed
    # e2el's keys first here.
    r = run_cli("simulate", SMALL, "--num-prompts", "5", "--random-input-len", "100",
                "--random-output-len", "10", "--percentile-metrics", "e2el,ttft", "--json")
    assert r.code == 0, r.err
    keys = [k for k in r.json() if k.endswith("_ms") and k.startswith(("mean_", "p99_"))]
    assert keys == ["mean_ttft_ms", "p99_ttft_ms", "mean_e2el_ms", "p99_e2el_ms"]
    rows = _table_rows("--percentile-metrics", "e2el,ttft")
    assert [x for x in rows if x.startswith("P99")] == ["P99 TTFT", "P99 E2EL"]
