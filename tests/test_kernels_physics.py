"""Physics a table cannot break: no op above its datasheet peak FLOP/s or bandwidth (kvplan's
GPU catalog, GB200 included: its figures are aiconfigurator's systems/gb200.yaml ones), H200
(H100's GH100 tensor cores, more bandwidth) never slower than H100 and GB200 (B200's die and
HBM at 1,200 W) never slower than B200 on any op at the same shape."""

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
    for gpu in GPUS:
        spec, figures = gpu_catalog()[gpu.lower()], peaks(gpu)
        assert figures["bfloat16"] == spec.peak_flops_for("bfloat16")
        assert figures["mem_bw"] == spec.mem_bw_bytes_per_s
        assert figures["link_bw"] == spec.interconnect_bytes_per_s / 2
        assert figures["source"] == f"kvplan catalog ({spec.id})"
    # GB200 is in the catalog with aiconfigurator's systems/gb200.yaml figures, which floored
    # its tables when it was not: 2.5 / 5 / 10 PF dense bf16 / fp8 / fp4, 8 TB/s
    assert [peaks("GB200")[k] for k in ("bfloat16", "fp8", "fp4", "mem_bw")] == [
        2.5e15, 5e15, 1e16, 8e12]


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


TWINS = [("H100-SXM-80GB", "H200-SXM-141GB"), ("B200-SXM-180GB", "GB200")]
"""(reference, the same die with at least its bandwidth, clocks and links): never slower."""
twins = pytest.mark.parametrize("pair", TWINS, ids=["H200-vs-H100", "GB200-vs-B200"])


def _never_slower(pair: tuple[str, str], lookup: Callable[[str], np.ndarray]) -> None:
    ref, twin = pair
    slow, fast = lookup(ref), lookup(twin)
    assert np.all(fast <= slow), (twin, float(np.max(fast / slow)))


@twins
def test_never_slower_gemm(pair: tuple[str, str]) -> None:
    m, n, k = _sizes(8, 1, 70_000), _sizes(9, 8, 200_000), _sizes(10, 8, 100_000)
    dtypes = ("bfloat16", "fp8", "fp8_block") + (("nvfp4",) if pair[1] == "GB200" else ())
    for dtype in dtypes:
        _never_slower(pair, lambda g, d=dtype: K.gemm_s(g, m, n, k, d))


@twins
def test_never_slower_attention(pair: tuple[str, str]) -> None:
    batch, length = _sizes(11, 1, 2048), _sizes(12, 1, 300_000)
    for h, kv, d in HEADS:
        for kv_dtype in ("bfloat16", "fp8"):
            shape = {"num_heads": h, "num_kv_heads": kv, "head_dim": d, "kv_dtype": kv_dtype}
            _never_slower(pair, lambda g, s=shape: K.context_attention_s(g, batch, length, **s))
            _never_slower(pair, lambda g, s=shape: K.decode_attention_s(g, batch, length, **s))


@twins
def test_never_slower_mla_moe_and_collectives(pair: tuple[str, str]) -> None:
    batch, length, tokens = _sizes(13, 1, 1024), _sizes(14, 1, 200_000), _sizes(15, 1, 40_000)
    for heads in (1, 8, 16, 128):
        for kv_dtype in ("bfloat16", "fp8"):
            _never_slower(pair, lambda g, h=heads, d=kv_dtype: K.mla_context_s(
                g, batch, length, num_heads=h, kv_dtype=d, gemm_dtype="fp8_block"))
            _never_slower(pair, lambda g, h=heads, d=kv_dtype: K.mla_decode_s(
                g, batch, length, num_heads=h, kv_dtype=d))
    for hidden, inter, experts, topk, tp, ep in MOE:
        for dtype in ("bfloat16", "fp8_block", "nvfp4"):
            _never_slower(pair, lambda g, a=(hidden, inter, experts, topk, tp, ep), d=dtype:
                          K.moe_s(g, tokens, hidden=a[0], inter=a[1], num_experts=a[2],
                                  topk=a[3], tp=a[4], ep=a[5], dtype=d))
    for count in (2, 4, 8, 16):
        _never_slower(pair, lambda g, c=count: K.all_reduce_s(g, tokens * 16384, c))
        _never_slower(pair, lambda g, c=count: K.nccl(g, "all_gather", tokens * 16384,
                                                      c).seconds)


def test_caps_are_counted_in_the_manifest() -> None:
    """The raw tables put H200 above H100 on some cells (up to 1.34x on bf16/fp8 GEMMs after
    the monotone pass) and GB200 above B200 on more (fp8_block GEMMs and MLA blocks about 1.6x
    on nearly every cell): the derive step caps them and says how many."""
    gpus = K.manifest()["gpus"]
    for gpu, ref, tag in (("H200-SXM-141GB", "H100-SXM-80GB", "h100"),
                          ("GB200", "B200-SXM-180GB", "b200")):
        assert gpus[gpu]["capped_at"] == ref
        for family in ("gemm", "attn_ctx", "attn_gen", "moe", "allreduce", "nccl"):
            assert gpus[gpu]["tables"][family][f"{tag}_axes_match"] is True
            assert gpus[gpu]["tables"][family][f"capped_at_{tag}_cells"] > 0
    gb200 = gpus["GB200"]["tables"]
    assert gb200["mla_ctx"]["capped_at_b200_cells"] == 7773  # of 7,776
    assert gb200["gemm"]["capped_at_b200_max_ratio"] == pytest.approx(5.8251)
