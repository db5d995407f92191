"""kvplan plan / kvplan prices from the command line: JSON keys, text, plot, one-line errors."""

from __future__ import annotations

import shlex
from pathlib import Path
from typing import Any

import pytest

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
    _bands_are_the_profile_groups(doc, "fleet")
    assert doc["inputs"]["slo"]["margin"] == "none" and s["without_margin"] is None
    assert (tmp_path / "p.html").read_text().lstrip().startswith("<!DOCTYPE html>")


def test_text_view() -> None:
    r = run_cli(*BASE, *SLO, "--goodput", "ttft:3000", "--goodput-target", "0.95")
    assert r.code == 0, r.err
    for text in ("winner", "Binding:", "Serve:  vllm serve", "Verify: vllm bench serve",
                 "One lever at a time", "enumerated", "Error band: held-out calibration",
                 "band (10-90%)", "at the band's upper edge", "band's lower edge"):
        assert text in r.out, text


def test_bad_input_is_one_line() -> None:
    for extra in (("--slo", "ttft:99:2000"), ("--slo", "ttft:p99:x"),
                  ("--goodput", "itl:50"), (*SLO, "--price", "L40S=cheap"),
                  (*SLO, "--gpu", "L40S,H900"), (*SLO, "--kv-cache-dtype", ""),
                  (*SLO, "-tp", "1,,2"), (*SLO, "--search", "random"),
                  (*SLO, "--executor", "dask"), (*SLO, "--replicas", "many"),
                  (*SLO, "--slo-margin", "edge")):
        assert_one_line_error(run_cli(*BASE, *extra))
    assert_one_line_error(run_cli(*BASE))  # no SLO at all


def test_nothing_feasible_exits_1_names_the_miss_and_the_what_if() -> None:
    # exit codes (docs/planner.md): 0 feasible, 1 nothing feasible, 2 bad input
    r = run_cli(*BASE, "--slo", "ttft:p99:1", "tpot:p99:1")
    assert r.code == 1 and not r.err, (r.code, r.err)
    text = " ".join(r.out.split())
    assert "nothing feasible:" in text and "misses p99_ttft_ms" in text
    # zero load already misses: the advice compares single changes at zero load (more
    # replicas cannot help there, so they are not offered)
    assert "of single changes to" in text and "at zero load" in text
    assert "twice the replicas" not in text
    j = run_cli(*BASE, "--slo", "ttft:p99:1", "tpot:p99:1", "--json")
    assert j.code == 1
    doc = j.json()
    s = doc["summary"]
    assert s["status"] == "infeasible" and s["why"] and s["advice"] in s["why"]
    assert 1 <= len(s["closest"]) <= 3 and s["closest"][0]["misses"] == "p99_ttft_ms"
    assert s["closest"][0]["margin"] < 0 and s["closest"][0]["id"] in s["why"]
    assert set(doc) >= {"inputs", "candidates", "search_report"}


def test_max_gpus_too_low() -> None:
    # 150 requests in 0.37 s: one H100 meets ttft:p99:2000 (p99 TTFT 1.47 s; hunt 13: the
    # steady-state ceiling had called it infeasible), not 500 ms: its 150 prefills need
    # more than one GPU inside their 0.37 + 0.5 s window
    r = run_cli(*BASE, "--slo", "ttft:p99:500", "tpot:p99:100", "--request-rate", "400",
                "--max-gpus", "1")
    assert r.code == 1
    assert "--max-gpus 1 is below any feasible fleet" in " ".join(r.out.split())


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


def test_lever_table_starts_with_the_verified_winner():
    # Every lever row is searched and verified as the winner was; the first row IS the
    # winner: its replicas, $/hour, per-replica load and binding term, deltas zero.
    r = run_cli(*BASE, *SLO, "--json")
    assert r.code == 0, r.err
    doc = r.json()
    levers, s = doc["levers"], doc["summary"]
    first = levers[0]
    best = next(c for c in doc["candidates"] if c["id"] == s["best"])
    assert first["change"] == "none (the winner)" and first["verified"]
    assert (first["replicas"], first["usd_per_hour"]) == (s["replicas"], s["usd_per_hour"])
    assert first["capacity_rps"] == s["capacity_rps_per_replica"] == pytest.approx(
        doc["inputs"]["target_rate_rps"] / s["replicas"])
    assert first["binding_p99_ms"] == best["fleet"]["achieved"][first["binding_key"]]
    assert first["delta_capacity_pct"] == 0.0 and first["delta_replicas"] == 0
    for row in levers[1:]:
        if row["usd_per_hour"] is not None and row["delta_usd_per_hour"] is not None:
            assert abs(row["usd_per_hour"] - row["delta_usd_per_hour"]
                       - first["usd_per_hour"]) < 1e-6


