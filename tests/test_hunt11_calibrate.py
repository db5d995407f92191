"""hunt11: `kvplan calibrate` on serving results - the deployment a run is replayed on, runs the
replay cannot reproduce, and what the flags may say about a file."""

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
from kvplan.errors import TraceError
from kvplan.specs.requests.workload import WorkloadArgs
from kvplan.specs.serving import EngineConfig
from tests.conftest import assert_one_line_error, run_cli

MODEL, GPU = "meta-llama/Llama-3.1-8B", "H100-SXM-80GB"
RUNS = [dict(num_prompts=8, random_input_len=2000, random_output_len=100, max_concurrency=1),
        dict(num_prompts=64, random_input_len=3000, random_output_len=30)]


def _save(path: Path, engine: EngineConfig, profile: object = None, **workload: int) -> Path:
    args = WorkloadArgs(**workload)
    run = simulate_serving(MODEL, GPU, engine, args, profile=profile)  # type: ignore[arg-type]
    path.write_text(json.dumps(save_result_json(run.result, compute_metrics(run.result),
                                                run.header(args))))
    return path


# ------------------------------------------------ kvplan simulate's file names its engine flags


def test_simulated_fp8_run_is_replayed_at_fp8_and_fits_its_truth(tmp_path: Path) -> None:
    """`kvplan simulate -q fp8 --save-result` wrote no quantization, so calibrate replayed the
    run as bfloat16 (kernels ~2x slower) and fitted a bfloat16 profile with the step overhead
    driven to ~0.02 ms to make up for it. The header now carries the engine flags."""
    fp8 = EngineConfig(quantization="fp8")
    truth = replace(default_profiles().pick(GPU, "fp8"), step_overhead_s=1.5e-3)
    files = [_save(tmp_path / f"r{i}.json", fp8, truth, **w) for i, w in enumerate(RUNS)]
    runs = [r for f in files for r in sc.read_serving(f, Defaults())]
    assert {r.engine.quantization for r in runs} == {"fp8"}
    fit = sc.fit_user([sc.to_point(r) for r in runs], default_profiles(),
                      names=("step_overhead_s",))
    (p,) = fit.profiles.profiles
    # the precision the profile is keyed by: fp8 (was bfloat16), and the known 1.5 ms back
    # (was 2.06e-05 s: the fit absorbing bf16 kernels)
    assert p.precision == "fp8"
    assert p.step_overhead_s == pytest.approx(1.5e-3, rel=0.02)


def test_simulated_tp_and_pp_runs_keep_their_parallelism(tmp_path: Path) -> None:
    engine = EngineConfig(tensor_parallel_size=2, pipeline_parallel_size=2)
    f = _save(tmp_path / "tp.json", engine, **RUNS[0])
    (run,) = sc.read_serving(f, Defaults())
    assert (run.engine.tensor_parallel_size, run.engine.pipeline_parallel_size) == (2, 2)
    # replayed on the same 4 GPUs, the bundled profile predicts the file's TTFT exactly
    measured = run.measured["ttft_s"]
    assert sc.to_point(run).predict(default_profiles().pick(GPU, "bfloat16"))["ttft_s"] == \
        pytest.approx(measured, rel=1e-9)


# ------------------------------------------------ runs the replay cannot reproduce: refused


def _vllm_file(tmp: Path, name: str, **extra: object) -> Path:
    """A `vllm bench serve --save-result` summary (vLLM 0.11 keys) of a simulated run."""
    src = json.loads(_save(tmp / "src.json", EngineConfig(), **RUNS[1]).read_text())
    keep = ("num_prompts", "request_rate", "burstiness", "max_concurrency", "duration",
            "completed", "failed", "total_input_tokens", "total_output_tokens",
            "output_throughput", "mean_ttft_ms", "mean_tpot_ms", "mean_itl_ms")
    doc = {"backend": "vllm", "model_id": MODEL, **{k: src[k] for k in keep}, **extra}
    path = tmp / name
    path.write_text(json.dumps(doc))
    return path


def test_ramp_up_run_is_refused_not_replayed_as_rate_inf(tmp_path: Path) -> None:
    """vLLM writes request_rate 'inf' for a --ramp-up-strategy run (the rate climbs from
    ramp_up_start_rps to ramp_up_end_rps: vllm/benchmarks/serve.py main_async, 'Traffic');
    calibrate replayed every request as sent at t = 0 and fitted that."""
    f = _vllm_file(tmp_path, "ramp.json", ramp_up_strategy="linear", ramp_up_start_rps=1,
                   ramp_up_end_rps=20)
    r = run_cli("calibrate", str(f), "--gpu", "h100", "--out", str(tmp_path / "p.json"))
    assert_one_line_error(r)
    assert "ramp-up" in r.err and not (tmp_path / "p.json").exists()


