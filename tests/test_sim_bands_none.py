"""A simulation in which no request completes has no value for an error band to bound: it
printed "band (10-90%...): TTFT 0.0-0.0 us; TPOT 0.0-0.0 us; output throughput 0.00-0.00"
and wrote [0, 0] bands into its JSON."""

from __future__ import annotations

from tests.conftest import run_cli

ALL_REJECTED = ("simulate", "meta-llama/Llama-3.1-8B", "--gpu", "L4", "--max-model-len", "1024",
                "--random-input-len", "2000", "--num-prompts", "5")


def test_no_band_when_nothing_completed() -> None:
    r = run_cli(*ALL_REJECTED)
    assert r.code == 0, r.err
    assert "5 requests rejected" in " ".join(r.out.split())
    assert "band (10-90%" not in r.out and "0.0-0.0 us" not in r.out
    doc = run_cli(*ALL_REJECTED, "--json").json()
    assert doc["completed"] == 0
    bands = {k: v for k, v in doc.items() if k.endswith("_band")}
    assert bands and all(v is None for v in bands.values())


def test_a_completed_run_keeps_its_bands() -> None:
    doc = run_cli("simulate", "meta-llama/Llama-3.1-8B", "--gpu", "H100", "--num-prompts", "5",
                  "--json").json()
    low, high = doc["mean_ttft_ms_band"]
    assert 0 < low <= doc["mean_ttft_ms"] < high
