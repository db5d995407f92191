"""--async-scheduling / --no-async-scheduling from the command line (latency, simulate, plan,
a pasted `vllm serve` line) and in `kvplan calibrate`'s input files.

The golden: under the bundled profile vLLM's host work per decode step is
``step_overhead_s + request_overhead_s x R`` = 934.6 us + 94.10 us x R (default.json,
``engines.vllm``, the seventh 141-point refit of 2026-12-06: GDN layers measured).
Synchronously a decode step costs the GPU's stage plus that; with async scheduling
``max(stage, host)``, and for Llama-3.1-8B on one H100 the stage
(its 16 GB of weights streamed, ~7.3 ms) is the longer, so each decode step - and so TPOT - is
shorter by exactly the host work: 8 requests -> 934.6 + 8 x 94.10 us = 1.6874 ms; one
request -> 1.0287 ms.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from kvplan.analysis.calibration import serving_fit as sc
from kvplan.analysis.calibration.measurements import Defaults, read_measurements
from kvplan.analysis.metrics import compute_metrics, save_result_json
from kvplan.analysis.serving import simulate_serving
from kvplan.cli.fast.simulate_args import simulate_args
from kvplan.cli.pasted import parse_vllm_command
from kvplan.costs.step.profiles import default_profiles
from kvplan.specs.catalog import load_model
from kvplan.specs.deployment import Deployment, vllm_serve_argv
from kvplan.specs.hardware import load_gpu
from kvplan.specs.requests.workload import WorkloadArgs
from kvplan.specs.serving import EngineConfig
from tests.conftest import CliResult, assert_one_line_error, run_cli

M, GPU = "meta-llama/Llama-3.1-8B", "H100-SXM-80GB"
VLLM_STEP_S, VLLM_REQUEST_S = 934.6e-6, 94.10e-6
"""default.json engines.vllm.step_overhead_s and request_overhead_s."""
LATENCY = ("latency", M, "--gpu", "H100", "--prompt", "1000", "--output", "101", "--batch", "8",
           "--json")


def test_the_golden_rests_on_the_bundled_vllm_host_costs() -> None:
    p = default_profiles().pick(GPU, "bfloat16")
    assert (p.step_overhead_s, p.request_overhead_s) == (VLLM_STEP_S, VLLM_REQUEST_S)


def test_latency_tpot_drops_by_one_decode_steps_host_work() -> None:
    sync, off, on = (run_cli(*LATENCY, *extra) for extra in
                     ((), ("--no-async-scheduling",), ("--async-scheduling",)))
    assert sync.code == off.code == on.code == 0, (sync.err, on.err)
    assert off.json()["tpot_s"] == sync.json()["tpot_s"]
    tpot_sync, tpot_async = sync.json()["tpot_s"], on.json()["tpot_s"]
    # 8 decodes: host 934.6 + 8 x 94.10 us = 1.6874 ms, hidden under a ~6.6 ms GPU stage
    assert tpot_sync - tpot_async == pytest.approx(1.6874e-3, rel=1e-9)
    assert tpot_async > VLLM_STEP_S + 8 * VLLM_REQUEST_S  # the stage is the longer


def _typer_only(*args: str) -> CliResult:
    """The command through typer (cli.app.main), not the fast simulate parser."""
    code = ("import sys; from kvplan.cli.app import main; "
            "sys.argv = ['kvplan', *sys.argv[1:]]; main()")
    p = subprocess.run([sys.executable, "-c", code, *args], capture_output=True, text=True,
                       timeout=300)
    return CliResult(p.returncode, p.stdout, p.stderr)


@pytest.mark.parametrize("fast", [True, False])
def test_simulate_tpot_at_concurrency_one_drops_by_one_requests_host_work(fast: bool) -> None:
    args = ("simulate", M, "--num-prompts", "4", "--max-concurrency", "1",
            "--random-input-len", "100", "--random-output-len", "11", "--json")
    if fast:
        assert simulate_args([*args, "--async-scheduling"]) is not None  # takes the fast path
    cli = run_cli if fast else _typer_only
    sync, on = cli(*args), cli(*args, "--async-scheduling")
    assert sync.code == on.code == 0, on.err
    ms = sync.json()["mean_tpot_ms"] - on.json()["mean_tpot_ms"]
    assert ms == pytest.approx(1.0287, rel=1e-9)  # one request: 934.6 + 94.10 us per step


def test_plan_serve_line_carries_the_flag() -> None:
    r = run_cli("plan", M, "--gpu", "H100", "-tp", "1", "--num-prompts", "60",
                "--random-input-len", "300", "--random-output-len", "30", "--request-rate", "2",
                "--sample-requests", "40", "--workers", "1", "--max-num-seqs", "64",
                "--max-num-batched-tokens", "2048", "--slo", "ttft:p99:2000", "tpot:p99:100",
                "--async-scheduling", "--json")
    assert r.code == 0, r.err
    serve = r.json()["summary"]["vllm_serve"]
    assert "--async-scheduling" in serve.split()
    found, ignored = parse_vllm_command(serve.split())
    assert found["async_scheduling"] is True and ignored == []


def test_serve_line_and_pasted_line_round_trip() -> None:
    d = Deployment(model=load_model(M), gpu=load_gpu("H100"),
                   engine=EngineConfig(async_scheduling=True))
    found, _ = parse_vllm_command(vllm_serve_argv(d))
    assert found["async_scheduling"] is True
    plain = Deployment(model=load_model(M), gpu=load_gpu("H100"), engine=EngineConfig())
    assert "--async-scheduling" not in vllm_serve_argv(plain)
    assert parse_vllm_command(["vllm", "serve", M, "--no-async-scheduling"])[0][
        "async_scheduling"] is False


def test_a_pasted_async_line_is_read_not_warned_about() -> None:
    cap = run_cli("capacity", "--gpu", "H100", "--", "vllm", "serve", M, "--async-scheduling")
    assert cap.code == 0, cap.err
    assert "--async-scheduling" not in cap.err and "--async-scheduling" not in cap.out


def _saved_run(tmp: Path, async_scheduling: bool) -> tuple[Path, float]:
    args = WorkloadArgs(num_prompts=4, random_input_len=100, random_output_len=11,
                        max_concurrency=1)
    run = simulate_serving(M, GPU, EngineConfig(async_scheduling=async_scheduling), args)
    doc = save_result_json(run.result, compute_metrics(run.result), run.header(args))
    path = tmp / f"run-{async_scheduling}.json"
    path.write_text(json.dumps(doc))
    return path, float(doc["mean_tpot_ms"]) / 1e3


def test_calibrate_reads_the_flag_from_a_saved_run(tmp_path: Path) -> None:
    path, tpot = _saved_run(tmp_path, True)
    doc = json.loads(path.read_text())
    assert doc["async_scheduling"] is True
    (run,) = sc.read_serving(path, Defaults())
    assert run.engine.async_scheduling
    profile = default_profiles().pick(GPU, "bfloat16")
    assert sc.to_point(run).exact(profile)["tpot_s"] == pytest.approx(tpot, rel=1e-9)
    del doc["async_scheduling"]  # vLLM's own save-result: the option says it
    path.write_text(json.dumps(doc))
    (plain,) = sc.read_serving(path, Defaults())
    (told,) = sc.read_serving(path, Defaults(async_scheduling=True))
    assert not plain.engine.async_scheduling and told.engine.async_scheduling
    off = sc.to_point(plain).exact(profile)["tpot_s"]
    assert off - tpot == pytest.approx(VLLM_STEP_S + VLLM_REQUEST_S, rel=1e-6)


def test_calibrate_reads_the_column_of_csv_sweeps_and_static_points(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep.csv"
    sweep.write_text("model,gpu,num_prompts,input_len,output_len,max_concurrency,"
                     f"mean_tpot_ms,async_scheduling\n{M},H100,8,100,20,1,7.5,true\n"
                     f"{M},H100,8,100,20,2,7.9,0\n")
    on, off = sc.read_serving(sweep, Defaults())
    assert on.engine.async_scheduling and not off.engine.async_scheduling
    static = tmp_path / "static.csv"
    static.write_text(f"model,gpu,batch,prompt,output,tpot_ms,async_scheduling\n"
                      f"{M},H100,8,100,20,7.5,yes\n{M},H100,8,100,20,7.5,\n")
    a, b = read_measurements(static, Defaults())
    assert a.engine.async_scheduling and not b.engine.async_scheduling


def test_calibrate_refuses_a_bad_value_in_one_line(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep.csv"
    sweep.write_text("model,gpu,num_prompts,input_len,output_len,max_concurrency,"
                     f"mean_tpot_ms,async_scheduling\n{M},H100,8,100,20,1,7.5,maybe\n")
    r = run_cli("calibrate", str(sweep))
    assert_one_line_error(r)
    assert "'async_scheduling' must be true or false, got 'maybe'" in r.err
    assert f"{sweep}:2" in r.err
