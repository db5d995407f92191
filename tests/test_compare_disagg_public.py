"""benchmarks/compare_disagg_public.py and its held-out data file: every point parses with its
citation, none is fitted, and the script prices one point the way `kvplan latency` does."""

from __future__ import annotations

import importlib.util
import json
import re
import sys
from pathlib import Path
from types import ModuleType

import pytest

ROOT = Path(__file__).resolve().parent.parent
MEASUREMENTS = ROOT / "src" / "kvplan" / "data" / "measurements"


def _load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


cdp = _load("compare_disagg_public")
POINTS = cdp.load_points()


def test_every_point_parses_with_its_citation() -> None:
    sources = (MEASUREMENTS / "SOURCES.md").read_text()
    ids = [p["id"] for p in POINTS]
    assert len(ids) == len(set(ids)) == 16
    for p in POINTS:
        assert p["url"].startswith("https://"), p["id"]
        assert re.fullmatch(r"\d{4}-\d{2}-\d{2}", p["date"]), p["id"]
        assert f"`{p['source']}`" in sources, p["id"]
        for key in ("engine", "engine_version", "model", "gpu", "nodes", "gpus", "notes"):
            assert p[key], (p["id"], key)
        assert p["parallelism"]["disagg"], p["id"]
        assert p["metrics"] and all(v > 0 for v in p["metrics"].values()), p["id"]
        assert set(p["metrics"]) <= set(cdp.FAMILY) | {"input_throughput_tok_s_per_node"}


def test_lmsys_headline_figures_as_printed() -> None:
    """The LMSYS blog (2025-05-05): 52.3k input / 22.3k output tok/s per node, 22,282 decode."""
    by_id = {p["id"]: p for p in POINTS}
    assert by_id["lmsys-headline-12-nodes"]["metrics"] == {
        "input_throughput_tok_s_per_node": 52300, "output_throughput_tok_s_per_node": 22300}
    assert by_id["lmsys-decode-2k"]["metrics"] == {"output_throughput_tok_s_per_node": 22282}
    assert by_id["lmsys-prefill-4k"]["workload"]["tokens_per_gpu"] == 16384


def test_held_out_of_the_calibration_set() -> None:
    """The calibration set is public_calibration.json + latency_calibration.json (public_set)."""
    from kvplan.analysis.calibration.public_set import raw_points

    held = {p["id"] for p in POINTS}
    assert not held & {p["id"] for p in raw_points()}
    trtllm = json.loads((MEASUREMENTS / "latency_calibration.json").read_text())["points"]
    assert not held & {p["id"] for p in trtllm}
    assert "public_disagg_ep" not in (
        ROOT / "src" / "kvplan" / "analysis" / "calibration" / "public_set.py").read_text()
    assert json.loads((MEASUREMENTS / "public_disagg_ep.json").read_text())["description"]


def test_unexpressible_points_say_why() -> None:
    by_id = {p["id"]: p for p in POINTS}
    with pytest.raises(cdp.Unexpressible, match="speculative decoding is not modelled"):
        cdp.question(by_id["lmsys-decode-mtp-4k"])
    with pytest.raises(cdp.Unexpressible, match="production averages"):
        cdp.question(by_id["deepseek-day6-production"])


def test_decode_point_is_the_latency_commands_tpot(capsys: pytest.CaptureFixture[str]) -> None:
    """One point end to end: per node = 8 GPUs x 256 requests / kvplan latency's TPOT."""
    p = next(p for p in POINTS if p["id"] == "lmsys-decode-2k")
    q = cdp.question(p)
    assert "--all2all-backend" in q.argv and "-dp" in q.argv and "72" in q.argv
    tpot_s = cdp.run_kvplan(q)["tpot_s"]
    assert cdp.main(["--point", "lmsys-decode-2k"]) == 0
    out = capsys.readouterr().out
    predicted = 8 * 256 / tpot_s
    row = next(line for line in out.splitlines() if line.startswith("| lmsys-decode-2k"))
    assert f"| 2.228e+04 | {predicted:.4g} | {abs(predicted / 22282 - 1):.0%} |" in row
    assert "| decode tok/s per node (EP) | 1 |" in out


def test_aiconfigurator_question_is_the_same_phase() -> None:
    """The optional peer's inputs (no aiconfigurator needed): 4 prompts of 4,096 per rank."""
    aic = _load("compare_disagg_aic")
    by_id = {p["id"]: p for p in POINTS}
    metric, kw = aic._kwargs(by_id["lmsys-prefill-4k"])
    assert metric == "prefill_throughput_tok_s_per_node"
    assert kw == {"backend_name": "sglang", "tp_size": 1, "attention_dp_size": 32,
                  "moe_ep_size": 32, "moe_tp_size": 1, "mode": "static_ctx", "isl": 4096,
                  "osl": 1, "batch_size": 4}
    assert aic._per_node(metric, kw, type("R", (), {"ttft": 4000.0})()) == 8 * 16384 / 4.0
    with pytest.raises(ValueError, match="no request queue"):
        aic._kwargs(by_id["vllm-26072-1p1d"])