def test_data_parallel_run_is_refused_not_replayed_on_one_engine(tmp_path: Path) -> None:
    f = _vllm_file(tmp_path, "dp.json", data_parallel_size=2, gpu=GPU)
    r = run_cli("calibrate", str(f), "--out", str(tmp_path / "p.json"))
    assert_one_line_error(r)
    assert "data-parallel" in r.err and not (tmp_path / "p.json").exists()


# ------------------------------------------------ the flags against what the file names


def test_model_flag_names_a_vllm_file_whose_model_id_is_a_local_folder(tmp_path: Path) -> None:
    """vLLM's model_id is what `vllm bench serve --model` was given (often a local folder);
    --model could not name it: 'unknown model /models/Llama-3.1-8B', exit 2, whatever --model
    said. Now --model says what the run served; fitted on the bundled profile's own run, the
    step overhead comes back as the bundled 0.9346 ms."""
    f = _vllm_file(tmp_path, "v.json", model_id="/models/Llama-3.1-8B")
    (run,) = sc.read_serving(f, Defaults(model=MODEL, gpu="h100"))
    assert run.model == MODEL
    fit = sc.fit_user([sc.to_point(run)], default_profiles(), names=("step_overhead_s",))
    bundled = default_profiles().pick(GPU, "bfloat16").step_overhead_s  # 0.0009346 s
    assert fit.profiles.profiles[0].step_overhead_s == pytest.approx(bundled, rel=0.02)


@pytest.mark.parametrize(("flag", "value"), [("--model", "meta-llama/Llama-3.1-70B"),
                                             ("--gpu", "a100")])
def test_a_flag_naming_another_model_or_gpu_than_the_file_is_refused(
        tmp_path: Path, flag: str, value: str) -> None:
    """A kvplan file names H100 (and the 8B model); --gpu a100 was silently ignored."""
    f = _vllm_file(tmp_path, "k.json", gpu=GPU)
    args = ("--gpu", "h100") if flag == "--model" else ()
    r = run_cli("calibrate", str(f), flag, value, *args, "--out", str(tmp_path / "p.json"))
    assert_one_line_error(r)
    assert f"but {flag} says {value}" in r.err and not (tmp_path / "p.json").exists()


# ------------------------------------------------ a term fitted to its floor is reported


def test_overhead_fitted_to_its_floor_is_refused(tmp_path: Path) -> None:
    """Runs 25% faster than the bundled profile's own simulation of them (every latency x 0.75,
    throughput / 0.75): no overhead >= 0 explains them, so the step overhead went to the
    search's floor, 1e-06 s, and the fit was written with 'problems: []' (median error ~12%,
    under the 20% limit). Now: pinned at its lower bound, refused unless --force."""
    files = []
    for i, w in enumerate(RUNS):
        doc = json.loads(_save(tmp_path / f"s{i}.json", EngineConfig(), **w).read_text())
        for k in ("mean_ttft_ms", "mean_tpot_ms", "mean_itl_ms"):
            doc[k] *= 0.75
        doc["output_throughput"] /= 0.75
        files.append(tmp_path / f"f{i}.json")
        files[-1].write_text(json.dumps(doc))
    out = tmp_path / "p.json"
    r = run_cli("calibrate", *map(str, files), "--out", str(out))
    assert_one_line_error(r)
    assert "step_overhead_s pinned at its lower bound 1e-06" in r.err and not out.exists()
    forced = run_cli("calibrate", *map(str, files), "--out", str(out), "--force", "--json")
    assert forced.code == 0 and out.exists()
    assert json.loads(out.read_text())["profiles"][0]["step_overhead_s"] == 1e-06


def test_text_output_shows_the_fitted_terms(tmp_path: Path) -> None:
    """The text table showed compute_eff 0.600 / bandwidth_eff 0.800 (never fitted) and only
    one of the three fitted terms. Runs simulated on the bundled H100 profile fit back to it:
    step 0.0009346 s = 0.935 ms, per request 9.41e-05 s = 94.1 us, API path 0.04271 s =
    42.71 ms."""
    files = [_save(tmp_path / f"b{i}.json", EngineConfig(), **w) for i, w in enumerate(RUNS)]
    r = run_cli("calibrate", *map(str, files), "--force")
    assert r.code == 0, r.err
    assert "compute_eff" not in r.out
    assert all(v in r.out for v in ("0.935 ms", "94.1 us", "42.71 ms")), r.out


