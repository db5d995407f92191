"""A GPU without kernel tables is priced by the roofline at its nearest measured GPU's
efficiencies, never above the best rates measured on the GPU itself (gpus.json
``achievable``): AMD's max-achievable FLOP/s on MI300X are 708 TFLOP/s bf16 (54% of the
1,307.4 datasheet) where H200's tables reach 76%."""

from pathlib import Path

import pytest

from kvplan.costs.kernels import nearest_measured_gpu
from kvplan.costs.step.roofline import StepCostModel
from kvplan.specs.catalog import load_model
from kvplan.specs.hardware import load_gpu
from kvplan.specs.serving import EngineConfig
from tests.conftest import assert_one_line_error, run_cli


def test_mi300x_compute_and_memory_capped_at_its_own_measurements() -> None:
    e = nearest_measured_gpu("MI300X")
    assert e.donor == "H200-SXM-141GB"
    # AMD ROCm blog, Table 1: 708 TFLOP/s bf16 on a 1,307.4 TFLOP/s datasheet
    assert e.compute == pytest.approx(708 / 1307.4)  # 0.54153
    # arXiv:2510.27583: BabelStream ~81% of 5.3 TB/s = 4.29 TB/s
    assert e.memory == pytest.approx(4.29 / 5.3)  # 0.80943
    assert e.capped == ("compute", "memory")


def test_mi300x_fp8_rate_capped_at_its_fp8_measurement() -> None:
    e = nearest_measured_gpu("MI300X", "fp8")
    assert e.compute == pytest.approx(1273 / 2614.9)  # 0.48682


def test_mi325x_compute_capped_memory_stays_the_donors() -> None:
    e = nearest_measured_gpu("MI325X")
    donor = nearest_measured_gpu("H200")  # a measured GPU: its own tables' figures
    assert e.compute == pytest.approx(843 / 1307.4)
    assert e.memory == pytest.approx(donor.memory)  # no public MI325X bandwidth measurement
    assert e.capped == ("compute",)


def test_gpu_without_measurements_keeps_the_donor_rates() -> None:
    l4, l40s = nearest_measured_gpu("L4"), nearest_measured_gpu("L40S")
    assert (l4.donor, l4.capped) == ("L40S", ())
    assert (l4.compute, l4.memory) == (l40s.compute, l40s.memory)


def test_no_roofline_rate_above_the_measured_best() -> None:
    """Physics: the step model's compute and bandwidth rates on MI300X stay at or under what
    was measured on it, for a bf16 and an fp8 deployment."""
    hw = load_gpu("MI300X")
    model = load_model("meta-llama/Llama-3.1-8B")
    for quant, dtype in ((None, "bfloat16"), ("fp8", "fp8")):
        timer = StepCostModel(model, hw, EngineConfig(quantization=quant))
        rate = hw.peak_flops_for(dtype) * timer.profile.compute_eff
        assert rate <= hw.achievable[dtype] * (1 + 1e-9), dtype
        bw = hw.mem_bw_bytes_per_s * timer.profile.bandwidth_eff
        assert bw <= hw.achievable["mem_bw"] * (1 + 1e-9)


def test_cli_says_the_cap() -> None:
    r = run_cli("latency", "meta-llama/Llama-3.1-8B", "--gpu", "MI300X", "--prompt", "1024",
                "--output", "16", "--json")
    assert r.code == 0, r.err
    assert r.json()["kernels"] == (
        "roofline: MI300X has no measured kernel tables; compute 54%, bandwidth 81% of peak: "
        "the rates of H200-SXM-141GB's measured kernels, capped at the best measured on MI300X "
        "itself (708 TFLOP/s bfloat16, 4.29 TB/s)")


@pytest.mark.parametrize(("block", "what"), [
    ("achievable: {bf16_tflops: 900}", "above the datasheet's 800"),
    ("achievable: {bf16_tflop: 700}", "must map some of"),
    ("achievable: {mem_bw_tbps: -1}", "mem_bw_tbps must be a number"),
    ("achievable: 700", "must map some of"),
])
def test_bad_achievable_block_one_line(tmp_path: Path, block: str, what: str) -> None:
    f = tmp_path / "gpu.yaml"
    text = f"id: MyGPU\nmemory_gb: 96\nmem_bw_tbps: 4.0\nbf16_tflops_dense: 800\n{block}\n"
    f.write_text(text)
    r = run_cli("latency", "meta-llama/Llama-3.1-8B", "--gpu", str(f), "--prompt", "64",
                "--output", "8")
    assert_one_line_error(r)
    assert what in r.err and "achievable" in r.err
    assert f.read_text() == text


def test_custom_gpu_with_achievable_block(tmp_path: Path) -> None:
    f = tmp_path / "gpu.yaml"
    f.write_text("id: MyGPU\nmemory_gb: 96\nmem_bw_tbps: 4.0\nbf16_tflops_dense: 800\n"
                 "achievable: {bf16_tflops: 400, mem_bw_tbps: 3.0, source: my bench}\n")
    gpu = load_gpu(str(f))
    assert gpu.achievable == {"bfloat16": pytest.approx(400e12), "mem_bw": pytest.approx(3e12)}
    e = nearest_measured_gpu(gpu)
    assert (e.compute, e.memory) == (pytest.approx(0.5), pytest.approx(0.75))


def test_gpus_json_shows_the_measured_rates_and_their_source() -> None:
    r = run_cli("gpus", "--json")
    assert r.code == 0, r.err
    by_id = {g["id"]: g for g in r.json()["gpus"]}
    mi300x = by_id["MI300X"]["achievable"]
    assert mi300x["rates_per_s"] == {"float16": 654e12, "bfloat16": 708e12, "fp8": 1273e12,
                                     "mem_bw": 4.29e12}
    assert "Max-Achievable FLOPs" in mi300x["source"] and "2510.27583" in mi300x["source"]
    assert "achievable" not in by_id["H100-SXM-80GB"]
