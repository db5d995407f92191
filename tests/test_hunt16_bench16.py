"""Hunt 16 (bench16): kvplan's workloads and reported metrics against `vllm bench serve`
(vllm/benchmarks/serve.py, vllm/benchmarks/datasets.py), with hand-checkable goldens."""

from __future__ import annotations

from tests.conftest import run_cli

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
