"""Physics a table cannot break: no op above its datasheet peak FLOP/s or bandwidth (kvplan's
GPU catalog; GB200, absent from it, aiconfigurator's systems/gb200.yaml), and H200 (H100's
GH100 tensor cores, more bandwidth) never slower than H100 on any op at the same shape."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

from kvplan.costs import kernels as K
from kvplan.costs.kernels import work
from kvplan.costs.kernels.tables import peaks
from kvplan.specs.hardware import gpu_catalog

GPUS = ["A100-80GB-SXM", "H100-SXM-80GB", "H200-SXM-141GB", "B200-SXM-180GB", "GB200", "L40S"]
SLACK = 1 + 1e-6
HEADS = [(32, 8, 128), (64, 8, 128), (28, 4, 128), (16, 16, 64), (40, 8, 128), (8, 1, 256)]
MOE = [(7168, 2048, 256, 8, 1, 8), (4096, 14336, 8, 2, 2, 1), (2048, 768, 128, 8, 1, 1),
       (2880, 2880, 128, 4, 1, 4), (5120, 1536, 160, 6, 4, 1)]


def _sizes(seed: int, low: float, high: float, count: int = 400) -> np.ndarray:
    return np.exp(np.random.default_rng(seed).uniform(np.log(low), np.log(high), count)).round()


def test_bundled_peaks_are_the_catalogs() -> None:
    for gpu in [*GPUS[:4], "L40S"]:
        spec, figures = gpu_catalog()[gpu.lower()], peaks(gpu)
        assert figures["bfloat16"] == spec.peak_flops_for("bfloat16")
        assert figures["mem_bw"] == spec.mem_bw_bytes_per_s
    assert peaks("GB200")["bfloat16"] == 2.5e15 and "gb200.yaml" in peaks("GB200")["source"]


@pytest.mark.parametrize("gpu", GPUS)
def test_gemm_below_peak_flops_and_bandwidth(gpu: str) -> None:
    m, n, k = _sizes(1, 1, 70_000), _sizes(2, 8, 200_000), _sizes(3, 8, 100_000)
    for dtype in ("bfloat16", "fp8", "fp8_block", "nvfp4"):
        answer = K.gemm(gpu, m, n, k, dtype)
        priced = "bfloat16" if answer.notes and "bfloat16" in answer.notes[-1] else dtype
        rate = peaks(gpu)[work.TENSOR_RATE[priced]] or peaks(gpu)["bfloat16"]
        assert np.all(work.gemm_flops(m, n, k) / answer.seconds <= rate * SLACK), dtype
        moved = work.gemm_bytes(m, n, k, priced)
        assert np.all(moved / answer.seconds <= peaks(gpu)["mem_bw"] * SLACK), dtype


@pytest.mark.parametrize("gpu", GPUS)
def test_attention_below_peak(gpu: str) -> None:
    batch, length = _sizes(4, 1, 512), _sizes(5, 1, 300_000)
    for h, kv, d in HEADS:
        ctx = K.context_attention_s(gpu, batch, length, num_heads=h, num_kv_heads=kv,
                                    head_dim=d)
        flops = work.context_attention_flops(batch, length, h, d)
        assert np.all(flops / ctx <= peaks(gpu)["bfloat16"] * SLACK), (h, kv, d)
        dec = K.decode_attention_s(gpu, batch, length, num_heads=h, num_kv_heads=kv,
                                   head_dim=d)
        moved = work.decode_attention_bytes(batch, length, kv, d, "bfloat16")
        assert np.all(moved / dec <= peaks(gpu)["mem_bw"] * SLACK), (h, kv, d)


@pytest.mark.parametrize("gpu", GPUS)
def test_moe_below_peak(gpu: str) -> None:
    tokens = _sizes(6, 1, 40_000)
    for hidden, inter, experts, topk, tp, ep in MOE:
        seconds = K.moe_s(gpu, tokens, hidden=hidden, inter=inter, num_experts=experts,
                          topk=topk, tp=tp, ep=ep)
        flops = work.moe_flops(tokens, hidden, inter, topk, tp, ep)
        assert np.all(flops / seconds <= peaks(gpu)["bfloat16"] * SLACK)
        moved = work.moe_bytes(tokens, hidden, inter, topk, experts, tp, ep, "bfloat16")
        assert np.all(moved / seconds <= peaks(gpu)["mem_bw"] * SLACK)


@pytest.mark.parametrize("gpu", GPUS)
def test_collectives_below_link_bandwidth(gpu: str) -> None:
    size = _sizes(7, 2, 2**32)
    for count in (2, 4, 8):
        for seconds in (K.all_reduce_s(gpu, size, count), K.nccl(gpu, "all_gather", size,
                                                                  count).seconds):
            moved = work.collective_floor_bytes(size, count)
            assert np.all(moved / seconds <= peaks(gpu)["link_bw"] * SLACK)


def _h200_never_slower(lookup: Callable[[str], np.ndarray]) -> None:
    h100, h200 = lookup("H100-SXM-80GB"), lookup("H200-SXM-141GB")
    assert np.all(h200 <= h100), float(np.max(h200 / h100))


def test_h200_never_slower_gemm() -> None:
    m, n, k = _sizes(8, 1, 70_000), _sizes(9, 8, 200_000), _sizes(10, 8, 100_000)
    for dtype in ("bfloat16", "fp8", "fp8_block"):
        _h200_never_slower(lambda g, d=dtype: K.gemm_s(g, m, n, k, d))


def test_h200_never_slower_attention() -> None:
    batch, length = _sizes(11, 1, 2048), _sizes(12, 1, 300_000)
    for h, kv, d in HEADS:
        for kv_dtype in ("bfloat16", "fp8"):
            shape = {"num_heads": h, "num_kv_heads": kv, "head_dim": d, "kv_dtype": kv_dtype}
            _h200_never_slower(lambda g, s=shape: K.context_attention_s(g, batch, length, **s))
            _h200_never_slower(lambda g, s=shape: K.decode_attention_s(g, batch, length, **s))


def test_h200_never_slower_mla_moe_and_collectives() -> None:
    batch, length, tokens = _sizes(13, 1, 1024), _sizes(14, 1, 200_000), _sizes(15, 1, 40_000)
    for heads in (1, 8, 16, 128):
        for kv_dtype in ("bfloat16", "fp8"):
            _h200_never_slower(lambda g, h=heads, d=kv_dtype: K.mla_context_s(
                g, batch, length, num_heads=h, kv_dtype=d, gemm_dtype="fp8_block"))
            _h200_never_slower(lambda g, h=heads, d=kv_dtype: K.mla_decode_s(
                g, batch, length, num_heads=h, kv_dtype=d))
    for hidden, inter, experts, topk, tp, ep in MOE:
        for dtype in ("bfloat16", "fp8_block"):
            _h200_never_slower(lambda g, a=(hidden, inter, experts, topk, tp, ep), d=dtype:
                               K.moe_s(g, tokens, hidden=a[0], inter=a[1], num_experts=a[2],
                                       topk=a[3], tp=a[4], ep=a[5], dtype=d))
    for count in (2, 4, 8, 16):
        _h200_never_slower(lambda g, c=count: K.all_reduce_s(g, tokens * 16384, c))
        _h200_never_slower(lambda g, c=count: K.nccl(g, "all_gather", tokens * 16384, c).seconds)


def test_h200_caps_are_counted_in_the_manifest() -> None:
    """The raw tables put H200 above H100 on some cells (up to 1.34x on bf16/fp8 GEMMs after
    the monotone pass): the derive step caps them and says how many."""
    tables = K.manifest()["gpus"]["H200-SXM-141GB"]["tables"]
    for family in ("gemm", "attn_ctx", "attn_gen", "moe", "allreduce", "nccl"):
        assert tables[family]["h100_axes_match"] is True
        assert tables[family]["capped_at_h100_cells"] > 0
