"""kvplan calibrate on serving results through the simulator: the round trip (simulate with
known factors -> --save-result JSON -> calibrate -> the factors back within 5%) and the
refusals of fits that cannot be trusted."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from kvplan.analysis.calibration import serving_fit as sc
from kvplan.analysis.calibration.measurements import Defaults
from kvplan.analysis.metrics import compute_metrics, save_result_json
from kvplan.analysis.serving import simulate_serving
from kvplan.costs.step.profiles import default_profiles
from kvplan.specs.requests.workload import WorkloadArgs
from kvplan.specs.serving import EngineConfig
from tests.conftest import assert_one_line_error, run_cli

MODEL, GPU = "meta-llama/Llama-3.1-8B", "H100-SXM-80GB"
TRUTH = replace(default_profiles().pick(GPU, "bfloat16"), step_overhead_s=1.5e-3,
                request_overhead_s=60e-6, api_request_s=12e-3)
"""Known engine overheads (kernels: H100's measured tables, which no fit moves)."""
RUNS = [dict(num_prompts=8, random_input_len=2000, random_output_len=100, max_concurrency=1),
        dict(num_prompts=96, random_input_len=500, random_output_len=200, max_concurrency=32),
        dict(num_prompts=64, random_input_len=3000, random_output_len=30)]


def save_run(tmp: Path, i: int, **workload: int) -> Path:
    args = WorkloadArgs(**workload)
    run = simulate_serving(MODEL, GPU, EngineConfig(), args, profile=TRUTH)
    doc = save_result_json(run.result, compute_metrics(run.result), run.header(args))
    path = tmp / f"run{i}.json"
    path.write_text(json.dumps(doc))
    return path


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    tmp = tmp_path_factory.mktemp("serve")
    return [save_run(tmp, i, **w) for i, w in enumerate(RUNS)]


def test_round_trip_recovers_known_factors(saved: list[Path]) -> None:
    points = [sc.to_point(r) for f in saved for r in sc.read_serving(f, Defaults())]
    fit = sc.fit_user(points, default_profiles())
    (p,) = fit.profiles.profiles
    assert fit.problems == ()
    assert p.step_overhead_s == pytest.approx(1.5e-3, rel=0.05)
    assert p.request_overhead_s == pytest.approx(60e-6, rel=0.1)
    assert p.api_request_s == pytest.approx(12e-3, rel=0.05)
    assert all(abs(pred / meas - 1) < 0.01 for *_, meas, pred in fit.errors)


def test_cli_writes_a_profile_that_adds_to_the_bundled_one(saved: list[Path],
                                                           tmp_path: Path) -> None:
    out = tmp_path / "mine.json"
    r = run_cli("calibrate", *map(str, saved), "--out", str(out), "--json")
    assert r.code == 0, r.err
    doc = r.json()
    assert doc["problems"] == [] and {e["metric"] for e in doc["points"]} >= {"ttft_s", "tpot_s"}
    (mine,) = json.loads(out.read_text())["profiles"]
    assert mine["gpu"] == GPU and mine["step_overhead_s"] == pytest.approx(1.5e-3, rel=0.05)
    # another GPU still gets its bundled profile, not the user's and not the fallback
    a100 = run_cli("latency", MODEL, "--gpu", "a100", "--prompt", "128", "--output", "8",
                   "--profile", str(out), "--json")
    bundled = default_profiles().pick("A100-80GB-SXM", "bfloat16")
    assert a100.json()["profile"]["step_overhead_s"] == bundled.step_overhead_s


def test_underdetermined_fit_is_refused(saved: list[Path], tmp_path: Path) -> None:
    one = json.loads(saved[0].read_text())
    only_ttft = {k: v for k, v in one.items() if k not in ("mean_tpot_ms", "mean_itl_ms",
                                                            "output_throughput")}
    path = tmp_path / "ttft.json"
    path.write_text(json.dumps(only_ttft))
    out = tmp_path / "p.json"
    r = run_cli("calibrate", str(path), "--out", str(out))
    assert_one_line_error(r)
    assert "underdetermined" in r.err and not out.exists()


def test_csv_sweep_of_concurrency(tmp_path: Path, saved: list[Path]) -> None:
    rows = ["model,gpu,num_prompts,input_len,output_len,max_concurrency,mean_ttft_ms,"
            "mean_tpot_ms"]
    for f, w in zip(saved[:2], RUNS[:2], strict=True):
        d = json.loads(f.read_text())
        rows.append(f"{MODEL},h100,{w['num_prompts']},{w['random_input_len']},"
                    f"{w['random_output_len']},{w['max_concurrency']},{d['mean_ttft_ms']},"
                    f"{d['mean_tpot_ms']}")
    path = tmp_path / "sweep.csv"
    path.write_text("\n".join(rows) + "\n")
    assert sc.is_serving_file(path)
    runs = sc.read_serving(path, Defaults())
    assert [r.max_concurrency for r in runs] == [1, 32]
    pred = sc.to_point(runs[1]).predict(TRUTH)
    assert pred["tpot_s"] == pytest.approx(runs[1].measured["tpot_s"], rel=1e-6)
