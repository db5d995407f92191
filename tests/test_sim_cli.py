"""kvplan simulate from the command line: JSON keys, save-result round trip, plot, errors."""

from __future__ import annotations

import json

from tests.conftest import assert_one_line_error, run_cli

BASE = ("simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--num-prompts", "30",
        "--random-input-len", "256", "--random-output-len", "16", "--request-rate", "20")


def test_json_has_vllm_bench_keys(tmp_path):
    out = tmp_path / "r.json"
    r = run_cli(*BASE, "--goodput", "ttft:500", "--metric-percentiles", "50,99",
                "--percentile-metrics", "ttft,tpot,itl,e2el", "--save-result", str(out),
                "--save-detailed", "--json")
    assert r.code == 0, r.err
    doc = r.json()
    for key in ("completed", "duration", "request_throughput", "output_throughput",
                "total_token_throughput", "request_goodput", "mean_ttft_ms", "median_tpot_ms",
                "std_itl_ms", "p99_e2el_ms", "p50_ttft_ms", "preemptions",
                "prefix_cache_hit_rate", "peak_kv_blocks", "prefill_kv_share"):
        assert key in doc, key
    assert doc["completed"] == 30
    saved = json.loads(out.read_text())
    assert saved["completed"] == 30 and len(saved["ttfts"]) == 30 and len(saved["itls"]) == 30
    assert saved["kv_usage"]["used_blocks"]


def test_text_view_and_svg_plot(tmp_path):
    svg = tmp_path / "kv.svg"
    r = run_cli(*BASE, "--plot", str(svg))
    assert r.code == 0, r.err
    assert "TTFT" in r.out and "Peak KV blocks" in r.out
    assert svg.read_text().lstrip().startswith("<svg")


def test_user_errors_are_one_line(tmp_path):
    assert_one_line_error(run_cli(*BASE, "--goodput", "itl:5"))
    assert_one_line_error(run_cli(*BASE, "--plot", str(tmp_path / "kv.gif")))
    trace = tmp_path / "t.csv"
    trace.write_text("arrival,input,output\n0,10,5\n")
    assert_one_line_error(run_cli("simulate", "meta-llama/Llama-3.1-8B", "--trace", str(trace),
                                  "--trace-columns", "arrival=arrival,input=input,output=output",
                                  "--save-result", str(trace)))
    assert trace.read_text() == "arrival,input,output\n0,10,5\n"


def test_rejected_requests_are_explained():
    from tests.conftest import run_cli

    r = run_cli("simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--num-prompts", "2",
                "--random-input-len", "200000")
    assert r.code == 0, r.err
    assert "2 requests rejected" in r.out and "exceeds max_model_len 131072" in r.out
