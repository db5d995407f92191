"""MoE, MLA and donor-GPU lookups against aiconfigurator-core 0.12.0 on H100
(systems/data/h100_sxm/{moe,mla}/vllm/0.24.0/*.parquet, latency in ms)."""

from __future__ import annotations

import numpy as np
import pytest

from kvplan.costs import kernels as K
from kvplan.costs.kernels import Status
from kvplan.errors import UnknownNameError

DEEPSEEK = {"hidden": 7168, "inter": 2048, "num_experts": 256, "topk": 8}
MIXTRAL = {"hidden": 4096, "inter": 14336, "num_experts": 8, "topk": 2}


def test_moe_rows() -> None:
    """balanced routing; DeepSeek-V3 fp8_block EP8 (flashinfer cutlass): 1 / 256 / 4096
    tokens 0.115333 / 0.619749 / 3.420341 ms; Mixtral bf16 TP2 (triton): 0.163760 /
    0.531851 / 2.162955 ms."""
    tokens = [1, 256, 4096]
    deepseek = K.moe("H100", tokens, dtype="fp8_block", ep=8, **DEEPSEEK)
    assert np.allclose(deepseek.seconds * 1e3, [0.115333, 0.619749, 3.420341], rtol=1e-5)
    assert deepseek.worst is Status.MEASURED and not deepseek.notes
    mixtral = K.moe_s("H100", tokens, tp=2, **MIXTRAL)
    assert np.allclose(mixtral * 1e3, [0.163760, 0.531851, 2.162955], rtol=1e-5)


@pytest.mark.parametrize("gpu", ["A100", "H100", "H200", "B200", "GB200", "L40S"])
def test_moe_more_tokens_never_faster(gpu: str) -> None:
    tokens = np.arange(1, 40_000)
    for shape in (DEEPSEEK, MIXTRAL, {"hidden": 2048, "inter": 1024, "num_experts": 64,
                                      "topk": 6}):
        assert np.all(np.diff(K.moe_s(gpu, tokens, ep=4, **shape)) >= 0)


def test_unmeasured_moe_shape_is_scaled_and_says_so() -> None:
    """Twice Mixtral's intermediate size on TP2 is Mixtral's per-GPU work on TP1: read off
    that row unscaled. Twice the experts (16, EP1) doubles the weights a batch of 4096
    tokens touches: in between the 8-expert row's time and twice it."""
    tokens = np.array([1, 64, 4096])
    wide = K.moe("H100", tokens, hidden=4096, inter=28672, num_experts=8, topk=2, tp=2)
    assert wide.notes and "scaled from (hidden 4096, inter 14336" in wide.notes[0]
    assert np.allclose(wide.seconds, K.moe_s("H100", tokens, **MIXTRAL), rtol=1e-9)
    many = K.moe("H100", 4096, hidden=4096, inter=14336, num_experts=16, topk=2)
    base = float(K.moe_s("H100", 4096, **MIXTRAL))
    assert many.notes and base < float(many.seconds) <= 2 * base


def test_moe_dtype_fallbacks() -> None:
    a100 = K.moe("A100", 16, dtype="fp8_block", **MIXTRAL)
    assert "no fp8 tensor cores" in a100.notes[0]
    assert K.manifest()["gpus"]["A100-80GB-SXM"]["tables"]["moe"]["distribution"] == (
        "power_law_1.01")
    with pytest.raises(UnknownNameError):
        K.moe("H100", 16, dtype="int2", **MIXTRAL)


def test_mla_rows() -> None:
    """DeepSeek-V3 block, 16 heads (TP8): prefill batch 1 isl 4096, bf16 KV, fp8_block
    GEMMs 0.7313 ms; decode batch 64 step 4096 (kv_len 4097), fp8 KV, fp8_block 0.1869 ms
    (FLASHMLA)."""
    prefill = K.mla_context("H100", 1, 4096, num_heads=16, gemm_dtype="fp8")
    assert float(prefill.seconds) * 1e3 == pytest.approx(0.7313, rel=1e-4)
    assert prefill.worst is Status.MEASURED
    decode = K.mla_decode("H100", 64, 4097, num_heads=16, kv_dtype="fp8",
                          gemm_dtype="fp8_block")
    assert float(decode.seconds) * 1e3 == pytest.approx(0.1869, rel=1e-4)
    assert "FLASHMLA" in decode.source.kernels


def test_mla_heads_scaled() -> None:
    answer = K.mla_decode("H100", 8, 4097, num_heads=24)
    assert answer.notes and "batch x0.75" in answer.notes[0]


