"""GEMM lookups against the raw aiconfigurator-core 0.12.0 tables.

Golden values are rows of systems/data/<gpu>/gemm/vllm/<version>/gemm_perf.parquet (latency in
ms); FLOP/s = 2·m·n·k / latency."""

from __future__ import annotations

import numpy as np
import pytest

from kvplan.costs import kernels as K
from kvplan.costs.kernels import Status
from kvplan.errors import UnknownNameError

# h100_sxm/gemm/vllm/0.24.0: bfloat16 torch.nn.functional.linear m=1024 n=k=8192: 0.163956 ms
# (838 TFLOP/s, 85% of 989.4); fp8 CutlassFP8ScaledMMLinearKernel 0.117935 ms (1,165 TFLOP/s)
H100_BF16_MS, H100_FP8_MS = 0.163956, 0.117935
# h200_sxm/gemm/vllm/0.24.0: bfloat16 0.167228 ms (822 TFLOP/s); fp8 0.108834 ms (1,263)
H200_BF16_RAW_MS, H200_FP8_MS = 0.167228, 0.108834
# a100_sxm/gemm/vllm/0.14.0 vllm_default: m=1024 n=k=8192 0.526579 ms (261 TFLOP/s);
# m=n=k=8192 3.743377 ms (294 TFLOP/s)
A100_1024_MS, A100_8192_MS = 0.526579, 3.743377


def _ms(gpu: str, m: int, n: int, k: int, dtype: str = "bfloat16") -> float:
    return float(K.gemm_s(gpu, m, n, k, dtype)) * 1e3


def test_h100_bf16_and_fp8_are_the_measured_rows() -> None:
    answer = K.gemm("H100", 1024, 8192, 8192)
    assert float(answer.seconds) * 1e3 == pytest.approx(H100_BF16_MS, rel=1e-5)
    assert answer.worst is Status.MEASURED
    assert (answer.source.gpu, answer.source.engine, answer.source.version) == (
        "H100-SXM-80GB", "vllm", "0.24.0")
    assert _ms("H100", 1024, 8192, 8192, "fp8") == pytest.approx(H100_FP8_MS, rel=1e-5)
    tflops = 2 * 1024 * 8192 * 8192 / (H100_BF16_MS * 1e-3) / 1e12
    assert tflops == pytest.approx(838.3, abs=0.1)


def test_h200_fp8_measured_and_bf16_capped_at_h100() -> None:
    """H200's bf16 row (0.1672 ms) is slower than H100's (0.1640) on the same die: the
    bundle caps it at H100's (manifest: capped_at_h100_cells)."""
    assert _ms("H200", 1024, 8192, 8192, "fp8") == pytest.approx(H200_FP8_MS, rel=1e-5)
    assert _ms("H200", 1024, 8192, 8192) == pytest.approx(H100_BF16_MS, rel=1e-5)
    assert _ms("H200", 1024, 8192, 8192) < H200_BF16_RAW_MS
    entry = K.manifest()["gpus"]["H200-SXM-141GB"]["tables"]["gemm"]
    assert entry["capped_at_h100_cells"] > 0


def test_a100_bf16_rows_and_their_rates() -> None:
    assert _ms("A100", 1024, 8192, 8192) == pytest.approx(A100_1024_MS, rel=1e-5)
    assert _ms("A100", 8192, 8192, 8192) == pytest.approx(A100_8192_MS, rel=1e-5)
    rate_1024 = 2 * 1024 * 8192**2 / (A100_1024_MS * 1e-3) / 1e12
    rate_8192 = 2 * 8192**3 / (A100_8192_MS * 1e-3) / 1e12
    assert (round(rate_1024), round(rate_8192)) == (261, 294)
    assert K.gemm("A100", 1024, 8192, 8192).source.version == "0.14.0"


def test_between_nodes_is_interpolated_and_bracketed() -> None:
    answer = K.gemm("H100", 1500, 8192, 8192)
    assert answer.worst is Status.INTERPOLATED
    low, high = _ms("H100", 1281, 8192, 8192), _ms("H100", 1536, 8192, 8192)
    assert low <= float(answer.seconds) * 1e3 <= high


@pytest.mark.parametrize("gpu", ["A100", "H100", "H200", "B200", "GB200", "L40S"])
def test_more_tokens_never_faster(gpu: str) -> None:
    m = np.arange(1, 40_001)
    for n, k in [(128, 4096), (6144, 4096), (4096, 14336), (151_936, 4096), (100, 30)]:
        seconds = K.gemm_s(gpu, m, n, k)
        assert np.all(np.diff(seconds) >= 0), (gpu, n, k)


def test_beyond_the_largest_m_scales_with_flops_and_is_flagged() -> None:
    edge = K.gemm("H100", 32768, 8192, 8192)
    beyond = K.gemm("H100", 65536, 8192, 8192)
    assert beyond.worst is Status.EXTRAPOLATED and edge.worst is Status.MEASURED
    assert float(beyond.seconds) == pytest.approx(2 * float(edge.seconds), rel=1e-9)


def test_below_the_smallest_n_is_the_edge_floor_flagged() -> None:
    small = K.gemm("H100", 16, 8, 4096)
    assert small.worst is Status.EXTRAPOLATED
    assert float(small.seconds) == float(K.gemm_s("H100", 16, 32, 4096))


def test_fp8_not_faster_than_bf16_without_fp8_tensor_cores() -> None:
    """A100 (Ampere) has no fp8 tensor cores: fp8 is priced as bf16 and says so."""
    m = np.array([1, 64, 1024, 8192])
    fp8 = K.gemm("A100", m, 8192, 8192, "fp8")
    assert np.array_equal(fp8.seconds, K.gemm_s("A100", m, 8192, 8192))
    assert "no fp8 tensor cores" in fp8.notes[0]


@pytest.mark.parametrize("gpu", ["L40S", "H100", "H200", "B200", "GB200"])
def test_fp8_faster_than_bf16_where_tensor_cores_have_fp8(gpu: str) -> None:
    """Ada, Hopper and Blackwell have fp8 tensor cores: a compute-bound fp8 GEMM is faster.
    (Not at every shape: on B200/GB200 vLLM's per-tensor fp8 kernel measured 0.0875/0.0839 ms
    at 4096³ against bf16's 0.0902/0.0808 ms; the table keeps what was measured.)"""
    assert _ms(gpu, 16384, 16384, 16384, "fp8") < 0.75 * _ms(gpu, 16384, 16384, 16384)


def test_block_fp8_and_nvfp4_tables() -> None:
    assert _ms("H100", 1024, 8192, 8192, "fp8_block") == pytest.approx(0.125349, rel=1e-5)
    # b200_sxm/gemm/vllm/0.24.0 FlashInferCuteDslNvFp4LinearKernel m=1024 n=k=8192: 0.0415 ms
    assert _ms("B200", 1024, 8192, 8192, "nvfp4") == pytest.approx(0.0415, rel=0.01)
    hopper = K.gemm("H100", 1024, 8192, 8192, "nvfp4")
    assert "no fp4 tensor cores" in hopper.notes[0]


def test_float16_uses_the_bf16_table_and_unknown_dtype_errors() -> None:
    assert K.gemm("H100", 64, 4096, 4096, "float16").notes
    with pytest.raises(UnknownNameError, match="unknown GEMM dtype"):
        K.gemm("H100", 64, 4096, 4096, "int3")
    with pytest.raises(UnknownNameError, match="nearest_measured_gpu"):
        K.gemm("MI300X", 64, 4096, 4096)
