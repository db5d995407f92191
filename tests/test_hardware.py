"""GPU catalog: datasheet figures, aliases, and custom GPUs described in YAML/JSON."""

from pathlib import Path

import pytest

from kvplan.errors import ConfigError, UnknownNameError
from kvplan.specs.hardware import gpu_catalog, load_gpu
from tests.conftest import assert_one_line_error, run_cli


def test_h100_datasheet_figures() -> None:
    h100 = load_gpu("H100-SXM-80GB")
    assert h100.memory_bytes == 80 * 10**9
    assert h100.mem_bw_bytes_per_s == pytest.approx(3.35e12)
    assert h100.peak_flops_for("bfloat16") == pytest.approx(989.4e12)
    assert h100.peak_flops_for("fp8") == pytest.approx(1978.9e12)


def test_aliases_and_case() -> None:
    assert load_gpu("h100").id == "H100-SXM-80GB"
    assert load_gpu("A100").id == "A100-80GB-SXM"
    assert load_gpu("l40s").id == "L40S"
    # names as nvidia-smi prints them
    assert load_gpu("NVIDIA H100 80GB HBM3").id == "H100-SXM-80GB"
    assert load_gpu("NVIDIA A100-SXM4-80GB").id == "A100-80GB-SXM"
    assert load_gpu("NVIDIA GeForce RTX 4090").id == "RTX-4090"


def test_no_fp8_falls_back_to_16_bit_rate() -> None:
    a100 = load_gpu("A100-80GB-SXM")  # Ampere: no FP8 tensor cores
    assert a100.peak_flops_for("fp8") == a100.peak_flops_for("bfloat16") == pytest.approx(312e12)


def test_every_catalog_gpu_has_memory_and_bandwidth() -> None:
    for gpu in gpu_catalog().values():
        assert gpu.memory_bytes > 0 and gpu.mem_bw_bytes_per_s > 0, gpu.id


def test_custom_gpu_yaml(tmp_path: Path) -> None:
    f = tmp_path / "mygpu.yaml"
    f.write_text("id: MyGPU\nmemory_gb: 96\nmem_bw_tbps: 4.0\nbf16_tflops_dense: 800\n")
    gpu = load_gpu(str(f))
    assert (gpu.id, gpu.memory_bytes) == ("MyGPU", 96 * 10**9)
    assert gpu.peak_flops_for("bfloat16") == pytest.approx(800e12)


def test_custom_gpu_missing_field(tmp_path: Path) -> None:
    f = tmp_path / "bad.yaml"
    f.write_text("id: X\nmemory_gb: 96\n")
    with pytest.raises(ConfigError, match="mem_bw_tbps"):
        load_gpu(str(f))


def test_custom_gpu_in_capacity_cli(tmp_path: Path) -> None:
    f = tmp_path / "mygpu.json"
    f.write_text('{"id": "MyGPU", "memory_gb": 96, "mem_bw_tbps": 4.0, "bf16_tflops_dense": 800}')
    r = run_cli("capacity", "meta-llama/Llama-3.1-8B", "--gpu", str(f), "--json")
    assert r.code == 0, r.err
    assert r.json()["num_blocks"] > 0


def test_unknown_gpu() -> None:
    with pytest.raises(UnknownNameError, match="H100-SXM-80GB"):
        load_gpu("H900")
    assert_one_line_error(run_cli("capacity", "meta-llama/Llama-3.1-8B", "--gpu", "H900"))


def test_malformed_yaml_one_line(tmp_path: Path) -> None:
    f = tmp_path / "broken.yaml"
    f.write_text("id: [unclosed\n")
    assert_one_line_error(run_cli("capacity", "meta-llama/Llama-3.1-8B", "--gpu", str(f)))
    assert f.read_text() == "id: [unclosed\n"
