"""Physics the step model must keep whatever a fit does (issue 16): the same tensor cores with
more bandwidth are never slower; no priced op runs above its datasheet peak; fp8 GEMMs gain
only where the tensor cores have fp8; measured GPUs carry no fitted rate."""

from __future__ import annotations

import json
from importlib import resources

import numpy as np
import pytest

from kvplan.costs.step.latency import RequestShape, static_batch_latency
from kvplan.costs.step.profiles import default_profiles
from kvplan.costs.step.roofline import StepCostModel
from kvplan.specs.catalog import load_model
from kvplan.specs.hardware import load_gpu
from kvplan.specs.serving import EngineConfig

CASES = [("meta-llama/Llama-3.1-8B", 1), ("meta-llama/Llama-3.1-70B", 8),
         ("Qwen/Qwen3-30B-A3B", 1), ("mistralai/Mixtral-8x7B-v0.1", 2),
         ("google/gemma-2-9b-it", 1), ("deepseek-ai/DeepSeek-V3", 8),
         ("Qwen/Qwen3-Next-80B-A3B-Thinking", 4)]
SHAPES = [RequestShape(batch=1, prompt_tokens=4096, output_tokens=128),
          RequestShape(batch=32, prompt_tokens=1024, output_tokens=64),
          RequestShape(batch=256, prompt_tokens=512, output_tokens=16)]


def latency(model: str, gpu: str, tp: int, shape: RequestShape, **engine: object) -> object:
    timer = StepCostModel(load_model(model), load_gpu(gpu),
                          EngineConfig(tensor_parallel_size=tp, **engine),  # type: ignore[arg-type]
                          default_profiles().pick(gpu, "bfloat16"))
    return static_batch_latency(timer, shape, max_num_batched_tokens=8192)


@pytest.mark.parametrize(("model", "tp"), CASES)
@pytest.mark.parametrize("shape", SHAPES, ids=lambda s: f"b{s.batch}")
def test_h200_is_never_slower_than_h100(model: str, tp: int, shape: RequestShape) -> None:
    # the same GH100 tensor cores with 4.8 TB/s of HBM3e instead of 3.35 TB/s of HBM3
    h100 = latency(model, "H100-SXM-80GB", tp, shape)
    h200 = latency(model, "H200-SXM-141GB", tp, shape)
    assert h200.ttft_s <= h100.ttft_s * (1 + 1e-9)  # type: ignore[attr-defined]
    assert h200.e2e_s <= h100.e2e_s * (1 + 1e-9)  # type: ignore[attr-defined]
    assert (h200.tpot_s or 0) <= (h100.tpot_s or 0) * (1 + 1e-9)  # type: ignore[attr-defined]


@pytest.mark.parametrize("gpu", ["A100-80GB-SXM", "H100-SXM-80GB", "H200-SXM-141GB",
                                 "B200-SXM-180GB", "L40S"])
@pytest.mark.parametrize(("model", "tp"), CASES[:3])
def test_no_step_runs_above_the_datasheet_peaks(gpu: str, model: str, tp: int) -> None:
    hw = load_gpu(gpu)
    timer = StepCostModel(load_model(model), hw, EngineConfig(tensor_parallel_size=tp))
    assert timer.measured is not None, f"{gpu} should be priced from its tables"
    for tokens in (1, 16, 256, 2048, 8192):
        cost = timer.cost(np.ones(tokens, dtype=np.int64) if tokens <= 256
                          else np.array([tokens]), np.full(min(tokens, 256), 512)
                          if tokens <= 256 else np.array([0]))
        kernels_s = cost.seconds.roofline_s
        peak = hw.peak_flops_for(timer.constants.compute_precision)
        assert cost.flops.total / kernels_s <= peak, (tokens, cost.flops.total / kernels_s)
        moved = cost.bytes.weights + cost.bytes.kv_read
        assert moved / kernels_s <= hw.mem_bw_bytes_per_s, (tokens, moved / kernels_s)


def test_fp8_gemms_gain_only_on_fp8_tensor_cores() -> None:
    from kvplan.costs import kernels as kn

    m = np.array([4096])
    for gpu, has_fp8 in (("H100-SXM-80GB", True), ("H200-SXM-141GB", True),
                         ("B200-SXM-180GB", True), ("L40S", True), ("A100-80GB-SXM", False)):
        bf16 = float(kn.gemm_s(gpu, m, 8192, 8192, "bfloat16")[0])
        fp8 = float(kn.gemm_s(gpu, m, 8192, 8192, "fp8")[0])
        if has_fp8:
            assert fp8 < 0.8 * bf16, gpu
        else:  # Ampere has no fp8 tensor cores: never faster than its 16-bit GEMM
            assert fp8 >= bf16 * (1 - 1e-9), gpu


def test_the_bundled_profile_fits_no_rate_per_gpu() -> None:
    text = (resources.files("kvplan") / "data" / "profiles" / "default.json").read_text()
    data = json.loads(text)
    for entry in [data["default"], *data["profiles"]]:
        assert "compute_eff" not in entry or entry["compute_eff"] == pytest.approx(0.6)
        assert "bandwidth_eff" not in entry or entry["bandwidth_eff"] == pytest.approx(0.8)


def test_gpus_without_tables_take_their_generations_measured_rates() -> None:
    timer = StepCostModel(load_model("meta-llama/Llama-3.1-8B"), load_gpu("L4"), EngineConfig())
    assert timer.measured is None and timer.donor == "L40S"
    assert 0.3 < timer.profile.compute_eff < 1.0
    mi = StepCostModel(load_model("meta-llama/Llama-3.1-8B"), load_gpu("MI300X"), EngineConfig())
    assert mi.donor in ("H100-SXM-80GB", "H200-SXM-141GB")
