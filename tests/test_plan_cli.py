"""kvplan plan / kvplan prices from the command line: JSON keys, text, plot, one-line errors."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

from tests.conftest import assert_one_line_error, run_cli

BASE = ("plan", "meta-llama/Llama-3.1-8B", "--gpu", "L40S,H100", "-tp", "1",
        "--num-prompts", "150", "--random-input-len", "500", "--random-output-len", "60",
        "--request-rate", "4", "--sample-requests", "60", "--workers", "1")
SLO = ("--slo", "ttft:p99:2000", "tpot:p99:100")


def test_json_keys_and_winner(tmp_path: Path) -> None:
    r = run_cli(*BASE, *SLO, "--json", "--plot", str(tmp_path / "p.html"))
    assert r.code == 0, r.err
    doc = r.json()
    assert doc["schema"] == "kvplan.plan/v1"
    assert set(doc) == {"schema", "kvplan_version", "seed", "inputs", "summary", "candidates",
                        "levers", "search_report", "warnings"}
    s = doc["summary"]
    assert s["status"] == "feasible" and s["vllm_serve"].startswith("vllm serve ")
    assert "--goodput ttft:2000 tpot:100" in s["vllm_bench_serve"]
    assert doc["inputs"]["slo"]["bounds"][0]["key"] == "p99_ttft_ms"
    assert {c["stage"] for c in doc["candidates"]} <= {
        "invalid", "duplicate", "pruned_memory", "pruned_bound", "pruned_cost", "infeasible",
        "simulated",
        "verified"}
    assert len(doc["levers"]) >= 4
    _serve_line_reads_back(doc)
    assert (tmp_path / "p.html").read_text().lstrip().startswith("<!DOCTYPE html>")


def test_text_view() -> None:
    r = run_cli(*BASE, *SLO, "--goodput", "ttft:3000", "--goodput-target", "0.95")
    assert r.code == 0, r.err
    for text in ("winner", "Binding:", "Serve:  vllm serve", "Verify: vllm bench serve",
                 "One lever at a time", "enumerated"):
        assert text in r.out, text


def test_bad_input_is_one_line() -> None:
    for extra in (("--slo", "ttft:99:2000"), ("--slo", "ttft:p99:x"),
                  ("--goodput", "itl:50"), (*SLO, "--price", "L40S=cheap"),
                  (*SLO, "--gpu", "L40S,H900"), (*SLO, "--kv-cache-dtype", ""),
                  (*SLO, "-tp", "1,,2"), (*SLO, "--search", "random"),
                  (*SLO, "--executor", "dask"), (*SLO, "--replicas", "many")):
        assert_one_line_error(run_cli(*BASE, *extra))
    assert_one_line_error(run_cli(*BASE))  # no SLO at all


def test_nothing_feasible_names_the_miss_and_the_lever() -> None:
    r = run_cli(*BASE, "--slo", "ttft:p99:1", "tpot:p99:1")
    assert_one_line_error(r)
    assert "misses" in r.err and "than the space holds" in r.err
    assert "try --tensor-parallel-size 2" in r.err and "H200-SXM-141GB" in r.err


def test_max_gpus_too_low() -> None:
    r = run_cli(*BASE, *SLO, "--request-rate", "400", "--max-gpus", "1")
    assert_one_line_error(r)
    assert "--max-gpus 1 is below any feasible fleet" in r.err


def test_prices_command() -> None:
    r = run_cli("prices", "--provider", "lambda", "--json")
    assert r.code == 0, r.err
    rows = r.json()["rows"]
    assert {x["provider"] for x in rows} == {"lambda"}
    assert all(x["source_url"] and x["observed_on"] for x in rows)
    assert_one_line_error(run_cli("prices", "--provider", "nobody"))
    assert_one_line_error(run_cli("prices", "--price", "H100"))


def _serve_line_reads_back(doc: dict[str, Any]) -> None:
    """The winner's `vllm serve` line, pasted into `kvplan capacity`, gives its capacity plan."""
    best = next(c for c in doc["candidates"] if c["id"] == doc["summary"]["best"])
    r = run_cli("capacity", "--gpu", best["gpu"], "--json", "--",
                *shlex.split(doc["summary"]["vllm_serve"]))
    assert r.code == 0, r.err
    cap = r.json()
    assert cap["kv_cache_tokens"] == best["kv_cache_tokens"]
    for key in ("max_model_len", "max_num_seqs", "max_num_batched_tokens", "block_size",
                "tensor_parallel_size", "pipeline_parallel_size"):
        assert cap[key] == best[key], key
    assert cap["ignored_vllm_flags"] == []
