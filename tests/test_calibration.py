"""Calibration: readers, round-trip fits, and the bundled profile's error on published points.

Reference points: TensorRT-LLM docs/source/performance.md at commit
138f96d45f90b9667426f7c47297d8c06bafac73 (v0.5 TTFT, v0.6.1 static-batch throughput), copied
into kvplan/data/measurements/latency_calibration.json.
"""

from __future__ import annotations

import json
from dataclasses import replace
from importlib import resources
from pathlib import Path

import pytest

from kvplan.costs import calibration as cal
from kvplan.costs.latency import RequestShape, request_latency
from kvplan.costs.roofline import Profile
from kvplan.errors import TraceError
from kvplan.specs.catalog import load_model
from kvplan.specs.hardware import load_gpu
from kvplan.specs.serving import EngineConfig

BUNDLED = Path(str(resources.files("kvplan") / "data" / "measurements" /
                   "latency_calibration.json"))


def bundled_points() -> list[cal.Measurement]:
    return cal.read_measurements(BUNDLED)


def test_bundled_file_has_17_static_points() -> None:
    points = bundled_points()
    assert len(points) == 17  # the 3 offline_max_throughput points are left to the simulator
    h100 = next(p for p in points if p.id == "trtllm-static-thr-1")
    assert h100.shape == RequestShape(batch=768, prompt_tokens=128, output_tokens=128)
    assert h100.engine.quantization == "fp8" and h100.engine.kv_cache_dtype == "fp8"
    assert h100.measured == {"output_throughput_tok_s": 19694}


def test_default_profile_error_on_bundled_points() -> None:
    result = cal.evaluate(bundled_points(), cal.default_profiles())
    for e in result.errors:  # the per-point table, printed with -s
        print(f"{e.id:22s} {e.gpu:14s} {e.metric:24s} {e.measured:9.4g} {e.predicted:9.4g} "
              f"{e.error:+.1%}")
    assert len(result.errors) == 17
    assert result.median_abs_error("ttft_s") <= 0.20  # type: ignore[operator]
    assert result.median_abs_error("output_throughput_tok_s") <= 0.20  # type: ignore[operator]
    assert all(abs(e.error) < 0.35 for e in result.errors)


def test_refit_reproduces_the_bundled_profile() -> None:
    fitted = cal.fit_profiles(bundled_points()).profiles
    for p in cal.default_profiles().profiles:
        q = fitted.pick(p.gpu, p.precision)
        assert q.compute_eff == pytest.approx(p.compute_eff, abs=0.01)
        assert q.bandwidth_eff == pytest.approx(p.bandwidth_eff, abs=0.01)
        assert q.step_overhead_s == pytest.approx(p.step_overhead_s, abs=2e-4)


def test_round_trip_recovers_a_known_profile(tmp_path: Path) -> None:
    truth = Profile(compute_eff=0.55, bandwidth_eff=0.7, step_overhead_s=3e-3)
    model, gpu = load_model("meta-llama/Llama-2-7b-hf"), load_gpu("H100-SXM-80GB")
    rows = []
    for b, p, o in [(1, 16, 1), (1, 4096, 1), (1, 128, 512), (64, 512, 256), (8, 2048, 64)]:
        r = request_latency(model, gpu, EngineConfig(), RequestShape(
            batch=b, prompt_tokens=p, output_tokens=o), truth, check_fit=False)
        rows.append({"model": "meta-llama/Llama-2-7b-hf", "gpu": "h100", "batch": b,
                     "prompt": p, "output": o, "ttft_ms": r.ttft_s * 1e3,
                     "output_throughput_tok_s": r.output_throughput_tok_s})
    path = tmp_path / "points.json"
    path.write_text(json.dumps({"points": rows}))
    result = cal.fit_profiles(cal.read_measurements(path))
    (fitted,) = result.profiles.profiles
    assert fitted.compute_eff == pytest.approx(0.55, rel=0.03)
    assert fitted.bandwidth_eff == pytest.approx(0.7, rel=0.03)
    assert fitted.step_overhead_s == pytest.approx(3e-3, abs=2e-4)
    assert all(abs(e.error) < 0.01 for e in result.errors)


def test_profile_file_round_trip(tmp_path: Path) -> None:
    ps = cal.ProfileSet(profiles=(Profile(gpu="L40S", precision="fp8", compute_eff=0.5),),
                        fitted_on="test")
    path = tmp_path / "p.json"
    cal.save_profiles(ps, path)
    assert cal.load_profiles(path) == ps
    assert ps.pick("l40s", "fp8").compute_eff == 0.5
    assert ps.pick("L40S", "bfloat16") == ps.default
    both = replace(ps, profiles=(Profile(gpu="A100-80GB-SXM", precision="float16"),))
    assert both.pick("A100-80GB-SXM", "bfloat16").precision == "float16"


def test_csv_reader_and_line_numbers(tmp_path: Path) -> None:
    good = tmp_path / "m.csv"
    good.write_text("model,gpu,batch,prompt,output,ttft_ms,tpot_ms\n"
                    "meta-llama/Llama-2-7b-hf,a100,1,128,64,20,9\n")
    (pt,) = cal.read_measurements(good)
    assert pt.measured == {"ttft_s": 0.02, "tpot_s": 0.009}
    bad = tmp_path / "bad.csv"
    bad.write_text("model,gpu,batch,prompt,output,ttft_ms\n"
                   "meta-llama/Llama-2-7b-hf,a100,1,128,64,20\n"
                   "meta-llama/Llama-2-7b-hf,a100,x,128,64,20\n")
    with pytest.raises(TraceError, match=r"bad\.csv:3: 'batch' must be a number"):
        cal.read_measurements(bad)


def test_json_syntax_error_names_the_line(tmp_path: Path) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"points": [\n  {"model": "x",\n  oops}\n]}')
    with pytest.raises(TraceError, match=r"bad\.json:3:"):
        cal.read_measurements(bad)


def test_vllm_bench_serve_and_latency_json(tmp_path: Path) -> None:
    serve = tmp_path / "serve.json"
    serve.write_text(json.dumps({
        "date": "20250101-000000", "backend": "vllm", "model_id": "meta-llama/Llama-2-7b-hf",
        "num_prompts": 32, "request_rate": "inf", "max_concurrency": 8, "completed": 32,
        "total_input_tokens": 32 * 512, "total_output_tokens": 32 * 128,
        "output_throughput": 900.0, "mean_ttft_ms": 80.0, "mean_tpot_ms": 9.5,
    }))
    (pt,) = cal.read_measurements(serve, cal.Defaults(gpu="a100"))
    assert pt.shape == RequestShape(batch=8, prompt_tokens=512, output_tokens=128)
    assert pt.measured == {"ttft_s": 0.08, "tpot_s": 0.0095, "output_throughput_tok_s": 900.0}
    lat = tmp_path / "lat.json"
    lat.write_text(json.dumps({"avg_latency": 1.5, "std_latency": 0.01, "latencies": [1.5],
                               "percentiles": {"50": 1.5}}))
    d = cal.Defaults(model="meta-llama/Llama-2-7b-hf", gpu="a100", batch=8, prompt=32, output=128)
    (pt,) = cal.read_measurements(lat, d)
    assert pt.measured == {"e2e_s": 1.5}
    with pytest.raises(TraceError, match="missing 'batch'"):
        cal.read_measurements(lat, cal.Defaults(model="m", gpu="a100"))
