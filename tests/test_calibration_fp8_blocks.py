"""Qwen's official -FP8 checkpoints ("fine-grained fp8 quantization with block size of 128",
their model cards) are priced as block-scaled fp8, not on the per-tensor fp8 tables."""

from __future__ import annotations

import json

import pytest

from kvplan.analysis.calibration import public_set as ps
from kvplan.costs.memory.resolved import resolve
from kvplan.costs.step.roofline import StepCostModel
from kvplan.input_file import package_file
from kvplan.specs.catalog import load_model
from kvplan.specs.hardware import load_gpu

IDS = ("gpustack-qwen3-235b-a22b-h100-L193",
       "vllm-gh-pr26887-qwen3-next-80b-fp8-h100-tp2-128-1024-c64",
       "vllm-gh-pr29217-qwen3-vl-32b-fp8-l40s-tp1-sharegpt")


def _points() -> dict[str, dict]:
    data = json.loads(package_file("data", "measurements", "public_calibration.json")
                      .read_text("utf-8"))
    return {p["id"]: p for p in data["points"]}


@pytest.mark.parametrize("pid", IDS)
def test_block_scaled_points_run_the_block_fp8_kernels(pid: str) -> None:
    p = _points()[pid]
    assert p["weight_block_size"] == [128, 128] and p["quantization"] == "fp8"
    engine = ps._engine(p)
    base = load_model(p["model_config"])
    assert base.weight_block_size is None  # the catalog config is the bf16 one
    from dataclasses import replace

    model = replace(base, weight_block_size=(128, 128))
    gpu = load_gpu(p["gpu"])
    timer = StepCostModel(model, gpu, engine, resolved=resolve(model, gpu, engine))
    assert timer.gemm_dtype == "fp8_block"
    per_tensor = StepCostModel(base, gpu, engine, resolved=resolve(base, gpu, engine))
    assert per_tensor.gemm_dtype == "fp8"


def test_the_loader_applies_the_block_size() -> None:
    """The loader prices the H100 Qwen3-235B-FP8 point with its block scales: its replay
    differs from the same point read without ``weight_block_size`` (block-fp8 GEMM and MoE
    tables instead of the per-tensor ones, which are capped at block / bf16 where slower)."""
    p = _points()["gpustack-qwen3-235b-a22b-h100-L193"]
    blocked = ps._point(p)
    plain = ps._point({k: v for k, v in p.items() if k != "weight_block_size"})
    from kvplan.costs.step.profile import Profile

    prof = Profile()
    assert blocked.predict(prof)["tpot_s"] != plain.predict(prof)["tpot_s"]