def test_lever_capacities_stop_at_the_same_ceiling_as_the_search():
    # Capacity mode (no rate) on a 60-request sample: the search stops at the optimistic
    # ceiling (bounds.py); the levers used 8x the winner's capacity as their ceiling and, on a
    # short sample whose burst always passes, credited the winner with 2.2x its own capacity
    # (31.85 vs 14.30 req/s). Both now stop at each configuration's own ceiling.
    r = run_cli("plan", "meta-llama/Llama-3.1-8B", "--gpu", "L40S,H100", "-tp", "1",
                "--num-prompts", "150", "--random-input-len", "500", "--random-output-len",
                "60", "--sample-requests", "60", "--workers", "1", *SLO, "--json")
    assert r.code == 0, r.err
    doc = r.json()
    won = doc["summary"]["capacity_rps_per_replica"]
    assert doc["levers"][0]["capacity_rps"] == won
    _bands_are_the_profile_groups(doc, "capacity")


def _profile_group(family: str, gpu: str, tp: int, metric: str) -> tuple[float, float]:
    """The stored 10th / 90th percentile ratios of the nearest group with >= 4 points, read
    from the bundled profile by the documented rule (family, GPU, TP), (family, GPU), family,
    all: the test follows a refit of default.json, yet fails if the plan scales wrongly."""
    import json
    from importlib import resources

    text = (resources.files("kvplan") / "data" / "profiles" / "default.json").read_text()
    groups = json.loads(text)["bands"]
    for fam, g, t in ((family, gpu, str(tp)), (family, gpu, "*"), (family, "*", "*"),
                      ("*", "*", "*")):
        for x in groups:
            if (x["family"], x["gpu"], x["tp"], x["metric"]) == (fam, g, t, metric) \
                    and x["n"] >= 4:
                return float(x["low_ratio"]), float(x["high_ratio"])
    raise AssertionError(f"no band group for {metric}")


def _bands_are_the_profile_groups(doc: dict[str, Any], source: str) -> None:
    """summary.*_band = the predicted value x the group's ratios (Llama-3.1-8B is dense)."""
    from kvplan.costs.step.uncertainty import band_for

    s = doc["summary"]
    best = next(c for c in doc["candidates"] if c["id"] == s["best"])
    gpu, tp = best["gpu"], best["tensor_parallel_size"]
    achieved = (best["fleet"]["achieved"] if source == "fleet"
                else best["capacity"]["achieved_at_capacity"])
    for key, metric in (("p99_ttft_ms", "ttft_s"), ("p99_tpot_ms", "tpot_s")):
        lo, hi = _profile_group("dense", gpu, tp, metric)
        assert s[key] == achieved[key]
        assert s[f"{key}_band"] == pytest.approx([lo * s[key], hi * s[key]])
        check = next(x for x in s["slo_at_band_edge"] if x["key"] == key)
        assert check["edge"] == pytest.approx(hi * s[key])
        assert check["met_at_edge"] == (hi * s[key] <= check["limit"])
        assert check["band_basis"] == band_for(1.0, metric, family="dense", gpu=gpu,
                                               tp=tp).basis  # each term names its own group
    lo, hi = _profile_group("dense", gpu, tp, "output_throughput_tok_s")
    rate = s["output_tokens_per_s"]
    assert s["output_tokens_per_s_band"] == pytest.approx([lo * rate, hi * rate])
    assert isinstance(s["band_basis"], str) and isinstance(s["calibration_notes"], list)
    assert best["bands"]["p99_tpot_ms_band"] == s["p99_tpot_ms_band"]
    first = doc["levers"][0]
    binds = first["binding_key"]
    if binds is None:  # the search never failed a probe: no binding term, no band
        assert first["binding_p99_ms"] is None and first["binding_p99_ms_band"] is None
        return
    lo, hi = _profile_group("dense", gpu, tp, {"ttft": "ttft_s", "tpot": "tpot_s"}[
        binds.split("_")[1]])
    assert first["binding_p99_ms_band"] == pytest.approx(
        [lo * first["binding_p99_ms"], hi * first["binding_p99_ms"]])
