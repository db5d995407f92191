"""hunt12: the CUDA-visible totals of the bundled AMD GPUs, as ROCm's torch reports them."""

from __future__ import annotations

from kvplan.costs.memory.vllm_defaults import cuda_total_bytes
from kvplan.specs.hardware import load_gpu
from tests.conftest import run_cli

GIB = 2**30


def test_mi300x_and_mi325x_cuda_total_is_what_rocm_torch_reports() -> None:
    # MI300X carries 192 GiB of HBM3: vLLM on ROCm logs "Free memory 191.46/191.98 GiB" and
    # PyTorch "HIP out of memory ... GPU 0 has a total capacity of 191.98 GiB". kvplan used
    # 192 GB -> 192 GiB x (1 - 1.04%) = 190.00 GiB, 1.98 GiB (1.78 GiB of KV at 0.9) short.
    # MI325X: 256 GiB of HBM3e, "total capacity of 255.98 GiB"; was 253.34 GiB.
    assert abs(cuda_total_bytes(load_gpu("MI300X")) / GIB - 191.98) < 0.005
    assert abs(cuda_total_bytes(load_gpu("MI325X")) / GIB - 255.98) < 0.005


def test_gpus_json_and_table_show_the_same_mi300x_total() -> None:
    r = run_cli("gpus", "--json")
    assert r.code == 0
    gpus = {g["id"]: g for g in r.json()["gpus"]}
    assert round(gpus["MI300X"]["cuda_total_bytes"] / GIB, 2) == 191.98
    table = run_cli("gpus")
    row = next(line for line in table.out.splitlines() if "MI300X" in line)
    assert "191.98 GiB" in row