@pytest.mark.parametrize("gpu", ["H100", "H200", "B200", "GB200", "L40S", "A100"])
def test_mla_more_work_never_faster(gpu: str) -> None:
    batch, length = np.arange(1, 300)[:, None], np.geomspace(1, 200_000, 200)[None, :]
    for fn in (K.mla_context_s, K.mla_decode_s):
        seconds = fn(gpu, batch, length, num_heads=16)
        assert np.all(np.diff(seconds, axis=0) >= 0) and np.all(np.diff(seconds, axis=1) >= 0)


def test_donors_and_their_efficiencies() -> None:
    """Unmeasured GPUs borrow a measured GPU's achieved/peak: H100 bf16 GEMMs of 4096-16384
    reach 0.75 of 989.4 TFLOP/s (median of 27), its decode attention 0.92 of 3.35 TB/s."""
    h100 = K.nearest_measured_gpu("H100")
    assert (h100.donor, h100.reason) == ("H100-SXM-80GB", "measured")
    assert h100.compute == pytest.approx(0.749, abs=0.001)
    assert h100.memory == pytest.approx(0.925, abs=0.001)
    assert K.nearest_measured_gpu("H100-PCIe-80GB").donor == "H100-SXM-80GB"
    assert K.nearest_measured_gpu("L4").donor == "L40S"
    assert K.nearest_measured_gpu("A10G").donor == "A100-80GB-SXM"
    mi300 = K.nearest_measured_gpu("MI300X")
    assert mi300.donor == "H200-SXM-141GB" and "no measured GPU of its architecture" in (
        mi300.reason)
    for gpu in K.measured_gpus():  # every bundled GPU is a catalog GPU, GB200 included
        found = K.nearest_measured_gpu(gpu)
        assert (found.donor, found.reason) == (gpu, "measured")
        assert 0.3 < found.compute <= 1.0 and 0.3 < found.memory <= 1.0


def test_a_gpu_without_a_tensor_rate_is_matched_on_bandwidth_alone() -> None:
    """A custom GPU file that gives no FLOP/s figure: nearest by bytes/s (no log of zero)."""
    from kvplan.specs.hardware import HardwareSpec

    bare = HardwareSpec(id="custom-no-flops", memory_bytes=80 * 10**9,
                        mem_bw_bytes_per_s=4.8e12, peak_flops={}, arch="Hopper")
    with np.errstate(all="raise"):
        assert K.nearest_measured_gpu(bare).donor == "H200-SXM-141GB"


def test_a_gpu_without_mla_tables_prices_mla_by_its_measured_attention_ratio() -> None:
    """A100 has no MLA table in the bundle: its MLA block is the nearest-datasheet GPU with
    one (L40S: log gaps 0.15 on FLOP/s + 0.86 on bytes/s, against H100's 1.15 + 0.50) times
    one ratio per phase of the two GPUs' own measured attention (decode: 64 x 8,192, MQA;
    prefill: 1 x 8,192, MHA); marked extrapolated."""
    assert K.mla_donor("A100-80GB-SXM") == "L40S" and K.mla_donor("H100") is None
    batch, length = np.array([1, 8, 64]), np.array([1024, 4096, 8192])
    got = K.mla_decode("A100-80GB-SXM", batch, length, num_heads=16)
    ratio = (K.decode_attention_s("A100-80GB-SXM", 64, 8192, num_heads=16, num_kv_heads=1,
                                  head_dim=128)
             / K.decode_attention_s("L40S", 64, 8192, num_heads=16, num_kv_heads=1,
                                    head_dim=128))
    want = K.mla_decode_s("L40S", batch, length, num_heads=16) * ratio
    assert np.allclose(got.seconds, want) and np.all(got.status >= Status.EXTRAPOLATED)
    assert any("no measured MLA table" in n for n in got.notes)
    # A100 streams 2.36x L40S's bytes/s: its bandwidth-bound decode block is faster
    assert ratio < 1.0
    ratio = (K.context_attention_s("A100-80GB-SXM", 1, 8192, num_heads=16, num_kv_heads=16,
                                   head_dim=128)
             / K.context_attention_s("L40S", 1, 8192, num_heads=16, num_kv_heads=16,
                                     head_dim=128))
    pre = K.mla_context_s("A100-80GB-SXM", batch, length, num_heads=16)
    assert np.allclose(pre, K.mla_context_s("L40S", batch, length, num_heads=16) * ratio)