# ------------------------------------------------ a term fitted to 0 is still seen


def test_static_fit_of_kvplan_latencys_own_numbers_is_not_refused(tmp_path: Path) -> None:
    """Static batches priced by `kvplan latency` (bundled H100 profile: step 0.9346 ms,
    prefill overhead 0) fit back to that profile, but the fit was refused: 'prefill_overhead_s
    does not change any prediction' - a term at 0 was probed at 1 us, and 1 us / 11.6 ms of
    TTFT = 9e-5 is under the 1e-4 'unseen' threshold. Probed at 100 us it is seen."""
    rows = ["model,gpu,batch,prompt,output,ttft_ms,tpot_ms"]
    for b, p, o in ((1, 512, 64), (32, 2048, 128), (8, 1024, 128)):
        d = run_cli("latency", MODEL, "--gpu", "h100", "--batch", str(b), "--prompt", str(p),
                    "--output", str(o), "--json").json()
        rows.append(f"{MODEL},h100,{b},{p},{o},{d['ttft_s'] * 1e3!r},{d['tpot_s'] * 1e3!r}")
    csv = tmp_path / "static.csv"
    csv.write_text("\n".join(rows) + "\n")
    out = tmp_path / "p.json"
    r = run_cli("calibrate", str(csv), "--out", str(out), "--json")
    assert r.code == 0, r.err
    (p,) = json.loads(out.read_text())["profiles"]
    assert p["step_overhead_s"] == pytest.approx(0.0009346, rel=1e-3)
    assert p["prefill_overhead_s"] == pytest.approx(0.0, abs=1e-6)


def test_fit_step_overhead_does_not_count_the_step_overhead_twice(tmp_path: Path) -> None:
    """The static fit already holds step_overhead_s; --fit-step-overhead appended it again:
    one point with TTFT and TPOT (2 values, 2 terms) was refused as 'underdetermined, 2
    measured values for 3 factors' and 'cannot separate step_overhead_s from
    step_overhead_s'. Golden: kvplan latency's own numbers for batch 8, 1,024 / 128."""
    d = run_cli("latency", MODEL, "--gpu", "h100", "--batch", "8", "--prompt", "1024",
                "--output", "128", "--json").json()
    csv = tmp_path / "one.csv"
    csv.write_text("model,gpu,batch,prompt,output,ttft_ms,tpot_ms\n"
                   f"{MODEL},h100,8,1024,128,{d['ttft_s'] * 1e3!r},{d['tpot_s'] * 1e3!r}\n")
    plain = run_cli("calibrate", str(csv), "--json")
    flagged = run_cli("calibrate", str(csv), "--fit-step-overhead", "--json")
    assert (plain.code, flagged.code) == (0, 0), flagged.err
    assert flagged.json()["profiles"] == plain.json()["profiles"]


# ------------------------------------- `vllm bench serve --append-result`: one JSON per line


def test_appended_results_are_read_as_one_run_per_line(tmp_path: Path) -> None:
    """--append-result writes each run's object on a line of its own (a newline, then
    json.dump: vllm/benchmarks/serve.py); calibrate said "not valid JSON (line 2)". The
    lines read as the separate files do, each named by its line."""
    files = [_save(tmp_path / f"r{i}.json", EngineConfig(), **w) for i, w in enumerate(RUNS)]
    joined = tmp_path / "appended.json"
    joined.write_text("\n".join(f.read_text() for f in files))
    assert sc.is_serving_file(joined)
    runs = sc.read_serving(joined, Defaults())
    alone = [r for f in files for r in sc.read_serving(f, Defaults())]
    assert [r.where for r in runs] == [f"{joined}:{n}" for n in range(1, len(files) + 1)]
    assert [(r.measured, r.input_lens, r.engine) for r in runs] == \
        [(r.measured, r.input_lens, r.engine) for r in alone]
    bad = tmp_path / "bad.json"
    bad.write_text(files[0].read_text() + "\n{not json")
    with pytest.raises(TraceError, match="not valid JSON"):
        sc.read_serving(bad, Defaults())
